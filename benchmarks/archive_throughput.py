"""archive push and restore against raw boto3 copies of the same files, measured in the same run.

Goal (issue #7): `walctl archive push` and `walctl archive restore` of a 256 MB WAL to a local S3 server
>= 0.7x the throughput of the same library (boto3) copying the same files without walctl's checks,
both with 4 parallel transfers. The server is moto's (`moto_server`, from the test extra) in its own
process on 127.0.0.1; every configuration runs as a whole process, in interleaved rounds.

Issue #14: "walctl push sealed" pushes a sealed copy (walctl seal) of the same chunks, whose hashes and
ranges come from the ledger: goal >= 0.8x raw boto3.

Usage: python benchmarks/archive_throughput.py [--mb 256] [--dir DIR] [--repeat 3]
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import bench_dir, median, moto_server, walctl_cmd  # noqa: E402

RAW_PUSH = """
import os, sys, boto3
from concurrent.futures import ThreadPoolExecutor
d, bucket, prefix = sys.argv[1:4]
c = boto3.client("s3")
names = sorted(n for n in os.listdir(d) if n.endswith(".bin"))[:-1]   # the sealed ones, as walctl pushes
def put(n):
    with open(os.path.join(d, n), "rb") as f:
        c.put_object(Bucket=bucket, Key=f"{prefix}/{n}", Body=f)
with ThreadPoolExecutor(4) as p:
    list(p.map(put, names))
"""
RAW_GET = """
import os, sys, boto3
from concurrent.futures import ThreadPoolExecutor
bucket, prefix, out = sys.argv[1:4]
c = boto3.client("s3")
os.makedirs(out)
keys = [o["Key"] for pg in c.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
        for o in pg.get("Contents", [])]
def get(k):
    c.download_file(bucket, k, os.path.join(out, k.rsplit("/", 1)[-1]))
with ThreadPoolExecutor(4) as p:
    list(p.map(get, keys))
"""


def main() -> None:
    args, d = bench_dir(3)
    env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    bucket = "bench"
    server, port = moto_server(env, bucket)
    work = tempfile.mkdtemp(prefix="walctl-archive-bench-")
    try:
        size = sum(os.path.getsize(os.path.join(d, n)) for n in sorted(os.listdir(d))[:-1])
        w = walctl_cmd()
        # issue #14: the same chunks sealed (walctl seal): push takes hashes and ranges from the ledger
        sealed = os.path.join(work, "sealed")
        shutil.copytree(d, sealed)
        subprocess.run(w + ["seal", sealed, "--apply"], check=True, stdout=subprocess.DEVNULL)
        times: dict = {k: [] for k in ("raw push", "walctl push", "walctl push sealed", "raw download",
                                       "walctl restore")}

        def run(name, cmd):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t)

        for r in range(args.repeat):
            run("raw push", [sys.executable, "-c", RAW_PUSH, d, bucket, f"raw{r}"])
            run("walctl push", w + ["archive", "push", d, f"s3://{bucket}/w{r}", "--namespace", "wal", "--jobs", "4"])
            run("walctl push sealed", w + ["archive", "push", sealed, f"s3://{bucket}/s{r}", "--namespace", "wal",
                                           "--jobs", "4"])
            run("raw download", [sys.executable, "-c", RAW_GET, bucket, f"raw{r}", os.path.join(work, f"raw{r}")])
            run("walctl restore", w + ["archive", "restore", f"s3://{bucket}/w{r}", os.path.join(work, f"w{r}"),
                                       "--namespace", "wal", "--jobs", "4"])
            shutil.rmtree(os.path.join(work, f"raw{r}"))
            shutil.rmtree(os.path.join(work, f"w{r}"))
        print(f"{size / 2**20:.0f} MiB of sealed chunks from {d}; moto_server on 127.0.0.1:{port}; "
              f"{args.repeat} interleaved rounds")
        print(f"{'':16} {'median s':>9} {'MB/s':>8} {'ratio':>7}")
        for name, base in (("raw push", "raw push"), ("walctl push", "raw push"), ("walctl push sealed", "raw push"),
                           ("raw download", "raw download"), ("walctl restore", "raw download")):
            m = median(sorted(times[name]))
            ratio = median(sorted(times[base])) / m
            goal = ("(goal >= 0.80x, issue #14)" if name.endswith("sealed") else
                    "(goal >= 0.70x)" if name.startswith("walctl") else "")
            print(f"{name:18} {m:9.3f} {size / 2**20 / m:8.1f} {ratio:6.2f}x {goal}")
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
