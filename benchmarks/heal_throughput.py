"""walctl heal --apply against a raw boto3 download of the same objects, measured in the same run.

Goal (issue #22): healing a 256 MB V2 directory with 3 damaged chunks (a mid-log bit flip, a deleted
chunk, bytes changed in place under a valid CRC... here: a flipped bit in a sealed chunk) from a local S3
server moves only those chunks' bytes (bytes downloaded vs bytes damaged) and takes <= 1.5x the time of a
raw boto3 download of the same three objects. The server is moto's (`moto_server`) in its own process on
127.0.0.1; both configurations run as whole processes, in interleaved rounds, each round on a fresh
damaged copy (not timed) made of hard links to the sealed directory, so that its files keep the inode
and mtime their seals recorded, as the writer's own directory does (the three damaged chunks are real
copies). heal's time includes what the baseline does not do: verifying the whole directory before (to
find the damage: every sealed chunk hashed) and after (sealed files whose size, inode and mtime are
unchanged are trusted, as `verify --quick` does: the replaced files are read), keeping the damaged
originals in .quarantine/, and fsyncing every file it writes.

Usage: python benchmarks/heal_throughput.py [--mb 256] [--repeat 3]
Everything is written under one temporary directory, deleted at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import median, moto_server, walctl_cmd  # noqa: E402

RAW_GET = """
import os, sys, boto3
bucket, out, *keys = sys.argv[1:]
c = boto3.client("s3")
os.makedirs(out)
for k in keys:
    c.download_file(bucket, k, os.path.join(out, k.rsplit("/", 1)[-1]))
"""


def pick(d: str) -> list[str]:
    """Three sealed chunks, at a quarter, half and three quarters of the directory."""
    names = sorted(n for n in os.listdir(d) if n.endswith(".bin"))[:-1]
    if len(names) < 3:
        raise SystemExit("--mb is too small for three sealed 8 MiB chunks (use 32 or more)")
    return [names[len(names) * k // 4] for k in (1, 2, 3)]


def link_chunks(a: str, b: str) -> None:
    """Chunks as hard links (their seals' inode and mtime); the ledger and the lock file as copies."""
    if a.endswith(".bin"):
        os.link(a, b)
    else:
        shutil.copy2(a, b)


def damage(d: str, chosen: list[str]) -> int:
    """Flips a bit mid-chunk in two chunks, deletes a third; returns their bytes. A hard-linked chunk is
    copied first (its own inode), so that the source directory is never touched."""
    total = 0
    for i, name in enumerate(chosen):
        p = os.path.join(d, name)
        total += os.path.getsize(p)
        with open(p, "rb") as f:
            data = f.read()
        os.unlink(p)
        if i == 1:
            continue
        with open(p, "wb") as f:
            f.write(data)
        with open(p, "r+b") as f:
            f.seek(os.path.getsize(p) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x10]))
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    bucket = "bench"
    server, port = moto_server(env, bucket)
    work = tempfile.mkdtemp(prefix="walctl-heal-bench-")
    try:
        src = os.path.join(work, "wal")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_wal.py"), src, str(args.mb)], check=True,
                       stdout=subprocess.DEVNULL)
        w = walctl_cmd()
        subprocess.run(w + ["seal", src, "--apply"], check=True, stdout=subprocess.DEVNULL)
        url = f"s3://{bucket}/heal"
        subprocess.run(w + ["archive", "push", src, url, "--namespace", "wal", "--jobs", "4"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        chosen = pick(src)
        keys = [f"heal/wal/chunks/{n}" for n in chosen]
        times: dict = {"raw download": [], "walctl heal --apply": []}
        figures: dict = {}
        for r in range(args.repeat):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", RAW_GET, bucket, os.path.join(work, f"raw{r}"), *keys], check=True,
                           env=env)
            times["raw download"].append(time.perf_counter() - t)
            shutil.rmtree(os.path.join(work, f"raw{r}"))
            copy = os.path.join(work, f"damaged{r}")
            shutil.copytree(src, copy, copy_function=link_chunks)
            damaged_bytes = damage(copy, chosen)
            t = time.perf_counter()
            out = subprocess.run(w + ["heal", copy, "--from", url, "--namespace", "wal", "--apply", "--json"],
                                 env=env, capture_output=True, text=True)
            times["walctl heal --apply"].append(time.perf_counter() - t)
            doc = json.loads(out.stdout)
            if out.returncode != 0 or [s["outcome"] for s in doc["steps"]] != ["healed"] * len(chosen):
                raise SystemExit(f"heal did not finish clean: exit {out.returncode}: {out.stdout[:2000]}")
            figures = {"downloaded": doc["downloaded_bytes"], "damaged": damaged_bytes, "plan": doc["damaged_bytes"]}
            shutil.rmtree(copy)
        size = sum(os.path.getsize(os.path.join(src, n)) for n in os.listdir(src) if n.endswith(".bin"))
        print(f"{size / 2**20:.0f} MiB V2 directory, {len(chosen)} damaged chunks ({', '.join(chosen)}); "
              f"moto_server on 127.0.0.1:{port}; {args.repeat} interleaved rounds")
        print(f"bytes downloaded {figures['downloaded']:,} vs bytes damaged {figures['damaged']:,} "
              f"({figures['downloaded'] / figures['damaged']:.2f}x; the directory holds {size:,})")
        base = median(sorted(times["raw download"]))
        print(f"{'':22} {'median s':>9} {'min s':>7} {'ratio':>7}")
        for name, ts in times.items():
            m = median(sorted(ts))
            goal = "(goal <= 1.50x)" if name.startswith("walctl") else ""
            print(f"{name:22} {m:9.3f} {min(ts):7.3f} {m / base:6.2f}x {goal}")
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
