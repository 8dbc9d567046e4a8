"""Chunk file names: wal-%06d.bin, ordered by number (wal-1000000.bin sorts after wal-999999.bin)."""
from __future__ import annotations

import re

_CHUNK_RE = re.compile(r"wal-([0-9]+)\.bin")


def chunk_name(index: int) -> str:
    return f"wal-{index:06d}.bin"


def parse_chunk_name(name: str) -> int | None:
    m = _CHUNK_RE.fullmatch(name)
    return int(m.group(1)) if m else None
