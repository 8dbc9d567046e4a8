"""archive push --follow: recovery point, cost to the writer, objects per minute (issue #18).

Goals, against a local S3 server (moto_server from the test extra, its own process on 127.0.0.1), all
measured in the same run:
- a writer at 1,000 events/s (group commits every 10 ms), the shipper at --interval 1s: the archive's lag
  (from an event's group commit to the moment the upload holding it is verified) stays under 2 s at the
  99th percentile;
- shipping costs the writer under 5%: the writer at 1,000 events/s alone and with the shipper following
  it, in interleaved rounds: its CPU time per event and its group-commit spacing (ratio of medians); and,
  for information, the same writer appending as fast as it can (on a small shared machine the shipper,
  the S3 server and the writer then compete for the same cores);
- objects uploaded per minute stay at or under 60 plus one per sealed chunk.
The shipper is the library's Shipper (what `walctl archive push --follow` runs), in its own process,
printing the time at which each sequence became archived and verified.

Usage: python benchmarks/archive_follow.py [--seconds 60] [--rate 1000] [--repeat 3]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import median, moto_server  # noqa: E402

WRITER = r"""
import sys, time
from walctl.ops.wal.write import WalWriter
d, rate, seconds, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
log = open(out, "w")
n = int(rate * seconds) if rate > 0 else int(seconds)
with WalWriter(d, sync="batch", batch_records=1 << 30, batch_ms=1 << 30, max_chunk_bytes=1 << 20) as w:
    t0 = time.time()
    group = max(1, int(rate / 100)) if rate > 0 else 100   # a group commit every 10 ms at the target rate
    i = 0
    while i < n:
        if rate > 0:
            due = t0 + i / rate
            now = time.time()
            if due > now:
                time.sleep(due - now)
        for _ in range(group):
            w.append(i % 5, "mem-%d" % (i % 17), b"payload %d " % i * 8, int(time.time() * 1000))
            i += 1
        seq = w.flush()
        log.write("%d %.6f\n" % (w.last_sequence, time.time()))
    elapsed = time.time() - t0
import os
cpu = os.times()
log.write("done %d %.6f %.6f\n" % (n, elapsed, cpu.user + cpu.system))
"""

SHIPPER = r"""
import signal, sys, time
from walctl.ops.archive.follow import Shipper
d, dest, out = sys.argv[1:4]
log = open(out, "w", buffering=1)
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
sh = Shipper(d, dest, namespace="bench", interval=1.0,
             on_shipped=lambda seq: log.write("%d %.6f\n" % (seq, time.time())))
while not stop:
    sh.poll()
    time.sleep(0.05)
sh.close()
r = sh.report("signal")
import json
log.write("report " + json.dumps(r.to_json()) + "\n")
"""


def _run(work, env, name, rate, seconds, ship):
    d = os.path.join(work, name)
    os.makedirs(d)
    wlog, slog = os.path.join(work, name + ".w"), os.path.join(work, name + ".s")
    shipper = None
    if ship:
        shipper = subprocess.Popen([sys.executable, "-c", SHIPPER, d, f"s3://bench/{name}", slog], env=env)
        time.sleep(1.0)  # its imports and first listing, before the writer starts
    subprocess.run([sys.executable, "-c", WRITER, d, str(rate), str(seconds), wlog], check=True, env=env)
    if shipper is not None:
        time.sleep(2.5)  # the last interval, then a clean stop
        shipper.terminate()
        shipper.wait()
    writes = [line.split() for line in open(wlog)]
    done = writes.pop()
    ships, report = [], None
    if ship:
        for line in open(slog):
            if line.startswith("report "):
                report = json.loads(line[7:])
            else:
                a, b = line.split()
                ships.append((int(a), float(b)))
    _run.cpu = float(done[3])
    return [(int(a), float(b)) for a, b in writes], int(done[1]), float(done[2]), ships, report


def _lags(writes, ships) -> list[float]:
    """Per group commit: from its flush to the first verified upload holding its last sequence."""
    out, j = [], 0
    for seq, t in writes:
        while j < len(ships) and ships[j][0] < seq:
            j += 1
        if j == len(ships):
            break
        out.append(ships[j][1] - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--burst", type=int, default=100_000, help="events for the unpaced throughput rounds")
    ap.add_argument("--paced", type=float, default=15, help="seconds of each paced cost round")
    args = ap.parse_args()
    env = dict(os.environ, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    server, port = moto_server(env)
    work = tempfile.mkdtemp(prefix="walctl-follow-bench-")
    try:
        writes, n, elapsed, ships, rep = _run(work, env, "paced", args.rate, args.seconds, True)
        lags = sorted(_lags(writes, ships))
        p = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]  # noqa: E731
        minutes = elapsed / 60
        pieces, sealed = rep["pieces_uploaded"], len(rep["sealed_uploaded"])
        print(f"moto_server on 127.0.0.1:{port}; writer {n} events in {elapsed:.1f} s "
              f"({n / elapsed:.0f}/s, group commit every {max(1, int(args.rate / 100))} events)")
        print(f"lag (commit -> verified upload), {len(lags)} group commits: p50 {p(0.5):.3f} s, p99 {p(0.99):.3f} s, "
              f"max {lags[-1]:.3f} s (goal p99 < 2 s)")
        print(f"objects: {pieces} live pieces + {sealed} sealed chunks in {minutes:.2f} min = "
              f"{(pieces + sealed) / minutes:.1f}/min; bound 60/min + 1 per sealed chunk = "
              f"{60 + sealed / minutes:.1f}/min; {len(rep['pieces_deleted'])} pieces deleted after their seal; "
              f"shipped through {rep['shipped_through']} of {n}")
        cpu_alone, cpu_ship, rate_alone, rate_ship = [], [], [], []
        for r in range(args.repeat):
            _, m, t, _, _ = _run(work, env, f"palone{r}", args.rate, args.paced, False)
            cpu_alone.append(_run.cpu / m)
            rate_alone.append(m / t)
            _, m, t, _, _ = _run(work, env, f"pship{r}", args.rate, args.paced, True)
            cpu_ship.append(_run.cpu / m)
            rate_ship.append(m / t)
        ca, cs = median(sorted(cpu_alone)), median(sorted(cpu_ship))
        ra, rs = median(sorted(rate_alone)), median(sorted(rate_ship))
        print(f"writer at {args.rate:.0f}/s, {args.paced:.0f} s, {args.repeat} interleaved rounds: alone {ra:.1f} events/s, "
              f"{1e6 * ca:.1f} us CPU per event; with the shipper {rs:.1f} events/s ({rs / ra:.3f}x), "
              f"{1e6 * cs:.1f} us CPU per event ({cs / ca:.3f}x) (goal: cost < 5%)")
        alone, shipped = [], []
        for r in range(args.repeat):
            _, m, t, _, _ = _run(work, env, f"alone{r}", 0, args.burst, False)
            alone.append(m / t)
            _, m, t, _, _ = _run(work, env, f"ship{r}", 0, args.burst, True)
            shipped.append(m / t)
        a, s = median(sorted(alone)), median(sorted(shipped))
        print(f"unpaced writer, {args.burst} events, {args.repeat} interleaved rounds: alone {a:.0f}/s, with the "
              f"shipper following {s:.0f}/s: {s / a:.3f}x (for information: CPU contention on this machine)")
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
