"""File names and magic prefixes: what `detect_kind` needs to tell formats apart, kept in one light module
so that recognising a path does not import every codec (cold start).

Chunk files are wal-%06d.bin, ordered by number (wal-1000000.bin sorts after wal-999999.bin); ADR-003
segments are wal_%08d.log, N >= 1; checkpoints are <uuid>.ckpt starting with the O_CKPT_V2 magic."""
from __future__ import annotations

import re

LEDGER_DIR = ".walctl"  # the directory ledger (format/ledger.py): ours, not a chunk, not foreign
QUARANTINE_DIR = ".quarantine"  # where removed bytes are kept as evidence (store/quarantine.py)
TMP_SUFFIX = ".tmp"  # a file being written, renamed into place once durable (store/durable.py)

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
    """The number of an ADR-003 segment name, `wal_<N>.log` with N >= 1. Writers pad N to 8 digits;
    readers accept any spelling of it (the spec: `wal_1.log` is segment 1), ASCII digits only. Two
    spellings of one number are both read, and the second is reported (ops/wal/segments.list_segments)."""
    m = _SEGMENT_RE.fullmatch(name)
    if not m or not m.group(1).isascii():
        return None
    n = int(m.group(1))
    return n if n >= 1 else None


# ---- names read from files (manifest lines, object keys, ids): untrusted data ----

MAX_NAME_BYTES = 255  # NAME_MAX on Linux and most file systems


def name_problem(name) -> str | None:
    """Why `name` (taken from a file, a listing or an id) cannot be used as one plain file name inside a
    directory, or None when it can: a non-empty string, not `.` or `..`, with no separator, NUL or other
    control character (which could also reach a terminal), at most 255 bytes of UTF-8."""
    if not isinstance(name, str):
        return f"not a string ({'null' if name is None else type(name).__name__})"
    if name in ("", ".", ".."):
        return f"{name!r} is not a file name"
    if "/" in name or "\\" in name:
        return f"{name!r} has a path separator"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in name):
        return f"{name!r} has a control character"
    try:
        if len(name.encode("utf-8")) > MAX_NAME_BYTES:
            return f"longer than {MAX_NAME_BYTES} bytes"
    except UnicodeEncodeError:
        return f"{name!r} is not valid UTF-8 (a lone surrogate)"
    return None


def is_plain_name(name) -> bool:
    return name_problem(name) is None


def movable_kind(name: str) -> str | None:
    """What `quarantine move` may set aside, by name: a V2 chunk, an ADR-003 segment or a checkpoint
    (a rotten one: recovery passes over it anyway, but it stays a candidate in every listing)."""
    if parse_chunk_name(name) is not None:
        return "chunk"
    if parse_segment_name(name) is not None:
        return "segment"
    if name.endswith(CHECKPOINT_SUFFIX) and len(name) > len(CHECKPOINT_SUFFIX) and not name.startswith("."):
        return "checkpoint"
    return None
