"""salvage as stories: what was set aside in .quarantine/ comes back, every record's source is named, the copy
keeps the source's chunks (byte for byte where they were intact), carries a ledger, and the printed
accept-loss line, pasted, leaves a copy that verify calls clean."""
from __future__ import annotations

import json
import os
import shlex

import pytest

from conftest import flip_bit, make_chunk, record_offsets, tree_digest, write_dir
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.verify import verify_path
from walctl.store import quarantine as q
from walctl.store.fs import DEFAULT_FS


def seqs(path) -> list[int]:
    return [r.sequence for r in RecordWalk(str(path)) if isinstance(r, Record)]


def records(path) -> dict[int, tuple]:
    """sequence -> (file, offset, raw bytes) of every valid record."""
    return {r.sequence: (r.file, r.offset, r.raw) for r in RecordWalk(str(path), keep_raw=True)
            if isinstance(r, Record)}


def three_chunks(tmp_path, damage_seq: int | None = 25):
    """wal-000000 (1..70, seq `damage_seq` rotten mid-log), wal-000001 (71..187), wal-000002 (188..249)."""
    c0 = make_chunk(range(1, 71))
    if damage_seq is not None:
        c0 = flip_bit(c0, record_offsets(c0)[damage_seq - 1] + 45)  # its payload: mid-log damage
    return write_dir(tmp_path / "w", {0: c0, 1: make_chunk(range(71, 188)), 2: make_chunk(range(188, 250))})


def run_printed(cli, line: str):
    words = shlex.split(line)
    assert words[0] == "walctl", line
    return cli(*words[1:])


def next_lines(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("next: "))
    return [ln.split(":", 1)[1].strip() if i == 0 else ln.strip() for i, ln in enumerate(lines[start:])]


def test_salvage_after_quarantine_move_takes_the_chunk_back_from_quarantine(tmp_path, cli):
    d = three_chunks(tmp_path)
    assert cli("seal", d, "--apply").code == 0
    src_records = records(d)
    assert cli("quarantine", "move", d, "wal-000001.bin", "--reason", "rot", "--apply").code == 0
    before = {n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d) if n.endswith(".bin")}
    tree = tree_digest(d)
    out = str(tmp_path / "new")
    r = cli("salvage", d, "--out", out, "--json")
    doc = r.json()
    assert r.code == 4  # the copy still lacks seq 25, which no source holds
    assert doc["records"] == 248 and doc["records_from_quarantine"] == 117
    assert doc["lost_sequence_ranges"] == [[25, 25]] and doc["lost_sequences"] == 1
    by_file = {s["file"]: s for s in doc["sources"]}
    assert [(s["file"], s["from"], s["sequence_ranges"], s["out_file"]) for s in doc["sources"]] == [
        ("wal-000000.bin", "directory", [[1, 24], [26, 70]], "wal-000000.bin"),
        (".quarantine/wal-000001.bin", "quarantine", [[71, 187]], "wal-000001.bin"),
        ("wal-000002.bin", "directory", [[188, 249]], "wal-000002.bin")]
    assert by_file[".quarantine/wal-000001.bin"]["manifest"]["action"] == "move"
    assert by_file["wal-000000.bin"]["damaged"] == [[1352, 1408]]
    assert doc["damaged_ranges"] == [{"file": "wal-000000.bin", "offset": 1352, "end_offset": 1408, "length": 56,
                                      "class": "mid-log-damage", "reason": doc["damaged_ranges"][0]["reason"]}]
    # chunk by chunk: the intact ones byte for byte, the damaged one without its rotten record
    assert [(c["file"], c["identical_to"]) for c in doc["chunks"]] == [
        ("wal-000000.bin", None), ("wal-000001.bin", ".quarantine/wal-000001.bin"),
        ("wal-000002.bin", "wal-000002.bin")]
    new = lambda n: open(os.path.join(out, n), "rb").read()  # noqa: E731
    assert new("wal-000001.bin") == open(os.path.join(d, ".quarantine", "wal-000001.bin"), "rb").read()
    assert new("wal-000002.bin") == before["wal-000002.bin"]
    assert new("wal-000000.bin") == before["wal-000000.bin"][:1352] + before["wal-000000.bin"][1408:]
    got = records(out)
    assert sorted(got) == [s for s in range(1, 250) if s != 25]
    for s, (f, off, raw) in got.items():  # same record bytes, same chunk; same offsets before the damage
        assert raw == src_records[s][2] and f == src_records[s][0]
        assert off == src_records[s][1] or (f == "wal-000000.bin" and s > 25 and off == src_records[s][1] - 56)
    assert tree_digest(d) == tree  # the source, its quarantine included: untouched


def test_the_printed_accept_loss_line_pasted_leaves_a_clean_copy(tmp_path, cli):
    d = three_chunks(tmp_path)
    assert cli("quarantine", "move", d, "wal-000001.bin", "--reason", "rot", "--apply").code == 0
    out = str(tmp_path / "new")
    r = cli("salvage", d, "--out", out)
    assert r.code == 4
    assert "from .quarantine/wal-000001.bin (move of wal-000001.bin at " in r.out
    assert ": 117 records, seq 71..187 -> wal-000001.bin (byte for byte)" in r.out
    assert "  lost: seq 25 (no source holds it)" in r.out and "lost: seq 71" not in r.out
    steps = next_lines(r.out)
    assert steps[0].startswith(f"walctl repair {shlex.quote(out)} --accept-loss 25..25 --reason ")
    assert len(steps) == 3 and steps[1] == f"walctl verify {shlex.quote(out)}"
    assert run_printed(cli, steps[0]).code == 0 and run_printed(cli, steps[1]).code == 0
    shown = run_printed(cli, steps[2])  # the source's lost bytes, annotated (it exits with the source's state)
    assert shown.code == 3 and steps[2] == f"walctl inspect {shlex.quote(d)} --damaged" and "offset 1352" in shown.out
    rep = verify_path(out)
    assert rep.exit_code == 0 and [(f.cls, f.sequence_range) for f in rep.findings] == [("accepted-loss", (25, 25))]
    ledger = [json.loads(x) for x in open(os.path.join(out, ".walctl", "ledger.jsonl"))]
    assert [(x["event"], x.get("file"), x.get("seq")) for x in ledger] == [
        ("seal", "wal-000001.bin", None), ("hwm", None, 249), ("accept-loss", None, None)]


def test_a_lost_tail_is_on_the_copy_s_ledger_and_its_accept_loss_line_works(tmp_path, cli):
    chunks = {i: make_chunk(range(1 + 10 * i, 11 + 10 * i)) for i in range(4)}
    d = write_dir(tmp_path / "w", chunks)
    assert cli("seal", d, "--apply").code == 0  # seals 0..2; the last chunk (31..40) is never sealed
    from walctl.store import ledger as SL
    from walctl.format import ledger as L

    SL.record(d, L.HWM, "2026-01-01T00:00:00Z", DEFAULT_FS.beneath(d), seq=40)
    os.unlink(os.path.join(d, "wal-000003.bin"))  # the tail chunk is gone: 31..40 issued, held nowhere
    out = str(tmp_path / "new")
    r = cli("salvage", d, "--out", out)
    assert r.code == 4 and "lost: seq 31..40" in r.out
    line = next_lines(r.out)[0]
    assert "--accept-loss 31..40" in line
    assert run_printed(cli, line).code == 0
    rep = verify_path(out)
    assert rep.exit_code == 0 and [(f.cls, f.sequence_range) for f in rep.findings] == [("accepted-loss", (31, 40))]
    assert seqs(out) == list(range(1, 31))


def test_a_lost_head_is_reported_but_the_copy_starts_after_it(tmp_path, cli):
    chunks = {i: make_chunk(range(1 + 10 * i, 11 + 10 * i)) for i in range(3)}
    d = write_dir(tmp_path / "w", chunks)
    assert cli("seal", d, "--apply").code == 0
    os.unlink(os.path.join(d, "wal-000000.bin"))
    out = str(tmp_path / "new")
    r = cli("salvage", d, "--out", out, "--json")
    doc = r.json()
    assert r.code == 0 and doc["lost_sequence_ranges"] == [[1, 10]] and doc["lost_before_first"] == [[1, 10]]
    assert doc["next_steps"] == [["walctl", "verify", out]]  # nothing for accept-loss to record in the copy
    assert [c["file"] for c in doc["chunks"]] == ["wal-000001.bin", "wal-000002.bin"]  # the names are kept
    text = cli("salvage", d, "--out", str(tmp_path / "new2")).out
    assert "sequences 1..10 come before the copy's first sequence 11" in text


def _cut(d, name: str, keep: int, reason="cut by hand") -> None:
    """What repair does: the bytes after `keep` kept as evidence with a manifest line, then the chunk cut."""
    path = os.path.join(d, name)
    data = open(path, "rb").read()
    q.keep_bytes(d, name, keep, data[keep:], action="truncate", reason=reason, now="2026-01-01T00:00:00Z",
                 version="test", fs=DEFAULT_FS.beneath(d))
    os.truncate(path, keep)


def test_valid_records_in_cut_tail_bytes_come_back_at_their_offsets(tmp_path, cli):
    data = make_chunk(range(1, 21))
    d = write_dir(tmp_path / "w", {0: data})
    offs = record_offsets(data)
    _cut(d, "wal-000000.bin", offs[15])  # seq 16..20 set aside
    out = str(tmp_path / "new")
    doc = cli("salvage", d, "--out", out, "--json").json()
    cut = [s for s in doc["sources"] if s["from"] == "quarantine"]
    assert [(s["source_offset"], s["sequence_ranges"], s["out_file"]) for s in cut] == \
        [(offs[15], [[16, 20]], "wal-000000.bin")]
    assert doc["records_from_quarantine"] == 5 and doc["lost_sequence_ranges"] == []
    assert open(os.path.join(out, "wal-000000.bin"), "rb").read() == data  # the chunk as it was before the cut


def test_a_torn_tail_repair_cut_is_read_and_its_damage_named_at_the_chunk_s_offsets(tmp_path, cli):
    data = make_chunk(range(1, 11))
    d = write_dir(tmp_path / "w", {0: data + make_chunk([11])[8:30]})  # a record cut short
    assert cli("repair", d, "--apply").code == 0
    doc = cli("salvage", d, "--out", str(tmp_path / "new"), "--json").json()
    cut = [s for s in doc["sources"] if s["from"] == "quarantine"][0]
    assert cut["records"] == 0 and cut["damaged"] == [[len(data), len(data) + 22]] and cut["source_offset"] == len(data)
    # what repair left is whole: copied byte for byte
    assert doc["chunks"][0]["identical_to"] == "wal-000000.bin" and seqs(tmp_path / "new") == list(range(1, 11))
    assert open(tmp_path / "new" / "wal-000000.bin", "rb").read() == data


def test_untrusted_manifest_lines_and_links_are_never_followed(tmp_path, cli):
    d = three_chunks(tmp_path, damage_seq=None)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.rename(os.path.join(d, "wal-000001.bin"), outside / "wal-000001.bin")
    qd = os.path.join(d, ".quarantine")
    os.makedirs(qd)
    os.symlink(outside / "wal-000001.bin", os.path.join(qd, "wal-000001.bin"))
    sha = q.sha256_file(str(outside / "wal-000001.bin"))
    good = q.entry("2026-01-01T00:00:00Z", "move", "wal-000001.bin", 0, 6560, sha, ".quarantine/wal-000001.bin", "r", "v")
    evil = dict(good, evidence=".quarantine/../../outside/wal-000001.bin")
    with open(os.path.join(qd, q.MANIFEST), "w") as f:
        f.write(json.dumps(evil) + "\n" + json.dumps(good) + "\n")
    r = cli("salvage", d, "--out", str(tmp_path / "new"), "--json")
    doc = r.json()
    assert doc["records_from_quarantine"] == 0 and doc["lost_sequence_ranges"] == [[71, 187]]
    notes = " ".join(doc["notes"])
    assert "a symbolic link: never followed" in notes and "line 1" in notes
    assert seqs(tmp_path / "new") == list(range(1, 71)) + list(range(188, 250))


def test_compacted_chunks_are_not_sources(tmp_path, cli):
    d = write_dir(tmp_path / "w", {i: make_chunk(range(1 + 10 * i, 11 + 10 * i)) for i in range(4)})
    assert cli("compact", d, "--to", "25", "--apply").code == 0
    doc = cli("salvage", d, "--out", str(tmp_path / "new"), "--json").json()
    assert doc["first_sequence"] == 21 and doc["records_from_quarantine"] == 0 and doc["lost_sequence_ranges"] == []
    assert any("compaction retired" in n for n in doc["notes"])


def test_a_second_copy_in_quarantine_fills_only_what_the_directory_lacks(tmp_path, cli):
    """The directory's chunk 1 is rotten mid-log; an intact copy of it sits in .quarantine/ under another name
    (a restore by hand): the directory's records come first, the copy fills the hole, nothing twice."""
    d = three_chunks(tmp_path, damage_seq=None)
    good = open(os.path.join(d, "wal-000001.bin"), "rb").read()
    bad = flip_bit(good, record_offsets(good)[40] + 45)  # seq 111
    qd = os.path.join(d, ".quarantine")
    os.makedirs(qd)
    with open(os.path.join(qd, "copy"), "wb") as f:
        f.write(good)
    q.record(d, q.entry("2026-01-01T00:00:00Z", "move", "wal-000001.bin", 0, len(good), q.sha256_bytes(good), ".quarantine/copy",
                        "an old copy", "v"), DEFAULT_FS.beneath(d))
    with open(os.path.join(d, "wal-000001.bin"), "wb") as f:
        f.write(bad)
    doc = cli("salvage", d, "--out", str(tmp_path / "new"), "--json").json()
    ranges = {s["file"]: s["sequence_ranges"] for s in doc["sources"]}
    assert ranges["wal-000001.bin"] == [[71, 110]] and ranges[".quarantine/copy"] == [[111, 187]]
    skipped = {(s["file"], s["sequence"], s["last_sequence"]) for s in doc["skipped"]}
    assert skipped == {(".quarantine/copy", 71, 110), ("wal-000001.bin", 112, 187)}
    assert doc["lost_sequence_ranges"] == [] and seqs(tmp_path / "new") == list(range(1, 250))
    assert open(tmp_path / "new" / "wal-000001.bin", "rb").read() == good


# ---- Ctrl-C at every step ------------------------------------------------------------------------

SEAM = ("stat", "listdir", "map_read", "read_range", "exists", "is_symlink", "open_append", "open_new", "write",
        "fsync", "fsync_dir", "rename", "unlink", "mkdir", "rmdir", "identity")


class Interrupts:
    """Ctrl-C at chosen calls of the fs seam (KeyboardInterrupt where the signal handler would raise it)."""

    def __init__(self, monkeypatch, at=()):
        from walctl.store import fs as F

        self.calls, self.at, self.names = 0, set(at), []
        for name in SEAM:
            monkeypatch.setattr(F.OsFileSystem, name, self._hook(getattr(F.OsFileSystem, name)))

    def _hook(self, real):
        def hooked(fs, *a, **k):
            self.calls += 1
            self.names.append(real.__name__)
            if self.calls in self.at:
                raise KeyboardInterrupt
            return real(fs, *a, **k)

        return hooked


def _after_interrupt(line: str, out: str) -> None:
    """The line says what is left: check it against the file system."""
    tmp, mark = out + ".tmp", os.path.join(out, ".walctl-salvage")
    if "before the copy began" in line or "was removed" in line:
        assert not os.path.exists(tmp) and not os.path.exists(out), line
    elif "is still there" in line:
        assert os.path.exists(tmp) and not os.path.exists(out), line
    elif "may still be there" in line:
        assert not os.path.exists(out), line
    elif "still marked unfinished" in line:
        assert os.path.exists(mark) and not os.path.exists(tmp), line
    elif "may be marked unfinished" in line:  # Ctrl-C twice around the final rename
        assert os.path.exists(tmp) != os.path.exists(out), line
    else:
        assert "is complete" in line and os.path.isdir(out) and not os.path.exists(mark), line
        assert not os.path.exists(tmp), line


KINDS_OF_LINE = ("before the copy began", "was removed", "is still there", "may still be there",
                 "still marked unfinished", "may be marked unfinished", "is complete")


def _chunks(out: str) -> dict:
    return {n: open(os.path.join(out, n), "rb").read() for n in os.listdir(out) if n.endswith(".bin")}


def test_ctrl_c_at_every_step_says_what_is_left_and_the_printed_command_finishes(tmp_path, cli, monkeypatch):
    d = three_chunks(tmp_path)
    assert cli("quarantine", "move", d, "wal-000001.bin", "--reason", "rot", "--apply").code == 0
    with monkeypatch.context() as m:
        probe = Interrupts(m)
        ref = cli("salvage", d, "--out", str(tmp_path / "ref"))
    want, steps = _chunks(str(tmp_path / "ref")), probe.calls
    assert ref.code == 4 and len(want) == 3
    said = set()
    # every step from the copy's first mkdir on; the reads before it, every fifth (they leave nothing)
    first_change = probe.names.index("mkdir") + 1
    for n in [n for n in range(1, steps + 1) if n >= first_change - 2 or n % 5 == 0]:
        out = str(tmp_path / f"out{n}")
        with monkeypatch.context() as m:
            Interrupts(m, at=(n, n + 2) if n % 3 == 0 else (n,))  # every third: Ctrl-C again while cleaning up
            r = cli("salvage", d, "--out", out)
        lines = r.err.splitlines()
        assert r.code == 130 and len(lines) == 1 and lines[0].startswith("walctl: interrupted"), (n, r.err)
        _after_interrupt(lines[0], out)
        said.add(next(k for k in KINDS_OF_LINE if k in lines[0]))
        printed = shlex.split(lines[0].split("`")[1])
        again = cli(*printed[1:])
        if again.code == 7 and "may be marked unfinished" in lines[0]:  # the copy was final: the second command
            assert "the output exists" in again.err, again.err
            again = cli(*shlex.split(lines[0].split("`")[3])[1:])
        assert again.code == 4, (n, lines[0], again.out, again.err)  # the copy's state: seq 25 is missing
        assert _chunks(out) == want and not os.path.exists(out + ".tmp"), n
    assert said == set(KINDS_OF_LINE), said  # every moment of the run was met, and each said its own


# ---- never a Python None in what salvage, replay and quarantine print ------------------------------

def _damage_cases(root, cli) -> dict[str, str]:
    """name -> a directory holding that damage (each class once; some with a ledger, some set aside)."""
    import shutil

    from conftest import DAMAGED_CASES, case_dir, zero_fill

    def ten(i):
        return make_chunk(range(1 + 10 * i, 11 + 10 * i))

    base = {i: ten(i) for i in range(3)}
    cases = {}

    def mk(name, chunks, *steps):
        d = write_dir(os.path.join(root, name), chunks)
        for argv in steps:
            cli(*[a.format(d=d) for a in argv])
        cases[name] = d

    for c in DAMAGED_CASES:
        cases[c] = shutil.copytree(case_dir(c), os.path.join(root, c))
    mk("torn-tail", {**base, 2: ten(2) + make_chunk([31])[8:40]})
    mk("zero-fill", {**base, 2: zero_fill(ten(2), 64)})
    mk("checksum-tail", {**base, 2: ten(2)[:-4] + b"\0\0\0\1"})
    mk("mid-log", {**base, 1: flip_bit(ten(1), record_offsets(ten(1))[3] + 45)})
    for which, i in (("head", 0), ("middle", 1), ("tail", 2)):
        mk(f"deleted-{which}", {**base, 3: ten(3)}, ["seal", "{d}", "--apply"], ["write", "{d}", "--type", "REMEMBER",
                                                                              "--id", "m"])
        os.unlink(os.path.join(cases[f"deleted-{which}"], f"wal-00000{i}.bin"))
    mk("quarantined", base, ["quarantine", "move", "{d}", "wal-000001.bin", "--reason", "rot", "--apply"])
    mk("quarantined-empty", {**base, 3: make_chunk([])},
       ["quarantine", "move", "{d}", "wal-000003.bin", "--reason", "empty", "--apply"])
    mk("quarantined-rotten", {**base, 3: flip_bit(ten(3), record_offsets(ten(3))[3] + 45)},
       ["quarantine", "move", "{d}", "wal-000003.bin", "--reason", "rot", "--apply"])
    mk("repaired-torn", {**base, 2: ten(2) + make_chunk([31])[8:40]}, ["repair", "{d}", "--apply"])
    mk("header-only-last", {**base, 3: make_chunk([])})
    mk("short-chunk", {**base, 3: b"SPEC\0"})
    mk("bad-magic-middle", {**base, 1: b"NOPE" + ten(1)[4:]})
    mk("repeat", {0: ten(0), 1: make_chunk(range(5, 15))})
    mk("regression", {0: make_chunk(range(20, 30)), 1: ten(0)})
    mk("manifest-nulls", base, ["quarantine", "move", "{d}", "wal-000001.bin", "--reason", "rot", "--apply"])
    mpath = os.path.join(cases["manifest-nulls"], ".quarantine", "MANIFEST.jsonl")
    line = dict(json.loads(open(mpath).read()), time=None, reason=None, walctl_version=None)
    open(mpath, "w").write(json.dumps(line) + "\n")  # an edited manifest: a bad line, reported, never acted on
    mk("not-a-file", base)
    os.mkdir(os.path.join(cases["not-a-file"], "wal-000003.bin"))
    return cases


def test_no_output_of_salvage_replay_or_quarantine_says_none(tmp_path, cli):
    cases = _damage_cases(str(tmp_path / "cases"), cli)
    ran = 0
    for name, d in cases.items():
        runs = [["salvage", d, "--out", str(tmp_path / f"{name}.s")],
                ["salvage", d, "--out", str(tmp_path / f"{name}.j"), "--json"],
                ["replay", d, "--skip-damaged"], ["replay", d], ["quarantine", "list", d]]
        for item in os.listdir(os.path.join(d, ".quarantine")) if os.path.isdir(os.path.join(d, ".quarantine")) else []:
            if item != "MANIFEST.jsonl":
                runs += [["quarantine", "show", d, item], ["quarantine", "restore", d, item]]
        runs.append(["quarantine", "purge", d, "--older-than", "0"])
        for argv in runs:
            r = cli(*argv)
            ran += 1
            assert "None" not in r.out + r.err, (name, argv, [ln for ln in (r.out + r.err).splitlines()
                                                               if "None" in ln])
            # a manifest line with nulls is a bad line (never acted on): its item is not a recorded one (2)
            usage = (2,) if name == "manifest-nulls" and argv[1] == "restore" else ()
            assert "Traceback" not in r.err and r.code in (0, 1, 3, 4, 5, 7) + usage, (name, argv, r.code, r.err)
    assert ran >= 90


# ---- replay --skip-damaged and recover read what was set aside -------------------------------------

def test_replay_skip_damaged_and_recover_read_a_quarantined_chunk_instead_of_skipping_it(tmp_path, cli):
    d = three_chunks(tmp_path, damage_seq=None)
    assert cli("quarantine", "move", d, "wal-000001.bin", "--reason", "rot", "--apply").code == 0
    plain = cli("replay", d)  # without --skip-damaged the stream still stops at the gap, and says how to go on
    assert plain.code == 4 and len(plain.jsonl()) == 70 and "use --skip-damaged" in plain.err
    r = cli("replay", d, "--skip-damaged")
    got = r.jsonl()
    assert r.code == 0 and [e["sequence"] for e in got] == list(range(1, 250))
    assert {e["file"] for e in got if 71 <= e["sequence"] <= 187} == {".quarantine/wal-000001.bin"}
    assert "read .quarantine/wal-000001.bin (set aside in .quarantine/) in place of the chunk the directory lacks: " \
           "117 events, sequences 71..187" in r.err and "skipped" not in r.err
    report = str(tmp_path / "report.json")
    assert cli("replay", d, "--skip-damaged", "--report", report).code == 0
    assert json.load(open(report))["set_aside_read"] == [
        {"file": ".quarantine/wal-000001.bin", "records": 117, "first_sequence": 71, "last_sequence": 187}]
    rec = cli("recover", "--log", d, "--json")
    j = rec.json()
    assert rec.code == 0 and j["final_sequence"] == 249 and j["entries_replayed"] == 249, rec.out
    assert any("read .quarantine/wal-000001.bin" in w and "sequences 71..187" in w for w in j["warnings"])
    assert verify_path(d).exit_code == 4  # the directory itself still lacks them: nothing was changed


def test_crash_at_every_step_of_a_salvage_that_reads_quarantine_then_one_rerun_finishes(tmp_path, cli):
    """On the simulated file system: a crash anywhere leaves no OUT or a whole one, and one rerun to the same
    OUT ends with exactly the copy an uninterrupted run makes (the pieces of .quarantine/ included)."""
    from simfs import SimCrash, load_tree

    from walctl.ops.wal.salvage import salvage

    d = three_chunks(tmp_path)
    assert cli("quarantine", "move", d, "wal-000001.bin", "--reason", "rot", "--apply").code == 0

    def load(crash_at=None):
        return load_tree(d, "/data/w", crash_at=crash_at)

    def copy(fs) -> dict:
        got = {e.name: fs.read_range(e.path, 0, e.size) for e in fs.listdir("/data/out") if e.kind == "file"}
        text = fs.read_range("/data/out/.walctl/ledger.jsonl", 0, 1 << 20).decode()
        got["ledger"] = [(x["event"], x.get("file"), x.get("seq"), x.get("sha256"))
                         for x in map(json.loads, text.splitlines())]
        return got

    start = load().ops
    done = load()
    whole = salvage("/data/w", "/data/out", fs=done)
    steps, want = done.ops - start, copy(done)
    assert whole.from_quarantine == 117 and sorted(want) == ["ledger", "wal-000000.bin", "wal-000001.bin",
                                                             "wal-000002.bin"]
    for n in range(1, steps + 1):
        fs = load(crash_at=start + n)
        with pytest.raises(SimCrash):
            salvage("/data/w", "/data/out", fs=fs)
        fs.crash()
        if fs.exists("/data/out") and not fs.exists("/data/out/.walctl-salvage"):
            assert copy(fs) == want, n  # a final OUT is whole
            continue
        rep = salvage("/data/w", "/data/out", fs=fs)
        assert rep.records == 248 and rep.lost_sequences == ((25, 25),), n
        assert copy(fs) == want and not fs.exists("/data/out.tmp"), n
