"""verify throughput against the baseline loop, measured in the same run, as whole processes.

Goals (issue #2): `walctl verify` in one process >= 0.85x the baseline's records/s; `--jobs 2` >= 1.6x.
Also printed: two baseline copies in parallel (the machine's own 2-process ceiling).

Usage: python benchmarks/verify_throughput.py [--mb 256] [--dir DIR] [--repeat 3]
The directory is generated once (deterministic) and reused when it exists.
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
    py = sys.executable
    for name in os.listdir(d):  # warm the page cache: the goal is CPU, not disk
        with open(os.path.join(d, name), "rb") as f:
            while f.read(1 << 24):
                pass
    configs = {
        "baseline loop, 1 process": [[py, baseline, d]],
        "baseline loop, 2 processes": [[py, baseline, d, "0", "2"], [py, baseline, d, "1", "2"]],
        "walctl verify": [walctl_cmd() + ["verify", "-q", d]],
        "walctl verify --jobs 2": [walctl_cmd() + ["verify", "-q", "--jobs", "2", d]],
    }
    goals = {"baseline loop, 2 processes": "(the machine's 2-process ceiling)", "walctl verify": "(goal >= 0.85x)",
             "walctl verify --jobs 2": "(goal >= 1.60x)"}
    times = interleaved(configs, args.repeat)
    size_mb = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)) / 2 ** 20
    print(f"directory {d}: {size_mb:.0f} MiB, {records} records; {args.repeat} interleaved rounds")
    print(f"{'':30} {'median s':>9} {'min s':>7} {'records/s (median)':>19} {'ratio median':>13} {'ratio min':>10}")
    b_med, b_min = median(times["baseline loop, 1 process"]), times["baseline loop, 1 process"][0]
    for name, t in times.items():
        m = median(t)
        print(f"{name:30} {m:9.3f} {t[0]:7.3f} {records / m:19.0f} {b_med / m:12.2f}x {b_min / t[0]:9.2f}x "
              f"{goals.get(name, '')}")


if __name__ == "__main__":
    main()
