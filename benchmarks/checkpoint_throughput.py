"""Checkpoints and recovery against raw library calls on the same bytes, measured in the same run.

Goals (issue #4), realistic agent state (memory blocks with text and 384-float embeddings, conversation
history, tool registry) of 50 MB and 500 MB of canonical msgpack:
- `checkpoint create` (library: canonicalise, zstd-9 on all cores, SHA-256, durable write) >= 0.9x a raw
  zstd-9 compression of the same canonical bytes on all cores;
- restore (verify all steps and decode) >= 0.9x raw SHA-256 + zstd decompression + msgpack decoding of
  the same file;
- recover of a 50 MB checkpoint plus 1,000 entries <= 0.5 s; replay of 1,000 entries <= 10 ms (the ADR's
  "WAL replay": applying the entries to the state; reading and checking them is printed on its own line).

Usage: python benchmarks/checkpoint_throughput.py [--sizes 50,500] [--repeat 3]
"""
from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import msgpack  # noqa: E402
import zstandard  # noqa: E402

from walctl.format.canonical import packb  # noqa: E402
from walctl.ops.checkpoints.checkpoint import check_path, create  # noqa: E402
from walctl.ops.checkpoints.recover import recover  # noqa: E402
from walctl.ops.wal.write import WalWriter  # noqa: E402

WORDS = "the agent recalled a memory about tools plans steps commits messages users goals".split()


def realistic_state(mb: int, seed: int = 3) -> dict:
    rng = random.Random(seed)
    blocks, size, seq = [], 0, 0
    while size < mb * 1_000_000:
        seq += 1
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(40, 120)))
        emb = [rng.uniform(-1, 1) for _ in range(384)]
        blocks.append({"content": text, "sequence": seq, "timestamp": 1795300000 + seq, "embedding": emb,
                       "tags": [rng.choice(WORDS) for _ in range(3)], "importance": rng.random()})
        size += len(text) + 9 * 384 + 80
    history = [{"role": rng.choice(["user", "assistant", "tool"]), "content": " ".join(rng.choice(WORDS) for _ in range(30)),
                "turn": i} for i in range(2000)]
    tools = {f"tool_{i}": {"name": f"tool_{i}", "description": " ".join(rng.choice(WORDS) for _ in range(20)),
                           "parameters": {"type": "object", "properties": {f"p{j}": {"type": "string"} for j in range(5)}}}
             for i in range(100)}
    return {"agent_state": {"mood": "focused", "goal": "benchmark", "step": seq}, "conversation_history": history,
            "memory_blocks": blocks, "metrics": {"tokens": 123456, "turns": 2000}, "tool_registry": tools}


def timed_pair(ours, raw, repeat):
    """Medians of both, interleaved round by round so a noisy moment hits both alike."""
    a, b = [], []
    for _ in range(repeat):
        for fn, out in ((ours, a), (raw, b)):
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    return statistics.median(a), statistics.median(b)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="50,500")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    base = tempfile.mkdtemp()
    try:
        print(f"{'':38} {'walctl s':>9} {'raw s':>8} {'ratio':>6}  goal")
        for mb in (int(x) for x in args.sizes.split(",")):
            state = realistic_state(mb)
            raw = packb(dict(state, wal_sequence=1000))
            cctx = zstandard.ZstdCompressor(level=9, threads=-1, write_checksum=True, write_content_size=True)
            n = [0]

            def make():
                n[0] += 1
                return create(os.path.join(base, f"ck{mb}-{n[0]}"), state, 1000)

            t_create, t_raw = timed_pair(make, lambda: cctx.compress(raw), args.repeat)
            path = make().path
            print(f"create  {len(raw) / 1e6:6.0f} MB canonical state        {t_create:9.3f} {t_raw:8.3f} "
                  f"{t_raw / t_create:5.2f}x  >= 0.90x")

            def raw_restore():
                with open(path, "rb") as f:
                    data = f.read()
                hashlib.sha256(data[256:]).digest()
                msgpack.unpackb(zstandard.ZstdDecompressor().decompress(data[256:]), raw=False)

            t_restore, t_rr = timed_pair(lambda: check_path(path, check_canonical=False), raw_restore, args.repeat)
            print(f"restore {len(raw) / 1e6:6.0f} MB (verify + decode)         {t_restore:9.3f} {t_rr:8.3f} "
                  f"{t_rr / t_restore:5.2f}x  >= 0.90x")
            if mb <= 50:
                ckdir = os.path.dirname(path)
                log = os.path.join(base, f"log{mb}")
                with WalWriter(log, format="segments", sync="none") as w:
                    for i in range(1000):
                        w.append_entry("memory_add", {"content": f"entry {i} " + "x" * 100}, 1795300000)
                # the checkpoint reflects 1000 entries that are not in this log: re-create at 0 instead
                shutil.rmtree(ckdir)
                create(ckdir, state, 0)
                # Only the timings are kept: holding every recovered state would make each run walk a
                # larger heap than a process recovering at start-up has.
                reps = []
                for _ in range(args.repeat):
                    r = recover(ckdir, log)
                    assert r.entries_replayed == 1000
                    reps.append(r.seconds)
                    del r
                total = statistics.median(s["total"] for s in reps)
                replay = statistics.median(s["replay"] for s in reps)
                read = statistics.median(s["read_log"] for s in reps)
                print(f"recover {len(raw) / 1e6:6.0f} MB checkpoint + 1,000 entries {total:9.3f} {'':>8} {'':>6}  <= 0.5 s")
                print(f"replay  1,000 entries (fold into state)    {replay * 1000:8.1f}ms {'':>8} {'':>6}  <= 10 ms")
                print(f"read    1,000 entries (frames, checksums)  {read * 1000:8.1f}ms {'':>8} {'':>6}  (information)")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
