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
    m = _CHUNK_RE.fullmatch(name)
    return int(m.group(1)) if m else None


_SEGMENT_RE = re.compile(r"wal_([0-9]+)\.log")
CHECKPOINT_MAGIC = b"O_CKPT_V2" + bytes(7)
CHECKPOINT_SUFFIX = ".ckpt"


def segment_name(n: int) -> str:
    return f"wal_{n:08d}.log"


def parse_segment_name(name: str) -> int | None:
    m = _SEGMENT_RE.fullmatch(name)
    return int(m.group(1)) if m and int(m.group(1)) >= 1 else None
