"""Issue 15, "Checkpoints and recovery": the edges of checkpoint files, recovery's outcomes and counts, and
the zero-filled segment tail. Each test checks the data and the accounting (exit codes, steps, counts)."""
from __future__ import annotations

import json
import os

import pytest

from conftest import tree_digest
from simfs import SimFS
from test_recover import independent_fold, random_entries, write_segments
from walctl.errors import EnvironmentProblem
from walctl.format.segment import encode_frame, seal
from walctl.ops.checkpoints import checkpoint as C
from walctl.ops.checkpoints.recover import recover
from walctl.ops.wal.verify import verify_path

CID = "00000000-0000-4000-8000-0000000000e0"


def _entry(seq, op="memory_add", **data):
    return seal({"sequence": seq, "timestamp": 1_700_000_000 + seq, "operation": op,
                 "data": data or {"content": f"fact {seq}"}})


# ---- an empty .ckpt is corruption at step 1, on every path ---------------------------------------

@pytest.mark.parametrize("argv", [
    ("verify", "{f}", "--json"), ("verify", "{d}", "--json"), ("checkpoint", "verify", "{f}", "--json"),
    ("checkpoint", "verify", "{d}", "--json"), ("checkpoint", "inspect", "{f}", "--json"),
    ("checkpoint", "inspect", "{d}", "--json"), ("inspect", "{f}", "--jsonl"), ("inspect", "{d}", "--jsonl"),
])
def test_an_empty_ckpt_file_is_step_1_corruption_on_every_path(cli, tmp_path, argv):
    d = tmp_path / "ck"
    d.mkdir()
    f = d / f"{CID}.ckpt"
    f.write_bytes(b"")
    before = tree_digest(tmp_path)
    r = cli(*[a.format(f=f, d=d) for a in argv])
    assert r.code == 3, r.out + r.err
    doc = r.json()
    findings = (doc.get("findings") or [x for c in doc.get("checkpoints", []) for x in c["findings"]]
                or [x for p in doc.get("paths", []) for x in p["findings"]])
    assert [(x["class"], x["exit_code"], x["file"]) for x in findings] == [("checkpoint-corrupt", 3, f"{CID}.ckpt")]
    assert findings[0]["step"] == 1 and "0 bytes, shorter than the 256-byte header" in findings[0]["reason"]
    assert tree_digest(tmp_path) == before  # read-only


def test_restore_and_recover_refuse_an_empty_ckpt_and_a_short_one(cli, tmp_path):
    d = tmp_path / "ck"
    d.mkdir()
    (d / f"{CID}.ckpt").write_bytes(b"O_CKPT_V2")  # 9 bytes: still step 1
    r = cli("checkpoint", "restore", d / f"{CID}.ckpt", "--out", tmp_path / "s.json")
    assert r.code == 3 and "step 1" in r.err and not (tmp_path / "s.json").exists()
    r = cli("recover", "--checkpoints", d, "--json")
    assert r.code == 3 and not (tmp_path / "s.json").exists()


# ---- inspect on a checkpoint directory works like verify ----------------------------------------

def test_inspect_on_a_checkpoint_directory_shows_each_and_exits_as_verify(cli, tmp_path):
    d = str(tmp_path / "ck")
    good = C.create(d, {"agent_state": {"k": 1}}, 7, checkpoint_id="00000000-0000-4000-8000-000000000001")
    r = cli("inspect", d, "--jsonl")
    assert r.code == 0 == cli("verify", d).code
    doc = r.json()
    assert doc["schema"] == "walctl.checkpoint-inspect/2" and doc["exit_code"] == 0
    [c] = doc["checkpoints"]
    assert c["file"] == os.path.basename(good.path) and c["valid"] and c["header"]["wal_sequence"] == 7
    assert c["top_level_keys"] == {"agent_state": "map of 1", "wal_sequence": "int 7"}
    with open(good.path, "r+b") as f:  # flip a body byte: step 8
        f.seek(260)
        b = f.read(1)
        f.seek(260)
        f.write(bytes([b[0] ^ 0x40]))
    r = cli("inspect", d)
    assert r.code == 3 == cli("verify", d).code
    assert "INVALID" in r.out and "step 8: body SHA-256 mismatch" in r.out


# ---- recovery: counts, empty log directory, history-lost, duplicates -------------------------------

def test_entries_replayed_includes_skipped_unknown_operations(tmp_path):
    entries = [_entry(1), _entry(2, "noop"), _entry(3), _entry(4, "frobnicate"), _entry(5)]
    log = write_segments(str(tmp_path / "log"), entries)
    rep = recover(None, log)
    assert rep.entries_replayed == 5 and [s["sequence"] for s in rep.skipped] == [2, 4]
    assert rep.final_sequence == 5 and [b["sequence"] for b in rep.state["memory_blocks"]] == [1, 3, 5]
    assert rep.to_json()["skipped_count"] == 2


@pytest.mark.parametrize("bookkeeping", [(), (".quarantine",), (".walctl.lock", "wal_00000001.log.tmp")])
def test_an_empty_log_directory_is_no_log(tmp_path, bookkeeping):
    log = tmp_path / "log"
    log.mkdir()
    for name in bookkeeping:
        (log / name).mkdir() if name == ".quarantine" else (log / name).write_bytes(b"x")
    ck = str(tmp_path / "ck")
    state = independent_fold(random_entries(12, seed=3))
    C.create(ck, state, 12)
    rep = recover(ck, str(log))
    assert (rep.outcome, rep.exit_code, rep.final_sequence, rep.entries_replayed) == ("checkpoint+replay", 0, 12, 0)
    assert rep.state == dict(state, wal_sequence=12) and rep.checkpoint["wal_sequence"] == 12
    fresh = recover(str(tmp_path / "no-ckpts-here"), str(log))
    assert (fresh.outcome, fresh.exit_code, fresh.final_sequence) == ("fresh-start", 0, 0)
    assert fresh.state == {"agent_state": {}, "conversation_history": [], "memory_blocks": [], "metrics": {},
                           "tool_registry": {}, "wal_sequence": 0}


def test_cli_recover_with_a_checkpoint_and_an_empty_log_dir_writes_its_state(cli, tmp_path):
    (tmp_path / "log").mkdir()
    C.create(str(tmp_path / "ck"), {"agent_state": {"a": 1}}, 4)
    r = cli("recover", "--checkpoints", tmp_path / "ck", "--log", tmp_path / "log", "--out", tmp_path / "s.json",
            "--json")
    assert r.code == 0 and r.json()["outcome"] == "checkpoint+replay" and r.json()["final_sequence"] == 4
    assert json.loads((tmp_path / "s.json").read_text()) == {"agent_state": {"a": 1}, "wal_sequence": 4}


@pytest.mark.parametrize("seqs", [list(range(50, 60)), [1, 2, 3, 6, 7]], ids=["starts-at-50", "gap-after-3"])
def test_history_lost_is_exit_4_in_the_json_and_writes_only_with_allow_gap(cli, tmp_path, seqs):
    log = write_segments(str(tmp_path / "log"), [_entry(s) for s in seqs])
    out = tmp_path / "state.json"
    r = cli("recover", "--log", log, "--out", out, "--json")
    assert r.code == 4
    doc = r.json()
    assert (doc["schema"], doc["outcome"], doc["exit_code"], doc["final_sequence"]) == \
        ("walctl.recover/2", "history-lost", 4, 0)
    assert doc["entries_replayed"] == 0 and doc["state_written"] is None and not out.exists()
    assert any("history lost" in w for w in doc["warnings"])
    r = cli("recover", "--log", log, "--out", out, "--allow-gap", "--json")
    assert r.code == 4 and r.json()["state_written"] == str(out)
    assert json.loads(out.read_text()) == {"agent_state": {}, "conversation_history": [], "memory_blocks": [],
                                           "metrics": {}, "tool_registry": {}, "wal_sequence": 0}
    r = cli("recover", "--log", log)  # the human form says so too
    assert r.code == 4 and "outcome: history-lost" in r.out


def test_history_lost_with_rotten_checkpoints_is_corruption_first(tmp_path):
    log = write_segments(str(tmp_path / "log"), [_entry(s) for s in range(5, 9)])
    d = tmp_path / "ck"
    d.mkdir()
    (d / f"{CID}.ckpt").write_bytes(b"")
    rep = recover(str(d), log)
    assert (rep.outcome, rep.exit_code, rep.state["wal_sequence"]) == ("history-lost", 3, 0)
    assert rep.rejected[0]["step"] == 1


def test_duplicates_found_during_recovery_are_warned_about(tmp_path):
    entries = [_entry(s) for s in range(1, 7)]
    log = tmp_path / "log"
    log.mkdir()
    (log / "wal_00000001.log").write_bytes(b"".join(encode_frame(e) for e in entries[:4] + [entries[3]] + entries[4:]))
    rep = recover(None, str(log))
    assert (rep.exit_code, rep.duplicates, rep.entries_replayed, rep.final_sequence) == (0, 1, 6, 6)
    assert [b["sequence"] for b in rep.state["memory_blocks"]] == [1, 2, 3, 4, 5, 6]
    dup = [w for w in rep.warnings if "sequence 4 repeated with the same checksum" in w]
    assert len(dup) == 1 and "wal_00000001.log: offset 588..735" in dup[0]
    assert any("1 duplicate entries" in w for w in rep.warnings)


# ---- a zero-filled segment tail is zero-fill ------------------------------------------------------

def test_a_zero_filled_segment_tail_is_labelled_zero_fill(tmp_path):
    entries = [_entry(s) for s in range(1, 11)]
    log = write_segments(str(tmp_path / "log"), entries)
    seg = os.path.join(log, "wal_00000001.log")
    good = os.path.getsize(seg)
    with open(seg, "ab") as f:
        f.write(bytes(4096))
    rep = verify_path(log)
    [f] = rep.findings
    assert (rep.exit_code, f.cls, f.offset, f.end_offset, f.tail_kind) == (1, "tail-damage", good, good + 4096,
                                                                                     "zero-fill")
    assert "4096 zero bytes" in f.reason and "acknowledged" not in f.reason
    rec = recover(None, log)
    assert (rec.exit_code, rec.final_sequence, rec.torn_bytes_ignored) == (0, 10, 4096)
    assert rec.state == independent_fold(entries)


def test_a_nonzero_tail_frame_still_warns_that_it_may_have_been_acknowledged(tmp_path):
    log = write_segments(str(tmp_path / "log"), [_entry(s) for s in range(1, 4)])
    seg = os.path.join(log, "wal_00000001.log")
    frame = bytearray(encode_frame(_entry(4)))
    frame[-3] ^= 0xFF
    with open(seg, "ab") as f:
        f.write(bytes(frame))
    [f] = verify_path(log).findings
    assert f.tail_kind == "checksum" and "may have been acknowledged" in f.reason


# ---- checkpoint create on a full disk removes its .tmp -----------------------------------------------

class FullDisk(SimFS):
    """Every write past `room` bytes fails as ENOSPC does (the real fs seam raises EnvironmentProblem)."""

    def __init__(self, room: int):
        super().__init__()
        self.room = room

    def write(self, fd, data, path=""):
        if len(data) > self.room:
            raise EnvironmentProblem("no space left on device", path)
        self.room -= len(data)
        super().write(fd, data, path)


@pytest.mark.parametrize("room", [0, 256, 300])
def test_checkpoint_create_on_a_full_disk_removes_its_tmp(room):
    fs = FullDisk(room)
    fs.mkdir("/ck")
    with pytest.raises(EnvironmentProblem) as err:
        C.create("/ck", {"agent_state": {"blob": os.urandom(4096).hex()}}, 3, fs=fs)
    assert err.value.exit_code == 6 and "no space left" in str(err.value)
    assert [e.name for e in fs.listdir("/ck")] == [] and fs.fds == {}
    fs.room = 1 << 30  # space again: the next create succeeds and verifies
    made = C.create("/ck", {"agent_state": {"a": 1}}, 3, fs=fs)
    assert [e.name for e in fs.listdir("/ck")] == [os.path.basename(made.path)]
    assert C.check_path(made.path, fs=fs).checked.ok


def test_cli_checkpoint_create_on_a_full_disk_exits_6_without_a_tmp(cli, tmp_path, monkeypatch):
    import errno

    from walctl.store import fs as fsmod

    real = os.write

    def enospc(fd, data):
        if os.fstat(fd).st_size >= 256:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    (tmp_path / "s.json").write_text(json.dumps({"agent_state": {"x": "y" * 5000}}))
    monkeypatch.setattr(fsmod.os, "write", enospc)
    r = cli("checkpoint", "create", tmp_path / "ck", "--state", tmp_path / "s.json", "--to", "5")
    monkeypatch.setattr(fsmod.os, "write", real)
    assert r.code == 6 and "no space left on device" in r.err
    assert os.listdir(tmp_path / "ck") == []


# ---- what verify passes, restore and recover can use -------------------------------------------------

def _raw_checkpoint(directory, raw: bytes, seq: int, cid: str) -> str:
    """A checkpoint whose body is exactly `raw` (msgpack), every checksum right."""
    import hashlib
    import uuid

    import zstandard

    from walctl.format import checkpoint as ck

    body = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(raw)
    head = ck.encode_header(checkpoint_id=uuid.UUID(cid).bytes, timestamp=1795300000, wal_sequence=seq,
                            compressed_size=len(body), uncompressed_size=len(raw),
                            body_sha256=hashlib.sha256(body).digest())
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{cid}.ckpt")
    with open(path, "wb") as f:
        f.write(head + body)
    return path


def _deep(n):
    v = inner = {}
    for _ in range(n):
        inner["n"] = {}
        inner = inner["n"]
    return v


NO_CANONICAL_FORM = {
    "bytes-key": lambda m: m.packb({b"k": 1, "wal_sequence": 9}, use_bin_type=True),
    "ext-type": lambda m: m.packb({"k": m.ExtType(5, b"xx"), "wal_sequence": 9}, use_bin_type=True),
    "900-deep": lambda m: m.packb({"agent_state": _deep(900), "wal_sequence": 9}, use_bin_type=True),
}


@pytest.mark.parametrize("case", sorted(NO_CANONICAL_FORM))
def test_a_body_with_no_canonical_form_is_corrupt_everywhere_and_recover_falls_back(cli, tmp_path, case):
    import msgpack

    d = str(tmp_path / "ck")
    log = write_segments(str(tmp_path / "log"), [_entry(s) for s in range(1, 13)])
    prev = C.create(d, independent_fold([_entry(s) for s in range(1, 5)]), 4)
    bad = _raw_checkpoint(d, NO_CANONICAL_FORM[case](msgpack), 9, CID)
    rep = C.check_path(bad)
    assert (rep.checked.failure.step, rep.checked.failure.cls) == (10, "corrupt") and rep.checked.state is None
    assert "no canonical form" in rep.checked.failure.reason
    r = cli("checkpoint", "verify", bad, "--json")
    assert r.code == 3 and r.json()["paths"][0]["findings"][0]["step"] == 10
    out = tmp_path / "s.json"
    r = cli("checkpoint", "restore", bad, "--out", out)
    assert r.code == 3 and "step 10" in r.err and not out.exists() and "internal error" not in r.err
    r = cli("checkpoint", "inspect", bad, "--json")
    assert r.code == 3 and r.json()["top_level_keys"] is None
    rec = recover(d, log)  # the newer (wal_sequence 9) one is passed over: the previous one is the base
    assert rec.checkpoint["file"] == os.path.basename(prev.path) and rec.checkpoint["wal_sequence"] == 4
    assert [(f["file"], f["step"]) for f in rec.fallbacks] == [(f"{CID}.ckpt", 10)]
    assert (rec.exit_code, rec.final_sequence) == (0, 12) and rec.state == independent_fold(
        [_entry(s) for s in range(1, 13)])
    r = cli("checkpoint", "restore", d, "--out", out)  # a directory: the latest that restores
    assert r.code == 0 and json.loads(out.read_text())["wal_sequence"] == 4


def test_a_body_in_non_canonical_order_is_an_anomaly_and_restores(cli, tmp_path):
    import msgpack

    d = str(tmp_path / "ck")
    raw = msgpack.packb({"wal_sequence": 3, "agent_state": {"b": 1, "a": b"\x00\x01"}}, use_bin_type=True)
    path = _raw_checkpoint(d, raw, 3, CID)
    rep = C.check_path(path)
    assert rep.checked.ok and rep.checked.anomalies == ("body decodes but is not canonical msgpack",)
    assert cli("checkpoint", "verify", path).code == 0 and cli("checkpoint", "verify", path, "--strict").code == 3
    out = tmp_path / "s.json"
    r = cli("checkpoint", "restore", path, "--out", out)
    assert r.code == 0
    assert json.loads(out.read_text()) == {"agent_state": {"a": {"$bytes_hex": "0001"}, "b": 1}, "wal_sequence": 3}
