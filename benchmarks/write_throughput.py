"""walctl's writer against raw loops writing the same bytes, measured in the same run.

Goals (issue #3), 256-byte payloads, library API (`WalWriter.append`):
- sync=always >= 0.9x a raw loop doing os.write + os.fdatasync per record;
- sync=batch (100) >= 200,000 records/s and >= 0.6x a raw loop that writes each record and fdatasyncs
  every 100 records;
- sync=none: records/s reported (raw: os.write per record, no sync).
The CLI (`walctl write` reading JSON lines) is reported for information: it also parses JSON.

Usage: python benchmarks/write_throughput.py [--dir DIR] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from walctl.format.v2 import encode_file_header, encode_record  # noqa: E402
from walctl.ops.wal.write import WalWriter  # noqa: E402

PAYLOAD = bytes(range(256))
COUNTS = {"always": 5000, "batch": 200_000, "none": 200_000}


def events(n):
    return [(i % 16, b"mem-%08d" % i, PAYLOAD, 1795300000000 + i) for i in range(n)]


def raw(path: str, evs, sync_every: int | None) -> float:
    recs = [encode_record(i + 1, t, m, ts, p) for i, (t, m, p, ts) in enumerate(evs)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    os.write(fd, encode_file_header())
    os.fsync(fd)
    t = time.perf_counter()
    for i, r in enumerate(recs, 1):
        os.write(fd, r)
        if sync_every and i % sync_every == 0:
            os.fdatasync(fd)
    if sync_every:
        os.fdatasync(fd)
    elapsed = time.perf_counter() - t
    os.close(fd)
    return elapsed


def walctl(d: str, evs, sync: str) -> float:
    w = WalWriter(d, sync=sync, batch_records=100, max_chunk_bytes=1 << 40)
    t = time.perf_counter()
    for typ, mid, p, ts in evs:
        w.append(typ, mid, p, ts)
    w.close()
    return time.perf_counter() - t


def cli(d: str, n: int) -> float:
    import json

    lines = "".join(json.dumps({"type": i % 16, "id": "mem-%08d" % i, "payload_hex": PAYLOAD.hex(),
                                "timestamp_ms": 1795300000000 + i}) + "\n" for i in range(n))
    exe = shutil.which("walctl", path=os.path.dirname(sys.executable))
    cmd = [exe] if exe else [sys.executable, "-m", "walctl"]
    t = time.perf_counter()
    subprocess.run(cmd + ["write", d, "--sync", "batch"], input=lines.encode(), check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    base = tempfile.mkdtemp(dir=args.dir)
    try:
        print(f"writing under {base}; 256-byte payloads; median of {args.repeat} interleaved rounds")
        print(f"{'':34} {'records':>8} {'raw rec/s':>12} {'walctl rec/s':>13} {'ratio':>6}  goal")
        goals = {"always": "walctl >= 0.90x raw", "batch": "walctl >= 0.60x raw and >= 200,000 rec/s",
                 "none": "reported"}
        for sync, n in COUNTS.items():
            evs = events(n)
            r_times, w_times = [], []
            for k in range(args.repeat):
                r_times.append(raw(os.path.join(base, f"raw-{sync}-{k}.bin"), evs,
                                   {"always": 1, "batch": 100, "none": None}[sync]))
                w_times.append(walctl(os.path.join(base, f"w-{sync}-{k}"), evs, sync))
            r, w = statistics.median(r_times), statistics.median(w_times)
            print(f"sync={sync:<28} {n:>8} {n / r:>12,.0f} {n / w:>13,.0f} {r / w:>5.2f}x  {goals[sync]}")
        n = 50_000
        t = cli(os.path.join(base, "cli"), n)
        print(f"walctl write CLI, JSON lines, batch {n:>8} {'':>12} {n / t:>13,.0f}         (information)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
