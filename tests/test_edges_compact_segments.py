"""Issue 15: `compact` on ADR-003 segment directories (whole segments at or below the horizon, into
.quarantine/ with manifest lines, dry run without --apply, crash-safe) and `quarantine move` of a
segment or a rotten checkpoint."""
from __future__ import annotations

import hashlib
import os

import pytest

from conftest import tree_digest
from simfs import SimCrash, load_tree
from test_recover import independent_fold, random_entries, write_segments
from walctl.errors import UsageError
from walctl.format.names import segment_name
from walctl.ops.checkpoints import checkpoint as C
from walctl.ops.wal.compact import compact
from walctl.ops.wal.quarantine import list_quarantine, move, restore, show
from walctl.ops.checkpoints.recover import recover
from walctl.ops.wal.verify import verify_path
from walctl.store import quarantine as q


def seg_bytes(d) -> dict:
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.endswith(".log")}


@pytest.fixture
def segdir(tmp_path):
    entries = random_entries(100, seed=7)
    return write_segments(str(tmp_path / "log"), entries, per_segment=20), entries  # 5 segments: 1-20 ... 81-100


def test_dry_run_plans_whole_segments_at_or_below_the_hwm_and_changes_nothing(cli, segdir):
    d, _ = segdir
    before = tree_digest(d)
    r = cli("compact", d, "--to", "65", "--json")
    assert r.code == 0
    doc = r.json()
    assert doc["applied"] is False and doc["hwm"] == 65
    assert [(x["file"], x["first_sequence"], x["last_sequence"]) for x in doc["removals"]] == \
        [(segment_name(1), 1, 20), (segment_name(2), 21, 40), (segment_name(3), 41, 60)]
    assert doc["bytes"] == sum(os.path.getsize(os.path.join(d, segment_name(i))) for i in (1, 2, 3))
    assert "wal_00000004.log: holds sequences up to 80, above the HWM 65" == doc["stopped_at"]
    assert tree_digest(d) == before


def test_apply_moves_them_into_quarantine_with_lines_and_recovery_still_works(cli, segdir, tmp_path):
    d, entries = segdir
    ck = str(tmp_path / "ck")
    C.create(ck, independent_fold(entries[:40]), 40)
    C.create(ck, independent_fold(entries[:70]), 70)
    old = seg_bytes(d)
    r = cli("compact", d, "--checkpoints", ck, "--apply", "--json")  # horizon: the OLDEST valid checkpoint, 40
    assert r.code == 0
    doc = r.json()
    assert doc["hwm"] == 40 and doc["applied"] and [x["file"] for x in doc["removals"]] == [segment_name(1),
                                                                                           segment_name(2)]
    assert sorted(seg_bytes(d)) == [segment_name(i) for i in (3, 4, 5)]
    entries_q, problems = q.read_manifest(d)
    assert problems == [] and [(e["action"], e["source"], e["offset"], e["length"]) for e in entries_q] == \
        [("compact", segment_name(i), 0, len(old[segment_name(i)])) for i in (1, 2)]
    for e in entries_q:
        kept = open(os.path.join(d, e["evidence"]), "rb").read()
        assert kept == old[e["source"]] and hashlib.sha256(kept).hexdigest() == e["sha256"]
    rep = verify_path(d)
    assert rep.exit_code == 0 and rep.first_sequence == 41 and rep.last_sequence == 100
    rec = recover(ck, d)  # from the newest checkpoint (70); the previous one (40) can still be replayed onto
    assert rec.exit_code == 0 and rec.state == independent_fold(entries)
    assert cli("compact", d, "--checkpoints", ck, "--apply", "--json").json()["removals"] == []  # idempotent


def test_never_the_last_segment_a_damaged_one_or_one_before_a_gap(segdir, tmp_path):
    d, entries = segdir
    rep = compact(d, before=10_000)
    assert [r.file for r in rep.removals] == [segment_name(i) for i in (1, 2, 3, 4)]
    assert rep.stopped_at == f"{segment_name(5)}: the last segment is never compacted"
    with open(os.path.join(d, segment_name(3)), "r+b") as f:  # mid-segment damage in 41..60
        f.seek(30)
        f.write(b"\xff\xff\xff")
    rep = compact(d, before=10_000)
    assert [r.file for r in rep.removals] == [segment_name(1)]
    assert rep.stopped_at.startswith(f"{segment_name(2)}: the next segment {segment_name(3)} is corrupt")
    gap = write_segments(str(tmp_path / "gap"), entries[:20] + entries[25:], per_segment=20)
    rep = compact(gap, before=10_000)  # 1..20 then 26..45: removing segment 1 would hide the gap
    assert rep.removals == ()
    assert rep.stopped_at == f"{segment_name(1)}: the next segment {segment_name(2)} is discontinuous, so this one is kept"


def test_crash_at_every_step_of_segment_compaction_then_one_rerun_finishes(segdir):
    d, entries = segdir
    probe = load_tree(d)
    start = probe.ops
    done = compact("/r", before=50, apply=True, fs=probe)
    assert [r.file for r in done.removals] == [segment_name(1), segment_name(2)]
    steps = probe.ops - start
    original = seg_bytes(d)
    final_names = {e.name for e in probe.listdir("/r")}
    for n in range(1, steps + 1):
        fs = load_tree(d)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            compact("/r", before=50, apply=True, fs=fs)
        fs.crash()
        # after the crash: every segment is in the log or byte for byte in .quarantine/
        held = {e.name: bytes(fs.read_range(e.path, 0, e.size)) for e in fs.listdir("/r") if e.name.endswith(".log")}
        qd = "/r/.quarantine"
        kept = {bytes(fs.read_range(e.path, 0, e.size)) for e in fs.listdir(qd)
                if e.name != q.MANIFEST and not e.name.endswith(".tmp")} if fs.exists(qd) else set()
        for name, data in original.items():
            assert held.get(name) == data or data in kept, (n, name)
        compact("/r", before=50, apply=True, fs=fs)  # one rerun ends as an uninterrupted run
        assert {e.name for e in fs.listdir("/r")} == final_names, n
        lines, problems = q.read_manifest("/r", fs)
        assert sorted(e["source"] for e in lines if e["action"] == "compact") == [segment_name(1), segment_name(2)], n
        assert all("torn by a crash" in p for p in problems)
        assert verify_path("/r", fs=fs).first_sequence == 41


def test_quarantine_move_sets_aside_a_segment_and_a_rotten_checkpoint(tmp_path):
    d = write_segments(str(tmp_path / "log"), random_entries(40, seed=2), per_segment=20)
    seg = open(os.path.join(d, segment_name(2)), "rb").read()
    act = move(d, segment_name(2), reason="bit rot")
    assert not act.applied and os.path.exists(os.path.join(d, segment_name(2)))  # dry run
    act = move(d, segment_name(2), reason="bit rot", apply=True)
    assert act.entry["source"] == segment_name(2) and act.entry["length"] == len(seg)
    assert open(os.path.join(d, act.entry["evidence"]), "rb").read() == seg
    shown = show(d, segment_name(2))
    assert shown.kind == "segment" and shown.report.records == 20 and shown.report.exit_code == 0
    assert verify_path(d).last_sequence == 20
    restore(d, segment_name(2), apply=True)
    assert open(os.path.join(d, segment_name(2)), "rb").read() == seg and verify_path(d).last_sequence == 40

    ck = str(tmp_path / "ck")
    good = C.create(ck, {"agent_state": {}}, 5)
    bad = C.create(ck, {"agent_state": {"x": 1}}, 9)
    with open(bad.path, "r+b") as f:
        f.seek(300)
        f.write(b"\x00\x01")
    rotten = os.path.basename(bad.path)
    raw = open(bad.path, "rb").read()
    assert C.latest(ck).fallbacks[0].file == rotten
    act = move(ck, rotten, reason="step 8", apply=True)
    assert open(os.path.join(ck, act.entry["evidence"]), "rb").read() == raw
    assert act.entry["sha256"] == hashlib.sha256(raw).hexdigest()
    after = C.latest(ck)
    assert after.report.file == os.path.basename(good.path) and after.fallbacks == ()
    shown = show(ck, rotten)
    assert shown.kind == "checkpoint" and shown.report.exit_code == 3
    assert [i.name for i in list_quarantine(ck).items] == [rotten]


@pytest.mark.parametrize("name", ["notes.txt", "../x.ckpt", ".ckpt", "wal_.log"])
def test_quarantine_move_refuses_other_names(tmp_path, name):
    d = tmp_path / "d"
    d.mkdir()
    with pytest.raises(UsageError):
        move(str(d), name, reason="x", apply=True)
    assert not (d / ".quarantine").exists()
