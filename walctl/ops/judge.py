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

The verdict is complete (`Judged`): torn or corrupt (`torn`), the exit code (`code`), the lost range
(`lost`), whether a gap belongs to the damage before it (`owns_gap`) or is a finding of its own
(`sequence_break`), an append in progress by a live writer (`live`), and whether a stream may go on
(`stream_block`, `waits`, `stream_stops`). Callers render these; they decide none of them.

verify feeds everything and turns every Judged into findings; replay feeds chunk by chunk and stops at
the first block; the followers (ops/wal/follow.py, ops/wal/follow_segments.py) feed as bytes arrive -- the bytes
left in a file they roll away from are a tail Damage (`Tail.roll`), the records after it a Run -- and
stop where `stream_block` says.

Where a kind of log differs, the judge takes a `Policy` rather than a second copy of a rule:
- V2 chunks (`CONTINUED`): tail damage is torn when what follows continues the sequence (above);
  a run stepping back is judged and the sequence goes on from its last record.
- ADR-003 segments (`SEGMENTS`, through the adapter in ops/wal/segment_items.py): tail damage is torn only
  in the directory's last segment (`feed(..., last_file=True)`), whatever follows; an entry stepping
  back with another checksum is reported and dropped: it is judged on arrival (so verdicts may come
  before those of damage still pending), the last sequence stays, the damage before it stays pending.
The live-writer context is `in_progress`: the same rule for chunks and segments.
"""
from __future__ import annotations

from enum import StrEnum
from typing import Callable, NamedTuple

from ..errors import EXIT_CORRUPT, EXIT_ENVIRONMENT, EXIT_OK, EXIT_SEQUENCE, EXIT_TORN, EXIT_UNSUPPORTED
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
    UNSUPPORTED. `torn`: it is itself torn (the judge sets it for a short file fed as the last file:
    one a crashed or live writer was creating), so tail damage right before it is torn too. `note`: the
    caller's own value (its finding, its block). `code`: an unreadable file's exit code, as the
    environment said (default: UNREADABLE 6, UNSUPPORTED 5)."""
    kind: str
    torn: bool = False
    note: object = None
    code: int | None = None


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
    live: bool = False  # damage/short file: an append (or a file) a live writer has in flight (`in_progress`)

    @property
    def gap(self) -> tuple[int, int] | None:
        """Run only: the missing sequences before it, when it starts above the previous run's last + 1."""
        if self.continuity != Continuity.GAP:
            return None
        return lost_range(self.last_before, self.item.first_seq)

    @property
    def owns_gap(self) -> bool:
        """Run only: its gap belongs to the damage or barriers right before it (their `lost`), and is no
        separate sequence finding."""
        return self.continuity == Continuity.GAP and bool(self.after)

    @property
    def sequence_break(self) -> bool:
        """Run only: a sequence finding of its own (a gap no damage explains, a repeat, a regression)."""
        return self.continuity not in FOLLOWS and self.continuity is not None and not self.owns_gap

    @property
    def code(self) -> int:
        """The exit code of the verdict: a run's (0, or 4 for a sequence break); tail damage and short
        files 1 when torn, else 3 (0: in progress); mid-log and undecodable 3; unreadable files as the
        environment said."""
        item = self.item
        if type(item) is Run:
            return EXIT_SEQUENCE if self.sequence_break else EXIT_OK
        if self.live:
            return EXIT_OK
        if type(item) is Barrier:
            if item.kind == SHORT:
                return EXIT_TORN if self.torn else EXIT_CORRUPT
            if item.code is not None:
                return item.code
            return EXIT_ENVIRONMENT if item.kind == UNREADABLE else EXIT_UNSUPPORTED
        if item.kind == TAIL:
            return EXIT_TORN if self.torn else EXIT_CORRUPT
        return EXIT_CORRUPT


FOLLOWS = (Continuity.FIRST, Continuity.CONTINUES)  # continuities a stream may simply go on through


def lost_range(last: int | None, first: int | None) -> tuple[int, int] | None:
    """The sequences missing between the last valid sequence and the next one met (first > last + 1):
    the one `+ 1` rule of continuity. None when nothing is missing or either end is unknown."""
    if last is None or first is None or first <= last + 1:
        return None
    return last + 1, first - 1


def continues(last: int | None, first: int) -> bool:
    """Does a record (or run) starting at `first` continue the last valid sequence (or start the log)?"""
    return last is None or first == last + 1


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
        return continues(last_before, following.first_seq)
    return type(following) is Barrier and following.torn


class Policy(NamedTuple):
    """How a kind of log differs before the judge (see the module docstring)."""
    torn_in_last_file_only: bool = False  # a tail is torn only in the directory's last file
    step_back_rejected: bool = False  # a run stepping back is reported and dropped; the sequence stays


CONTINUED = Policy()  # Spector V2 chunks
SEGMENTS = Policy(torn_in_last_file_only=True, step_back_rejected=True)  # ADR-003 segments


def in_progress(item, last_file: bool, writer) -> bool:
    """The live-writer context: a record cut short at the end of the last file, or a last file shorter
    than its header, while a writer holds the directory is an append in flight, not damage (torn all the
    same)."""
    if not (writer and last_file):
        return False
    return _is_tail(item) and item.tail_kind == INCOMPLETE or type(item) is Barrier and item.kind == SHORT


class Judge:
    """Feed items in directory order, then end(); each call returns the items judged so far.
    `last`: the last valid sequence already known (a stream resumed at a known record). `writer`: the
    live writer holding the directory, if any (`in_progress`, for items fed with last_file)."""
    __slots__ = ("prev_last", "pending", "count", "_torn", "policy", "writer")

    def __init__(self, policy: Policy = CONTINUED, last: int | None = None, writer=None):
        self.policy = policy
        self.writer = writer
        self.prev_last: int | None = last  # the last valid sequence met
        self.pending: list[tuple[int, int, object, int | None, bool]] = []  # (index, pos, item, last_before, live)
        self.count = 0
        self._torn: dict[int, bool] = {}  # index of a tail damage -> torn, decided by the next item

    def feed(self, pos: int, item, last_file: bool = False) -> list[Judged]:
        """`last_file`: the item is in the directory's last file (a tail read under
        torn_in_last_file_only; a short file, torn there; the live-writer context)."""
        k = self.count
        self.count += 1
        by_position = self.policy.torn_in_last_file_only
        if type(item) is Barrier and item.kind == SHORT and last_file and not item.torn:
            item = item._replace(torn=True)  # a short last file: torn while being created
        if self.pending and not by_position:
            last_k, _, last_item, before, _ = self.pending[-1]
            if last_k == k - 1 and _is_tail(last_item):
                self._torn[last_k] = tail_torn(before, item)
        if type(item) is not Run:
            if by_position and _is_tail(item):
                self._torn[k] = last_file
            self.pending.append((k, pos, item, self.prev_last, in_progress(item, last_file, self.writer)))
            return []
        cont = continuity(self.prev_last, item.first_seq)
        if self.policy.step_back_rejected and cont in (Continuity.REPEAT, Continuity.REGRESSION):
            return [Judged(k, pos, item, self.prev_last, cont, after=tuple((p[1], p[2]) for p in self.pending))]
        lost = lost_range(self.prev_last, item.first_seq) if self.pending else None
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
        for i, (k, pos, item, before, live) in enumerate(self.pending):
            torn = item.torn if type(item) is Barrier and item.kind == SHORT else self._torn.pop(k, None)
            out.append(Judged(k, pos, item, before, lost=lost if i == 0 else None, torn=torn, live=live))
        return out


def _is_tail(item) -> bool:
    return type(item) is Damage and item.kind == TAIL


def judge_all(entries, last_pos=None, writer=None) -> list[Judged]:
    """Every (pos, item) judged, in the order fed (V2 chunks); `last_pos`: the last file's position."""
    j = Judge(writer=writer)
    out: list[Judged] = []
    for pos, item in entries:
        out.extend(j.feed(pos, item, pos == last_pos))
    out.extend(j.end())
    return out


def skipped_damage(item) -> bool:
    """Damage whose bytes a stream skips over (with --skip-damaged): mid-log or undecodable."""
    return type(item) is Damage and item.kind in (MID_LOG, UNDECODABLE)


def waits(item) -> bool:
    """Does a stream reaching this damage or barrier wait for what follows it (tail damage, a short file:
    torn or not is for the next run to say, through stream_block)? Anything else stops it at once (or,
    with --skip-damaged, is skipped)."""
    return _is_tail(item) or type(item) is Barrier and item.kind == SHORT


def stream_stops(code: int) -> bool:
    """A stream of ADR-003 entries (replay) stops at a finding of this exit code: damage and breaks that
    are corrupt or worse; a torn tail and notes do not stop it."""
    return code >= EXIT_CORRUPT


def stop_code(block, run: Judged) -> int:
    """The exit code of a stream stopped by stream_block before `run` (the followers): the damage the run
    does not continue is corrupt; the discontinuity itself is a sequence finding."""
    return EXIT_SEQUENCE if block is run else EXIT_CORRUPT


def no_ledger(a: int, b: int) -> bool:
    """`accepted` for a stream with no ledger to ask (the followers): no gap is accepted as lost."""
    return False


def stream_block(run: Judged, accepted: Callable[[int, int], bool]):
    """For a stream reaching this run: None (stream it), or the (pos, item) that stops the stream before
    it (the last pending tail damage or short chunk, which the run does not continue), or `run` itself
    (the discontinuity). `accepted(a, b)`: the directory's ledger accepted a..b as lost."""
    if run.continuity in FOLLOWS:
        return None
    if any(skipped_damage(i) for _, i in run.after):
        return None  # the skipped bytes held the missing records
    waiting = [(p, i) for p, i in run.after if waits(i)]
    if not waiting and run.gap is not None and accepted(*run.gap):
        return None
    return waiting[-1] if waiting else run
