"""Seeking through the sequence index (issue #27), as whole processes, against `walctl --version` measured
in the same run (interleaved rounds: a noisy moment on the shared machine hits every configuration alike).

Goals:
- `replay --after` of the last 10 entries and `inspect --seq N` take <= 2x `walctl --version`'s time;
  so does `inspect --since T` of ADR-003 segments, T the time of the 10th entry from the end (the index's
  min_ts/max_ts let it skip the sealed segments before; the last, active one is read);
- and grow < 1.2x when the directory grows 10x: V2 chunks 256 MB -> 2.5 GB, ADR-003 segments 100k -> 1M
  entries (both sealed and indexed: `walctl seal --apply`; the writer's sealer indexes segments as it rolls);
- recovery of a 50 MB checkpoint + 1,000 entries after it from the 1M-entry log <= 0.5 s: recover's own
  timings (find, verify and decode the checkpoint; seek and read the log; fold), printed by phase; the
  whole command's time is printed beside them for information.

Everything is generated in a temporary directory (gen_wal.py for V2, walctl's writer for segments) and
deleted at the end, unless --keep DIR names a directory to generate into once and reuse.

Usage: python benchmarks/seek_throughput.py [--small-mb 256] [--factor 10] [--entries 100000] [--repeat 5]
       [--keep DIR] [--scan] [--segments-only]
       (--scan: also time each command once without the index, for information; --segments-only: no V2
       directories and no recovery row, for a busy machine)
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from common import interleaved, median, timed, walctl_cmd  # noqa: E402


def v2_dir(path: str, mb: int) -> int:
    if not os.path.isdir(path):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_wal.py"), path, str(mb)], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(walctl_cmd() + ["seal", "--apply", path], check=True, stdout=subprocess.DEVNULL)
    return _last(path)


def segment_dir(path: str, entries: int) -> int:
    if not os.path.isdir(path):
        from walctl.ops.wal.write import WalWriter

        with WalWriter(path, format="segments", sync="none") as w:
            for i in range(entries):
                w.append_entry("memory_add", {"content": f"memory {i} " + "x" * (i % 200)}, SEGMENT_T0 + i)
    subprocess.run(walctl_cmd() + ["seal", "--apply", path], check=True, stdout=subprocess.DEVNULL)  # a --keep
    return _last(path)  # directory made before segments had times gets them


SEGMENT_T0 = 1795300000  # seconds: entry i (sequence i + 1) is stamped SEGMENT_T0 + i


def _last(path: str) -> int:
    from walctl.ops.wal.verify import verify_path

    return verify_path(path, quick=True).last_sequence


def commands(path: str, last: int, segments: bool) -> dict:
    w = walctl_cmd()
    out = {"replay --after last-10": [w + ["replay", "-q", "--jsonl", "--after", str(last - 10), path]],
           "inspect --seq N": [w + ["inspect", "--seq", str(last * 3 // 4), path]]}
    if segments:  # sequence last-9 is entry last-10: the last 10 entries
        out["inspect --since T"] = [w + ["inspect", "--jsonl", "--since", str((SEGMENT_T0 + last - 10) * 1000), path]]
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small-mb", type=int, default=256)
    ap.add_argument("--factor", type=int, default=10)
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep")
    ap.add_argument("--scan", action="store_true")
    ap.add_argument("--segments-only", action="store_true")
    args = ap.parse_args()
    base = args.keep or tempfile.mkdtemp(prefix="walctl-seek-")
    try:
        run(args, base)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def run(args, base: str) -> None:
    dirs = {}
    for label, make, small, big in _kinds(args):
        for size in (small, big):
            path = os.path.join(base, f"{label}-{size}")
            dirs[(label, size)] = (path, make(path, size))
    print(f"load before: {open('/proc/loadavg').read().strip()}")
    configs = {"walctl --version": [walctl_cmd() + ["--version"]]}
    for (label, size), (path, last) in dirs.items():
        for name, cmd in commands(path, last, label == "segments").items():
            configs[f"{label} {size} {name}"] = cmd
    times = interleaved(configs, args.repeat)
    print(f"load after:  {open('/proc/loadavg').read().strip()}; {args.repeat} interleaved rounds")
    version = median(times["walctl --version"])
    print(f"{'':48} {'median s':>9} {'min s':>7} {'/ --version':>11} {'10x growth':>11}")
    print(f"{'walctl --version':48} {version:9.3f} {times['walctl --version'][0]:7.3f}")
    for label, _, small, big in _kinds(args):
        for name in ("replay --after last-10", "inspect --seq N") + (("inspect --since T",) if label == "segments"
                                                                     else ()):
            s, b = median(times[f"{label} {small} {name}"]), median(times[f"{label} {big} {name}"])
            unit = "MB" if label == "V2" else "entries"
            print(f"{label + ' ' + str(small) + ' ' + unit + ': ' + name:48} {s:9.3f} "
                  f"{times[f'{label} {small} {name}'][0]:7.3f} {s / version:10.2f}x  (goal <= 2x)")
            print(f"{label + ' ' + str(big) + ' ' + unit + ': ' + name:48} {b:9.3f} "
                  f"{times[f'{label} {big} {name}'][0]:7.3f} {b / version:10.2f}x {b / s:10.2f}x (goal < 1.2x)")
    if args.scan:
        scan_once(dirs)
    if args.segments_only:
        return
    seg_big = dirs[("segments", args.entries * args.factor)]
    recover_bench(base, *seg_big, args.repeat)


def _kinds(args) -> tuple:
    segments = ("segments", segment_dir, args.entries, args.entries * args.factor)
    if args.segments_only:
        return (segments,)
    return (("V2", v2_dir, args.small_mb, args.small_mb * args.factor), segments)


def scan_once(dirs: dict) -> None:
    """Each command once with the index moved aside: what the scan costs (information)."""
    for (label, size), (path, last) in dirs.items():
        idx = os.path.join(path, ".walctl", "index.jsonl")
        if not os.path.exists(idx):
            continue
        os.rename(idx, idx + ".aside")
        try:
            for name, cmd in commands(path, last, label == "segments").items():
                print(f"without the index: {label} {size} {name}: {timed(cmd):.3f} s")
        finally:
            os.rename(idx + ".aside", idx)


def recover_bench(base: str, log: str, last: int, repeat: int) -> None:
    """A 50 MB checkpoint at sequence last-1000 of the large segment log, then recover: whole process and
    recover's own phases (in process)."""
    import statistics

    from checkpoint_throughput import realistic_state
    from walctl.ops.checkpoints.checkpoint import create
    from walctl.ops.checkpoints.recover import recover

    ckdir = os.path.join(base, "ckpts")
    if not os.path.isdir(ckdir):
        create(ckdir, realistic_state(50), last - 1000)
    cmd = walctl_cmd() + ["recover", "--checkpoints", ckdir, "--log", log, "--json"]
    whole = sorted(timed([cmd]) for _ in range(repeat))
    phases = []
    for _ in range(repeat):
        r = recover(ckdir, log)
        assert r.entries_replayed == 1000, r.entries_replayed
        phases.append(r.seconds)
        del r
    keys = sorted({k for p in phases for k in p})
    total = statistics.median(p["total"] for p in phases)
    print(f"recover 50 MB checkpoint + 1,000 entries of a {last}-entry log: {total:.3f} s in process, median "
          f"(goal <= 0.5 s); load {open('/proc/loadavg').read().strip()}")
    print("  phases (median s, in process): " + ", ".join(f"{k} {statistics.median(p.get(k, 0) for p in phases):.3f}"
                                                          for k in keys))
    print(f"  the whole command (information: interpreter start-up, the fingerprint it prints, freeing the state "
          f"at exit): {median(whole):.3f} s median, {whole[0]:.3f} s min")


if __name__ == "__main__":
    main()
