"""Forensic views: the annotated bytes around an offset of a chunk. Read-only."""
from __future__ import annotations

from typing import NamedTuple

from ..format import scan as fscan
from ..format.hexdump import Field, file_header_fields, hex_lines, record_fields
from ..format.v2 import FILE_HEADER, RECORD_HEADER
from ..store.fs import DEFAULT_FS


class RecordAnnotation(NamedTuple):
    start: int
    damaged: bool
    fields: tuple[Field, ...]


class AroundView(NamedTuple):
    path: str
    size: int
    offset: int
    window_start: int
    window_end: int
    records: tuple[RecordAnnotation, ...]
    lines: tuple[str, ...]
    note: str | None


def around(path: str, offset: int, context: int, fs=DEFAULT_FS) -> AroundView:
    """Annotates every record (valid, or where one was expected and is damaged) whose header overlaps
    [offset - context, offset + context], and dumps those bytes."""
    with fs.map_read(path) as buf:
        size = len(buf)
        lo, hi = max(0, offset - context), min(size, offset + context + 1)
        note = None
        if offset >= size:
            note = f"offset {offset} is past the end of the file ({size} bytes)"
        starts: list[tuple[int, bool]] = []

        def visit(_buf, off, h, p, q, nxt, payload):
            if off < hi and nxt > lo:
                starts.append((off, False))
            return off >= hi

        scan = fscan.scan_chunk(buf, visit)
        if scan.header != fscan.HEADER_OK:
            note = (note + "; " if note else "") + f"file header: {scan.header}"
        for d in scan.damage:
            if d.offset < hi and max(d.end, d.offset + RECORD_HEADER.size) > lo:
                starts.append((d.offset, True))
        starts.sort()
        anns = []
        if lo < FILE_HEADER.size:
            anns.append(RecordAnnotation(0, scan.header != fscan.HEADER_OK, tuple(file_header_fields(buf))))
        for start, damaged in starts:
            anns.append(RecordAnnotation(start, damaged, tuple(record_fields(buf, start))))
        lines = tuple(hex_lines(buf, lo, hi, mark=offset if offset < size else None))
    return AroundView(path, size, offset, lo, hi, tuple(anns), lines, note)
