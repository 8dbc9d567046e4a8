"""Regenerates the example WAL directories with walctl's own encoder (deterministic bytes).

Usage: python examples/make_examples.py [OUT_DIR]   (default: this folder)
tests/test_examples.py checks that the committed examples are exactly what this writes.
"""
from __future__ import annotations

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from walctl.format.names import chunk_name  # noqa: E402
from walctl.format.v2 import TYPE_ORDINALS, compress_payload, encode_file_header, encode_record  # noqa: E402

TS0 = 1795300000000  # 2026-11-21T...Z, fixed so the bytes never change
THRESHOLD = 256


def events(first: int, count: int):
    kinds = ["REMEMBER", "RECALL_HIT", "REINFORCE", "TAG_MERGE", "FORGET"]
    for seq in range(first, first + count):
        kind = kinds[seq % len(kinds)]
        mid = f"mem-{seq % 7:04d}".encode()
        if kind == "REMEMBER":
            payload = json.dumps({"text": f"the agent noted fact {seq}", "tags": ["example"],
                                  "detail": "x" * (seq * 37 % 600)}).encode()
        elif kind == "FORGET":
            payload = b""
        else:
            payload = seq.to_bytes(4, "big")
        yield seq, TYPE_ORDINALS[kind], mid, TS0 + seq * 1000, payload


def chunk(first: int, count: int) -> bytes:
    out = bytearray(encode_file_header())
    for seq, typ, mid, ts, payload in events(first, count):
        stored, flags = compress_payload(payload, THRESHOLD)
        out += encode_record(seq, typ, mid, ts, stored, flags)
    return bytes(out)


def write(base: str, name: str, chunks: dict) -> None:
    d = os.path.join(base, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    for index, data in chunks.items():
        with open(os.path.join(d, chunk_name(index)), "wb") as f:
            f.write(data)


def record_starts(data: bytes) -> list[int]:
    from walctl.format.scan import scan_chunk

    starts = []
    scan_chunk(data, lambda buf, off, *rest: starts.append(off))
    return starts


def main(base: str) -> None:
    healthy = {0: chunk(1, 40), 1: chunk(41, 40), 2: encode_file_header()}
    write(base, "wal-healthy", healthy)

    # The writer died in the middle of appending seq 81: torn tail (exit 1), repair can cut it.
    last = chunk(41, 41)
    cut = record_starts(last)[-1] + 29
    write(base, "wal-torn-tail", {0: chunk(1, 40), 1: last[:cut]})

    # One bit of a payload (seq 10) rotted in the first, closed chunk: mid-log corruption (exit 3).
    rotten = bytearray(chunk(1, 40))
    rotten[record_starts(bytes(rotten))[9] + 60] ^= 0x04
    write(base, "wal-midlog-corrupt", {0: bytes(rotten), 1: chunk(41, 40)})

    # A whole chunk went missing: sequences 41..80 are gone (exit 4).
    write(base, "wal-sequence-gap", {0: chunk(1, 40), 2: chunk(81, 20)})

    # A legacy V1 chunk: unsupported for verify (exit 5), readable by inspect.
    v1 = bytearray(b"SPEC\x00\x00\x00\x01")
    for seq, typ, mid, ts, payload in events(1, 5):
        body = (seq.to_bytes(8, "big") + bytes([typ]) + len(mid).to_bytes(4, "big") + mid + ts.to_bytes(8, "big")
                + len(payload).to_bytes(4, "big") + payload)
        v1 += len(body).to_bytes(4, "big") + body
    write(base, "wal-legacy-v1", {0: bytes(v1)})

    # ADR-003 entry segments (seq 1..40) and checkpoints at 10, 20 and 30, the newest with a rotten body:
    # recovery falls back to the one at 20 and replays 21..40.
    write_segments(base)
    write_checkpoints(base)
    write_task_logs(base)
    copy_agent_root(base)


TASK_INTERRUPTED = "3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77"
TASK_COMPLETED = "9c41d2aa-7e1b-4f0e-8d25-51a7b3c0e9f4"


def write_task_logs(base: str) -> None:
    """Two Tiffany task logs: one interrupted mid-step (with a torn last line), one completed."""
    from walctl.format.tasklog_entry import encode_entry

    d = os.path.join(base, "tasks")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    plan = [{"index": 0, "description": "add the validator"}, {"index": 1, "description": "wire it in"},
            {"index": 2, "description": "write tests"}]

    def e(tid, n, kind, **kw):
        return dict({"v": 1, "ts": f"2026-11-21T10:{n:02d}:00Z", "type": kind, "task_id": tid}, **kw)

    sha = ["%040x" % (0xA11CE + i) for i in range(4)]
    t = TASK_INTERRUPTED
    entries = [e(t, 0, "InstructionStart", instruction="Add validation to model.rs", base_sha=sha[0]),
               e(t, 1, "LLMPlan", steps=plan, model="example-model"),
               e(t, 2, "StepStart", step_index=0), e(t, 3, "ToolResult", step_index=0, tool="edit", success=True),
               e(t, 4, "PatchPreview", step_index=0, diff="--- a/model.rs\n+++ b/model.rs", files={"model.rs": "fn v() {}"}),
               e(t, 5, "Commit", step_index=0, sha=sha[1], message="add the validator"),
               e(t, 6, "StepStart", step_index=1),
               e(t, 7, "PatchPreview", step_index=1, diff="--- a/lib.rs", base_sha=sha[1])]
    with open(os.path.join(d, f"{t}.wal"), "wb") as f:
        f.write(b"".join(encode_entry(x) for x in entries) + b'{"v":1,"ts":"2026-11-21T10:08:00Z","type":"ToolRe')
    t = TASK_COMPLETED
    entries = [e(t, 0, "InstructionStart", instruction="Bump the version", base_sha=sha[0]),
               e(t, 1, "LLMPlan", steps=plan[:1]), e(t, 2, "StepStart", step_index=0),
               e(t, 3, "Commit", step_index=0, sha=sha[2], message="bump"),
               e(t, 4, "TaskComplete", success=True, final_sha=sha[2], summary="version bumped"),
               e(t, 5, "ShutdownMarker", reason="done")]
    with open(os.path.join(d, f"{t}.wal"), "wb") as f:
        f.write(b"".join(encode_entry(x) for x in entries))


def copy_agent_root(base: str) -> None:
    """A Substrat root the real daemon wrote, killed during a turn (tests/data/substrat/crashed-active)."""
    src = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                                        "substrat", "crashed-active", "root"))
    d = os.path.join(base, "agents-crashed")
    if os.path.isdir(d):
        shutil.rmtree(d)
    shutil.copytree(src, d)
    for root, dirs, files in os.walk(d):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)


def adr_entries():
    from walctl.format.segment import seal

    out = []
    for seq in range(1, 41):
        if seq % 10 == 5:
            op, data = "tool_register", {"tool": {"name": f"tool-{seq}", "description": "an example tool"}}
        elif seq % 10 == 7:
            op, data = "state_update", {"new_state": {"mood": ["calm", "curious"][seq % 2], "step": seq}}
        else:
            op, data = "memory_add", {"content": f"the agent learned fact {seq}"}
        out.append(seal({"sequence": seq, "timestamp": 1795300000 + seq, "operation": op, "data": data}))
    return out


def write_segments(base: str) -> None:
    from walctl.format.names import segment_name
    from walctl.format.segment import encode_frame

    d = os.path.join(base, "segments")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    entries = adr_entries()
    for n, part in ((1, entries[:25]), (2, entries[25:])):
        with open(os.path.join(d, segment_name(n)), "wb") as f:
            f.write(b"".join(encode_frame(e, "json" if e["sequence"] % 4 == 0 else "msgpack") for e in part))


CHECKPOINT_IDS = ("0a6b3c1e-0000-4000-8000-000000000010", "0a6b3c1e-0000-4000-8000-000000000020",
                  "0a6b3c1e-0000-4000-8000-000000000030")


def write_checkpoints(base: str) -> None:
    from walctl.ops.checkpoints.checkpoint import create
    from walctl.ops.checkpoints.recover import reduce_adr003
    from walctl.format.checkpoint import empty_state

    d = os.path.join(base, "checkpoints")
    if os.path.isdir(d):
        shutil.rmtree(d)
    state, entries = empty_state(), adr_entries()
    for cid, upto in zip(CHECKPOINT_IDS, (10, 20, 30)):
        for e in entries:
            if upto - 10 < e["sequence"] <= upto:
                reduce_adr003(state, e)
        made = create(d, state, upto, timestamp=1795300000 + upto, checkpoint_id=cid, threads=0)
    with open(made.path, "r+b") as f:  # the newest rots: one bit of its body
        f.seek(260)
        b = f.read(1)
        f.seek(260)
        f.write(bytes([b[0] ^ 0x10]))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
