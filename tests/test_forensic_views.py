"""issue #22, "Forensic views show where the damage is": what verify cannot see without a ledger is said
(and the command that fixes it runs as printed); a 0-byte first chunk ends in one run of repair or write."""
from __future__ import annotations

import json
import os
import shlex

import pytest

from conftest import make_chunk, write_dir
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.verify import verify_path


def seqs(d):
    return [r.sequence for r in RecordWalk(d) if isinstance(r, Record)]


def java_dir(path):
    """Three chunks as the Java writer leaves them: no ledger."""
    return write_dir(path, {0: make_chunk(range(1, 11)), 1: make_chunk(range(11, 21)), 2: make_chunk(range(21, 26))})


def test_no_ledger_verify_says_once_that_a_deleted_chunk_cannot_show_and_seal_as_printed_makes_it_so(tmp_path, cli):
    d = java_dir(tmp_path / "j")
    r = cli("verify", d)
    note = f"absence of a whole chunk is not detectable here (no ledger: a chunk deleted where its neighbours' " \
           f"sequences still meet leaves no trace); `walctl seal {d} --apply` makes it so"
    assert r.code == 0 and r.out.count("note:") == 1 and f"  note: {note}\n" in r.out
    doc = json.loads(cli("verify", d, "--json").out)
    assert doc["exit_code"] == 0 and doc["paths"][0]["ledger"]["note"] == note
    # a head chunk deleted without a ledger: the neighbours still meet (26.. is the end), nothing shows
    twin = java_dir(tmp_path / "twin")
    os.unlink(os.path.join(twin, "wal-000000.bin"))
    r = cli("verify", twin)
    assert r.code == 0 and "note: absence of a whole chunk is not detectable here" in r.out
    # the printed command, as printed
    printed = note.split("`")[1]
    assert cli(*shlex.split(printed)[1:]).code == 0
    r = cli("verify", d, "--json")
    ledger = json.loads(r.out)["paths"][0]["ledger"]
    assert "note" not in ledger and ledger["sealed"] == 2 and "note:" not in cli("verify", d).out
    # now the same deletion is a finding
    os.unlink(os.path.join(d, "wal-000000.bin"))
    rep = verify_path(d)
    f = [f for f in rep.findings if f.cls == "sealed-chunk-missing"]
    assert rep.exit_code == 3 and f[0].file == "wal-000000.bin" and tuple(f[0].sequence_range) == (1, 10)


def test_a_single_chunk_path_has_no_note(tmp_path, cli):
    d = java_dir(tmp_path / "j")
    r = cli("verify", os.path.join(d, "wal-000001.bin"), "--json")
    assert "note" not in (json.loads(r.out)["paths"][0]["ledger"] or {})


@pytest.mark.parametrize("first", ["repair", "write"])
def test_a_zero_byte_first_chunk_ends_in_one_run_of_repair_or_write(tmp_path, cli, first):
    d = str(tmp_path / "z")
    os.mkdir(d)
    open(os.path.join(d, "wal-000000.bin"), "wb").close()  # a crash (or ENOSPC) before the first header
    r = cli("verify", d, "--json")
    (f,) = json.loads(r.out)["paths"][0]["findings"]
    assert r.code == 1 and (f["class"], f["file"], f["torn"]) == ("short-chunk", "wal-000000.bin", True)
    if first == "repair":
        r = cli("repair", d, "--apply", "--json")
        doc = json.loads(r.out)
        assert r.code == 0 and doc["after"] == {"verdict": "clean", "exit_code": 0}
        (cut,) = doc["cuts"]
        assert (cut["file"], cut["action"], cut["length"]) == ("wal-000000.bin", "quarantine-chunk", 0)
        (ev,) = doc["evidence"]
        kept = os.path.join(d, ev["evidence"])
        assert os.path.getsize(kept) == 0 and not os.path.exists(os.path.join(d, "wal-000000.bin"))
        r = cli("verify", d, "--json")
        assert r.code == 0 and json.loads(r.out)["paths"][0]["kind"] == "spector-v2-dir"
        assert json.loads(r.out)["paths"][0]["summary"]["chunks"] == 0
    r = cli("write", d, "--type", "REMEMBER", "--id", "m1", "--payload", "hi", "--json")
    doc = json.loads(r.out)
    assert r.code == 0 and (doc["first_sequence"], doc["durable_sequence"], doc["active_chunk"]) == \
        (1, 1, "wal-000000.bin")
    if first == "write":  # the open cut it: the empty file is evidence
        assert doc["repaired_on_open"]["cuts"][0]["action"] == "quarantine-chunk"
    q = [n for n in os.listdir(os.path.join(d, ".quarantine")) if n != "MANIFEST.jsonl"]
    assert len(q) == 1 and os.path.getsize(os.path.join(d, ".quarantine", q[0])) == 0
    assert cli("verify", d).code == 0 and seqs(d) == [1]
    assert cli("write", d, "--type", "REMEMBER", "--id", "m2", "--payload", "again").code == 0
    assert seqs(d) == [1, 2] and verify_path(d).exit_code == 0


# ---- map: whole-file findings under exact regions; a missing chunk at its gap -------------------------

def sealed_dir(path, n=400, chunk=10000):
    """A walctl-written directory (every closed chunk sealed in the ledger) and its records' places."""
    from walctl.ops.wal.write import WalWriter

    with WalWriter(str(path), sync="none", max_chunk_bytes=chunk) as w:
        for i in range(n):
            w.append(0, f"m{i}", b"x" * 40, 1000 + i)
    places = {}
    for r in RecordWalk(str(path)):
        if isinstance(r, Record):
            places.setdefault(r.file, []).append((r.sequence, r.offset, r.size))
    return str(path), places


def bar_of(out: str, name: str) -> str:
    (line,) = [x for x in out.splitlines() if x.startswith(name)]
    return line[line.index("|") + 1:line.rindex("|")]


def test_a_whole_file_finding_does_not_paint_over_the_mid_log_region_inside_it(tmp_path, cli):
    d, places = sealed_dir(tmp_path / "m")
    chunk = os.path.join(d, "wal-000001.bin")
    size = os.path.getsize(chunk)
    # the record at 47% of the chunk: one payload byte flipped (its CRC fails; the seal's SHA-256 too)
    seq, off, length = next(p for p in places["wal-000001.bin"] if p[1] >= size * 47 // 100)
    data = bytearray(open(chunk, "rb").read())
    data[off + 50] ^= 0xFF
    open(chunk, "wb").write(bytes(data))
    doc = json.loads(cli("map", d, "--json").out)
    regions = {r["class"]: r for r in doc["regions"]}
    assert (regions["mid-log-damage"]["offset"], regions["mid-log-damage"]["end_offset"]) == (off, off + length)
    assert regions["mid-log-damage"]["lost_sequence_range"] == [seq, seq]
    assert regions["seal-mismatch"]["offset"] is None and regions["seal-mismatch"]["chunk"] == 1
    assert doc["chunks"][1]["regions"] == [doc["regions"].index(regions[c]) for c in ("mid-log-damage",
                                                                                       "seal-mismatch")]
    bar = bar_of(cli("map", d, "--width", "120").out, "wal-000001.bin")
    cells = len(bar)
    a, b = off * cells // size, -(-(off + length) * cells // size)
    assert bar[a:b] == "M" * (b - a) and set(bar[:a] + bar[b:]) == {"D"}, bar
    svg = tmp_path / "m.svg"
    assert cli("map", d, "--svg", str(svg)).code == 3
    text = svg.read_text()
    # the seal mismatch is the ground (the whole bar), the mid-log region is painted after it, on top
    whole = text.index('data-mark="damaged" data-offset="None"')
    exact = text.index(f'data-mark="mid-log" data-offset="{off}" data-end="{off + length}"')
    assert whole < exact


def test_a_torn_tail_of_a_sealed_chunk_is_drawn_over_its_seal_mismatch(tmp_path, cli):
    d, places = sealed_dir(tmp_path / "t")
    chunk = os.path.join(d, "wal-000001.bin")
    seq, off, length = places["wal-000001.bin"][-1]
    with open(chunk, "r+b") as f:
        f.truncate(off + length - 7)  # the chunk's last record cut short: a torn tail, and its size changed
    doc = json.loads(cli("map", d, "--json").out)
    tail = next(r for r in doc["regions"] if r["class"] == "tail-damage")
    size = next(r for r in doc["regions"] if r["class"] == "seal-mismatch")
    assert (tail["offset"], tail["end_offset"], tail["file"]) == (off, off + length - 7, "wal-000001.bin")
    assert size["reason"].startswith("size differs from its seal") and size["chunk"] == tail["chunk"] == 1
    bar = bar_of(cli("map", d, "--width", "120").out, "wal-000001.bin")
    mark = {"torn": "T", "corrupt-tail": "C"}[tail["mark"]]
    assert bar.endswith(mark) and bar[0] == "D" and set(bar) == {"D", mark}, bar


def test_a_missing_sealed_chunk_is_drawn_at_its_gap_and_inspect_says_what_was_lost(tmp_path, cli):
    d, places = sealed_dir(tmp_path / "g", n=300, chunk=5000)
    lost = [p[0] for p in places["wal-000001.bin"]]
    os.unlink(os.path.join(d, "wal-000001.bin"))
    doc = json.loads(cli("map", d, "--json").out)
    missing = next(i for i, r in enumerate(doc["regions"]) if r["class"] == "sealed-chunk-missing")
    assert doc["regions"][missing]["chunk"] is None
    (gap,) = doc["gaps"]
    assert (gap["after_chunk"], gap["missing"], gap["absent_regions"]) == (0, [lost[0], lost[-1]], [missing])
    out = cli("map", d, "--width", "120").out.splitlines()
    at = next(i for i, x in enumerate(out) if x.startswith("   ~~ gap:"))
    assert out[at - 1].startswith("wal-000000.bin") and out[at + 1].startswith("   D damaged: wal-000001.bin")
    assert out.index(next(x for x in out if x.startswith("wal-000002.bin"))) > at + 1
    svg = tmp_path / "g.svg"
    cli("map", d, "--svg", str(svg))
    text = svg.read_text()
    assert text.index('class="gap"') < text.index('data-kind="absent"') < text.index('data-file="wal-000002.bin"')
    # inspect --damaged: what was lost (the ledger's count) and where records resume
    r = cli("inspect", d, "--damaged")
    block = r.out.split(": sealed-chunk-missing (exit 3)")[1]
    n = len(lost)
    assert f"  lost:    {n} sequences ({lost[0]}..{lost[-1]}) in {n} records: the whole chunk, as ledger line" in block
    nxt = places["wal-000002.bin"][0][0]
    assert f"  resumes: wal-000002.bin, sequence {nxt} (right after {lost[-1]})" in block


def test_a_missing_last_sealed_chunk_is_drawn_after_the_last_row(tmp_path, cli):
    d, places = sealed_dir(tmp_path / "e", n=300, chunk=5000)
    names = sorted(places)
    # the last sealed chunk and the active one after it: the active one goes, then the sealed one
    os.unlink(os.path.join(d, names[-1]))
    os.unlink(os.path.join(d, names[-2]))
    doc = json.loads(cli("map", d, "--json").out)
    missing = [i for i, r in enumerate(doc["regions"]) if r["class"] == "sealed-chunk-missing"]
    assert [doc["regions"][i]["file"] for i in missing] == [names[-2]]
    assert doc["gaps"][-1]["after_chunk"] == len(names) - 3 and doc["gaps"][-1]["absent_regions"] == missing
    out = cli("map", d, "--width", "120").out.splitlines()
    last_row = next(i for i, x in enumerate(out) if x.startswith(names[-3]))
    idx = len(names) - 2
    at = out.index(f"   ~~ gap: chunk index {idx} absent")  # after the row's own findings
    assert doc["gaps"][-1]["absent_indices"] == [idx, idx]
    assert at > last_row and out[at + 1].startswith(f"   D damaged: {names[-2]}")
    assert not out[at + 2].startswith("   ") or "legend" in out[at + 2] or out[at + 2].startswith("     ")
