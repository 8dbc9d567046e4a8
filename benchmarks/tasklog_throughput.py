"""`tasklog verify` of a 100 MB task log against a plain `json.loads`-per-line loop over the same file,
measured in the same run (interleaved rounds). Goal (issue #5): walctl >= 0.7x the loop.

Usage: python benchmarks/tasklog_throughput.py [--mb 100] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from walctl.format.tasklog_entry import encode_entry  # noqa: E402
from walctl.ops.tasklog.logs import read_task  # noqa: E402

TID = "3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77"


def write_log(path: str, mb: int) -> int:
    """A long, valid task: many re-plans, each step started, with a tool result, a preview and a commit."""
    lines = 0
    with open(path, "wb") as f:
        f.write(encode_entry({"v": 1, "ts": "2026-11-21T10:00:00Z", "type": "InstructionStart", "task_id": TID,
                              "instruction": "refactor the parser"}))
        size, n = 0, 0
        while size < mb * 1_000_000:
            n += 1
            steps = [{"index": i, "description": f"step {i} of plan {n}"} for i in range(10)]
            batch = [{"type": "LLMPlan", "steps": steps}]
            for i in range(10):
                batch += [{"type": "StepStart", "step_index": i},
                          {"type": "ToolResult", "step_index": i, "tool": "edit", "success": True, "output": "ok " * 30},
                          {"type": "PatchPreview", "step_index": i, "diff": "+ line\n" * 20},
                          {"type": "Commit", "step_index": i, "sha": "%040x" % (n * 100 + i), "message": f"step {i}"}]
            chunk = b"".join(encode_entry(dict({"v": 1, "ts": "2026-11-21T10:00:01Z", "task_id": TID}, **e))
                             for e in batch)
            f.write(chunk)
            size += len(chunk)
            lines += len(batch)
    return lines + 1


def loop(path: str) -> int:
    n = 0
    with open(path, "rb") as f:
        for line in f:
            json.loads(line)
            n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"{TID}.wal")
        lines = write_log(path, args.mb)
        ours, base = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            rep = read_task(path)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            assert loop(path) == lines
            base.append(time.perf_counter() - t)
        assert rep.exit_code == 0 and rep.read.state.valid_entries == lines
        o, b = statistics.median(ours), statistics.median(base)
        print(f"{os.path.getsize(path) / 1e6:.0f} MB, {lines} lines; median of {args.repeat} interleaved rounds")
        print(f"json.loads per line      {b:7.3f} s  {lines / b:10.0f} lines/s")
        print(f"walctl tasklog verify    {o:7.3f} s  {lines / o:10.0f} lines/s  {b / o:.2f}x (goal >= 0.70x)")


if __name__ == "__main__":
    main()
