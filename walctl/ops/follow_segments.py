"""--follow for ADR-003 segment directories: the same loop as for V2 chunks (ops/follow.py), over frames.

Position = (segment, offset of the first byte not consumed). Each poll reads the unconsumed tail again
and hands on every intact entry: a frame that runs past the end is an append in flight (wait); a frame
that does not verify at the end of the newest segment is waited for while a live writer holds the lock
(for `settle_polls` polls without one); with an intact frame after it, it is mid-log damage and stops
the stream. An entry repeated with the same checksum is skipped (a writer re-sending what it was not
sure had landed); any other step back or gap stops the stream.
"""
from __future__ import annotations

import os

from ..errors import EXIT_CORRUPT, EXIT_OK, EXIT_SEQUENCE
from ..format import segment as seg
from ..format.names import parse_segment_name
from . import judge as J
from .tail import Tail

RECENT = 16_384  # how far back a repeat is recognised as the same entry, as verify does


def _segments(directory: str) -> list[tuple[int, str]]:
    return sorted((n, name) for name in os.listdir(directory) if (n := parse_segment_name(name)) is not None)


def _first_entry_seq(path: str) -> int | None:
    """The sequence of a segment's first entry, reading just that frame."""
    try:
        with open(path, "rb") as f:
            head = f.read(seg.FRAME_LENGTH.size)
            if len(head) < seg.FRAME_LENGTH.size:
                return None
            (n,) = seg.FRAME_LENGTH.unpack(head)
            if not 0 < n <= seg.MAX_FRAME_BYTES:
                return None
            head += f.read(n)
    except OSError:
        return None
    fr = seg.read_frame(head, 0)
    return fr.entry.sequence if fr.entry is not None else None


def loop(directory, on_entries, after, to, limit, interval, timeout, settle_polls, clock, sleep, stop, result_type,
         writer_alive):
    deadline = None if timeout is None else clock() + timeout
    from .replay import covered_prefix

    names = _segments(directory)
    start = covered_prefix([os.path.join(directory, n) for _, n in names], after, _first_entry_seq)
    t = Tail(directory, names[start][1] if names else None, "entries")
    prev = None
    recent: dict[int, str] = {}
    events, first, last = 0, None, None

    def result(ended_by, problem=None, code=EXIT_OK):
        return result_type(events, first, last, ended_by, problem, code)

    def hand_on(out) -> None:
        nonlocal events, first, last
        on_entries(out)
        events += len(out)
        first = out[0][1].sequence if first is None else first
        last = out[-1][1].sequence

    while True:
        if stop.signal is not None:
            return result("signal")
        if deadline is not None and clock() >= deadline:
            return result("timeout")
        progressed = False
        newer, cut = t.poll(_segments(directory), parse_segment_name)
        if cut is not None:
            return result("damage", cut, EXIT_CORRUPT)
        if t.current is not None:
            current, base, pending = t.current, t.base, t.pending
            out, off, bad = [], 0, None
            while off < len(pending):
                fr = seg.read_frame(pending, off)
                if fr.kind == "incomplete":
                    break
                if fr.entry is None:
                    bad = fr
                    break
                e = fr.entry
                q, checksum = e.sequence, e.checksum
                if prev is not None and q <= prev and recent.get(q) == checksum:
                    off += e.size  # a re-sent entry: skipped, as verify does
                    continue
                if J.continuity(prev, q) not in J.FOLLOWS:
                    why = f" after damage left in a closed segment ({t.closed_tail})" if t.closed_tail else ""
                    if out:
                        hand_on(out)
                    return result("damage", f"{current}: offset {base + off}: sequence {q} after {prev}{why}",
                                  EXIT_CORRUPT if t.closed_tail else EXIT_SEQUENCE)
                t.closed_tail, prev = None, q
                recent[q] = checksum
                if len(recent) > 2 * RECENT:
                    recent = dict(list(recent.items())[-RECENT:])
                off += e.size
                if q <= after:
                    continue
                if to is not None and q > to:
                    break
                out.append((current, e._replace(offset=base + off - e.size)))
                if limit is not None and events + len(out) >= limit:
                    break
            if out:
                hand_on(out)
                progressed = True
            if limit is not None and events >= limit:
                return result("limit")
            if to is not None and prev is not None and prev >= to:
                return result("to")
            if off:
                t.consume(off)
            if bad is not None and seg.resync(t.pending, 1, [16 * len(t.pending) + (1 << 20)]) is not None:
                return result("damage", f"{current}: offset {t.base}: mid-log damage: {bad.problem}", EXIT_CORRUPT)
            if newer and (not t.pending or bad is not None):
                t.roll(newer[0])
                continue
            if bad is not None and t.stuck(settle_polls, writer_alive):
                return result("damage", f"{current}: offset {t.base}: {bad.problem} (no live writer)", EXIT_CORRUPT)
        if not progressed:
            sleep(interval)
