"""replay against the verify baseline loop, measured in the same run, as whole processes.

Goals (issue #29, on a 1 GiB uncompressed directory of ~1 KB records: --mb 1024): `walctl replay --jsonl`
at default options (a worker per core for a large log) >= 0.40x the 1-process baseline loop's records/s,
`--msgpack` >= 0.50x; on a compressed directory (--compressed) no worse relative to the loop than one
process was. The 1-process figures (--jobs 1) are printed beside them, and the machine's own 2-process
scaling (two baseline loops at once, each on half the chunks, against one on all of them), so that a
shortfall can be told from the machine's limit. Output goes to /dev/null.

Usage: python benchmarks/replay_throughput.py [--mb 256] [--dir DIR] [--repeat 7] [--compressed]
"""
from __future__ import annotations

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import HERE, SHARED_BASELINE, bench_dir, interleaved, median, walctl_cmd  # noqa: E402

GOALS = {"walctl replay --jsonl": "(goal >= 0.40x)", "walctl replay --msgpack": "(goal >= 0.50x)",
         "baseline loop, 2 processes": "(the machine's 2-process scaling)"}


def main() -> None:
    args, d = bench_dir(7)
    records = int(subprocess.run([sys.executable, os.path.join(HERE, "baseline_verify.py"), d],
                                 capture_output=True, text=True, check=True).stdout)
    baseline = SHARED_BASELINE if os.path.exists(SHARED_BASELINE) else os.path.join(HERE, "baseline_verify.py")
    w, py = walctl_cmd(), sys.executable
    configs = {
        "baseline verify loop": [[py, baseline, d]],
        "baseline loop, 2 processes": [[py, baseline, d, "0", "2"], [py, baseline, d, "1", "2"]],
        "walctl replay --jsonl": [w + ["replay", "-q", "--jsonl", d]],
        "walctl replay --jsonl --jobs 1": [w + ["replay", "-q", "--jsonl", "--jobs", "1", d]],
        "walctl replay --msgpack": [w + ["replay", "-q", "--msgpack", d]],
        "walctl replay --msgpack --jobs 1": [w + ["replay", "-q", "--msgpack", "--jobs", "1", d]],
        "walctl replay --sync-blob": [w + ["replay", "-q", "--sync-blob", d]],
        "walctl replay --sync-blob --jobs 1": [w + ["replay", "-q", "--sync-blob", "--jobs", "1", d]],
    }
    out = subprocess.run(w + ["replay", "--jsonl", d], capture_output=True, check=False)
    lines = out.stdout.count(b"\n")
    if lines != records:
        raise SystemExit(f"replay gave {lines} lines for {records} records: {out.stderr.decode()[-300:]}")
    out_mb = len(out.stdout) / 2 ** 20
    del out
    load = open("/proc/loadavg").read().split()[:3]
    times = interleaved(configs, args.repeat)
    size_mb = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)) / 2 ** 20
    print(f"directory {d}: {size_mb:.0f} MiB, {records} records, replay --jsonl output {out_mb:.0f} MiB; "
          f"{args.repeat} interleaved rounds; load before {' '.join(load)}, after "
          f"{' '.join(open('/proc/loadavg').read().split()[:3])}; {os.cpu_count()} cores")
    print(f"{'':36} {'median s':>9} {'min s':>7} {'records/s (median)':>19} {'ratio median':>13} {'ratio min':>10}")
    b_med, b_min = median(times["baseline verify loop"]), times["baseline verify loop"][0]
    for name, t in times.items():
        m = median(t)
        print(f"{name:36} {m:9.3f} {t[0]:7.3f} {records / m:19.0f} {b_med / m:12.2f}x {b_min / t[0]:9.2f}x "
              f"{GOALS.get(name, '')}")


if __name__ == "__main__":
    main()
