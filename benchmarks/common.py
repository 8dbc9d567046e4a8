"""What the benchmarks share: running whole commands in interleaved rounds, the test directory, medians.

Every configuration runs once per round, `repeat` rounds, so that a noisy moment on a shared machine hits
all of them alike; ratios are taken between medians (and between minimums) measured in the same run.
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


def bench_dir(default_repeat: int) -> tuple[argparse.Namespace, str]:
    """--mb / --dir / --repeat, and the deterministic test directory (generated once, then reused)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--dir")
    ap.add_argument("--repeat", type=int, default=default_repeat)
    ap.add_argument("--compressed", action="store_true", help="payloads over 512 bytes zlib-compressed")
    args = ap.parse_args()
    z = "-z" if args.compressed else ""
    d = args.dir or os.path.join(tempfile.gettempdir(), f"walctl-bench-{args.mb}mb{z}")
    if not os.path.isdir(d):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_wal.py"), d, str(args.mb)]
                       + (["compressed"] if args.compressed else []), check=True, stdout=subprocess.DEVNULL)
    return args, d


def median(values: list[float]) -> float:
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def moto_server(env: dict, bucket: str = "bench"):
    """Starts moto_server on a free 127.0.0.1 port (no network), points `env` at it (AWS_ENDPOINT_URL) and
    creates `bucket`. Returns (the server process, its port); the caller terminates it."""
    import socket

    exe = shutil.which("moto_server", path=os.path.dirname(sys.executable))
    if not exe:
        raise SystemExit("moto_server not found: pip install '.[test]'")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env=env)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.1)
    subprocess.run([sys.executable, "-c", f"import boto3; boto3.client('s3').create_bucket(Bucket='{bucket}')"],
                   check=True, env=env)
    return server, port
