"""File names and magic prefixes: what `detect_kind` needs to tell formats apart, kept in one light module
so that recognising a path does not import every codec (cold start).

Chunk files are wal-%06d.bin, ordered by number (wal-1000000.bin sorts after wal-999999.bin); ADR-003
segments are wal_%08d.log, N >= 1; checkpoints are <uuid>.ckpt starting with the O_CKPT_V2 magic."""
from __future__ import annotations

import re

_CHUNK_RE = re.compile(r"wal-([0-9]+)\.bin")


def chunk_name(index: int) -> str:
    return f"wal-{index:06d}.bin"


def parse_chunk_name(name: str) -> int | None:
    """The index of a chunk name spelled as the writers spell it (`wal-%06d.bin`); None for anything else,
    `wal-0.bin` and `wal-0000001.bin` included: such a file is foreign, never a chunk of the sequence."""
    m = _CHUNK_RE.fullmatch(name)
    if not m:
        return None
    n = int(m.group(1))
    return n if len(m.group(1)) == max(6, len(str(n))) else None


_SEGMENT_RE = re.compile(r"wal_([0-9]+)\.log")
CHECKPOINT_MAGIC = b"O_CKPT_V2" + bytes(7)
CHECKPOINT_SUFFIX = ".ckpt"


def segment_name(n: int) -> str:
    return f"wal_{n:08d}.log"


def parse_segment_name(name: str) -> int | None:
    """As parse_chunk_name, for `wal_%08d.log` (N >= 1)."""
    m = _SEGMENT_RE.fullmatch(name)
    if not m:
        return None
    n = int(m.group(1))
    return n if n >= 1 and len(m.group(1)) == max(8, len(str(n))) else None
