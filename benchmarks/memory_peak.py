"""Peak memory (ru_maxrss of each command's own process) on a chunk holding one CRC-valid payload that
inflates to --mib MiB (default 512: a ~510 KB record, within the format's 1032x cap), against the same
commands on a chunk whose payload inflates to 1 KiB, measured in the same run.

Goals (issue #15): verify and stats peak under 128 MiB whatever the inflated size (they need the decoded
length and validity, not the bytes); inspect --jsonl and replay stream the hex of a large payload, peaking
under 2x the largest decoded payload + 128 MiB.

Usage: python benchmarks/memory_peak.py [--mib 512] [--dir DIR]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from common import walctl_cmd  # noqa: E402

COMMANDS = {
    "verify": ["verify"],
    "stats": ["stats"],
    "stats --json": ["stats", "--json"],
    "inspect --jsonl": ["inspect", "--jsonl"],
    "inspect (table)": ["inspect"],
    "replay --jsonl": ["replay", "--jsonl"],
    "replay --msgpack": ["replay", "--msgpack"],
}
LIMITS_MIB = {"verify": lambda mib: 128, "stats": lambda mib: 128, "stats --json": lambda mib: 128}


def bomb_chunk(path: str, inflated_bytes: int) -> int:
    """A chunk of one REMEMBER record whose zlib payload inflates to `inflated_bytes` zeros, written
    without ever holding them; returns the stored payload length."""
    from walctl.format.v2 import FLAG_COMPRESSED, encode_file_header, encode_record

    z = zlib.compressobj(9)
    piece = bytes(4 << 20)
    stored = bytearray()
    left = inflated_bytes
    while left:
        n = min(left, len(piece))
        stored += z.compress(piece[:n])
        left -= n
    stored += z.flush()
    with open(path, "wb") as f:
        f.write(encode_file_header())
        f.write(encode_record(1, 0, b"bomb", 1795300000000, bytes(stored), FLAG_COMPRESSED))
    return len(stored)


def peak_mib(argv: list[str]) -> tuple[float, int]:
    """(ru_maxrss in MiB, exit status) of one command run as its own child process."""
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(argv, stdout=null, stderr=null)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_maxrss / 1024, p.returncode  # ru_maxrss is in KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=512, help="what the payload inflates to (MiB)")
    ap.add_argument("--dir", help="work here (default: a new temporary directory, removed afterwards)")
    args = ap.parse_args()
    work = args.dir or tempfile.mkdtemp(prefix="walctl-mem-")
    try:
        small, big = os.path.join(work, "small"), os.path.join(work, "big")
        for d in (small, big):
            os.makedirs(d, exist_ok=True)
        bomb_chunk(os.path.join(small, "wal-000001.bin"), 1024)
        stored = bomb_chunk(os.path.join(big, "wal-000001.bin"), args.mib << 20)
        print(f"chunk: one record, {stored} bytes stored, inflating to {args.mib} MiB "
              f"({(args.mib << 20) / stored:.0f}x)")
        w = walctl_cmd()
        print(f"{'command':<18} {'1 KiB payload':>14} {f'{args.mib} MiB payload':>16} {'limit':>10}  verdict")
        failed = False
        for name, cmd in COMMANDS.items():
            base, _ = peak_mib(w + cmd + [small])
            peak, code = peak_mib(w + cmd + [big])
            limit = LIMITS_MIB.get(name, lambda mib: 2 * mib + 128)(args.mib)
            ok = peak < limit and code == 0
            failed |= not ok
            print(f"{name:<18} {base:>11.1f} MiB {peak:>13.1f} MiB {limit:>6} MiB  "
                  f"{'ok' if ok else 'OVER' if code == 0 else f'exit {code}'}")
        if failed:
            raise SystemExit(1)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
