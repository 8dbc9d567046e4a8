"""replay: every event after a high-water mark, in order, as a stream another walctl (or a follower)
can apply.

V2 directories are read one chunk at a time; each chunk's valid records in (after, to] are encoded as
the scan meets them, and emitted in file order until something blocks the stream:
- mid-log damage or an undecodable payload (acknowledged events are missing or unreadable);
- tail damage of a chunk whose next readable record does not continue the sequence (a torn tail that
  the writer continued after a restart does not block: nothing acknowledged is missing);
- a sequence gap, repeat or regression; a chunk that cannot be read or is not V2.
With skip_damaged the stream goes on past each of these and the report lists what was skipped.
The exit code is verify's, over the chunks read (assemble): a replay never judges differently.

Chunks wholly at or below `after` are not scanned: chunk i is skipped when chunk i+1's first record
header (checked by its CRC) has a sequence <= after + 1, so a follower asking for the tail of a large
WAL reads the tail, not the WAL.
"""
from __future__ import annotations

import os

import json
from bisect import bisect_left
from typing import Callable, NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_ENVIRONMENT, EXIT_OK, UsageError
from ...format import events as ev
from ...format import scan as fscan
from ...format.record import HEADER_SIZE, SEQUENCE, TIMESTAMP_MS, TYPE
from ...format.scan import Damage, Run
from ...format.v2 import visited_payload
from ...store.chunkread import ChunkOutcome, scan_chunk_file
from ...store.fs import DEFAULT_FS
from .. import judge as J
from .fdwrite import write_pieces_to_fd  # noqa: F401 (callers pass its result as `out` with out_fd)
from .. import classes as K
from ..findings import SEQUENCE_GAP
from .ledger_check import accepted_gaps_only, accepted_losses
from ..kinds import KINDS
from ..report import PathReport
from .seek import NO_INDEX, v2_start
from .verify import assemble, detect_kind, not_a_file, resolve_chunks


class ReplayOptions(NamedTuple):
    after: int = 0
    to: int | None = None
    limit: int | None = None
    form: str = ev.FORM_JSONL
    skip_damaged: bool = False
    jobs: int | None = 1  # > 1: chunks are encoded (and written) by forked workers; needs out_fd. None: auto_jobs



class Blocked(NamedTuple):
    """Where the stream stopped (or, with skip_damaged, a range it went past)."""
    file: str
    offset: int | None
    end: int | None
    cls: str
    reason: str
    lost_sequences: tuple[int, int] | None

    def to_json(self) -> dict:
        return {"file": self.file, "offset": self.offset, "end": self.end, "class": self.cls, "reason": self.reason,
                "lost_sequences": list(self.lost_sequences) if self.lost_sequences else None}


class ReplayReport(NamedTuple):
    path: str
    kind: str
    events: int
    first_sequence: int | None
    last_sequence: int | None
    stopped: Blocked | None  # the stream ended here, before the end of the log
    skipped: tuple[Blocked, ...]
    ended_by: str  # "end" | "to" | "limit" | "damage"
    chunks_read: int
    chunks_skipped: int
    verify: PathReport | None
    index: object = NO_INDEX  # ops.wal.seek.Seek: how the sequence index was used, and what was wrong with it

    @property
    def exit_code(self) -> int:
        code = self.verify.exit_code if self.verify is not None else EXIT_OK
        # A stream that stopped at damage never ends clean, whatever the verdict of what was read says.
        return EXIT_CORRUPT if code == EXIT_OK and self.stopped is not None else code

    def set_aside_read(self) -> list[dict]:
        """The chunks read from `.quarantine/` in place of ones the directory lacks (--skip-damaged)."""
        from .salvage_sources import is_set_aside

        return [{"file": c.file, "records": c.records, "first_sequence": c.first_sequence,
                 "last_sequence": c.last_sequence} for c in (self.verify.chunks if self.verify else ())
                if is_set_aside(c.file)]

    def to_json(self) -> dict:
        return {"path": self.path, "kind": self.kind, "events": self.events, "first_sequence": self.first_sequence,
                "last_sequence": self.last_sequence, "ended_by": self.ended_by,
                "stopped": self.stopped.to_json() if self.stopped else None,
                "skipped": [s.to_json() for s in self.skipped], "chunks_read": self.chunks_read,
                "chunks_skipped_below_after": self.chunks_skipped, "exit_code": self.exit_code,
                "set_aside_read": self.set_aside_read(),
                "verdict": self.verify.verdict if self.verify is not None else "clean",
                "index": self.index.to_json(), "findings": [f.to_json() for f in
                                                            (self.verify.findings if self.verify else ()) + self.index.findings]}


class _Encoder:
    """Per chunk: the encoded bytes of each in-range record (`pieces`) and its (offset, sequence)."""

    def __init__(self, form: str, file_name: str, after: int, to: int | None):
        self.pieces: list[bytes] = []
        self.marks: list[tuple[int, int]] = []
        to = to if to is not None else ev.I64_MAX
        if form == ev.FORM_JSONL:
            self.visit = ev.jsonl_visitor(file_name, after, to, self.pieces.append, self.marks.append)
            return
        encode = ev.encode_msgpack if form == ev.FORM_MSGPACK else ev.encode_sync
        add, mark = self.pieces.append, self.marks.append

        large, streamed = ev.STREAM_HEX_BYTES, ev.streamed_binary

        def visit(buf, off, h, p, q, nxt, payload):
            seq = h[SEQUENCE]
            if after < seq <= to:
                e = ev.Event(seq, h[TYPE], buf[off + HEADER_SIZE:p], h[TIMESTAMP_MS], visited_payload(buf[p:q], payload))
                # A large payload is written as it is, after its head: never copied into the encoding.
                add(encode(e) if len(e.payload) <= large or len(e.payload) >= 1 << 32 else streamed(form, e))
                mark((off, seq))
            return False

        self.visit = visit


class _Sink:
    """Counts what is emitted and has the chunk write it; honours --limit."""

    def __init__(self, limit: int | None):
        self.limit = limit
        self.events = 0
        self.first: int | None = None
        self.last: int | None = None

    @property
    def full(self) -> bool:
        return self.limit is not None and self.events >= self.limit

    def emit(self, enc, start: int, stop: int) -> None:
        """Emits the chunk's records [start, stop) (clipped by the limit)."""
        if self.limit is not None:
            stop = min(stop, start + self.limit - self.events)
        if stop <= start:
            return
        enc.write(start, stop)
        if self.first is None:
            self.first = enc.marks[start][1]
        self.last = enc.marks[stop - 1][1]
        self.events += stop - start


def replay(path: str, out: Callable[[list], object], opts: ReplayOptions = ReplayOptions(),
           fs=DEFAULT_FS, out_fd: int | None = None, progress: Callable[[int], None] | None = None) -> ReplayReport:
    """Writes the stream through `out` (called with lists of byte strings, in order) and returns the
    report. With opts.jobs > 1 and `out_fd` (the descriptor `out` writes to), V2 chunks are encoded and
    written by worker processes instead. `progress` is called with each chunk's or segment's size once it
    is read."""
    kind = detect_kind(path, fs)
    entry = KINDS[kind]
    # a kind that holds no event stream goes to the chunk reader, which refuses it with its own message
    run = entry.load("replay") if entry.replay is not None else replay_v2
    return run(path, kind, out, opts, fs, out_fd, progress)


def first_record_seq(path: str, fs=DEFAULT_FS) -> int | None:
    """The sequence of a chunk's first record, if its header is intact (compaction's reading)."""
    from ...format.v2 import FILE_HEADER, RECORD_HEADER
    from .compact import first_sequence

    head = fs.read_head(path, FILE_HEADER.size + RECORD_HEADER.size)
    return first_sequence(head, len(head))[0]


def replay_v2(path: str, kind: str, out, opts: ReplayOptions, fs, out_fd: int | None = None,
              progress=None) -> ReplayReport:
    """Spector V2 chunks (KINDS: replay); `kind` is detected again with the chunks."""
    chunks, foreign, kind, writer = resolve_chunks(path, fs)
    if opts.skip_damaged:  # what was set aside is read, not skipped (named in the report)
        from .salvage_sources import with_set_aside

        chunks = with_set_aside(path, chunks, fs)
    start, offset, sk = v2_start(path, chunks, opts.after, opts.skip_damaged, fs, lambda p: first_record_seq(p, fs))
    todo = chunks[start:]
    enter = todo[0].name if offset and todo else None  # the chunk the index lets the scan enter at `offset`

    def encode_chunk(c, draining: bool = False):
        enc = _Encoder(opts.form, c.name, opts.after, opts.to)
        outcome = not_a_file(c) if c.kind != "file" else \
            scan_chunk_file(c.path, fs, None if draining else enc.visit, start=offset if c.name == enter else 0)
        return outcome, enc.pieces, enc.marks

    parallel = None
    jobs = opts.jobs if opts.jobs is not None else _auto_jobs(todo)
    if jobs > 1 and out_fd is not None and len(todo) > 1 and fs.worker_processes and hasattr(os, "fork"):
        from .replay_workers import ParallelChunks

        source = parallel = ParallelChunks(todo, jobs, out_fd, encode_chunk)
    else:
        source = _Sequential(todo, encode_chunk, out)
    try:
        return _emit_v2(path, kind, foreign, writer, opts, start, source, progress,
                        todo[-1] if todo else None, fs=fs)._replace(index=sk)
    finally:
        if parallel is not None:
            parallel.close()


def _auto_jobs(todo) -> int:
    from .replay_workers import auto_jobs

    return auto_jobs(todo)


class _Local:
    def __init__(self, pieces, marks, out):
        self.pieces, self.marks, self.out = pieces, marks, out

    def write(self, start: int, stop: int) -> None:
        for batch in ev.expand_pieces(self.pieces[start:stop] if start or stop < len(self.pieces) else self.pieces):
            self.out(batch)


class _Sequential:
    """Iterate for (chunk, outcome, encoded chunk) in order, in this process. Once `draining` is set
    (the stream has stopped) chunks are only scanned, for the verdict."""

    def __init__(self, todo, encode_chunk, out):
        self.todo, self.encode_chunk, self.out = todo, encode_chunk, out
        self.draining = False

    def __iter__(self):
        for c in self.todo:
            outcome, pieces, marks = self.encode_chunk(c, self.draining)
            yield c, outcome, _Local(pieces, marks, self.out)


def _emit_v2(path, kind, foreign, writer, opts: ReplayOptions, start: int, source, progress=None,
             last_chunk=None, *, fs) -> ReplayReport:
    """Renders the judge's verdicts chunk by chunk as a stream: what it may stream is written, what stops
    it (or, with skip_damaged, what it goes past) becomes a Blocked."""
    sink = _Sink(opts.limit)
    read_chunks, outcomes = [], []
    skipped: list[Blocked] = []
    stopped: Blocked | None = None
    ended_by = "end"
    judge = J.Judge()  # torn vs corrupt and continuity, as verify decides them
    accepted = accepted_losses(path)
    for c, outcome, enc in source:
        read_chunks.append(c)
        outcomes.append(outcome)
        if progress is not None:
            progress(c.size)
        if stopped is not None:
            continue
        block = _chunk_block(c.name, outcome)
        if block is not None:
            barrier = J.Barrier(J.SHORT if block.cls == K.SHORT_CHUNK else J.UNREADABLE, note=block)
            judge.feed(c.name, barrier, c is last_chunk)
            if not J.waits(barrier):  # a short chunk waits for the next record: is it torn?
                if not opts.skip_damaged:
                    stopped, ended_by = block, "damage"
                    continue
                skipped.append(block)
        stopped, ended_by = _emit_chunk(c, outcome, enc, judge, accepted, opts, sink, skipped)
        if stopped is not None:
            source.draining = True  # the rest is read only for the verdict
        if ended_by in ("to", "limit"):
            break  # nothing after this chunk is needed; the verdict covers what was read
    report = accepted_gaps_only(assemble(path, kind, read_chunks, outcomes, foreign, writer, False), fs)
    return ReplayReport(path, kind, sink.events, sink.first, sink.last, stopped, tuple(skipped), ended_by,
                        len(read_chunks), start, report)


def _emit_chunk(c, outcome, enc, judge: J.Judge, accepted, opts: ReplayOptions, sink,
                skipped: list) -> tuple[Blocked | None, str]:
    """Streams one chunk's runs as the judge allows: (the block that stops the stream, ended_by)."""
    items = outcome.scan.items if outcome.scan is not None and outcome.scan.header == fscan.HEADER_OK else ()
    cursor = 0
    for item in items:
        prev = judge.prev_last
        if isinstance(item, Damage):
            judge.feed(c.name, item)
            if J.waits(item):
                continue  # judged by the next record
            # the lost range as the judge will give it when the records resume (J.lost_range)
            b = Blocked(c.name, item.offset, item.end, K.MID_LOG_DAMAGE if item.kind == fscan.MID_LOG
                        else K.UNDECODABLE_PAYLOAD, item.reason, J.lost_range(prev, item.resync_sequence or None))
            if not opts.skip_damaged:
                return b, "damage"
            skipped.append(b)
            continue
        run: Run = item
        judged = judge.feed(c.name, run)[-1]
        blocker = J.stream_block(judged, accepted)
        if blocker is not None:
            b = _run_block(c.name, judged, blocker, prev)
            if not opts.skip_damaged:
                return b, "damage"
            skipped.append(b)
        if run.first_seq > (opts.to if opts.to is not None else ev.I64_MAX):
            return None, "to"
        n = bisect_left(enc.marks, (run.end,), cursor)  # the first record at or after the run's end
        sink.emit(enc, cursor, n)
        cursor = n
        if sink.full:
            return None, "limit"
        if opts.to is not None and run.last_seq >= opts.to:
            return None, "to"
    return None, "end"


def _run_block(name: str, judged: J.Judged, blocker, prev: int) -> Blocked:
    """What stops the stream before a run the judge says may not follow what came before it."""
    run, gap = judged.item, judged.gap
    if blocker is judged:
        return Blocked(name, run.offset, None, K.SEQUENCE_GAP if gap else K.SEQUENCE_REGRESSION,
                       f"sequence {run.first_seq} after {prev}", gap)
    where, item = blocker
    pending = item.note if type(item) is J.Barrier else Blocked(where, item.offset, item.end, K.TAIL_DAMAGE,
                                                                 item.reason, None)
    return pending._replace(cls=K.TAIL_DAMAGE, lost_sequences=gap,
                            reason=pending.reason + " (the next record does not continue the sequence)")


def _chunk_block(name: str, outcome: ChunkOutcome) -> Blocked | None:
    """A chunk whose records cannot be read at all blocks the stream (a header-only chunk does not)."""
    if outcome.scan is None:
        cls = K.UNREADABLE if outcome.error.exit_code == EXIT_ENVIRONMENT else K.UNSUPPORTED
        return Blocked(name, None, None, cls, outcome.error.reason, None)
    s = outcome.scan
    if s.header == fscan.HEADER_OK:
        return None
    if s.header == fscan.HEADER_SHORT:
        return Blocked(name, 0, s.size, K.SHORT_CHUNK, f"{s.size} bytes, shorter than the 8-byte file header", None)
    return Blocked(name, 0, None, K.UNSUPPORTED, f"file header {s.header}", None)


def replay_segments(path: str, kind: str, out, opts: ReplayOptions, fs, out_fd: int | None = None,
                    progress=None) -> ReplayReport:
    """ADR-003 entries (KINDS: replay; out_fd unused): jsonl is the `inspect --jsonl` entry object, msgpack the entry map itself
    (checksum included, so an importer can check it); there is no sync form for entries."""
    from ...format.canonical import packb
    from .segments import SegmentWalk, entry_json

    if opts.form == ev.FORM_SYNC:
        raise UsageError("the sync blob carries V2 events; replay ADR-003 segments as --jsonl or --msgpack")
    walk = SegmentWalk(path, fs, progress=progress, seek_from=opts.after + 1)
    sink_events = 0
    first = last = None
    stopped = None
    skipped: list[Blocked] = []
    ended_by = "end"
    seen_findings = 0
    to = opts.to if opts.to is not None else ev.I64_MAX
    accepted = accepted_losses(path)  # a gap the ledger accepted as lost is streamed across, as for V2
    it = iter(walk)
    for name, e in it:
        blocking = [f for f in walk.findings[seen_findings:] if J.stream_stops(f.exit_code)
                    and not (f.cls == SEQUENCE_GAP and f.sequence_range and accepted(*f.sequence_range))]
        seen_findings = len(walk.findings)
        if blocking:
            bl = [Blocked(f.file, f.offset, f.end_offset, f.cls, f.reason,
                          tuple(f.sequence_range) if f.sequence_range else None) for f in blocking]
            if not opts.skip_damaged:
                stopped, ended_by = bl[0], "damage"
                break
            skipped.extend(bl)
        if e.sequence <= opts.after:
            continue
        if e.sequence > to:
            ended_by = "to"
            break
        if opts.form == ev.FORM_JSONL:
            out([json.dumps(entry_json(name, e), ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n"])
        else:
            out([packb(e.value)])
        sink_events += 1
        first = e.sequence if first is None else first
        last = e.sequence
        if opts.limit is not None and sink_events >= opts.limit:
            ended_by = "limit"
            break
    if ended_by != "end":
        for _ in it:  # the verdict needs the whole walk
            pass
    return ReplayReport(path, kind, sink_events, first, last, stopped, tuple(skipped), ended_by,
                        len(walk.report.chunks), (walk.seek.start.file if walk.seek and walk.seek.start else 0),
                        accepted_gaps_only(walk.report, fs), walk.seek or NO_INDEX)
