"""Line logs (the ledger, task logs, Substrat event logs, the quarantine manifest): where their lines end,
one rule for all of them (docs/format.md, "Line logs"). Pure: a buffer in, offsets out.

A line is the bytes before a `\\n`; a `\\r` before it stays part of the line (each format's decoder says
what it makes of it). The bytes after the last `\\n` are the tail: a writer appends a line and its newline
with one write, so a tail is an append a crash cut short (torn: never acknowledged, never used, cut by the
next writer) unless it is longer than any line the format's writer appends, `max_line_bytes`: then it is
not one torn append but damage (a zero-filled or overwritten end, which may have swallowed whole lines).
A format whose writer has no bound on a line (`None`: task logs, Substrat logs, whose specs call every
unterminated tail torn) has no over-long tail.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple


class Tail(NamedTuple):
    offset: int  # where the bytes after the last newline start
    length: int
    overlong: bool  # longer than any line the writer appends: damage, not a torn append

    @property
    def torn(self) -> bool:
        return not self.overlong


def tail_of(data, max_line_bytes: int | None) -> Tail | None:
    """The bytes after the last newline of `data` (bytes or a mapping), or None when it ends with one (or is
    empty). Its line number is one more than the complete lines' (line_spans counts them)."""
    end = data.rfind(b"\n") + 1
    size = len(data)
    if end == size:
        return None
    return tail_at(end, size - end, max_line_bytes)


def tail_at(offset: int, length: int, max_line_bytes: int | None) -> Tail:
    """The tail of `length` bytes at `offset`, for a reader that found it itself (a readline loop)."""
    return Tail(offset, length, max_line_bytes is not None and length > max_line_bytes)


def line_spans(data, end: int | None = None) -> Iterator[tuple[int, int]]:
    """(offset, newline offset) of every complete line of `data` before `end` (default: all of it); the
    line's bytes are data[offset:newline]. A tail (no newline) is not a line: see tail_of."""
    stop = len(data) if end is None else end
    pos = 0
    find = data.find
    while pos < stop:
        nl = find(b"\n", pos, stop)
        if nl < 0:
            return
        yield pos, nl
        pos = nl + 1


def overlong_reason(tail: Tail, max_line_bytes: int, what: str) -> str:
    """The one wording of an over-long tail, `what` naming the format's lines ("ledger line")."""
    return (f"{tail.length} bytes with no newline at the end, longer than any {what} ({max_line_bytes} "
            f"bytes): not a torn append")
