"""--follow for ADR-003 segment directories: the same loop as for V2 chunks (ops/wal/follow.py), over frames.

Position = (segment, offset of the first byte not consumed). Each poll reads the unconsumed tail again
and hands on every intact entry: a frame that runs past the end is an append in flight (wait); a frame
that does not verify at the end of the newest segment is waited for while a live writer holds the lock
(for `settle_polls` polls without one); with an intact frame after it, it is mid-log damage and stops
the stream. An entry repeated with the same checksum is skipped (a writer re-sending what it was not
sure had landed); any other step back or gap stops the stream.
"""
from __future__ import annotations

import os

from ...errors import EXIT_CORRUPT, EXIT_OK, WalctlError
from ...format import segment as seg
from ...format.names import parse_segment_name
from ...store.fs import DEFAULT_FS
from .. import judge as J
from .segment_items import SegmentItems
from .tail import FollowResult, Tail, drive, writer_is_alive


def _segments(directory: str) -> list[tuple[int, str]]:
    return sorted((n, name) for name in os.listdir(directory) if (n := parse_segment_name(name)) is not None)


def _first_entry_seq(path: str, fs=DEFAULT_FS) -> int | None:
    """The sequence of a segment's first entry, reading just that frame."""
    size = seg.FRAME_LENGTH.size
    try:
        with fs.map_read(path) as buf:
            if len(buf) < size:
                return None
            (n,) = seg.FRAME_LENGTH.unpack(buf[:size])
            if not 0 < n <= seg.MAX_FRAME_BYTES:
                return None
            head = bytes(buf[:size + n])
    except (OSError, WalctlError):  # gone, or not a file it can read: no first entry known
        return None
    fr = seg.read_frame(head, 0)
    return fr.entry.sequence if fr.entry is not None else None


def loop(directory, on_entries, after, to, limit, interval, timeout, settle_polls, clock, sleep, stop, result_type,
         writer_alive):
    f = SegmentFollower(directory, on_entries, after=after, to=to, limit=limit, settle_polls=settle_polls,
                        result_type=result_type, writer_alive=writer_alive)
    return drive(f, interval, timeout, clock, sleep, stop)


class SegmentFollower:
    """ChunkFollower's counterpart over frames (see ops/wal/follow.py): step() hands on new intact entries
    and, with `on_bytes(file, offset, data, entries)`, the exact bytes consumed (whole frames, re-sent
    repeats included); `start` = (segment, offset, last sequence) resumes at a known frame boundary."""

    def __init__(self, directory, on_entries, *, after=0, to=None, limit=None, settle_polls=25, start=None,
                 on_bytes=None, result_type=None, writer_alive=None, fs=DEFAULT_FS):
        self.directory, self.on_entries, self.on_bytes = directory, on_entries, on_bytes
        self.after, self.to, self.limit, self.settle_polls = after, to, limit, settle_polls
        self.result_type = result_type or FollowResult
        self.writer_alive = writer_alive or writer_is_alive
        self.t, last = Tail.open(directory, _segments(directory), "entries", after,
                                 lambda path: _first_entry_seq(path, fs), start, fs=fs)
        self.items = SegmentItems(last)  # the judge's adapter: continuity, duplicates, closed tails
        self.events, self.first, self.last = 0, None, None

    def result(self, ended_by, problem=None, code=EXIT_OK):
        return self.result_type(self.events, self.first, self.last, ended_by, problem, code)

    def _hand_on(self, out) -> None:
        self.on_entries(out)
        self.events += len(out)
        self.first = out[0][1].sequence if self.first is None else self.first
        self.last = out[-1][1].sequence

    def step(self):
        t, result = self.t, self.result
        progressed = False
        while True:
            newer, cut = t.poll(_segments(self.directory), parse_segment_name)
            if cut is not None:
                return progressed, result("damage", cut, EXIT_CORRUPT)
            if t.current is None:
                return progressed, None
            out, off, bad, seen, end = self._read(t)
            if end is not None:
                return progressed, end
            if out:
                self._hand_on(out)
                progressed = True
            if self.limit is not None and self.events >= self.limit:
                return progressed, result("limit")
            if self.to is not None and self.items.last is not None and self.items.last >= self.to:
                return progressed, result("to")
            if off:
                if self.on_bytes is not None:
                    self.on_bytes(t.current, t.base, bytes(t.pending[:off]), seen)
                t.consume(off)
            if bad is not None and seg.resync(t.pending, 1, [16 * len(t.pending) + (1 << 20)]) is not None:
                return progressed, result("damage", f"{t.current}: offset {t.base}: mid-log damage: {bad.problem}",
                                          EXIT_CORRUPT)
            if newer and (not t.pending or bad is not None):
                closed, left = t.current, t.roll(newer[0])
                if left is not None:
                    self.items.closed_tail(closed, left)
                continue
            if bad is not None and t.stuck(self.settle_polls, self.writer_alive):
                # the end of the log, nobody writes it: the judge's verdict on a tail in the last segment
                zeros = not any(t.pending)
                self.items.damage(t.current, t.base, t.base + len(t.pending), bad.problem, bad.kind, False, zeros,
                                  last_file=True)
                code = self.items.end()[-1].code
                return progressed, result("damage", f"{t.current}: offset {t.base}: {bad.problem} (no live writer)",
                                          code)
            return progressed, None

    def _read(self, t: Tail):
        """The intact frames of the pending bytes: (entries to hand on, bytes consumed, the frame that
        does not verify or None, every consumed (segment, entry), the end of the stream or None). The
        judge decides whether each entry may be streamed (judge.stream_block); a re-sent entry is skipped."""
        current, base, pending = t.current, t.base, t.pending
        after, to, limit, items = self.after, self.to, self.limit, self.items
        out, off, bad, seen = [], 0, None, []
        while off < len(pending):
            fr = seg.read_frame(pending, off)
            if fr.kind == "incomplete":
                break
            if fr.entry is None:
                bad = fr
                break
            e = fr.entry
            q, checksum = e.sequence, e.checksum
            if items.duplicate(q, checksum):
                off += e.size  # a re-sent entry: skipped, as verify does
                continue
            prev = items.last
            verdict = items.entry(current, q, checksum, base + off, e.size)[-1]
            block = J.stream_block(verdict, J.no_ledger)
            if block is not None:
                closed = block is not verdict  # tail damage left in a segment rolled away from
                why = f" after damage left in a closed segment ({block[1].reason})" if closed else ""
                if out:
                    self._hand_on(out)
                if off and self.on_bytes is not None:
                    self.on_bytes(current, base, bytes(pending[:off]), seen)
                return out, off, bad, seen, self.result("damage", f"{current}: offset {base + off}: sequence {q} "
                                                        f"after {prev}{why}", J.stop_code(block, verdict))
            off += e.size
            seen.append((current, e._replace(offset=base + off - e.size)))
            if q <= after:
                continue
            if to is not None and q > to:
                break
            out.append(seen[-1])
            if limit is not None and self.events + len(out) >= limit:
                break
        return out, off, bad, seen, None
