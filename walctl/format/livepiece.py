"""Live pieces: the names of the small immutable objects `archive push --follow` uploads while a chunk
or segment is still being written (docs/format.md section 13). Pure: names <-> values.

    <log file>.<start:012d>-<end:012d>.<first:020d>-<last:020d>.piece
    wal-000003.bin.000000000016-000000004096.00000000000000000041-00000000000000000080.piece

The bytes are the log file's bytes [start, end): whole records (frames), the V2 file header with a
piece that starts at 0. Fixed widths make a listing sort by file, then offset; a name is accepted only
spelled exactly as piece_name spells it (object keys are untrusted).
"""
from __future__ import annotations

import re
from typing import NamedTuple

from .names import parse_chunk_name, parse_segment_name
from .v2 import MAX_SEQUENCE

PIECE_SUFFIX = ".piece"
MAX_OFFSET = 10 ** 12 - 1
_PIECE_RE = re.compile(r"(wal-[0-9]+\.bin|wal_[0-9]+\.log)\.([0-9]{12})-([0-9]{12})\.([0-9]{20})-([0-9]{20})\.piece")


class Piece(NamedTuple):
    file: str  # the chunk or segment it is a piece of
    start: int  # byte offset in that file
    end: int  # exclusive
    first_sequence: int
    last_sequence: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def is_segment(self) -> bool:
        return parse_segment_name(self.file) is not None


def piece_name(p: Piece) -> str:
    return f"{p.file}.{p.start:012d}-{p.end:012d}.{p.first_sequence:020d}-{p.last_sequence:020d}{PIECE_SUFFIX}"


def parse_piece_name(name) -> Piece | None:
    """The piece a name describes, or None unless it is spelled exactly as piece_name spells it, names a
    chunk or segment the writers would name, and holds at least one byte and one sequence in order."""
    if not isinstance(name, str):
        return None
    m = _PIECE_RE.fullmatch(name)
    if not m:
        return None
    file = m.group(1)
    if parse_chunk_name(file) is None and parse_segment_name(file) is None:
        return None
    start, end, first, last = (int(m.group(i)) for i in range(2, 6))
    if not (start < end <= MAX_OFFSET and 1 <= first <= last <= MAX_SEQUENCE):
        return None
    return Piece(file, start, end, first, last)
