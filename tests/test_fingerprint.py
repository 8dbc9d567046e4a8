"""walctl fingerprint: one number for one state, whatever path reached it (checkpoint + log, a replay of
the whole log, an archive push + restore, a replica written by replay | import, a merge); one changed
event gives another; --to in the middle of a chunk."""
from __future__ import annotations

import io
import os
import shutil

import pytest

from walctl.format import events as ev
from walctl.format.v2 import TYPE_ORDINALS
from walctl.ops.wal.importer import import_stream, read_stream
from walctl.ops.wal.replay import ReplayOptions, replay
from walctl.ops.wal.write import WalWriter

TYPES = [TYPE_ORDINALS[t] for t in ("REMEMBER", "REINFORCE", "TAG_MERGE", "RECALL_HIT", "FORGET", "REFLECT")]


def events(n: int, change: int | None = None):
    """n events over a few memories; `change`: that sequence's payload differs."""
    out = []
    for seq in range(1, n + 1):
        payload = bytes([seq % 251, 7]) if seq != change else bytes([(seq + 1) % 251, 8])
        out.append((TYPES[seq % len(TYPES)], f"m{seq % 5}".encode(), payload, 1_700_000_000_000 + seq))
    return out


def write_wal(path, evs, seal_on_close=True, max_chunk_bytes=1 << 20):
    with WalWriter(str(path), sync="none", max_chunk_bytes=max_chunk_bytes, seal_on_close=seal_on_close) as w:
        for e in evs:
            w.append(*e)
    return str(path)


def fp(cli, *args) -> dict:
    r = cli("fingerprint", *args, "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["schema"] == "walctl.fingerprint/1" and len(doc["sha256"]) == 64
    return doc


def test_every_path_to_the_state_gives_one_fingerprint(tmp_path, cli):
    wal = write_wal(tmp_path / "wal", events(30), max_chunk_bytes=600)
    ck = tmp_path / "ckpts"
    assert cli("checkpoint", "create", ck, "--log", wal, "--reducer", "spector").code == 0  # W = 30
    with WalWriter(wal, sync="none", max_chunk_bytes=600, seal_on_close=True) as w:
        for e in events(60)[30:]:
            w.append(*e)
    assert len([n for n in os.listdir(wal) if n.endswith(".bin")]) > 3
    full = fp(cli, wal, "--to", "45")
    assert (full["sequence"], full["form"], full["reducer"], full["source"]) == (45, "canonical-state/1", "spector", "log")
    from_ck = fp(cli, wal, "--checkpoints", ck, "--to", "45")
    assert from_ck["source"] == "checkpoint+log" and from_ck["checkpoint"]["wal_sequence"] == 30
    assert from_ck["entries_folded"] == 15 and full["entries_folded"] == 45
    # the checkpoint alone, at its own sequence, and the log folded to the same sequence
    ck_file = os.path.join(ck, os.listdir(ck)[0])
    assert fp(cli, ck_file)["sha256"] == fp(cli, wal, "--to", "30")["sha256"] == fp(cli, ck, "--to", "30")["sha256"]
    insp = cli("checkpoint", "inspect", ck_file, "--json").json()
    assert insp["fingerprint"] == {"form": "canonical-state/1", "sha256": fp(cli, ck_file)["sha256"], "sequence": 30}
    # an archive push, then a restore somewhere else
    arch = tmp_path / "arch"
    arch.mkdir()
    assert cli("archive", "push", wal, f"file://{arch}", "--checkpoints", ck, "--apply").code == 0
    assert cli("archive", "restore", f"file://{arch}", tmp_path / "restored").code == 0
    restored = str(tmp_path / "restored" / "wal")
    via_archive = fp(cli, restored, "--checkpoints", tmp_path / "restored" / "checkpoints", "--to", "45")
    # a replica fed by replay | import
    stream: list[bytes] = []
    replay(wal, stream.extend, ReplayOptions(form=ev.FORM_JSONL))
    form, items = read_stream(io.BufferedReader(io.BytesIO(b"".join(stream))))
    import_stream(str(tmp_path / "replica"), items, form)
    replica = fp(cli, tmp_path / "replica", "--to", "45")
    assert full["sha256"] == from_ck["sha256"] == via_archive["sha256"] == replica["sha256"]
    # recover prints the fingerprint of what it wrote: the state at the log's end
    rec = cli("recover", "--checkpoints", ck, "--log", wal, "--reducer", "spector", "--out", tmp_path / "s.json",
              "--json").json()
    assert rec["fingerprint"] == {"form": "canonical-state/1", "sha256": fp(cli, wal)["sha256"], "sequence": 60}
    text = cli("recover", "--checkpoints", ck, "--log", wal, "--reducer", "spector").out
    assert f"fingerprint: {rec['fingerprint']['sha256']} (canonical-state/1 at sequence 60)" in text
    # a merge of the log with its replica: merge's fold of either, and merge's state.json
    assert cli("merge", wal, tmp_path / "replica", "--out", tmp_path / "merged").code == 0
    merged = fp(cli, tmp_path / "merged")
    assert (merged["form"], merged["sequence"]) == ("canonical-memory-state/1", None)
    assert merged["sha256"] == fp(cli, wal, "--reducer", "merge")["sha256"] \
        == fp(cli, tmp_path / "replica", "--reducer", "merge")["sha256"] \
        == fp(cli, tmp_path / "merged" / "state.json")["sha256"]


def test_one_changed_event_changes_the_fingerprint_from_its_sequence_on(tmp_path, cli):
    a = write_wal(tmp_path / "a", events(40))
    b = write_wal(tmp_path / "b", events(40, change=19))  # a REINFORCE: another valence (both folds keep it)
    for reducer in ("spector", "merge"):
        before = [fp(cli, p, "--to", "18", "--reducer", reducer)["sha256"] for p in (a, b)]
        after = [fp(cli, p, "--to", "19", "--reducer", reducer)["sha256"] for p in (a, b)]
        assert before[0] == before[1] and after[0] != after[1], reducer
    # (a later REINFORCE of the same memory may overwrite the valence again: states can converge, as they should)


def test_at_in_the_middle_of_a_chunk_folds_exactly_that_prefix(tmp_path, cli):
    wal = write_wal(tmp_path / "wal", events(50))  # one chunk
    assert [n for n in os.listdir(wal) if n.endswith(".bin")] == ["wal-000000.bin"]
    prefix = write_wal(tmp_path / "prefix", events(23))
    mid = fp(cli, wal, "--to", "23")
    assert mid["sequence"] == 23 and mid["entries_folded"] == 23
    assert mid["sha256"] == fp(cli, prefix)["sha256"] != fp(cli, wal)["sha256"]
    assert fp(cli, wal, "--to", "0")["sha256"] == fp(cli, wal, "--to", "0")["sha256"]


def test_segments_and_damage_after_the_point(tmp_path, cli):
    from test_recover import random_entries, write_segments

    entries = random_entries(120)
    seg = write_segments(str(tmp_path / "seg"), entries, per_segment=50)
    short = write_segments(str(tmp_path / "short"), entries[:77], per_segment=50)
    assert fp(cli, seg, "--to", "77")["sha256"] == fp(cli, short)["sha256"]
    assert fp(cli, seg, "--to", "77")["reducer"] == "adr003"
    # damage in the last segment: the state before it is still fingerprinted, with a warning; at it, refused
    last = os.path.join(seg, sorted(os.listdir(seg))[-1])
    data = bytearray(open(last, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(last, "wb").write(bytes(data))
    got = fp(cli, seg, "--to", "77")
    assert got["sha256"] == fp(cli, short)["sha256"] and any("not folded" in w for w in got["warnings"])
    r = cli("fingerprint", seg)
    assert r.code == 3 and "damaged" in r.err and "Traceback" not in r.err


@pytest.mark.parametrize("args, code, words", [
    (["--to", "99"], 4, "ends at sequence 50: there is no state at sequence 99"),
    (["--to", "-1"], 2, "a sequence is 0 or more"),
    (["--reducer", "no_such_module_x:fn"], 2, "cannot be loaded"),
    (["--reducer", "fp_set_reducer:with_a_set"], 2, "no canonical form"),
])
def test_refusals_are_one_line(tmp_path, cli, monkeypatch, args, code, words):
    (tmp_path / "fp_set_reducer.py").write_text("def with_a_set(state, e):\n    state['s'] = {1}\n    return state\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    wal = write_wal(tmp_path / "wal", events(50))
    r = cli("fingerprint", wal, *args)
    assert r.code == code and words in r.err and "Traceback" not in r.err, r.err


def test_user_reducer_follows_recovers_rules(tmp_path, cli, monkeypatch):
    mod = tmp_path / "fp_sum_reducer.py"
    mod.write_text("def fold(state, e):\n    state['n'] = state.get('n', 0) + e['sequence']\n    return state\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    wal = write_wal(tmp_path / "wal", events(10))
    doc = fp(cli, wal, "--reducer", "fp_sum_reducer:fold", "--to", "4")
    assert doc["reducer"] == "fp_sum_reducer:fold"
    from walctl.format.checkpoint import empty_state
    from walctl.ops.checkpoints.fingerprint import state_sha256

    assert doc["sha256"] == state_sha256(dict(empty_state(), n=1 + 2 + 3 + 4), 4)


def test_merge_state_refuses_a_sequence(tmp_path, cli):
    wal = write_wal(tmp_path / "wal", events(10))
    shutil.copytree(wal, tmp_path / "wal2")
    assert cli("merge", wal, tmp_path / "wal2", "--out", tmp_path / "m").code == 0
    r = cli("fingerprint", tmp_path / "m", "--to", "3")
    assert r.code == 2 and "no sequence" in r.err
