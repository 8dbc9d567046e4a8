"""The judge: where torn vs corrupt and sequence continuity are decided, once, for every caller.

A small pure incremental state machine (in the spirit of h11's _state.py). Callers feed it scan items
in directory order -- a Run of valid records, a Damage, a Barrier (a file whose records cannot be read:
short, unreadable, unsupported) -- and then `end()`. It answers with `Judged` values: one per item,
in the order fed, each final. A Run is judged on arrival (its continuity is known then); a damage or
barrier is judged when the next Run arrives or at the end, because whether a tail is torn depends on
what follows it, and a gap after damage is the damage's lost range (LevelDB's log reader reports a
drop the same way: the caller decides what to do).

The rules:
- Continuity. A run continues when its first sequence is the previous run's last + 1 (or nothing came
  before). Otherwise it is a gap (first > last + 1), a repeat (first == last) or a regression.
- Lost range. A gap right after damage or barriers is what those bytes held: it belongs to the first
  of them, and is no separate sequence finding.
- Torn tail. Tail damage is torn when nothing follows it, when the next item is a run carrying the very
  next sequence (the writer crashed, restarted and went on), or a barrier that is itself torn (a short
  last chunk, a chunk a live writer is creating). Anything else means acknowledged bytes are damaged.
- Streaming (replay, follow): `stream_block` says whether a run may be streamed after what preceded it:
  a discontinuity is allowed after mid-log damage the caller skipped (its records are the gap), or for a
  gap the directory's ledger accepted as lost; otherwise the stream stops at the pending tail (or short
  chunk) the run does not continue, or at the discontinuity itself.

verify feeds everything and turns every Judged into findings; replay feeds chunk by chunk and stops at
the first block; the followers (ops/follow.py, ops/follow_segments.py) feed as bytes arrive -- the bytes
left in a file they roll away from are a tail Damage (`Tail.roll`), the records after it a Run -- and
stop where `stream_block` says.

Where a kind of log differs, the judge takes a `Policy` rather than a second copy of a rule:
- V2 chunks (`CONTINUED`): tail damage is torn when what follows continues the sequence (above);
  a run stepping back is judged and the sequence goes on from its last record.
- ADR-003 segments (`SEGMENTS`, through the adapter in ops/segment_items.py): tail damage is torn only
  in the directory's last segment (`feed(..., last_file=True)`), whatever follows; an entry stepping
  back with another checksum is reported and dropped: it is judged on arrival (so verdicts may come
  before those of damage still pending), the last sequence stays, the damage before it stays pending.
The live-writer context is `in_progress`: the same rule for chunks and segments.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Callable, NamedTuple

from ..format.scan import INCOMPLETE, MID_LOG, TAIL, UNDECODABLE, Damage, Run


class Continuity(StrEnum):
    FIRST = "first"  # nothing valid came before
    CONTINUES = "continues"
    GAP = "gap"
    REPEAT = "repeat"
    REGRESSION = "regression"


SHORT, UNREADABLE, UNSUPPORTED = "short", "unreadable", "unsupported"  # Barrier kinds


class Barrier(NamedTuple):
    """A file whose records cannot be read: SHORT (fewer bytes than a file header), UNREADABLE,
    UNSUPPORTED. `torn`: it is itself torn (a short last chunk, or one a live writer is creating), so
    tail damage right before it is torn too. `note`: the caller's own value (its finding, its block)."""
    kind: str
    torn: bool = False
    note: object = None


class Judged(NamedTuple):
    """The judge's final word on one item."""
    index: int  # the item's position in the order fed
    pos: int  # the caller's file position for it
    item: object  # Run | Damage | Barrier
    last_before: int | None  # the last valid sequence before the item
    continuity: Continuity | None = None  # Run only
    lost: tuple[int, int] | None = None  # damage/barrier: the sequences its bytes held (a gap after it)
    torn: bool | None = None  # tail damage only
    after: tuple = ()  # Run only: (pos, item) of the damage and barriers between the previous run and this one

    @property
    def gap(self) -> tuple[int, int] | None:
        """Run only: the missing sequences before it, when it starts above the previous run's last + 1."""
        if self.continuity != Continuity.GAP:
            return None
        return self.last_before + 1, self.item.first_seq - 1


FOLLOWS = (Continuity.FIRST, Continuity.CONTINUES)  # continuities a stream may simply go on through


def continuity(prev_last: int | None, first_seq: int) -> Continuity:
    """How a run (or one record) starting at first_seq stands to the last valid sequence before it."""
    if prev_last is None:
        return Continuity.FIRST
    if first_seq == prev_last + 1:
        return Continuity.CONTINUES
    if first_seq > prev_last + 1:
        return Continuity.GAP
    return Continuity.REPEAT if first_seq == prev_last else Continuity.REGRESSION


def tail_torn(last_before: int | None, following) -> bool:
    """Is tail damage torn, given the item right after it (None: nothing follows)?"""
    if following is None:
        return True
    if type(following) is Run:
        return last_before is None or following.first_seq == last_before + 1
    return type(following) is Barrier and following.torn


class Policy(NamedTuple):
    """How a kind of log differs before the judge (see the module docstring)."""
    torn_in_last_file_only: bool = False  # a tail is torn only in the directory's last file
    step_back_rejected: bool = False  # a run stepping back is reported and dropped; the sequence stays


CONTINUED = Policy()  # Spector V2 chunks
SEGMENTS = Policy(torn_in_last_file_only=True, step_back_rejected=True)  # ADR-003 segments


def in_progress(item, last_file: bool, writer) -> bool:
    """The live-writer context: a record cut short at the end of the last file while a writer holds the
    directory is an append in flight, not damage (a torn tail all the same)."""
    return bool(writer) and last_file and _is_tail(item) and item.tail_kind == INCOMPLETE


class Judge:
    """Feed items in directory order, then end(); each call returns the items judged so far.
    `last`: the last valid sequence already known (a stream resumed at a known record)."""
    __slots__ = ("prev_last", "pending", "count", "_torn", "policy")

    def __init__(self, policy: Policy = CONTINUED, last: int | None = None):
        self.policy = policy
        self.prev_last: int | None = last  # the last valid sequence met
        self.pending: list[tuple[int, int, object, int | None]] = []  # (index, pos, item, last_before)
        self.count = 0
        self._torn: dict[int, bool] = {}  # index of a tail damage -> torn, decided by the next item

    def feed(self, pos: int, item, last_file: bool = False) -> list[Judged]:
        """`last_file`: the item is in the directory's last file (read under torn_in_last_file_only)."""
        k = self.count
        self.count += 1
        by_position = self.policy.torn_in_last_file_only
        if self.pending and not by_position:
            last_k, _, last_item, before = self.pending[-1]
            if last_k == k - 1 and _is_tail(last_item):
                self._torn[last_k] = tail_torn(before, item)
        if type(item) is not Run:
            if by_position and _is_tail(item):
                self._torn[k] = last_file
            self.pending.append((k, pos, item, self.prev_last))
            return []
        cont = continuity(self.prev_last, item.first_seq)
        if self.policy.step_back_rejected and cont in (Continuity.REPEAT, Continuity.REGRESSION):
            return [Judged(k, pos, item, self.prev_last, cont, after=tuple((p[1], p[2]) for p in self.pending))]
        lost = (self.prev_last + 1, item.first_seq - 1) if cont == Continuity.GAP and self.pending else None
        out = self._flush(lost)
        out.append(Judged(k, pos, item, self.prev_last, cont, after=tuple((p[1], p[2]) for p in self.pending)))
        self.pending = []
        self.prev_last = item.last_seq
        return out

    def feed_next(self, sequence: int) -> bool:
        """feed's common case, cheaply, for a reader fed record by record (ADR-003 segments): a one-record
        run carrying the next sequence with nothing pending continues and flushes nothing, so it needs no
        verdict. True when it was that case (and is counted); False, having done nothing: feed() it."""
        if self.pending or self.prev_last is None or sequence != self.prev_last + 1:
            return False
        self.count += 1
        self.prev_last = sequence
        return True

    def end(self) -> list[Judged]:
        if self.pending and _is_tail(self.pending[-1][2]) and not self.policy.torn_in_last_file_only:
            self._torn[self.pending[-1][0]] = True
        out = self._flush(None)
        self.pending = []
        return out

    def _flush(self, lost) -> list[Judged]:
        out = []
        for i, (k, pos, item, before) in enumerate(self.pending):
            out.append(Judged(k, pos, item, before, lost=lost if i == 0 else None, torn=self._torn.pop(k, None)))
        return out


def _is_tail(item) -> bool:
    return type(item) is Damage and item.kind == TAIL


def judge_all(entries) -> list[Judged]:
    """Every (pos, item) judged, in the order fed (V2 chunks)."""
    j = Judge()
    out: list[Judged] = []
    for pos, item in entries:
        out.extend(j.feed(pos, item))
    out.extend(j.end())
    return out


def skipped_damage(item) -> bool:
    """Damage whose bytes a stream skips over (with --skip-damaged): mid-log or undecodable."""
    return type(item) is Damage and item.kind in (MID_LOG, UNDECODABLE)


def no_ledger(a: int, b: int) -> bool:
    """`accepted` for a stream with no ledger to ask (the followers): no gap is accepted as lost."""
    return False


def stream_block(run: Judged, accepted: Callable[[int, int], bool]):
    """For a stream reaching this run: None (stream it), or the (pos, item) that stops the stream before
    it (the last pending tail damage or short chunk, which the run does not continue), or `run` itself
    (the discontinuity). `accepted(a, b)`: the directory's ledger accepted a..b as lost."""
    if run.continuity in (Continuity.FIRST, Continuity.CONTINUES):
        return None
    if any(skipped_damage(i) for _, i in run.after):
        return None  # the skipped bytes held the missing records
    waiting = [(p, i) for p, i in run.after if _is_tail(i) or type(i) is Barrier and i.kind == SHORT]
    if not waiting and run.gap is not None and accepted(*run.gap):
        return None
    return waiting[-1] if waiting else run
