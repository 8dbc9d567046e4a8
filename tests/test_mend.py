"""repair, salvage, compact and quarantine as whole stories: break it, see it broken, mend it, check the
evidence is exactly what was cut, read back, append, read back (etcd's testRepair)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from conftest import (
    case_dir, flip_bit, load_expected, make_chunk, record_offsets, tree_digest, write_dir,
)
from walctl.errors import EnvironmentProblem, NotClean, Refused, UnsupportedInput, UsageError
from walctl.format.ckptmeta import encode_checkpoint_meta
from walctl.ops.wal import quarantine as Q
from walctl.ops.wal.compact import compact
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.repair import repair
from walctl.store.fs import DEFAULT_FS
from walctl.ops.wal.salvage import salvage
from walctl.ops.wal.verify import verify_path
from walctl.ops.wal.write import WalWriter
from walctl.store import quarantine as q


def seqs(path):
    return [r.sequence for r in RecordWalk(path) if isinstance(r, Record)]


def copy_case(case, tmp_path):
    d = str(tmp_path / case)
    shutil.copytree(case_dir(case), d)
    return d


# ---- repair ---------------------------------------------------------------------------------------

def test_repair_story_on_the_java_torn_vector(tmp_path, cli):
    d = copy_case("torn-tail-mid-payload", tmp_path)
    path = os.path.join(d, "wal-000000.bin")
    with open(path, "rb") as f:
        original = f.read()
    assert cli("verify", d).code == 1
    before = tree_digest(d)
    dry = cli("repair", d, "--json")
    assert dry.code == 1 and tree_digest(d) == before  # the dry run changed nothing
    plan = dry.json()
    assert plan["applied"] is False and plan["cuts"] == [{"file": "wal-000000.bin", "action": "truncate",
                                                         "offset": 3064, "end_offset": 3215, "length": 151,
                                                         "reason": plan["cuts"][0]["reason"]}]
    applied = cli("repair", d, "--apply", "--json").json()
    assert applied["exit_code"] == 0 and applied["after"] == {"verdict": "clean", "exit_code": 0}
    assert os.path.getsize(path) == 3064  # exactly where Java cut it
    (entry,) = applied["evidence"]
    with open(os.path.join(d, entry["evidence"]), "rb") as f:
        kept = f.read()
    assert kept == original[3064:] and entry["sha256"] == hashlib.sha256(kept).hexdigest()
    assert (entry["source"], entry["offset"], entry["length"], entry["action"]) == ("wal-000000.bin", 3064, 151,
                                                                                  "truncate")
    with open(os.path.join(d, ".quarantine", "MANIFEST.jsonl")) as f:
        (line,) = [json.loads(x) for x in f]
    assert line == entry and line["walctl_version"] == "0.1.0" and line["time"].endswith("Z")
    assert seqs(d) == list(range(1, 29))
    with WalWriter(d) as w:
        assert w.append(0, "after-repair", b"29") == 29
    assert seqs(d) == list(range(1, 30))
    assert cli("repair", d, "--apply").code == 0  # nothing left to do


def test_repair_leaves_midlog_corruption_alone_and_says_what_to_do(tmp_path, cli):
    d = copy_case("payload-bitflip-midlog", tmp_path)
    before = tree_digest(d)
    r = cli("repair", d, "--apply")
    assert r.code == 3 and "left alone: mid-log-damage" in r.out and "walctl salvage" in r.out
    assert tree_digest(d) == before or set(tree_digest(d)) - set(before) == {".walctl.lock"}


def test_repair_cuts_torn_tails_but_leaves_other_damage(tmp_path):
    c0, c1 = make_chunk(range(1, 6)), make_chunk(range(6, 11))
    d = write_dir(tmp_path / "w", {0: flip_bit(c0, record_offsets(c0)[1] + 20), 1: c1 + b"\x57\x41" + bytes(30)})
    rep = repair(d, apply=True)
    assert [c.file for c in rep.cuts] == ["wal-000001.bin"] and rep.exit_code == 3
    assert os.path.getsize(os.path.join(d, "wal-000001.bin")) == len(c1)
    assert [f.cls for f in rep.left_alone] == ["mid-log-damage"]


def test_repair_max_drop_bytes_refuses_and_changes_nothing(tmp_path, cli):
    c0 = make_chunk(range(1, 6))
    d = write_dir(tmp_path / "w", {0: c0 + bytes(4096)})
    before = {k: v for k, v in tree_digest(d).items()}
    r = cli("repair", d, "--apply", "--max-drop-bytes", "1000")
    assert r.code == 7 and "4096 bytes" in r.err
    assert {k: v for k, v in tree_digest(d).items() if k != ".walctl.lock"} == before
    assert cli("repair", d, "--apply").code == 0
    assert os.path.getsize(os.path.join(d, "wal-000000.bin")) == len(c0)


def test_repair_quarantines_a_short_last_chunk(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 4)), 1: b"SPE"})
    rep = repair(d, apply=True)
    assert rep.exit_code == 0 and not os.path.exists(os.path.join(d, "wal-000001.bin"))
    (entry,) = rep.evidence
    assert entry["action"] == "quarantine-chunk" and entry["length"] == 3
    with open(os.path.join(d, entry["evidence"]), "rb") as f:
        assert f.read() == b"SPE"


def test_repair_never_overwrites_earlier_evidence(tmp_path):
    c0 = make_chunk(range(1, 4))
    d = write_dir(tmp_path / "w", {0: c0 + b"\x57\x41first"})
    repair(d, apply=True)
    with open(os.path.join(d, "wal-000000.bin"), "ab") as f:
        f.write(b"\x57\x41secnd")  # same offset and length, other bytes
    repair(d, apply=True)
    entries, _ = q.read_manifest(d)
    assert [e["evidence"] for e in entries][0] != [e["evidence"] for e in entries][1]
    kept = sorted(open(os.path.join(d, e["evidence"]), "rb").read() for e in entries)
    assert kept == [b"\x57\x41first", b"\x57\x41secnd"]


def test_repair_needs_a_directory(tmp_path):
    with pytest.raises(EnvironmentProblem) as err:  # a wrong path is exit 6, never "nothing to cut"
        repair(os.path.join(case_dir("basic"), "wal-000000.bin"))
    assert err.value.exit_code == 6 and err.value.kind == "not-a-directory"


# ---- salvage --------------------------------------------------------------------------------------

def test_salvage_of_midlog_vector_copies_exactly_the_undamaged_events(tmp_path, cli):
    src = case_dir("payload-bitflip-midlog")
    before = tree_digest(src)
    out = str(tmp_path / "out")
    r = cli("salvage", src, "--out", out, "--json")
    doc = r.json()
    assert r.code == 4  # the copy is clean, but seq 25 is gone: verify says so
    assert doc["records"] == 48 and doc["lost_sequence_ranges"] == [[25, 25]] and doc["lost_sequences"] == 1
    assert doc["damaged_ranges"] == [{"file": "wal-000000.bin", "offset": 2368, "end_offset": 2616, "length": 248,
                                      "class": "mid-log-damage", "reason": doc["damaged_ranges"][0]["reason"]}]
    assert tree_digest(src) == before
    expected = [e for e in load_expected("basic")["appended"] if e["sequence"] != 25]
    got = [r for r in RecordWalk(out) if isinstance(r, Record)]
    assert [(r.sequence, r.type_ordinal, r.memory_id, r.timestamp_ms, r.payload) for r in got] == \
        [(e["sequence"], e["type_ordinal"], bytes.fromhex(e["memory_id_utf8_hex"]), e["timestamp_ms"],
          bytes.fromhex(e["payload_hex"])) for e in expected]
    report = verify_path(out)
    assert [f.cls for f in report.findings] == ["sequence-gap"] and report.findings[0].sequence_range == (25, 25)


def test_salvage_keeps_record_bytes_verbatim_and_skips_repeats(tmp_path):
    from conftest import make_record
    from walctl.format.v2 import encode_file_header

    weird = make_record(2, reserved32=7)  # an anomaly, still valid: copied as it is
    d = write_dir(tmp_path / "w", {0: encode_file_header() + make_record(1) + weird + make_record(3),
                                   1: make_chunk([3, 4])})
    rep = salvage(d, str(tmp_path / "out"))
    assert rep.records == 4 and [s["sequence"] for s in rep.skipped] == [3]
    with open(tmp_path / "out" / "wal-000000.bin", "rb") as f:
        assert weird in f.read()


def test_salvage_refuses_an_existing_output(tmp_path, cli):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    r = cli("salvage", case_dir("basic"), "--out", str(out))
    assert r.code == 7 and (out / "keep.txt").read_text() == "mine"
    assert salvage(case_dir("basic"), str(tmp_path / "empty-ok")).records == 49


# ---- compact --------------------------------------------------------------------------------------

def five_chunks(tmp_path):
    return write_dir(tmp_path / "w", {i: make_chunk(range(1 + 10 * i, 11 + 10 * i)) for i in range(5)})


def test_compact_dry_run_then_apply_with_manifest(tmp_path, cli):
    d = five_chunks(tmp_path)
    before = tree_digest(d)
    plan = cli("compact", d, "--to", "25", "--json").json()
    assert tree_digest(d) == before
    assert [(r["file"], r["first_sequence"], r["last_sequence"]) for r in plan["removals"]] == \
        [("wal-000000.bin", 1, 10), ("wal-000001.bin", 11, 20)]
    assert "above the HWM 25" in plan["stopped_at"]
    r = cli("compact", d, "--to", "25", "--apply")
    assert r.code == 0
    assert sorted(n for n in os.listdir(d) if n.startswith("wal-")) == ["wal-000002.bin", "wal-000003.bin",
                                                                       "wal-000004.bin"]
    assert seqs(d) == list(range(21, 51)) and verify_path(d).exit_code == 0
    entries, _ = q.read_manifest(d)
    assert [(e["action"], e["source"], e["evidence"]) for e in entries] == [
        ("compact", f"wal-00000{i}.bin", f".quarantine/wal-00000{i}.bin") for i in (0, 1)]
    for i in (0, 1):  # the bytes are kept, not deleted
        assert (tmp_path / "w" / ".quarantine" / f"wal-00000{i}.bin").read_bytes() == \
            make_chunk(range(1 + 10 * i, 11 + 10 * i))
    assert "moved wal-000000.bin (" in r.out and "to .quarantine/wal-000000.bin" in r.out


def test_compact_never_removes_the_last_chunk(tmp_path):
    d = five_chunks(tmp_path)
    rep = compact(d, before=10 ** 9, apply=True)
    assert [r.file for r in rep.removals] == [f"wal-00000{i}.bin" for i in range(4)]
    assert seqs(d) == list(range(41, 51))


@pytest.mark.parametrize("damage, stop", [
    (lambda c: {**c, 2: b"SPEX" + c[2][4:]}, "wal-000001.bin: its last sequence cannot be known"),
    (lambda c: {**c, 1: flip_bit(c[1], 20)}, "wal-000000.bin: its last sequence cannot be known"),
    (lambda c: {k: v for k, v in c.items() if k != 1}, "wal-000002.bin: chunk index 1 is missing"),
])
def test_compact_stops_at_damage_gaps_and_foreign_chunks(tmp_path, damage, stop):
    chunks = damage({i: make_chunk(range(1 + 10 * i, 11 + 10 * i)) for i in range(5)})
    d = write_dir(tmp_path / "w", chunks)
    rep = compact(d, before=10 ** 9, apply=True)
    assert stop in rep.stopped_at, rep.stopped_at
    kept_from = int(rep.stopped_at[4:10])
    assert all(int(r.file[4:10]) < kept_from for r in rep.removals)
    assert all(os.path.exists(os.path.join(d, f"wal-{i:06d}.bin")) for i in chunks if i >= kept_from)


def test_compact_refuses_a_regression_and_moves_nothing(tmp_path, cli):
    # chunk 0 holds 1..10, chunk 1 11..20, chunk 2 restarts at 5: "next first - 1" would call chunk 1's last
    # sequence 4, below the HWM 12, and move records 11..20 out of the live log
    chunks = {0: make_chunk(range(1, 11)), 1: make_chunk(range(11, 21)), 2: make_chunk(range(5, 11)),
              3: make_chunk(range(21, 31))}
    d = write_dir(tmp_path / "w", chunks)
    before = {n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d)}
    with pytest.raises(NotClean) as e:
        compact(d, before=12, apply=True)
    assert e.value.exit_code == 4 and "goes back" in e.value.reason and "5..10" in e.value.reason
    assert {n: open(os.path.join(d, n), "rb").read() for n in os.listdir(d)} == before  # not even the lock file
    r = cli("compact", d, "--to", "12", "--apply")
    assert r.code == 4 and "goes back" in r.err and sorted(os.listdir(d)) == sorted(before)


def test_compact_does_not_delete_the_java_wrong_magic_chunk(tmp_path):
    d = copy_case("wrong-file-magic", tmp_path)
    with open(os.path.join(d, "wal-000001.bin"), "wb") as f:
        f.write(b"SPEC\x00\x00\x00\x02")
    rep = compact(d, before=0, apply=True)  # Java's truncateBefore(0) deleted it
    assert rep.removals == () and os.path.getsize(os.path.join(d, "wal-000000.bin")) == 9312


def test_compact_with_checkpoint_meta(tmp_path, cli):
    d = five_chunks(tmp_path)
    meta = tmp_path / "checkpoint.meta"
    meta.write_bytes(encode_checkpoint_meta(30))
    rep = compact(d, checkpoint_meta=str(meta), apply=True)
    assert rep.hwm == 30 and [r.last_sequence for r in rep.removals] == [10, 20, 30]
    meta.write_bytes(b"CKPT" + bytes(12))  # wrong version, wrong magic: never a large HWM
    with pytest.raises(UnsupportedInput):
        compact(d, checkpoint_meta=str(meta), apply=True)
    assert cli("compact", d, "--checkpoint-meta", str(meta)).code == 5
    assert compact(d, checkpoint_meta=str(tmp_path / "missing.meta")).hwm == 0
    with pytest.raises(UsageError):
        compact(d)


def test_compact_archive_to_moves_chunks_intact(tmp_path):
    d = five_chunks(tmp_path)
    with open(os.path.join(d, "wal-000000.bin"), "rb") as f:
        first = f.read()
    arch = str(tmp_path / "archive")
    rep = compact(d, before=20, archive_to=arch, apply=True)
    assert [r.file for r in rep.removals] == ["wal-000000.bin", "wal-000001.bin"]
    with open(os.path.join(arch, "wal-000000.bin"), "rb") as f:
        assert f.read() == first
    assert seqs(arch) == list(range(1, 21))
    entries, _ = q.read_manifest(d)
    assert {e["action"] for e in entries} == {"compact-archive"}


# ---- quarantine -----------------------------------------------------------------------------------

def test_quarantine_move_list_show_restore(tmp_path, cli):
    d = five_chunks(tmp_path)
    with open(os.path.join(d, "wal-000002.bin"), "rb") as f:
        data = f.read()
    dry = cli("quarantine", "move", d, "wal-000002.bin", "--reason", "rotten")
    assert dry.code == 0 and "dry run" in dry.out and os.path.exists(os.path.join(d, "wal-000002.bin"))
    moved = cli("quarantine", "move", d, "wal-000002.bin", "--reason", "rotten", "--apply", "--json").json()
    assert moved["target"] == ".quarantine/wal-000002.bin" and moved["entry"]["reason"] == "rotten"
    assert verify_path(d).exit_code == 4  # the hole shows
    listing = cli("quarantine", "list", d, "--json").json()
    (item,) = listing["items"]
    assert item["name"] == "wal-000002.bin" and item["recorded"] and item["size"] == len(data)
    shown = cli("quarantine", "show", d, "wal-000002.bin")
    assert "as a chunk: clean, 10 valid records" in shown.out
    # a second chunk of the same name never overwrites the first (other bytes: a copy of the very same
    # bytes is what a crash between a recorded move and the move leaves, and the rerun finishes that move)
    with open(os.path.join(d, "wal-000002.bin"), "wb") as f:
        f.write(make_chunk(range(21, 31), payload_for=lambda s: b"second %d" % s))
    Q.move(d, "wal-000002.bin", reason="again", apply=True)
    assert sorted(os.listdir(os.path.join(d, ".quarantine"))) == ["MANIFEST.jsonl", "wal-000002.bin",
                                                                  "wal-000002.bin.1"]
    with pytest.raises(Refused):
        Q.restore(d, "wal-000002.bin", apply=True) if os.path.exists(os.path.join(d, "wal-000002.bin")) else \
            (_ for _ in ()).throw(Refused("x"))
    assert cli("quarantine", "restore", d, "wal-000002.bin", "--apply").code == 0
    with open(os.path.join(d, "wal-000002.bin"), "rb") as f:
        assert f.read() == data
    assert verify_path(d).exit_code == 0
    lst = Q.list_quarantine(d)  # the restored file is gone from the listing, and that is not a problem
    assert [i.name for i in lst.items] == ["wal-000002.bin.1"] and lst.problems == ()
    assert [e["action"] for e in lst.history] == ["move", "move", "restore"]
    assert cli("quarantine", "restore", d, "wal-000002.bin.1", "--apply").code == 7  # the name is taken


def test_quarantine_restore_of_cut_bytes_only_onto_the_same_end(tmp_path):
    c0 = make_chunk(range(1, 4))
    d = write_dir(tmp_path / "w", {0: c0 + b"\x57\x41tail"})
    (entry,) = repair(d, apply=True).evidence
    name = entry["evidence"].split("/", 1)[1]
    shown = Q.show(d, name)
    assert shown.kind == "cut" and shown.fields[0].start == len(c0)
    with WalWriter(d) as w:
        w.append(0, "x", b"")
    with pytest.raises(Refused):
        Q.restore(d, name, apply=True)


def test_quarantine_lists_unrecorded_files(tmp_path):
    d = five_chunks(tmp_path)
    os.makedirs(os.path.join(d, ".quarantine"))
    with open(os.path.join(d, ".quarantine", "stray.bin"), "wb") as f:
        f.write(b"x")
    lst = Q.list_quarantine(d)
    assert [i.entry for i in lst.items] == [None] and "not in MANIFEST.jsonl" in lst.problems[0]


def test_quarantine_lists_a_recorded_move_a_crash_left_undone_and_compact_finishes_it(tmp_path):
    d = five_chunks(tmp_path)
    src = os.path.join(d, "wal-000000.bin")
    entry = {"time": "2026-11-21T10:00:00.000Z", "action": "compact", "source": "wal-000000.bin", "offset": 0,
             "length": os.path.getsize(src), "sha256": q.sha256_file(src), "evidence": ".quarantine/wal-000000.bin",
             "reason": "a crash after this line", "walctl_version": "0"}
    q.record(d, entry, DEFAULT_FS.beneath(d))  # the state a crash between the line and the move leaves
    lst = Q.list_quarantine(d)
    assert lst.items == () and lst.problems == (
        "wal-000000.bin: recorded (compact of wal-000000.bin) but not in .quarantine/ (a crash before the move? "
        "the next run of that command finishes it)",)
    rep = compact(d, before=10, apply=True)
    assert rep.evidence == (entry,)  # the recorded move, finished: no second line
    lst = Q.list_quarantine(d)
    assert [i.entry for i in lst.items] == [entry] and lst.problems == () and len(lst.history) == 1


def _at(stamp: str):
    """Pins the manifest clock (ops/clock.py) to `stamp` for the block."""
    import contextlib

    from walctl.ops import clock

    @contextlib.contextmanager
    def pinned():
        clock._fixed.append(stamp)
        try:
            yield
        finally:
            clock._fixed.pop()

    return pinned()


def test_quarantine_purge_deletes_only_old_recorded_files_and_records_each_first(tmp_path, cli):
    import calendar
    import time

    d = five_chunks(tmp_path)
    old_bytes = open(os.path.join(d, "wal-000001.bin"), "rb").read()
    with _at("2026-10-01T00:00:00.000Z"):
        Q.move(d, "wal-000001.bin", reason="old rot", apply=True)
    with _at("2026-11-20T00:00:00.500Z"):
        Q.move(d, "wal-000003.bin", reason="new rot", apply=True)
    with open(os.path.join(d, ".quarantine", "stray.bin"), "wb") as f:
        f.write(b"nobody recorded me")
    now = calendar.timegm(time.strptime("2026-11-21T00:00:00", "%Y-%m-%dT%H:%M:%S"))
    qd = os.path.join(d, ".quarantine")
    before = tree_digest(qd)
    dry = Q.purge(d, older_than_s=30 * 86400, now=now)
    assert [i.name for i in dry.removals] == ["wal-000001.bin"] and dry.bytes == len(old_bytes)
    assert [(i.name, why) for i, why in dry.kept] == [
        ("stray.bin", f"unrecorded: see `walctl quarantine list {d}`"), ("wal-000003.bin", "1.0 days old")]
    assert tree_digest(qd) == before and not dry.applied  # a dry run changes nothing
    with _at("2026-11-21T00:00:00.000Z"):
        done = Q.purge(d, older_than_s=30 * 86400, apply=True, now=now)
    assert done.applied and sorted(os.listdir(qd)) == ["MANIFEST.jsonl", "stray.bin", "wal-000003.bin"]
    (line,) = done.entries
    assert line["action"] == "purge" and line["source"] == "wal-000001.bin" and line["length"] == len(old_bytes)
    assert line["sha256"] == hashlib.sha256(old_bytes).hexdigest() and "old rot" in line["reason"]
    lst = Q.list_quarantine(d)
    assert [i.name for i in lst.items] == ["stray.bin", "wal-000003.bin"]
    assert [e["action"] for e in lst.history] == ["move", "move", "purge"]
    assert len(lst.problems) == 1 and lst.problems[0].startswith("stray.bin:")  # the purge is not a problem
    # 0 takes every recorded file, never the unrecorded one; the CLI agrees and needs --older-than
    assert cli("quarantine", "purge", d).code == 2
    assert cli("quarantine", "purge", d, "--older-than", "soon").code == 2
    r = cli("quarantine", "purge", d, "--older-than", "0", "--json").json()
    assert [i["name"] for i in r["removed"]] == ["wal-000003.bin"] and not r["applied"]
    r = cli("quarantine", "purge", d, "--older-than", "0", "--apply")
    assert r.code == 0 and "purged 1 files" in r.out and sorted(os.listdir(qd)) == ["MANIFEST.jsonl", "stray.bin"]


def test_quarantine_purge_is_refused_under_the_lock_and_a_crash_at_every_step_is_finished_by_a_rerun(tmp_path):
    from simfs import SimCrash, load_tree
    from walctl.errors import EnvironmentProblem
    from walctl.store.fs import DEFAULT_FS
    from walctl.store.lock import DirectoryLock

    d = five_chunks(tmp_path)
    with _at("2026-10-01T00:00:00.000Z"):
        Q.move(d, "wal-000001.bin", reason="rot", apply=True)
        Q.move(d, "wal-000002.bin", reason="rot", apply=True)
    with DirectoryLock(d, "pid 1 on test: walctl write", DEFAULT_FS):
        with pytest.raises(EnvironmentProblem):
            Q.purge(d, older_than_s=0, apply=True)
    assert sorted(os.listdir(os.path.join(d, ".quarantine"))) == ["MANIFEST.jsonl", "wal-000001.bin", "wal-000002.bin"]

    def load(crash_at=None, seed=0):
        return load_tree(d, "/r", seed=seed, crash_at=crash_at)

    start = load().ops
    crashes = 0
    for n, seed in ((n, seed) for n in range(1, 200) for seed in range(3)):
        fs = load(crash_at=start + n, seed=seed)
        try:
            Q.purge("/r", older_than_s=0, apply=True, fs=fs)
        except SimCrash:
            crashes += 1
            fs.crash()
            # every file is still there or recorded as purged
            entries, _ = q.read_manifest("/r", fs)
            purged = {e["evidence"] for e in entries if e["action"] == "purge"}
            for name in ("wal-000001.bin", "wal-000002.bin"):
                ev = f".quarantine/{name}"
                assert fs.exists(f"/r/{ev}") or ev in purged, (n, name)
            Q.purge("/r", older_than_s=0, apply=True, fs=fs)  # the rerun finishes it
            lst = Q.list_quarantine("/r", fs)  # a manifest line torn by the crash stays reported, nothing else
            assert lst.items == () and all("MANIFEST.jsonl line" in p for p in lst.problems), (n, lst.problems)
            entries, _ = q.read_manifest("/r", fs)
            assert sorted(e["evidence"] for e in entries if e["action"] == "purge") == [
                ".quarantine/wal-000001.bin", ".quarantine/wal-000002.bin"], n
            continue
        if seed == 2:
            break
    assert crashes >= 18


@pytest.mark.parametrize("kind", ["file", "bytes"])
def test_crash_at_every_step_of_quarantine_restore_then_one_rerun_finishes(tmp_path, kind):
    """The restore line goes first, then the act: after a crash anywhere, the next `quarantine restore` of
    the same name ends exactly as an uninterrupted restore (the bytes back, the file gone from
    .quarantine/, one restore line), or, when the crash came before the line, restores it then."""
    from simfs import SimCrash, load_tree

    d = five_chunks(tmp_path)
    with open(os.path.join(d, "wal-000004.bin"), "rb") as f:
        whole = f.read()
    if kind == "file":
        Q.move(d, "wal-000002.bin", reason="rot", apply=True)
        name, source = "wal-000002.bin", "wal-000002.bin"
        with open(os.path.join(d, ".quarantine", name), "rb") as f:
            expected = f.read()
    else:
        with open(os.path.join(d, "wal-000004.bin"), "r+b") as f:
            f.truncate(len(whole) - 40)
        rep = repair(d, apply=True)
        (ev,) = rep.evidence
        name, source, expected = ev["evidence"].split("/", 1)[1], "wal-000004.bin", whole[:-40]  # torn, as cut

    def load(crash_at=None):
        return load_tree(d, "/r", crash_at=crash_at)

    start = load().ops
    done = load()
    Q.restore("/r", name, apply=True, fs=done)
    steps = done.ops - start
    assert steps >= 3
    for n in range(1, steps + 1):
        fs = load(crash_at=start + n)
        with pytest.raises(SimCrash):
            Q.restore("/r", name, apply=True, fs=fs)
        fs.crash()
        # nothing is lost at any point: the bytes are in .quarantine/ or back in place
        back = fs.exists(f"/r/{source}") and fs.read_range(f"/r/{source}", 0, 1 << 20) == expected
        assert back or fs.exists(f"/r/.quarantine/{name}"), n
        act = Q.restore("/r", name, apply=True, fs=fs)  # one rerun finishes it, and says which it did
        assert act.applied != act.already, n
        assert fs.read_range(f"/r/{source}", 0, 1 << 20) == expected, n
        assert not fs.exists(f"/r/.quarantine/{name}"), n
        restores = [e for e in q.read_manifest("/r", fs)[0] if e["action"] == "restore"]
        assert len(restores) == 1 and restores[0]["restore"] == kind, (n, restores)
        assert Q.list_quarantine("/r", fs).problems == (), n
        # run once more (twice, or a rerun after a crash in its very last step): done before, it says so
        lines, ledger = q.read_manifest("/r", fs)[0], ledger_text(fs)
        again = Q.restore("/r", name, apply=True, fs=fs)
        assert again.already and not again.applied and again.target == source, n
        assert q.read_manifest("/r", fs)[0] == lines and ledger_text(fs) == ledger, n
        fs.crash()  # whatever the last run left unsynced is gone: still restored, still said so
        assert Q.restore("/r", name, apply=True, fs=fs).already, n


def ledger_text(fs, d="/r") -> bytes:
    path = f"{d}/.walctl/ledger.jsonl"
    return fs.read_range(path, 0, 1 << 20) if fs.exists(path) else b""


@pytest.mark.parametrize("kind", ["file", "bytes"])
def test_quarantine_restore_twice_says_it_was_done_and_exits_0(tmp_path, cli, kind):
    d = five_chunks(tmp_path)
    if kind == "file":
        assert cli("quarantine", "move", d, "wal-000002.bin", "--reason", "rot", "--apply").code == 0
        name = "wal-000002.bin"
    else:
        with open(os.path.join(d, "wal-000004.bin"), "r+b") as f:
            f.truncate(os.path.getsize(os.path.join(d, "wal-000004.bin")) - 40)
        name = repair(d, apply=True).evidence[0]["evidence"].split("/", 1)[1]
    first = cli("quarantine", "restore", d, name, "--apply")
    assert first.code == 0 and first.out.startswith(f"restore-{kind}: ")
    for argv in (["--apply"], [], ["--apply", "--json"]):
        r = cli("quarantine", "restore", d, name, *argv)
        assert r.code == 0 and "not a recorded item" not in r.out + r.err
        if "--json" in argv:
            assert r.json()["already"] is True and r.json()["applied"] is False
        else:
            assert r.out.startswith(f"already restored: {name} -> ") and "nothing to do" in r.out
    assert len([e for e in q.read_manifest(d)[0] if e["action"] == "restore"]) == 1


def test_an_unfinished_restore_is_named_by_quarantine_list(tmp_path):
    d = five_chunks(tmp_path)
    Q.move(d, "wal-000002.bin", reason="rot", apply=True)
    line = dict(q.read_manifest(d)[0][0], action="restore", restore="file", reason="moved back")
    q.record(d, line, DEFAULT_FS.beneath(d))  # the state a crash between the line and the move leaves
    (problem,) = Q.list_quarantine(d).problems
    assert "its restore is recorded but the file is still here" in problem and "--apply" in problem
    Q.restore(d, "wal-000002.bin", apply=True)
    assert os.path.exists(os.path.join(d, "wal-000002.bin")) and Q.list_quarantine(d).problems == ()
    assert len([e for e in q.read_manifest(d)[0] if e["action"] == "restore"]) == 1


def test_crash_at_every_step_of_setting_aside_a_short_last_chunk_then_one_rerun_finishes(tmp_path):
    """repair moves a short last chunk into .quarantine/: the manifest line goes first, so a crash between
    the move and its line can no longer leave evidence nobody recorded (which restore refused and purge kept
    forever); the rerun finishes the same move under the same line."""
    from simfs import SimCrash, load_tree

    d = five_chunks(tmp_path)
    with open(os.path.join(d, "wal-000005.bin"), "wb") as f:
        f.write(b"SPEC\x00")  # a writer died while creating its next chunk

    def load(crash_at=None):
        return load_tree(d, "/r", crash_at=crash_at)

    start = load().ops
    done = load()
    repair("/r", apply=True, fs=done)
    steps = done.ops - start
    assert steps >= 3
    for n in range(1, steps + 1):
        fs = load(crash_at=start + n)
        with pytest.raises(SimCrash):
            repair("/r", apply=True, fs=fs)
        fs.crash()
        assert Q.list_quarantine("/r", fs).items == () or all(i.entry for i in Q.list_quarantine("/r", fs).items), n
        assert repair("/r", apply=True, fs=fs).exit_code == 0, n
        lst = Q.list_quarantine("/r", fs)
        assert [(i.name, i.entry["action"]) for i in lst.items] == [("wal-000005.bin", "quarantine-chunk")], n
        assert not fs.exists("/r/wal-000005.bin") and fs.read_range("/r/.quarantine/wal-000005.bin", 0, 99) == \
            b"SPEC\x00", n
        assert all("MANIFEST.jsonl line" in p for p in lst.problems), (n, lst.problems)


def test_restore_never_puts_back_evidence_that_is_not_what_its_line_describes(tmp_path, cli):
    d = five_chunks(tmp_path)
    with open(os.path.join(d, "wal-000004.bin"), "r+b") as f:
        f.truncate(os.path.getsize(os.path.join(d, "wal-000004.bin")) - 40)
    (ev,) = repair(d, apply=True).evidence
    name = ev["evidence"].split("/", 1)[1]
    piece = os.path.join(d, ".quarantine", name)
    with open(piece, "wb") as f:
        f.write(bytes(ev["length"]))  # same size, other bytes
    before = open(os.path.join(d, "wal-000004.bin"), "rb").read()
    r = cli("quarantine", "restore", d, name, "--apply")
    assert r.code == 3 and "sha256 differs" in r.err
    assert open(os.path.join(d, "wal-000004.bin"), "rb").read() == before and os.path.exists(piece)
    with open(piece, "ab") as f:
        f.write(b"more")
    problems = cli("quarantine", "list", d, "--json").json()["problems"]
    assert any(name in p and "manifest line says" in p for p in problems)
