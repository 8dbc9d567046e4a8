"""Cold start: `walctl verify` on a one-chunk directory vs `python -c "import typer"`.

Goal (issue #2): walctl <= 1.3x the baseline. Both are whole processes, alternated, timed N times;
the medians are compared. Usage: python benchmarks/cold_start.py [N]
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def _walctl_cmd() -> list[str]:
    exe = shutil.which("walctl", path=os.path.dirname(sys.executable)) or shutil.which("walctl")
    return [exe] if exe else [sys.executable, "-m", "walctl"]


def _time(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    from walctl.format.v2 import encode_file_header, encode_record

    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "wal-000000.bin"), "wb") as f:
            f.write(encode_file_header())
            for seq in range(1, 101):
                f.write(encode_record(seq, 0, b"mem-%d" % seq, 1795300000000 + seq, b"x" * 200))
        base_cmd = [sys.executable, "-c", "import typer"]
        wal_cmd = _walctl_cmd() + ["verify", d]
        for cmd in (base_cmd, wal_cmd):  # warm the page cache and the .pyc files
            _time(cmd)
        base, mine = [], []
        for _ in range(n):
            base.append(_time(base_cmd))
            mine.append(_time(wal_cmd))
    b, m = statistics.median(base), statistics.median(mine)
    print(f"baseline  python -c 'import typer'    median {b * 1000:7.1f} ms  (min {min(base) * 1000:.1f})")
    print(f"walctl    verify one-chunk directory  median {m * 1000:7.1f} ms  (min {min(mine) * 1000:.1f})")
    print(f"ratio     {m / b:.2f}x  (goal <= 1.30x)")


if __name__ == "__main__":
    main()
