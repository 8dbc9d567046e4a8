"""ADR-003 segments (damage, duplicates, legacy) and recovery, compared with an independent fold."""
from __future__ import annotations

import hashlib
import json
import os
import random
import struct

import pytest

from walctl.errors import NotClean
from walctl.format.canonical import entry_checksum
from walctl.format.names import segment_name
from walctl.format.segment import encode_frame, seal
from walctl.ops.checkpoints import checkpoint as C
from walctl.ops.checkpoints.recover import recover
from walctl.ops.wal.verify import verify_path
from walctl.ops.wal.write import WalWriter


def test_adr_test_vector_checksum():
    e = {"sequence": 1, "timestamp": 1234567890, "operation": "memory_add", "data": {"content": "hello"}}
    assert entry_checksum(e) == "5e116c3c268d50e7a6ab530b3e18f15b19e54059678fca6e4fd08878c327b910"
    assert entry_checksum(dict(e, checksum="whatever")) == entry_checksum(e)


def random_entries(n, seed=1, start=1):
    rng = random.Random(seed)
    out = []
    for seq in range(start, start + n):
        kind = rng.choice(["memory_add", "memory_add", "tool_register", "state_update", "memory-add", "noop"])
        if kind in ("memory_add", "memory-add"):
            data = {"content": f"fact {seq} " + "x" * rng.randint(0, 50), "tags": [seq % 3]}
        elif kind == "tool_register":
            data = {"tool": {"name": f"tool{rng.randint(0, 3)}", "version": seq}}
        elif kind == "state_update":
            data = {"new_state": {f"k{rng.randint(0, 4)}": rng.choice([seq, None, "v"])}}
        else:
            data = {}
        out.append(seal({"sequence": seq, "timestamp": 1_700_000_000 + seq, "operation": kind, "data": data}))
    return out


def write_segments(d, entries, per_segment=50, encoding="msgpack", first_number=1):
    os.makedirs(d, exist_ok=True)
    for i in range(0, len(entries), per_segment):
        with open(os.path.join(d, segment_name(first_number + i // per_segment)), "wb") as f:
            for e in entries[i:i + per_segment]:
                f.write(encode_frame(e, encoding))
    return d


def independent_fold(entries, base=None):
    """A second, deliberately plain implementation of the ADR-003 reducer, for comparison."""
    state = json.loads(json.dumps(base)) if base else {
        "agent_state": {}, "conversation_history": [], "memory_blocks": [], "metrics": {}, "tool_registry": {},
        "wal_sequence": 0}
    for e in entries:
        op = {"memory-add": "memory_add"}.get(e["operation"], e["operation"])
        if op == "memory_add":
            state["memory_blocks"].append({"content": e["data"]["content"], "sequence": e["sequence"],
                                           "timestamp": e["timestamp"]})
        elif op == "tool_register":
            state["tool_registry"][e["data"]["tool"]["name"]] = e["data"]["tool"]
        elif op == "state_update":
            for k, v in e["data"]["new_state"].items():
                state["agent_state"][k] = v
        state["wal_sequence"] = e["sequence"]
    return state


def test_recovery_equals_an_independent_fold_with_and_without_checkpoint(tmp_path):
    entries = random_entries(400)
    log = write_segments(str(tmp_path / "log"), entries)
    rep = recover(None, log)
    assert rep.outcome == "replayed-from-empty" and rep.final_sequence == 400
    assert rep.state == independent_fold(entries)
    assert len(rep.skipped) == sum(1 for e in entries if e["operation"] == "noop")
    ck = str(tmp_path / "ck")
    mid = independent_fold(entries[:250])
    C.create(ck, mid, 250)
    rep = recover(ck, log)
    assert rep.outcome == "checkpoint+replay" and rep.checkpoint["wal_sequence"] == 250
    assert rep.entries_replayed == 150 and len(rep.skipped) < 150
    assert rep.state == independent_fold(entries[250:], base=mid)


def test_json_and_msgpack_copies_of_the_same_entries_recover_alike(tmp_path):
    entries = random_entries(120, seed=5)
    a = write_segments(str(tmp_path / "mp"), entries, encoding="msgpack")
    b = write_segments(str(tmp_path / "js"), entries, encoding="json")
    assert verify_path(a).exit_code == verify_path(b).exit_code == 0
    assert recover(None, a).state == recover(None, b).state == independent_fold(entries)


def test_checkpoint_fallback_during_recovery(tmp_path):
    entries = random_entries(100)
    log = write_segments(str(tmp_path / "log"), entries)
    ck = str(tmp_path / "ck")
    C.create(ck, independent_fold(entries[:40]), 40)
    newest = C.create(ck, independent_fold(entries[:80]), 80)
    with open(newest.path, "r+b") as f:
        f.seek(300)
        b = f.read(1)
        f.seek(300)
        f.write(bytes([b[0] ^ 1]))
    rep = recover(ck, log)
    assert rep.checkpoint["wal_sequence"] == 40 and rep.fallbacks[0]["step"] == 8
    assert rep.state == independent_fold(entries)


def test_gap_after_checkpoint_is_exit_4_unless_allowed(tmp_path):
    entries = random_entries(60)
    log = write_segments(str(tmp_path / "log"), entries[:20] + entries[30:])
    ck = str(tmp_path / "ck")
    base = independent_fold(entries[:20])
    C.create(ck, base, 20)
    with pytest.raises(NotClean) as err:
        recover(ck, log)
    assert err.value.exit_code == 4
    rep = recover(ck, log, allow_gap=True)
    assert rep.final_sequence == 20 and rep.state == base and "missing" in rep.warnings[0]


def test_damage_after_the_checkpoint_is_an_error_below_it_a_warning(tmp_path):
    entries = random_entries(100)
    log = write_segments(str(tmp_path / "log"), entries, per_segment=25)
    with open(os.path.join(log, segment_name(2)), "r+b") as f:  # seqs 26..50
        f.seek(30)
        f.write(b"\xff\xff")
    ck = str(tmp_path / "ck")
    C.create(ck, independent_fold(entries[:10]), 10)
    with pytest.raises(NotClean) as err:
        recover(ck, log)
    assert err.value.exit_code == 3 and "nothing was recovered" in str(err.value)
    C.create(ck, independent_fold(entries[:60]), 60)
    rep = recover(ck, log)
    assert rep.final_sequence == 100 and any("at or below" in w for w in rep.warnings)
    assert rep.state == independent_fold(entries)


def test_torn_tail_is_ignored_and_counted(tmp_path):
    entries = random_entries(30)
    log = write_segments(str(tmp_path / "log"), entries)
    with open(os.path.join(log, segment_name(1)), "ab") as f:
        f.write(encode_frame(random_entries(1, start=31)[0])[:-7])
    rep = recover(None, log)
    assert rep.final_sequence == 30 and rep.torn_bytes_ignored > 0 and rep.exit_code == 0


def test_no_checkpoint_and_log_not_from_one_is_its_own_outcome(tmp_path):
    log = write_segments(str(tmp_path / "log"), random_entries(10, start=50))
    rep = recover(str(tmp_path / "ck"), log)
    assert rep.outcome == "history-lost" and rep.exit_code == 4
    assert rep.state["memory_blocks"] == [] and rep.final_sequence == 0
    assert recover(str(tmp_path / "none"), str(tmp_path / "nolog")).outcome == "fresh-start"


def test_segment_damage_classes(tmp_path):
    entries = random_entries(60)
    d = write_segments(str(tmp_path / "s"), entries, per_segment=20)
    last = os.path.join(d, segment_name(3))
    with open(last, "ab") as f:
        f.write(b"\x00\x00\x00\x40" + b"{")  # torn last frame
    assert verify_path(d).exit_code == 1
    os.truncate(last, os.path.getsize(last) - 5)
    mid = os.path.join(d, segment_name(2))
    with open(mid, "r+b") as f:
        f.seek(10)
        f.write(b"\x00")
    rep = verify_path(d)
    assert rep.exit_code == 3 and rep.findings[0].cls == "mid-log-damage"
    with open(mid, "wb") as f:
        f.write(b"".join(encode_frame(e) for e in entries[20:40]))
    assert verify_path(d).exit_code == 0
    with open(mid, "ab") as f:  # a complete bad frame at the end of a non-last segment: corruption
        f.write(b"\x00\x00\x00\x02{}")
    assert verify_path(d).exit_code == 3


def test_duplicates_same_checksum_skipped_different_is_sequence(tmp_path):
    entries = random_entries(30)
    d = write_segments(str(tmp_path / "s"), entries + [entries[-1]], per_segment=100)
    rep = verify_path(d)
    assert rep.exit_code == 0 and [f.extra["code"] for f in rep.findings] == ["duplicate"]
    assert recover(None, d).duplicates == 1
    changed = seal(dict(entries[-1], data={"content": "other"}))
    d2 = write_segments(str(tmp_path / "s2"), entries + [changed], per_segment=100)
    assert verify_path(d2).exit_code == 4


def test_erlang_term_segment_is_unsupported_and_gaps_between_segments_found(tmp_path):
    d = str(tmp_path / "s")
    os.makedirs(d)
    with open(os.path.join(d, segment_name(1)), "wb") as f:
        f.write(struct.pack(">I", 5) + b"\x83h\x02a\x01")
    assert verify_path(d).exit_code == 5
    d2 = write_segments(str(tmp_path / "g"), random_entries(10) + random_entries(5, start=20), per_segment=10)
    rep = verify_path(d2)
    assert rep.exit_code == 4 and rep.findings[0].sequence_range == (11, 19)


def test_segment_writer_continues_and_rolls_at_10000(tmp_path):
    d = str(tmp_path / "s")
    with WalWriter(d, format="segments", sync="none") as w:
        for i in range(10_005):
            w.append_entry("memory_add", {"content": str(i)}, 1)
    assert sorted(os.listdir(d)) == [".walctl", ".walctl.lock", segment_name(1), segment_name(2)]
    rep = verify_path(d)
    assert [c.records for c in rep.chunks] == [10_000, 5] and rep.last_sequence == 10_005


def test_spector_reducer_over_a_v2_log(tmp_path):
    d = str(tmp_path / "wal")
    with WalWriter(d) as w:
        w.append(0, "a", b"first")
        w.append(0, "b", b"second")
        w.append(2, "a", b"\xfe")
        w.append(1, "b", b"")
        w.append(5, "a", b"\x00\x00\x00\x01")  # RECALL_HIT: not part of this state
    rep = recover(None, d, reducer="spector")
    assert rep.state == {"memories": {"a": b"first"}, "valence": {"a": -2}, "wal_sequence": 5}
    assert [s["sequence"] for s in rep.skipped] == [5]
    # the default reducer is picked by the log: the same state, where adr003 would skip every event
    assert recover(None, d).state == rep.state
    assert recover(None, os.path.join(d, "wal-000000.bin")).state == rep.state
    assert len(recover(None, d, reducer="adr003").skipped) == 5


def test_the_default_reducer_for_segments_and_for_no_log_is_adr003(tmp_path, cli):
    log = write_segments(str(tmp_path / "log"), random_entries(12))
    assert recover(None, log).state == recover(None, log, reducer="adr003").state
    assert recover(None, log).skipped == recover(None, log, reducer="adr003").skipped
    out = tmp_path / "state.json"
    r = cli("recover", "--log", log, "--out", str(out), "--json")
    assert r.code == 0 and r.json()["entries_replayed"] == recover(None, log, reducer="adr003").entries_replayed
    assert "memory_blocks" in json.loads(out.read_text())
    assert recover(None, str(tmp_path / "missing")).state == recover(None, None, reducer="adr003").state


def test_pluggable_reducer_and_cli(tmp_path, cli, monkeypatch):
    mod = tmp_path / "myreducer.py"
    mod.write_text("def fold(state, entry):\n    state.setdefault('count', 0)\n    state['count'] += 1\n    return state\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    log = write_segments(str(tmp_path / "log"), random_entries(12))
    out = tmp_path / "state.json"
    r = cli("recover", "--log", log, "--reducer", "myreducer:fold", "--out", str(out), "--json")
    assert r.code == 0 and r.json()["entries_replayed"] == 12
    assert json.loads(out.read_text())["count"] == 12
    assert cli("recover", "--log", log, "--reducer", "nope").code == 2


def test_compact_takes_the_oldest_kept_checkpoint_as_horizon(tmp_path):
    from walctl.ops.wal.compact import compact

    d = str(tmp_path / "wal")
    with WalWriter(d, max_chunk_bytes=300) as w:
        for i in range(60):
            w.append(0, "m", b"x" * 20)
    ck = str(tmp_path / "ck")
    C.create(ck, {"x": 1}, 20)
    C.create(ck, {"x": 2}, 50)
    rep = compact(d, checkpoints=ck)
    assert rep.hwm == 20 and all(r.last_sequence <= 20 for r in rep.removals) and rep.removals


def test_checkpoint_create_from_log_and_checkpointer_triggers(tmp_path, cli):
    from walctl.ops.checkpoints.checkpointer import Checkpointer

    log = str(tmp_path / "log")
    ck = str(tmp_path / "ck")
    with WalWriter(log, format="segments") as w:
        t = [0.0]
        cp = Checkpointer(ck, log=log, writer=w, interval_s=60, every_entries=5, clock=lambda: t[0])
        state = cp.recover().state
        made = []
        for i in range(12):
            seq = w.append_entry("memory_add", {"content": str(i)})
            cp.entries_written()
            state["memory_blocks"].append({"content": str(i), "sequence": seq, "timestamp": 0})
            got = cp.maybe_checkpoint(lambda: (state, seq))
            if got:
                made.append(got.wal_sequence)
        assert made == [5, 10]
        t[0] = 61.0
        assert cp.maybe_checkpoint(lambda: (state, 12)).wal_sequence == 12
    assert cp.recover().final_sequence == 12
    r = cli("checkpoint", "create", str(tmp_path / "ck2"), "--log", log, "--json")
    assert r.code == 0 and r.json()["wal_sequence"] == 12


def test_recover_cli_report_on_fallback(tmp_path, cli):
    entries = random_entries(20)
    log = write_segments(str(tmp_path / "log"), entries)
    ck = str(tmp_path / "ck")
    C.create(ck, independent_fold(entries[:10]), 10)
    with open(os.path.join(ck, "deadbeef.ckpt"), "wb") as f:
        f.write(b"junk")
    r = cli("recover", "--checkpoints", ck, "--log", log)
    assert r.code == 0 and "rejected: deadbeef.ckpt: step 1" in r.out and "final sequence 20" in r.out
    assert hashlib.sha256(b"x").hexdigest()


def test_repair_and_cli_write_on_segments(tmp_path, cli, monkeypatch):
    import io
    import sys

    d = str(tmp_path / "seg")
    lines = "".join(json.dumps({"operation": "memory_add", "data": {"content": f"c{i}"}, "timestamp": i}) + "\n"
                    for i in range(5))
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    r = cli("write", d, "--format", "segments", "--encoding", "json", "--json")
    assert r.code == 0 and r.json()["last_sequence"] == 5
    with open(os.path.join(d, segment_name(1)), "ab") as f:
        f.write(b"\x00\x00\x01\x00{\"seq")
    assert cli("verify", d).code == 1
    rep = cli("repair", d, "--apply", "--json").json()
    assert rep["exit_code"] == 0 and rep["cuts"][0]["length"] == 9
    rows = cli("inspect", d, "--jsonl").jsonl()
    assert [(x["sequence"], x["encoding"], x["data"]["content"]) for x in rows] == [(i + 1, "json", f"c{i}")
                                                                                   for i in range(5)]
    doc = cli("stats", d, "--json").json()
    assert doc["entries"] == 5 and doc["operations"][0]["json"] == 5
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"operation": "x", "sequence": 9}\n'))
    assert cli("write", d, "--format", "segments").code == 2  # sequence is the writer's


def test_missing_paths_are_exit_6_empty_directories_a_fresh_start(cli, tmp_path):
    # a typo in --checkpoints or --log is not a fresh start (cli-contract.md: a missing path is exit 6)
    r = cli("recover", "--checkpoints", tmp_path / "no-ckpt", "--log", tmp_path / "no-log", "--json")
    doc = r.json()
    assert r.code == 6 and doc["error"]["reason"] == "not-found" and doc["error"]["path"] == str(tmp_path / "no-ckpt")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "log").mkdir()
    r = cli("recover", "--checkpoints", tmp_path / "ckpt", "--log", tmp_path / "log", "--json")
    doc = r.json()
    assert r.code == 0 and doc["outcome"] == "fresh-start" and doc["final_sequence"] == 0
