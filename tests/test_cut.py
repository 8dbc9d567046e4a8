"""walctl cut: keep records through N, set the rest aside with manifest lines first, record the cut so the
next writer continues at N+1 knowingly; dry run by default, refused under a live writer, a crash at every
step finished by one rerun, V2 chunks and ADR-003 segments, and the way back."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from walctl.format import ledger as L
from walctl.ops.wal import quarantine as Q
from walctl.ops.wal.cut import cut
from walctl.ops.wal.verify import verify_path
from walctl.ops.wal.write import WalWriter
from walctl.store import quarantine as q

from conftest import tree_digest


def v2_dir(path, n=60, max_chunk_bytes=700) -> str:
    with WalWriter(str(path), sync="none", max_chunk_bytes=max_chunk_bytes) as w:
        for i in range(1, n + 1):
            w.append(0, f"m{i % 4}", f"payload {i}".encode(), 1_700_000_000_000 + i * 1000)
    return str(path)


def seg_dir(path, n=60) -> str:
    from test_recover import random_entries, write_segments

    return write_segments(str(path), random_entries(n), per_segment=25)


def sequences(path, fs=None) -> list[int]:
    from walctl.ops.wal.records import Record, RecordWalk
    from walctl.ops.wal.segments import SegmentWalk
    from walctl.store.fs import DEFAULT_FS

    fs = fs or DEFAULT_FS
    if any(n.endswith(".log") for n in (e.name for e in fs.listdir(path))):
        return [e.sequence for _, e in SegmentWalk(path, fs)]
    return [r.sequence for r in RecordWalk(path, fs=fs) if isinstance(r, Record)]


def ledger_lines(path, fs=None):
    from walctl.store.ledger import read_ledger

    read = read_ledger(path, fs) if fs else read_ledger(path)
    return read.lines if read else ()


@pytest.mark.parametrize("make", [v2_dir, seg_dir])
def test_cut_keeps_through_n_sets_the_rest_aside_and_verify_is_clean_and_says_so(tmp_path, cli, make):
    d = make(tmp_path / "wal")
    before = sequences(d)
    assert before == list(range(1, 61))
    digest = tree_digest(d)
    plan = cli("cut", d, "--after", "37")
    assert plan.code == 0 and "dry run: nothing was changed" in plan.out
    assert tree_digest(d) == digest  # a dry run changes nothing, not even the lock file
    r = cli("cut", d, "--after", "37", "--apply", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["schema"] == "walctl.cut/1" and doc["applied"] and doc["after"] == 37 and doc["issued"] == 60
    assert doc["truncate"]["first_seq"] == 38 and doc["verify"] == {"exit_code": 0, "verdict": "clean"}
    assert sequences(d) == list(range(1, 38))
    # every removed byte is in .quarantine/, with a manifest line, and the pieces add up to what was cut
    entries, problems = q.read_manifest(d)
    assert problems == [] and {e["action"] for e in entries} <= set(q.CUT_ACTIONS)
    assert all(e["cut_after"] == 37 for e in entries)
    assert sum(e["length"] for e in entries) == doc["cut_bytes"] == sum(p["length"] for p in doc["moves"]) \
        + doc["truncate"]["length"]
    rewinds = [ln for ln in ledger_lines(d) if ln.event == L.REWIND]
    assert [(ln.get("last_seq_kept"), ln.get("last_seq")) for ln in rewinds] == [(37, 60)]
    v = cli("verify", d, "--json").json()
    assert v["exit_code"] == 0
    (note,) = [f for f in v["paths"][0]["findings"] if f["class"] == "cut-recorded"]
    assert note["sequence_range"] == [38, 60] and "next sequence issued is 38" in note["reason"]
    assert cli("verify", d, "--strict").code == 0
    assert "cut after sequence 37" in cli("verify", d).out
    # recover (which reads set-aside chunks for what the log lacks) does not read the cut part back
    rec = cli("recover", "--log", d, "--json").json()
    assert rec["final_sequence"] == 37 and rec["exit_code"] == 0
    # a second run finds nothing to do
    again = cli("cut", d, "--after", "37", "--apply", "--json").json()
    assert again["moves"] == [] and again["truncate"] is None and not again["rewind"]
    assert len(q.read_manifest(d)[0]) == len(entries)


def test_a_segment_writer_continues_at_n_plus_1_and_the_state_at_n_is_the_one_before_the_cut(tmp_path, cli):
    d = seg_dir(tmp_path / "seg")
    at = cli("fingerprint", d, "--to", "33", "--json").json()["sha256"]
    assert cli("cut", d, "--after", "33", "--apply").code == 0
    assert cli("fingerprint", d, "--json").json()["sha256"] == at
    with WalWriter(d, format="segments") as w:
        assert [w.append_entry("memory_add", {"content": f"new {i}"}) for i in range(40)] == list(range(34, 74))
    assert sequences(d) == list(range(1, 74))
    v = cli("verify", d, "--json").json()
    assert v["exit_code"] == 0 and {f["class"] for f in v["paths"][0]["findings"]} == {"cut-recorded"}


def test_the_next_writer_continues_at_n_plus_1_and_verify_stays_clean(tmp_path, cli):
    d = v2_dir(tmp_path / "wal")
    assert cli("cut", d, "--after", "25", "--apply").code == 0
    r = cli("write", d, "--type", "REMEMBER", "--id", "again", "--payload", "x")
    assert r.code == 0 and "seq 26..26" in r.out
    with WalWriter(d, sync="none", max_chunk_bytes=700) as w:  # and on, past the old last sequence
        for i in range(50):
            w.append(0, "z", b"new %d" % i)
    assert sequences(d) == list(range(1, 77))
    v = cli("verify", d, "--json").json()
    assert v["exit_code"] == 0, v
    classes = {f["class"] for f in v["paths"][0]["findings"]}
    assert classes == {"cut-recorded"}  # no repeat, regression or missing range: a recorded reuse
    assert cli("verify", d, "--strict").code == 0
    # the way back is closed once a writer went on: restoring the cut part would repeat sequences
    name = next(e["evidence"].split("/", 1)[1] for e in q.read_manifest(d)[0] if e["offset"] == 0)
    r = cli("quarantine", "restore", d, name, "--apply")
    assert r.code == 7 and "would repeat them" in r.err


@pytest.mark.parametrize("make", [v2_dir, seg_dir])
def test_the_advice_works_when_pasted_and_restore_brings_the_cut_part_back(tmp_path, cli, make):
    from test_advice_pasted import printed_commands

    d = make(tmp_path / "my wal's dir")
    digest = {k: v[:3] for k, v in tree_digest(d).items() if not k.startswith(".walctl")}  # (not mtime)
    plan = cli("cut", d, "--after", "30")
    (apply_cmd,) = printed_commands(plan.out)
    assert apply_cmd[1:] == ["cut", os.path.abspath(d), "--after", "30", "--apply"]
    done = cli(*apply_cmd[1:])
    assert done.code == 0 and sequences(d) == list(range(1, 31))
    steps = printed_commands(done.out)
    assert steps[0][1] == "verify" and all(s[1:3] == ["quarantine", "restore"] for s in steps[1:])
    for argv in steps:
        assert cli(*argv[1:]).code == 0, argv
    # back as it was (bytes and names), with the history in the ledger and the manifest
    assert sequences(d) == list(range(1, 61))
    now = {k: v[:3] for k, v in tree_digest(d).items() if not k.startswith((".walctl", ".quarantine"))}
    assert now == {k: v for k, v in digest.items() if not k.startswith(".quarantine")}
    v = cli("verify", d, "--json").json()
    assert v["exit_code"] == 0 and "31..60 are here again" in next(
        f["reason"] for f in v["paths"][0]["findings"] if f["class"] == "cut-recorded")


def test_until_a_time_keeps_the_records_before_the_first_one_stamped_after_it(tmp_path, cli):
    d = v2_dir(tmp_path / "wal")
    t = 1_700_000_000_000 + 44 * 1000 + 500  # between 44 and 45
    r = cli("cut", d, "--until", str(t), "--apply", "--json")
    assert r.code == 0 and r.json()["after"] == 44 and r.json()["until_ms"] == t
    assert sequences(d) == list(range(1, 45))
    d2 = v2_dir(tmp_path / "wal2")
    old = cli("cut", d2, "--at-time", "2023-11-14T22:14:04.500Z")  # the spelling: a hidden alias
    assert old.code == 0 and "note: --at-time is now --until" in old.err
    assert "cut after sequence 44" in old.out


def test_refused_under_a_live_writer_dry_run_and_apply(tmp_path, cli):
    d = v2_dir(tmp_path / "wal")
    digest = tree_digest(d)
    with WalWriter(d, sync="none"):
        for argv in ([], ["--apply"]):
            r = cli("cut", d, "--after", "10", *argv, "--json")
            assert r.code == 6 and r.json()["error"]["reason"] == "locked", r.out
    assert {k: v for k, v in tree_digest(d).items() if k != ".walctl.lock"} == \
        {k: v for k, v in digest.items() if k != ".walctl.lock"}
    assert sequences(d) == list(range(1, 61))


def test_refusals(tmp_path, cli):
    d = v2_dir(tmp_path / "wal")
    r = cli("cut", d, "--after", "61")
    assert r.code == 2 and "the last sequence here is 60" in r.err
    assert cli("cut", d).code == 2 and cli("cut", d, "--after", "3", "--until", "5").code == 2
    # damage at or below N stays whatever is cut after it
    chunk = os.path.join(d, "wal-000000.bin")
    data = bytearray(open(chunk, "rb").read())
    data[60] ^= 0x01
    open(chunk, "wb").write(bytes(data))
    digest = tree_digest(d)
    r = cli("cut", d, "--after", "40", "--apply")
    assert r.code == 7 and "at or below sequence 40" in r.err and tree_digest(d) == digest
    from test_advice_pasted import printed_commands

    (verify_cmd,) = printed_commands(r.err)
    assert cli(*verify_cmd[1:]).code == 3
    # compaction's horizon
    e = v2_dir(tmp_path / "wal3")
    open(os.path.join(e, "checkpoint.meta"), "wb").write(_meta(30))
    r = cli("cut", e, "--after", "20")
    assert r.code == 7 and "below the horizon" in r.err


def _meta(hwm: int) -> bytes:
    from walctl.format.ckptmeta import encode_checkpoint_meta

    return encode_checkpoint_meta(hwm)


@pytest.mark.parametrize("make", [v2_dir, seg_dir])
def test_crash_at_every_step_then_one_rerun_finishes(tmp_path, make):
    """Power fails at each mutating step of `cut --apply`; after the reboot nothing cut is lost (every
    sequence after N is in the directory or in .quarantine/), and one rerun ends exactly where an
    uninterrupted cut ends: the same directory, manifest actions and ledger events."""
    from simfs import SimCrash, load_tree

    d = make(tmp_path / "wal")

    def load(crash_at=None, seed=0):
        return load_tree(d, "/r", crash_at=crash_at, seed=seed)

    start = load().ops
    clean = load()
    cut("/r", after=22, apply=True, fs=clean)
    steps = clean.ops - start
    assert steps >= 8
    want_seqs = sequences("/r", clean)
    want_events = [ln.event for ln in ledger_lines("/r", clean)]
    assert want_seqs == list(range(1, 23)) and want_events[-1] == L.REWIND
    for n in range(1, steps + 1):
        for seed in (0, 1):
            fs = load(crash_at=start + n, seed=seed)
            with pytest.raises(SimCrash):
                cut("/r", after=22, apply=True, fs=fs)
            fs.crash()
            held = set(sequences("/r", fs)) | _quarantined_sequences(fs)
            assert held >= set(range(1, 61)), (n, seed)
            rep = cut("/r", after=22, apply=True, fs=fs)
            assert rep.verify is None or rep.verify["exit_code"] == 0, (n, seed)
            assert sequences("/r", fs) == want_seqs, (n, seed)
            assert verify_path("/r", fs=fs).exit_code == 0, (n, seed)
            # (a line torn by the crash stays, reported; the rerun's own lines start on lines of their own)
            assert all("torn" in p for p in q.read_manifest("/r", fs)[1]), (n, seed)
            assert set(ln.event for ln in ledger_lines("/r", fs)) == set(want_events), (n, seed)
            assert cut("/r", after=22, apply=True, fs=fs).nothing, (n, seed)


def _quarantined_sequences(fs) -> set[int]:
    """Sequences held by the pieces .quarantine/ has a manifest line for (a cut tail read from its offset)."""
    from walctl.format.scan import scan_chunk
    from walctl.format.segment import read_frame

    out: set[int] = set()
    for name, e in q.holding_lines(q.read_manifest("/r", fs)[0]).items():
        path = f"/r/.quarantine/{name}"
        if not fs.exists(path):
            continue
        data = fs.read_range(path, 0, 1 << 24)
        if e["source"].endswith(".log"):
            pos = 0
            while pos < len(data):
                got = read_frame(data, pos)
                if got.entry is None:
                    break
                out.add(got.entry.sequence)
                pos += got.entry.size
            continue
        if e["offset"]:
            src = fs.read_range(f"/r/{e['source']}", 0, e["offset"]) if fs.exists(f"/r/{e['source']}") else b""
            data = src[:e["offset"]].ljust(e["offset"], b"\0") + data
        scan = scan_chunk(data)
        out |= {s for r in scan.runs for s in range(r.first_seq, r.last_seq + 1)}
    return out


def test_help_and_man_page_name_the_vocabulary_not_the_alias(cli):
    r = cli("cut", "--help")
    assert "--until" in r.out and "--at-time" not in r.out
    page = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "man",
                             "walctl-cut.1"), encoding="utf-8").read()
    assert "\\-\\-until" in page and "at\\-time" in page  # the alias is documented as the old spelling
