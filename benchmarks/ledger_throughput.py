"""The directory ledger's speed goals (issue #14), each a ratio of two configurations measured in the same
run, in interleaved rounds:

1. sealing costs <= 3% of sync=batch writer throughput (WalWriter with 8 MiB chunks, 256-byte payloads,
   against the same writer whose seal step is replaced by a no-op); 1s: the same for the ADR-003 segment
   writer (10,000 entries a segment), and what indexing each sealed segment's times costs (min_ts/max_ts:
   every body decoded once more) against the sealer indexing it without them;
2. `walctl verify` of a fully sealed 256 MB directory >= 1.3x faster than of an identical copy without
   `.walctl/` (both --jobs 1, and both with the default jobs: the goal of issue #27, where sealed chunks are
   hashed by one process per core as unsealed ones are scanned);
3. `walctl verify --quick` of a 1 GB sealed directory plus 8 MB of new records <= 2x `walctl verify` of a
   directory holding only those 8 MB.
(archive push from seal lines: benchmarks/archive_throughput.py, "walctl push sealed".)

Everything is generated under a fresh temporary directory, deleted at the end.
Usage: python benchmarks/ledger_throughput.py [--mb 256] [--quick-mb 1024] [--repeat 5] [--only 1,1s,2,3]
       [--entries 100000]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from common import median, walctl_cmd  # noqa: E402

PAYLOAD = bytes(range(256))


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def writer_run(d: str, n: int, sealing: bool) -> float:
    from walctl.ops.wal.write import WalWriter
    from walctl.store.ledger import Sealer

    saved = Sealer.closed
    if not sealing:
        Sealer.closed = lambda self, items, hwm: None
    try:
        w = WalWriter(d, sync="batch", batch_records=100, max_chunk_bytes=8 << 20)
        t = time.perf_counter()
        for i in range(n):
            w.append(i % 16, b"mem-%08d" % i, PAYLOAD, 1795300000000 + i)
        w.close()
        return time.perf_counter() - t
    finally:
        Sealer.closed = saved


def sealing_cost(work: str, repeat: int) -> None:
    n = 300_000  # ~90 MB: 10 rolls of 8 MiB chunks
    times = {"no seal": [], "sealing": []}
    for r in range(repeat):
        for name in times:
            d = os.path.join(work, f"w-{name[:2]}-{r}")
            times[name].append(writer_run(d, n, name == "sealing"))
            seals = 0
            if name == "sealing":
                with open(os.path.join(d, ".walctl", "ledger.jsonl"), "rb") as f:
                    seals = f.read().count(b'"event":"seal"')
                assert seals >= 9, seals
            shutil.rmtree(d)
    base, seal = median(sorted(times["no seal"])), median(sorted(times["sealing"]))
    print(f"1. writer sync=batch, {n} records of 256 B, 8 MiB chunks, {repeat} rounds")
    print(f"   no seal  {n / base:10.0f} rec/s   (median {base:.3f} s)")
    print(f"   sealing  {n / seal:10.0f} rec/s   (median {seal:.3f} s)  cost {100 * (seal / base - 1):+.1f}% "
          f"(goal <= 3%)")


def segment_writer_run(d: str, n: int, sealing: str) -> float:
    """sealing: "off" (the seal step a no-op), "no times" (segments indexed as before they had times),
    "times" (as the sealer does now)."""
    from walctl.format import seqindex as X
    from walctl.ops.wal.write import WalWriter
    from walctl.store.ledger import Sealer

    saved, offsets, do = Sealer.closed, X.segment_offsets, Sealer._do
    if sealing == "off":
        Sealer.closed = lambda self, items, hwm: None
    elif sealing == "no times":
        X.segment_offsets = lambda buf, times=None: offsets(buf)

    def timed_do(self, items, hwm):  # the sealer thread's CPU time for the segments it seals
        t = time.thread_time()
        do(self, items, hwm)
        if items:
            SEALER_CPU[sealing] = SEALER_CPU.get(sealing, []) + [(time.thread_time() - t) / len(items)]
    Sealer._do = timed_do
    try:
        w = WalWriter(d, format="segments", sync="batch", batch_records=100)
        data = {"content": "x" * 200, "tags": ["a", "b"]}
        t = time.perf_counter()
        for i in range(n):
            w.append_entry("memory_add", data, 1795300000 + i / 1000)
        w.close()
        return time.perf_counter() - t
    finally:
        Sealer.closed, X.segment_offsets, Sealer._do = saved, offsets, do


SEALER_CPU: dict = {}


def segment_sealing_cost(work: str, repeat: int, n: int) -> None:
    times = {"off": [], "no times": [], "times": []}
    load = loadavg()
    for r in range(repeat):
        for name in times:
            d = os.path.join(work, f"s-{name[:2]}-{r}")
            times[name].append(segment_writer_run(d, n, name))
            if name != "off":
                with open(os.path.join(d, ".walctl", "index.jsonl"), "rb") as f:
                    lines = f.read().count(b"\n")
                assert lines >= n // 10_000 - 1, lines
            shutil.rmtree(d)
    base, old, new = (median(sorted(times[k])) for k in ("off", "no times", "times"))
    print(f"1s. segment writer sync=batch, {n} entries of ~230 B, 10,000 a segment, {repeat} rounds (load {load})")
    print(f"   no seal            {n / base:9.0f} entries/s (median {base:.3f} s)")
    print(f"   sealing, no times  {n / old:9.0f} entries/s (median {old:.3f} s)  cost {100 * (old / base - 1):+.1f}%")
    print(f"   sealing with times {n / new:9.0f} entries/s (median {new:.3f} s)  cost {100 * (new / base - 1):+.1f}% "
          f"({100 * (new / old - 1):+.1f}% against no times)")
    old_cpu, new_cpu = (1000 * median(sorted(SEALER_CPU[k])) for k in ("no times", "times"))
    lo = {k: min(v) for k, v in times.items()}
    print(f"   of minimums: sealing {100 * (lo['no times'] / lo['off'] - 1):+.1f}% without times, "
          f"{100 * (lo['times'] / lo['off'] - 1):+.1f}% with ({100 * (lo['times'] / lo['no times'] - 1):+.1f}%)")
    print(f"   sealer thread CPU a segment (median): {old_cpu:.1f} ms without times, {new_cpu:.1f} ms with")
    print(f"   load after: {loadavg()}")


def gen(d: str, mb: int) -> None:
    subprocess.run([sys.executable, os.path.join(HERE, "gen_wal.py"), d, str(mb)], check=True,
                   stdout=subprocess.DEVNULL)


def close_with_header_only_chunk(d: str) -> None:
    """A header-only chunk after the last one: then every chunk holding records is closed and sealable."""
    from walctl.format.names import chunk_name, parse_chunk_name
    from walctl.format.v2 import encode_file_header

    last = max(parse_chunk_name(n) for n in os.listdir(d) if parse_chunk_name(n) is not None)
    with open(os.path.join(d, chunk_name(last + 1)), "wb") as f:
        f.write(encode_file_header())


def run(cmd: list[str]) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if p.returncode != 0:
        raise SystemExit(f"exit {p.returncode}: {' '.join(cmd)}")
    return time.perf_counter() - t


def sealed_verify(work: str, mb: int, repeat: int) -> None:
    plain = os.path.join(work, "plain")
    gen(plain, mb)
    close_with_header_only_chunk(plain)
    sealed = os.path.join(work, "sealed")
    shutil.copytree(plain, sealed)
    w = walctl_cmd()
    subprocess.run(w + ["seal", sealed, "--apply"], check=True, stdout=subprocess.DEVNULL)
    configs = {"plain -j1": w + ["verify", "-q", "--jobs", "1", plain],
               "sealed -j1": w + ["verify", "-q", "--jobs", "1", sealed],
               "plain auto": w + ["verify", "-q", plain],
               "sealed auto": w + ["verify", "-q", sealed]}
    times = {k: [] for k in configs}
    for _ in range(repeat):
        for k, c in configs.items():
            times[k].append(run(c))
    print(f"2. walctl verify of {mb} MB, fully sealed vs an identical copy without .walctl/, {repeat} rounds "
          f"(load {loadavg()})")
    for jobs in ("-j1", "auto"):
        p, s = median(sorted(times[f"plain {jobs}"])), median(sorted(times[f"sealed {jobs}"]))
        lo = min(times[f"plain {jobs}"]) / min(times[f"sealed {jobs}"])
        goal = "(the goal: default options, >= 1.3x)" if jobs == "auto" else "(>= 1.3x)"
        print(f"   {jobs:5} plain {p:7.3f} s  sealed {s:7.3f} s  speed-up {p / s:5.2f}x (of minimums {lo:5.2f}x) "
              f"{goal}")
    print(f"   load after: {loadavg()}")
    shutil.rmtree(plain)
    shutil.rmtree(sealed)


def quick_verify(work: str, mb: int, repeat: int) -> None:
    from walctl.ops.wal.write import WalWriter

    big = os.path.join(work, "big")
    gen(big, mb)
    close_with_header_only_chunk(big)
    w = walctl_cmd()
    subprocess.run(w + ["seal", big, "--apply"], check=True, stdout=subprocess.DEVNULL)
    new_bytes = 8 << 20
    with WalWriter(big, sync="none", max_chunk_bytes=1 << 40) as wr:  # 8 MB of new records, unsealed
        active = os.path.join(big, wr.active_chunk)
        i = 0
        while os.path.getsize(active) < new_bytes:
            for _ in range(1000):
                wr.append(i % 16, b"mem-%08d" % i, PAYLOAD * 4, 1795400000000 + i)
                i += 1
            wr.flush()
    small = os.path.join(work, "small")
    os.makedirs(small)
    shutil.copy(active, small)
    configs = {"verify 8 MB": w + ["verify", "-q", small], "verify --quick 1 GB + 8 MB": w + ["verify", "-q", "--quick", big]}
    times = {k: [] for k in configs}
    for _ in range(repeat):
        for k, c in configs.items():
            times[k].append(run(c))
    a, b = median(sorted(times["verify 8 MB"])), median(sorted(times["verify --quick 1 GB + 8 MB"]))
    print(f"3. walctl verify --quick of {mb} MB sealed + {os.path.getsize(active) >> 20} MB new vs verify of only "
          f"the new chunk, {repeat} rounds")
    print(f"   only new {a:7.3f} s  quick {b:7.3f} s  ratio {b / a:5.2f}x (goal <= 2x)")
    shutil.rmtree(big)
    shutil.rmtree(small)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--quick-mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", default="1,1s,2,3")
    ap.add_argument("--entries", type=int, default=100_000, help="1s: segment entries a round")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="walctl-ledger-bench-")
    try:
        only = set(args.only.split(","))
        if "1" in only:
            sealing_cost(work, args.repeat)
        if "1s" in only:
            segment_sealing_cost(work, args.repeat, args.entries)
        if "2" in only:
            sealed_verify(work, args.mb, args.repeat)
        if "3" in only:
            quick_verify(work, args.quick_mb, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
