"""replay --jsonl against the verify baseline loop, measured in the same run, as whole processes.

Goal (issue #6): `walctl replay --jsonl` of a 256 MB directory >= 0.5x the baseline's records/s (the
baseline only checks CRCs; replay also decodes every record and writes ~2x its bytes as JSON). Output
goes to /dev/null. Also printed: `--jobs 2` and `--msgpack` / `--sync-blob`, for information.

Usage: python benchmarks/replay_throughput.py [--mb 256] [--dir DIR] [--repeat 7]
"""
from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import HERE, SHARED_BASELINE, bench_dir, interleaved, median, walctl_cmd  # noqa: E402


def main() -> None:
    args, d = bench_dir(7)
    records = int(subprocess.run([sys.executable, os.path.join(HERE, "baseline_verify.py"), d],
                                 capture_output=True, text=True, check=True).stdout)
    baseline = SHARED_BASELINE if os.path.exists(SHARED_BASELINE) else os.path.join(HERE, "baseline_verify.py")
    w = walctl_cmd()
    configs = {
        "baseline verify loop": [[sys.executable, baseline, d]],
        "walctl replay --jsonl": [w + ["replay", "-q", "--jsonl", d]],
        "walctl replay --jsonl --jobs 2": [w + ["replay", "-q", "--jsonl", "--jobs", "2", d]],
        "walctl replay --msgpack": [w + ["replay", "-q", "--msgpack", d]],
        "walctl replay --sync-blob": [w + ["replay", "-q", "--sync-blob", d]],
    }
    out = subprocess.run(w + ["replay", "--jsonl", d], capture_output=True, check=False)
    lines = out.stdout.count(b"\n")
    if lines != records:
        raise SystemExit(f"replay gave {lines} lines for {records} records: {out.stderr.decode()[-300:]}")
    times = interleaved(configs, args.repeat)
    size_mb = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)) / 2 ** 20
    print(f"directory {d}: {size_mb:.0f} MiB, {records} records, replay --jsonl output {len(out.stdout) / 2**20:.0f} "
          f"MiB; {args.repeat} interleaved rounds")
    print(f"{'':32} {'median s':>9} {'min s':>7} {'records/s (median)':>19} {'ratio median':>13} {'ratio min':>10}")
    b_med, b_min = median(times["baseline verify loop"]), times["baseline verify loop"][0]
    for name, t in times.items():
        m = median(t)
        goal = "(goal >= 0.50x)" if name == "walctl replay --jsonl" else ""
        print(f"{name:32} {m:9.3f} {t[0]:7.3f} {records / m:19.0f} {b_med / m:12.2f}x {b_min / t[0]:9.2f}x {goal}")


if __name__ == "__main__":
    main()
