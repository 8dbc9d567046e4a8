"""ADR-003 frames as the judge's items (ops/judge.py), for the segment walk (verify, replay, inspect,
recover...) and the segment follower alike.

An intact entry is a one-record `Run`; a frame that does not verify is a `Damage` (mid-log when an intact
frame follows it in the segment, else tail: zero-fill, incomplete or checksum); a legacy segment is an
unsupported `Barrier`. The judge reads them under `judge.SEGMENTS` (a tail is torn only in the last
segment; an entry stepping back is reported and dropped).

Duplicates stay here, before the judge: an entry repeated with the checksum of the entry that already
holds its sequence is the same entry re-sent by a writer that was not sure it had landed. That is a
question of identity (the checksum), not of continuity -- nothing is missing and nothing is new -- so
it never reaches the judge, leaves the sequence and any pending damage as they were, and is reported
by the caller as an anomaly (the walk) or skipped (the follower).
"""
from __future__ import annotations

from ...format.scan import CHECKSUM, INCOMPLETE, MID_LOG, TAIL, ZERO_FILL, Damage, Run
from .. import judge as J

RECENT_CHECKSUMS = 16_384  # how far back a repeat is recognised as the same entry
STEPS_BACK = (J.Continuity.REPEAT, J.Continuity.REGRESSION)


class SegmentItems:
    """Feeds ADR-003 frames to one Judge. `last`: the last sequence already known (a resumed stream);
    `writer`: the live writer holding the directory (the judge's in_progress)."""
    __slots__ = ("judge", "recent")

    def __init__(self, last: int | None = None, writer=None):
        self.judge = J.Judge(J.SEGMENTS, last, writer)
        self.recent: dict[int, str] = {}  # sequence -> checksum of the latest accepted entries

    @property
    def last(self) -> int | None:
        """The last accepted sequence."""
        return self.judge.prev_last

    def duplicate(self, sequence: int, checksum: str) -> bool:
        """Is this entry one already accepted, re-sent (same sequence, same checksum)?"""
        prev = self.judge.prev_last
        return prev is not None and sequence <= prev and self.recent.get(sequence) == checksum

    def next_entry(self, sequence: int, checksum: str) -> bool:
        """The common case, with no verdict to build (judge.feed_next): an intact entry carrying the next
        sequence with no damage pending. False, having done nothing, for any other entry: give it to
        entry()."""
        if not self.judge.feed_next(sequence):
            return False
        self._remember(sequence, checksum)
        return True

    def entry(self, pos, sequence: int, checksum: str, offset: int, size: int) -> list[J.Judged]:
        """An intact entry, as a one-record Run; the last verdict is the entry's own. Remembers the
        checksum of an accepted entry (one whose verdict is not a step back)."""
        out = self.judge.feed(pos, Run(sequence, sequence, 1, offset, offset + size))
        if out[-1].continuity not in STEPS_BACK:
            self._remember(sequence, checksum)
        return out

    def _remember(self, sequence: int, checksum: str) -> None:
        recent = self.recent
        recent[sequence] = checksum
        if len(recent) > 2 * RECENT_CHECKSUMS:  # keep the newest half; cheap amortised
            self.recent = dict(list(recent.items())[-RECENT_CHECKSUMS:])

    def damage(self, pos, off: int, end: int, problem: str, frame_kind: str, resynced: bool, zeros: bool,
               last_file: bool) -> int:
        """A frame that does not verify, from `off` to `end` (the next intact frame, or the end of the
        segment). Returns the judge's index for it: its verdict comes with the next accepted entry or at
        the end."""
        if resynced:
            d = Damage(MID_LOG, off, end, problem, field=frame_kind)
        else:
            kind = ZERO_FILL if zeros else INCOMPLETE if frame_kind == "incomplete" else CHECKSUM
            d = Damage(TAIL, off, end, problem, tail_kind=kind, field=frame_kind)
        return self._feed(pos, d, last_file)

    def barrier(self, pos, note, last_file: bool = False) -> int:
        """A segment whose frames cannot be read (legacy Erlang terms): unsupported."""
        return self._feed(pos, J.Barrier(J.UNSUPPORTED, note=note), last_file)

    def closed_tail(self, pos, d: Damage) -> None:
        """The bytes a follower left in a segment it rolled away from (tail.Tail.roll)."""
        self.judge.feed(pos, d)

    def end(self) -> list[J.Judged]:
        return self.judge.end()

    def _feed(self, pos, item, last_file: bool) -> int:
        k = self.judge.count
        self.judge.feed(pos, item, last_file)  # (not a Run: judged later)
        return k
