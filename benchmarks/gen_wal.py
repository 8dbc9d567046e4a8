"""Writes a deterministic synthetic Spector V2 directory of about MB megabytes: ~1 KB records (100 to
2000 bytes, half text, half random bytes), 8 MiB chunks. Usage: gen_wal.py DIR MB [compressed]. With
`compressed`, payloads over 512 bytes are stored zlib-compressed (the writer's rule with
--compress-threshold 512). Prints the count."""
from __future__ import annotations

import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from walctl.format.names import chunk_name  # noqa: E402
from walctl.format.v2 import compress_payload, encode_file_header, encode_record  # noqa: E402

CHUNK_BYTES = 8 * 1024 * 1024


def generate(out: str, mb: int, compressed: bool = False) -> int:
    os.makedirs(out, exist_ok=True)
    rng = random.Random(7)
    words = [w.encode() for w in "the agent recalled a memory about tools plans steps commits and messages".split()]
    seq = total = chunk = 0
    while total < mb * 1024 * 1024:
        buf = bytearray(encode_file_header())
        while len(buf) < CHUNK_BYTES:
            seq += 1
            n = rng.randint(100, 2000)
            payload = (b" ".join(rng.choice(words) for _ in range(n // 5)))[:n] if seq % 2 else rng.randbytes(n)
            stored, flags = compress_payload(payload, 512) if compressed else (payload, 0)
            buf += encode_record(seq, seq % 6, f"mem-{seq:028d}".encode(), 1795300000000 + seq, stored, flags)
        with open(os.path.join(out, chunk_name(chunk)), "wb") as f:
            f.write(buf)
        total += len(buf)
        chunk += 1
    return seq


if __name__ == "__main__":
    print(generate(sys.argv[1], int(sys.argv[2]), sys.argv[3:] == ["compressed"]))
