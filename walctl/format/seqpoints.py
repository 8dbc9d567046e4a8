"""Points in log files that are not sealed yet: `.walctl/points.jsonl` (docs/format.md, "The sequence index").
Pure: lines <-> points, and the points of a file's records built from its bytes.

The sequence index (format/seqindex.py) covers sealed files, whose bytes the ledger vouches for. The file
a writer is still appending to has no seal, so a reader seeking in it would start at its first byte; here
it finds a point to start at instead. One line per update, CRC'd as a ledger line (format/ledger.py, event
`points`): `file`; `ino` (the file's inode when the line was written, 0 where the file system has none);
`first_seq` (its first record); `marks` ([sequence, offset] of the first record and then one every
MARK_RECORDS records or MARK_BYTES bytes, as the index has them, at most MAX_MARKS); `last_seq` (the
last record vouched for: durable when the line was written). A later line for a file replaces an earlier
one. Written by walctl's writer for records already durable, and by `seal --apply` for the records of the
last file that verify read clean; a reader believes none of it before checking the inode, the size and
the record at the mark it enters (ops/wal/seek.py).
"""
from __future__ import annotations

from typing import NamedTuple

from .ledger import is_log_file_name
from .record import HEADER_SIZE, Invalid, check_header, record_size
from .seqindex import MARK_BYTES, MARK_RECORDS, marks_shape_problem, sequence_at
from .v2 import FILE_HEADER

POINTS_NAME = "points.jsonl"
POINTS = "points"
_I64 = 1 << 63
_FIELDS = ("file", "ino", "first_seq", "last_seq", "marks")
# A line must stay under the ledger's 64 KiB line bound: 1,024 marks of 20-digit numbers are ~43 KiB. A
# file with more (a chunk far above the default 8 MiB of small records) is entered at its last mark.
MAX_MARKS = 1024


class Points(NamedTuple):
    file: str
    first_seq: int
    marks: tuple  # (sequence, offset), both strictly rising; the first is (first_seq, the first record)
    last_seq: int  # the last record vouched for (first_seq - 1: none)
    ino: int = 0

    def mark_at_or_before(self, sequence: int, size: int) -> tuple[int, int] | None:
        """The last mark at or below `sequence` that lies inside a file of `size` bytes."""
        best = None
        for m in self.marks:  # at most a few hundred: a file that is not sealed is one chunk or segment
            if m[0] > sequence or m[1] >= size:
                break
            best = m
        return best

    def fields(self) -> dict:
        return {"file": self.file, "ino": self.ino, "first_seq": self.first_seq, "last_seq": self.last_seq,
                "marks": [list(m) for m in self.marks]}


def _int(v, lo: int = 0) -> bool:
    return type(v) is int and lo <= v < _I64


def check_points(event: str, fields: dict) -> str | None:
    """Why a decoded line is not one walctl writes (its shape: what it claims is checked by readers)."""
    if event != POINTS:
        return f"unknown event {event!r}"
    if sorted(fields) != sorted(_FIELDS):
        return f"{POINTS}: fields are not {', '.join(_FIELDS)}"
    if not is_log_file_name(fields["file"]):
        return f"{POINTS}: file is not a chunk or segment name"
    first, last, marks = fields["first_seq"], fields["last_seq"], fields["marks"]
    if not (_int(fields["ino"]) and _int(first, 1) and _int(last) and last >= first - 1):
        return f"{POINTS}: ino, first_seq or last_seq is not an integer in range"
    if not isinstance(marks, list) or len(marks) > MAX_MARKS:
        return f"{POINTS}: marks is not a list of at most {MAX_MARKS}"
    problem = marks_shape_problem(marks, first, last, _I64)  # the index's rule; no size to bound offsets by
    if problem:
        return f"{POINTS}: {problem}"
    if marks and marks[0][0] != first:
        return f"{POINTS}: the first mark is not first_seq's"
    return None


def from_fields(fields: dict) -> Points:
    """The points of a line that passed check_points."""
    return Points(fields["file"], fields["first_seq"], tuple(map(tuple, fields["marks"])),
                  fields["last_seq"], fields["ino"])


def latest(lines) -> dict:
    """file -> its Points, from decoded lines in order (a later line replaces an earlier one)."""
    return {ln.get("file"): from_fields(ln.fields) for ln in lines}


def scan(buf, is_v2: bool, file: str, first_seq: int, upto_seq: int, ino: int = 0) -> tuple[Points, int]:
    """(the points of the file's records from its first through sequence `upto_seq`, the offset after the
    last one vouched for), hopping record to record (a V2 header's CRC and sequence each time; a segment
    frame's length), with a mark where one is due whose record is checked whole. Stops at the first record
    that is incomplete or not the one expected: nothing past it is vouched for."""
    every_records, every_bytes = MARK_RECORDS, MARK_BYTES  # read now: tests make them small
    marks: list = []
    off, seq, size = FILE_HEADER.size if is_v2 else 0, first_seq - 1, len(buf)
    since = 0
    while seq < upto_seq:
        nxt = _next_record(buf, off, size, is_v2, seq + 1)
        if nxt is None:
            break
        if not marks or since >= every_records or off - marks[-1][1] >= every_bytes:
            if len(marks) >= MAX_MARKS or sequence_at(buf, off, is_v2) != seq + 1:
                break
            marks.append((seq + 1, off))
            since = 0
        since += 1
        seq += 1
        off = nxt
    return Points(file, first_seq, tuple(marks), seq, ino), off


def checked(buf, is_v2: bool, marks) -> tuple:
    """The leading `marks` whose records are intact and carry their sequence (a writer's own marks, checked
    before they are written down: the first that is not so ends them)."""
    out = []
    for seq, off in marks:
        if sequence_at(buf, off, is_v2) != seq:
            break
        out.append((seq, off))
    return tuple(out)


def _next_record(buf, off: int, size: int, is_v2: bool, expect: int) -> int | None:
    """Where the record at `off` ends, when it is whole (and, V2, its header checks and carries `expect`)."""
    if is_v2:
        if size - off < HEADER_SIZE:
            return None
        h = check_header(buf, off, size)
        if type(h) is Invalid or h.sequence != expect or off + record_size(h) > size:
            return None
        return off + record_size(h)
    from .segment import frame_end

    return frame_end(buf, off)
