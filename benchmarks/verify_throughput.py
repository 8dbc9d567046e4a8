"""verify throughput against the baseline loop, measured in the same run, as whole processes.

Goals (issue #2): `walctl verify` in one process >= 0.85x the baseline's records/s; `--jobs 2` >= 1.6x.
Also printed: two baseline copies in parallel (the machine's own 2-process ceiling).

Usage: python benchmarks/verify_throughput.py [--mb 256] [--dir DIR] [--repeat 3]
The directory is generated once (deterministic) and reused when it exists.
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
SHARED_BASELINE = os.path.join(HERE, "..", "..", "shared", "tools", "baseline_verify.py")


def walctl_cmd() -> list[str]:
    exe = shutil.which("walctl", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "walctl"]


def timed(cmds: list[list[str]]) -> float:
    """Wall time of the commands run side by side; each must succeed."""
    t = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL) for c in cmds]
    for p, c in zip(procs, cmds):
        if p.wait() != 0:
            raise SystemExit(f"failed: {' '.join(c)}")
    return time.perf_counter() - t


def interleaved(configs: dict, repeat: int) -> dict:
    """Runs every configuration once per round, `repeat` rounds, so that a noisy moment on a shared
    machine hits all of them alike; returns the sorted times per configuration."""
    times: dict = {name: [] for name in configs}
    for _ in range(repeat):
        for name, cmds in configs.items():
            times[name].append(timed(cmds))
    return {name: sorted(t) for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--dir")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    d = args.dir or os.path.join(tempfile.gettempdir(), f"walctl-bench-{args.mb}mb")
    if not os.path.isdir(d):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_wal.py"), d, str(args.mb)], check=True,
                       stdout=subprocess.DEVNULL)
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


def median(values: list[float]) -> float:
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


if __name__ == "__main__":
    main()
