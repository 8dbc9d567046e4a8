"""Append latency while a 50 MB checkpoint is written in the background, against appends with no checkpoint.

Goal (issue #28, ADR-003 "async checkpoint creation"): the p99 latency of `append an entry and apply it
to the state` while `Checkpointer(background=True)` writes a checkpoint of a realistic 50 MB state stays
within 1.5x of the p99 with no checkpoint running. The caller's pause to take the snapshot (the state's
canonical bytes, in the caller so that it is consistent) is printed on its own line, and so is what a
foreground checkpoint would have blocked the appender for.

Each round appends for as long as the background checkpoint runs, then for the same time without one;
rounds interleave so that a noisy moment on a shared machine hits both alike.

Usage: python benchmarks/checkpoint_background.py [--mb 50] [--repeat 3] [--sync batch]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checkpoint_throughput import realistic_state  # noqa: E402

from walctl.ops.checkpoints.checkpointer import Checkpointer  # noqa: E402
from walctl.ops.wal.write import WalWriter  # noqa: E402


def pct(sorted_ns: list[int], p: float) -> float:
    return sorted_ns[min(len(sorted_ns) - 1, int(len(sorted_ns) * p))] / 1000  # microseconds


def append_until(w, cp, state, done, latencies: list[int]) -> None:
    blocks = state["memory_blocks"]
    clock = time.perf_counter_ns
    while not done():
        t = clock()
        with cp.uninterrupted():
            seq = w.append_entry("memory_add", {"content": "an observation worth keeping " * 4})
            blocks.append({"content": "an observation worth keeping " * 4, "sequence": seq, "timestamp": None})
        latencies.append(clock() - t)


def one_round(base: str, state: dict, n: int, sync: str) -> dict:
    log, ck = os.path.join(base, f"log{n}"), os.path.join(base, f"ck{n}")
    with WalWriter(log, format="segments", sync=sync) as w:
        cp = Checkpointer(ck, log=log, writer=w, background=True)
        warm: list[int] = []
        deadline = time.perf_counter() + 0.3
        append_until(w, cp, state, lambda: time.perf_counter() > deadline, warm)
        t0 = time.perf_counter()
        cp.checkpoint(state, w.last_sequence)
        pause = time.perf_counter() - t0
        during: list[int] = []
        append_until(w, cp, state, lambda: not cp.in_progress, during)
        made = cp.wait()
        took = time.perf_counter() - t0
        quiet: list[int] = []
        deadline = time.perf_counter() + took
        append_until(w, cp, state, lambda: time.perf_counter() > deadline, quiet)
    del state["memory_blocks"][-(len(warm) + len(during) + len(quiet)):]  # the next round starts alike
    shutil.rmtree(log)
    shutil.rmtree(ck)
    return {"pause": pause, "took": took, "size": made.uncompressed_size, "during": sorted(during),
            "quiet": sorted(quiet)}


def foreground_block(base: str, state: dict) -> float:
    ck = os.path.join(base, "fg")
    cp = Checkpointer(ck)
    t = time.perf_counter()
    cp.checkpoint(state, 1)
    took = time.perf_counter() - t
    shutil.rmtree(ck)
    return took


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sync", default="batch")
    args = ap.parse_args()
    state = realistic_state(args.mb)
    base = tempfile.mkdtemp()
    try:
        rounds = [one_round(base, state, i, args.sync) for i in range(args.repeat)]
        fg = statistics.median(foreground_block(base, state) for _ in range(args.repeat))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"state {rounds[0]['size'] / 1e6:.1f} MB canonical; sync={args.sync}; {args.repeat} rounds (median of rounds)")
    print(f"{'':34} {'appends':>8} {'p50 us':>8} {'p99 us':>8} {'p99.9 us':>9} {'max ms':>8}")
    for key, label in (("quiet", "no checkpoint"), ("during", "background checkpoint running")):
        print(f"{label:34} {statistics.median(len(r[key]) for r in rounds):8.0f} "
              f"{statistics.median(pct(r[key], 0.5) for r in rounds):8.1f} "
              f"{statistics.median(pct(r[key], 0.99) for r in rounds):8.1f} "
              f"{statistics.median(pct(r[key], 0.999) for r in rounds):9.1f} "
              f"{statistics.median(r[key][-1] / 1e6 for r in rounds):8.1f}")
    ratio = statistics.median(pct(r["during"], 0.99) / pct(r["quiet"], 0.99) for r in rounds)
    print(f"p99 ratio (during / without): {ratio:.2f}x   goal <= 1.50x")
    print(f"caller's pause to snapshot: {statistics.median(r['pause'] for r in rounds) * 1000:.0f} ms; "
          f"background checkpoint took {statistics.median(r['took'] for r in rounds):.2f} s; "
          f"a foreground checkpoint blocks the appender {fg:.2f} s")


if __name__ == "__main__":
    main()
