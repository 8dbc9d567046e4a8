"""--follow: keep reading a V2 directory while a live writer appends to it (`tail -f` for a WAL).

Position = (chunk, offset of the first byte not yet consumed). Each poll reads what the chunk gained,
scans it with the same rules as verify, hands on every complete valid record, and keeps the bytes of
a record still being written for the next poll:
- bytes that end inside a record are an append in flight: wait;
- a complete header whose CRC fails, or zeros, at the very end of the newest chunk may be a write the
  kernel has not finished showing: wait, for up to `settle_polls` polls while nothing changes;
- once a newer chunk exists the current one is closed: whatever is left in it is tail damage, and the
  next chunk must continue the sequence (the writer restarted) or the stream stops as corrupt;
- mid-log damage (an intact record after bad bytes) stops the stream at once.
A chunk that disappears (compaction moved it into .quarantine/) is simply left behind. A chunk cut
at the held bytes (a repair, or a writer that reopens and cuts a torn tail) is read again from the last
consumed record; one cut before records already streamed stops the stream.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Callable, NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_OK, EXIT_UNSUPPORTED, UsageError
from ...format import scan as fscan
from ...format.names import parse_chunk_name
from ...format.v2 import FILE_HEADER, encode_file_header, visited_payload
from ...store.fs import DEFAULT_FS
from .. import judge as J
from .records import Record
from .tail import FollowResult, Tail, drive, writer_is_alive


class _Stop:
    def __init__(self):
        self.signal: int | None = None

    def __call__(self, signum, frame):
        self.signal = signum


def _chunk_names(directory: str) -> list[tuple[int, str]]:
    out = []
    for name in os.listdir(directory):
        n = parse_chunk_name(name)
        if n is not None:
            out.append((n, name))
    return sorted(out)


def follow(directory: str, on_records: Callable[[list[Record]], None], *, after: int = 0, to: int | None = None,
           limit: int | None = None, interval: float = 0.2, timeout: float | None = None,
           settle_polls: int = 25, clock=time.monotonic, sleep=time.sleep,
           install_signals: bool = True) -> FollowResult:
    """Calls on_records with each batch of new valid records: ops.wal.records.Record for a V2 directory,
    (segment name, format.segment.Entry) for an ADR-003 segment directory."""
    from .segments import looks_like_segment_dir

    if not os.path.isdir(directory):
        raise UsageError("--follow needs a V2 chunk or ADR-003 segment directory", directory)
    stop = _Stop()
    old = {}
    if install_signals:
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, stop)
    try:
        # A directory with no log file yet (the writer has not started) says nothing of its format: wait
        # for the first file rather than guess (a guess of V2 would never see segments appear).
        deadline = None if timeout is None else clock() + timeout
        while not (looks_like_segment_dir(directory) or _chunk_names(directory)) and stop.signal is None \
                and (deadline is None or clock() < deadline):
            sleep(interval)
        timeout = None if deadline is None else max(0.0, deadline - clock())
        if looks_like_segment_dir(directory):
            from . import follow_segments

            return follow_segments.loop(directory, on_records, after, to, limit, interval, timeout, settle_polls,
                                        clock, sleep, stop, FollowResult, writer_is_alive)
        return _loop(directory, on_records, after, to, limit, interval, timeout, settle_polls, clock, sleep, stop)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _loop(directory, on_records, after, to, limit, interval, timeout, settle_polls, clock, sleep, stop):
    f = ChunkFollower(directory, on_records, after=after, to=to, limit=limit, settle_polls=settle_polls)
    return drive(f, interval, timeout, clock, sleep, stop)


class ChunkFollower:
    """One V2 directory followed poll by poll: step() reads what the current chunk gained, hands on the
    new valid records (on_records) and, with `on_bytes(file, offset, data)`, the exact bytes it consumed
    (whole records, the file header with the first of a chunk), and rolls to the next chunk once the
    current one is closed. `start` = (chunk, offset, last sequence consumed) resumes at a record
    boundary already known (archive push --follow) instead of searching for `after`."""

    def __init__(self, directory, on_records, *, after=0, to=None, limit=None, settle_polls=25, start=None,
                 on_bytes=None, fs=DEFAULT_FS):
        from .replay import first_record_seq

        self.directory, self.on_records, self.on_bytes = directory, on_records, on_bytes
        self.after, self.to, self.limit, self.settle_polls = after, to, limit, settle_polls
        self.t, last = Tail.open(directory, _chunk_names(directory), "records", after,
                                 lambda path: first_record_seq(path, fs), start, fscan.LOOK_BEHIND, fs)
        self.judge = J.Judge(last=last)  # continuity, and the tails left in chunks rolled away from
        self.events = 0
        self.first = self.last = None

    def result(self, ended_by, problem=None, code=EXIT_OK) -> FollowResult:
        return FollowResult(self.events, self.first, self.last, ended_by, problem, code)

    def step(self) -> tuple[bool, FollowResult | None]:
        """(whether records were handed on, the end of the stream or None)."""
        t, result = self.t, self.result
        progressed = False
        while True:
            newer, cut = t.poll(_chunk_names(self.directory), lambda n: parse_chunk_name(n) or 0)
            if cut is not None:
                return progressed, result("damage", cut, EXIT_CORRUPT)
            if t.current is None:
                return progressed, None
            current, base, pending = t.current, t.base, t.pending
            header_ok = _header_state(base, pending)
            if header_ok is False:
                return progressed, result("damage", f"{current}: not a V2 chunk (file header {pending[:8].hex()})",
                                          EXIT_UNSUPPORTED)
            sc = _scan(current, base, t.behind, pending) if header_ok else _Scanned([], [], 0, None, None)
            out, end = self._take(current, sc)
            if end is not None:
                return progressed, end
            if out:
                self.on_records(out)
                self.events += len(out)
                self.first = out[0].sequence if self.first is None else self.first
                self.last = out[-1].sequence
                progressed = True
            if sc.broken is not None:
                if sc.consumed and self.on_bytes is not None:  # the intact records before the damage
                    self.on_bytes(current, base, bytes(pending[:sc.consumed]), sc.consumed_records(base))
                return progressed, result("damage", sc.broken, EXIT_CORRUPT)
            if self.limit is not None and self.events >= self.limit:
                return progressed, result("limit")
            last = self.judge.prev_last
            if self.to is not None and last is not None and last >= self.to:
                return progressed, result("to")
            if sc.consumed:
                if self.on_bytes is not None:
                    self.on_bytes(current, base, bytes(pending[:sc.consumed]), sc.consumed_records(base))
                t.consume(sc.consumed)
            tail = sc.tail
            if newer and (not t.pending or tail is not None or header_ok is None):
                left = t.roll(newer[0])
                if left is not None:
                    self.judge.feed(current, left)
                continue
            if tail is not None and tail.tail_kind != fscan.INCOMPLETE:
                if t.stuck(self.settle_polls, writer_is_alive):  # the end of the log, and nobody writes it
                    return progressed, result("damage", f"{current}: offset {tail.offset + sc.shift}: "
                                              f"{tail.tail_kind} tail: {tail.reason} (no live writer)",
                                              self._end_of_log(current, tail))
            return progressed, None

    def _end_of_log(self, current: str, tail) -> int:
        """The exit code for tail damage waited out at the end of the newest chunk with no writer left:
        the judge's verdict on it as the end of the log (torn, as verify says)."""
        self.judge.feed(current, tail)
        return self.judge.end()[-1].code

    def _take(self, current: str, sc: "_Scanned") -> tuple[list[Record], FollowResult | None]:
        """The records to hand on, run by run: the judge says whether each run may be streamed
        (judge.stream_block); after/to/limit choose within it. (records, the end of the stream or None)."""
        after, to, limit = self.after, self.to, self.limit
        out: list[Record] = []
        i = 0
        for run in sc.runs:
            prev = self.judge.prev_last
            verdict = self.judge.feed(current, run)[-1]
            block = J.stream_block(verdict, J.no_ledger)
            if block is not None:
                r = sc.recs[i]
                closed = block is not verdict  # tail damage left in a chunk rolled away from
                why = f" after damage left in a closed chunk ({block[1].reason})" if closed else ""
                return out, self.result("damage", f"{current}: offset {r.offset}: sequence {r.sequence} after "
                                        f"{prev}{why}", J.stop_code(block, verdict))
            for r in sc.recs[i:i + run.count]:
                if r.sequence <= after:
                    continue
                if to is not None and r.sequence > to:
                    return out, None
                out.append(r)
                if limit is not None and self.events + len(out) >= limit:
                    return out, None
            i += run.count
        return out, None


def _header_state(base: int, pending: bytes) -> bool | None:
    """Whether the chunk's file header is intact: None while it is still in flight."""
    if base == 0 and len(pending) < FILE_HEADER.size:
        return None
    return base > 0 or pending[:FILE_HEADER.size] == encode_file_header()


class _Scanned(NamedTuple):
    """What one poll's scan of the pending bytes found: the runs before the first damage, every valid
    record, the bytes those runs cover, the first damage when it is a tail, or why the stream breaks."""
    runs: list
    recs: list
    consumed: int
    tail: fscan.Damage | None
    broken: str | None
    shift: int = 0  # file offset = scan buffer offset + shift

    def consumed_records(self, base: int) -> list[Record]:
        return [r for r in self.recs if r.offset < base + self.consumed]


def _scan(current: str, base: int, behind: bytes, pending: bytes) -> _Scanned:
    """Scans the pending bytes with verify's scanner (format/scan.scan_records), from the first record
    boundary: after the file header at the start of a chunk, else at `base` with the real bytes before
    it in front; records carry their file offsets."""
    recs: list[Record] = []
    if base == 0:
        buf, start = pending, FILE_HEADER.size  # the header was checked (_header_state)
    else:
        buf, start = behind + pending, len(behind)
    shift = base - (start if base else 0)  # file offset = buffer offset + shift

    def visit(b, off, h, p, q, nxt, payload):
        _, ver, flags, typ, idlen, _, seq, ts, plen, pcrc, _, hcrc = h
        recs.append(Record(current, off + shift, nxt - off, ver, flags, typ, seq, ts,
                           bytes(b[off + 40:p]), plen, bytes(visited_payload(b[p:q], payload))))
        return False

    # a chunk's intact file header is consumed even with no record after it: a header-only chunk that a
    # newer one follows is closed (the writer reopened and moved on), and must not hold the stream
    runs, consumed, tail, broken = [], start if base == 0 else 0, None, None
    for item in fscan.scan_records(buf, start, visit):
        if isinstance(item, fscan.Damage):
            if item.kind != fscan.TAIL:  # the records before it still go out, then we stop
                broken = f"{current}: offset {item.offset + shift}: {item.kind} damage: {item.reason}"
            tail = item
            break
        runs.append(item)
        consumed = item.end + shift - base  # bytes of `pending` the runs cover
    return _Scanned(runs, recs, consumed, tail, broken, shift)


def follow_events(path: str, form: str, out, *, after: int = 0, to: int | None = None, limit: int | None = None,
                  interval: float = 0.2, timeout: float | None = None) -> FollowResult:
    """replay --follow: writes each new event in `form` to the binary stream `out`, flushed per poll."""
    import json

    from ...format import events as ev

    def write(recs: list) -> None:
        if recs and not isinstance(recs[0], Record):  # (segment name, Entry): ADR-003 entries
            from ...format.canonical import packb
            from .segments import entry_json

            data = b"".join(json.dumps(entry_json(n, e), ensure_ascii=False, sort_keys=True).encode() + b"\n"
                            if form == ev.FORM_JSONL else packb(e.value) for n, e in recs)
        elif form == ev.FORM_JSONL:
            data = b"".join(json.dumps(r.to_json(), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                            for r in recs)
        else:
            enc = ev.encode_msgpack if form == ev.FORM_MSGPACK else ev.encode_sync
            data = b"".join(enc(ev.Event(r.sequence, r.type_ordinal, r.memory_id, r.timestamp_ms, r.payload))
                            for r in recs)
        out.write(data)
        out.flush()

    return follow(path, write, after=after, to=to, limit=limit, interval=interval, timeout=timeout)
