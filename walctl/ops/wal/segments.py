"""ADR-003 entry segment directories: walking and verifying them.

One sequential pass over the segments in numeric order. Sequences are global and must rise by one; an
entry repeated with the same checksum (a writer re-sending what it was not sure had landed) is skipped
with a warning; repeated with another checksum it is a sequence finding. Damage with an intact frame
after it is corruption; with none, it is a torn tail only in the last segment. Those verdicts are the
judge's (ops/judge.py, policy SEGMENTS), fed through the adapter in ops/wal/segment_items.py; this module
turns them into findings.
"""
from __future__ import annotations

from typing import Callable, Iterator, NamedTuple

from ...errors import EXIT_OK, EXIT_TORN, EXIT_UNSUPPORTED, UnsupportedInput, \
    combine_exit_codes
from ...format import segment as seg
from ...format.names import parse_segment_name
from ...format.scan import Run
from ...store.chunkdir import LEDGER_DIR, QUARANTINE_DIR, TMP_SUFFIX
from ...store.fs import DEFAULT_FS
from ...store.lock import LOCK_NAME
from .. import findings as F
from .. import judge as J
from ..classes import strict_code
from ..findings import Finding
from .segment_items import STEPS_BACK, SegmentItems
from ..kinds import KIND_SEGMENT, KIND_SEGMENTS, kind_of
from ..report import ChunkReport, PathReport, file_row


class SegmentFile(NamedTuple):
    number: int
    name: str
    path: str
    size: int


def list_segments(path: str, fs=DEFAULT_FS) -> tuple[list[SegmentFile], list, str]:
    e = fs.stat(path)
    if e.kind == "file":
        return [SegmentFile(parse_segment_name(e.name) or 0, e.name, path, e.size)], [], KIND_SEGMENT
    segs, foreign = [], []
    for x in fs.listdir(path):
        n = parse_segment_name(x.name)
        if n is not None and x.kind == "file":
            segs.append(SegmentFile(n, x.name, x.path, x.size))
        elif x.name not in (QUARANTINE_DIR, LOCK_NAME, LEDGER_DIR) and not x.name.endswith(TMP_SUFFIX):
            foreign.append(Finding(F.FOREIGN_FILE, EXIT_OK, "not a segment file; left alone", file=x.name))
    segs.sort(key=lambda s: (s.number, s.name))
    for a, b in zip(segs, segs[1:]):
        if a.number == b.number:  # `wal_1.log` beside `wal_00000001.log`: both read, in name order
            foreign.append(Finding(F.DUPLICATE_INDEX, EXIT_OK, f"segment number {b.number} also claimed by "
                                   f"{a.name}", file=b.name))
    return segs, foreign, KIND_SEGMENTS


def looks_like_segment_dir(path: str, fs=DEFAULT_FS) -> bool:
    return any(parse_segment_name(e.name) is not None for e in fs.listdir(path))


class SegmentWalk:
    """Iterate for (segment name, Entry) of every valid, non-duplicate entry in order; `report` is the
    PathReport once the walk is done."""

    def __init__(self, path: str, fs=DEFAULT_FS, strict: bool = False, lock_held_by_us: bool = False,
                 progress=None, seek_from: int = 0, seek_window: tuple | None = None):
        self.path, self.fs, self.strict = path, fs, strict
        # > 1: only sequences >= seek_from are wanted; the sequence index may let the walk start past the
        # segments and entries before them (ops/wal/seek.py), and the report then covers what was read
        self.seek_from, self.seek = seek_from, None
        # (since, until) ms: only entries timed in it are wanted (inspect): the walk may start past the
        # leading segments wholly outside it
        self.seek_window = seek_window
        self.progress = progress  # called with each segment's size once it is read
        self.lock_held_by_us = lock_held_by_us
        self.report: PathReport | None = None
        self.duplicates = 0
        self.torn_bytes = 0
        self.findings: list[Finding] = []

    def __iter__(self) -> Iterator[tuple[str, seg.Entry]]:
        segs, foreign, kind = list_segments(self.path, self.fs)
        if not segs:
            raise UnsupportedInput("no ADR-003 segment files (wal_NNNNNNNN.log) in this directory", self.path)
        writer = None if self.lock_held_by_us or not kind_of(kind).is_dir else self.fs.probe_writer(self.path)
        self.findings = list(foreign)  # grows as the walk goes: replay stops at the first blocking one
        self._items, self._held, self._writer = SegmentItems(writer=writer), {}, writer
        stats: list[_SegmentStats] = []
        segs, offset = self._seek(segs, kind)
        for i, s in enumerate(segs):
            st = _SegmentStats()
            with self.fs.map_read(s.path) as buf:
                yield from self._segment(s, buf, i == len(segs) - 1, st, offset if i == 0 else 0)
            stats.append(st)
            if self.progress is not None:
                self.progress(s.size)
        self._verdicts(self._items.end())
        codes: dict[str, list[int]] = {}
        for f in self.findings:
            codes.setdefault(f.file, []).append(f.exit_code)
        for s, st in zip(segs, stats):
            st.code = combine_exit_codes(codes.get(s.name, ()))
        self.report = PathReport(self.path, kind, combine_exit_codes(f.exit_code for f in self.findings), writer,
                                 self._chunk_reports(segs, stats), tuple(self.findings))

    def _seek(self, segs: list, kind: str) -> tuple[list, int]:
        """(the segments to read, the offset to start the first at): all from 0 unless the index says less."""
        from .seek import seek, seek_time

        timed = self.seek_window is not None and self.seek_window != (None, None)
        if (self.seek_from <= 1 and not timed) or not kind_of(kind).is_dir:
            return segs, 0
        files = [(s.name, s.path) for s in segs]
        if self.seek_from > 1:
            self.seek = seek(self.path, files, self.seek_from, False, self.fs)
        else:
            self.seek = seek_time(self.path, files, *self.seek_window, self.fs, is_v2=False)
        start = self.seek.start
        return (segs, 0) if start is None else (segs[start.file:], start.offset)

    def _segment(self, s: SegmentFile, buf, is_last: bool, st: "_SegmentStats",
                 off: int = 0) -> Iterator[tuple[str, seg.Entry]]:
        """One segment's frames from `off`: intact entries go to the judge through the adapter (and, accepted,
        out); damage is held with a placeholder in `findings` until the judge's verdict on it."""
        findings, items = self.findings, self._items
        end = len(buf)
        view = memoryview(buf)
        budget = [16 * end + (1 << 20)]
        while off < end:
            fr = seg.read_frame(buf, off, view)
            if fr.kind == "legacy" and off == 0:
                f = Finding(F.UNSUPPORTED, EXIT_UNSUPPORTED, "first frame is Erlang term format (what the ADR's "
                            "public implementation writes): unsupported legacy segment", s.name, 0)
                findings.append(f)
                self._held[items.barrier(s.name, f)] = (len(findings) - 1,)
                break
            if fr.entry is None:
                nxt = seg.resync(buf, off + 1, budget)
                stop = nxt if nxt is not None else end
                zeros = nxt is None and not any(view[off:end])
                st.damaged += stop - off
                k = items.damage(s.name, off, stop, fr.problem, fr.kind, nxt is not None, zeros, is_last)
                findings.append(None)  # the judge's verdict fills it in (_verdicts)
                self._held[k] = (len(findings) - 1, s, fr, off, stop, nxt is not None, is_last, zeros, end)
                if nxt is None:
                    break
                off = nxt
                continue
            e = fr.entry
            q = e.sequence
            if items.next_entry(q, e.checksum):  # continues, nothing pending: no verdict to read
                st.add(q, e.size)
                yield s.name, e
                off += e.size
                continue
            if items.duplicate(q, e.checksum):
                self.duplicates += 1
                findings.append(Finding(F.ANOMALY, strict_code(F.ANOMALY, self.strict),
                                        f"sequence {q} repeated with the same checksum: skipped",
                                        s.name, off, off + e.size, (q, q), extra={"code": "duplicate"}))
                off += e.size
                continue
            verdicts = items.entry(s.name, q, e.checksum, off, e.size)
            self._verdicts(verdicts, s, e, off)
            if verdicts[-1].continuity not in STEPS_BACK:
                st.add(q, e.size)
                yield s.name, e
            off += e.size

    def _verdicts(self, verdicts: list[J.Judged], s: SegmentFile | None = None, e: seg.Entry | None = None,
                  off: int = 0) -> None:
        """The judge's verdicts as findings: held damage fills its placeholder (with its lost range);
        the entry just fed (s, e at off) gets a sequence finding when it steps back or follows a gap."""
        findings = self.findings
        for j in verdicts:
            if type(j.item) is not Run:
                held = self._held.pop(j.index)
                f = findings[held[0]] if len(held) == 1 else self._held_damage(j, *held[1:])
                if j.lost is not None:
                    rng = j.lost
                    f = f._replace(sequence_range=f.sequence_range or rng, lost_sequence_range=rng)
                findings[held[0]] = f
                continue
            q, prev = j.item.first_seq, j.last_before
            if j.continuity in STEPS_BACK:
                cls = F.SEQUENCE_REPEAT if j.continuity == J.Continuity.REPEAT else F.SEQUENCE_REGRESSION
                f = Finding(cls, j.code,
                            f"sequence {q} after {prev} with a different checksum", s.name, off,
                            off + e.size, (q, min(prev, q)), repeated=(q, q), previous_sequence=prev)
                findings.append(f)
            elif j.sequence_break:  # a gap no damage explains
                rng = j.gap
                f = Finding(F.SEQUENCE_GAP, j.code, f"sequence gap: {rng[1] - rng[0] + 1} missing "
                            f"({rng[0]}..{rng[1]}) before seq {q}", s.name, off, None, rng,
                            missing=rng, previous_sequence=prev)
                findings.append(f)

    def _held_damage(self, j: J.Judged, s, fr, off, stop, resynced, is_last, zeros, seg_end) -> Finding:
        f = self._damage(s, fr, off, stop, resynced, j, self._writer, zeros)
        if j.code in (EXIT_TORN, EXIT_OK):
            self.torn_bytes += seg_end - off
        return f

    @staticmethod
    def _chunk_reports(segs: list[SegmentFile], stats: list["_SegmentStats"]) -> tuple[ChunkReport, ...]:
        return tuple(file_row(s.name, s.number, s.size, "ok", st.code, records=st.records, first_sequence=st.first,
                              last_sequence=st.last, valid_bytes=st.valid_bytes, damaged_bytes=st.damaged)
                     for s, st in zip(segs, stats))

    def _damage(self, s: SegmentFile, fr: seg.Frame, off: int, end: int, resynced: bool, j: J.Judged,
                writer, zeros: bool = False) -> Finding:
        """Renders the judge's verdict on a frame that does not verify (torn, in progress, its code)."""
        torn, code = bool(j.torn), j.code
        shared = dict(field=fr.kind, last_good_sequence=j.last_before)
        if resynced:
            return Finding(F.MID_LOG_DAMAGE, code, f"{fr.problem}; intact frames resume at offset {end}",
                           s.name, off, end, **shared)
        if zeros:
            # Preallocated or never-written blocks after a crash (a length of 0 is no frame at all): no
            # complete frame failed a check, so nothing here can have been acknowledged.
            shared.update(tail_kind="zero-fill", torn=torn)
            if torn:
                return Finding(F.TAIL_DAMAGE, code, f"zero-fill tail: {end - off} zero bytes to the end of the "
                               "file", s.name, off, end, **shared)
            return Finding(F.TAIL_DAMAGE, code, f"zero-fill tail: {end - off} zero bytes to the end of the "
                           "file (not the last segment: entries that followed are missing)", s.name, off, end,
                           **shared)
        tail_kind = "incomplete" if fr.kind == "incomplete" else "checksum"
        shared.update(tail_kind=tail_kind, torn=torn)
        if j.live:
            return Finding(F.IN_PROGRESS, code, f"append in progress by a live writer ({writer}): {fr.problem}",
                           s.name, off, end, extra={"writer": writer}, **shared)
        if torn:
            warn = " (a complete frame fails its check: it may have been acknowledged; repair keeps it as " \
                   "evidence)" if fr.kind != "incomplete" else ""
            return Finding(F.TAIL_DAMAGE, code, f"{tail_kind} tail: {fr.problem}{warn}", s.name, off, end,
                           **shared)
        return Finding(F.TAIL_DAMAGE, code, f"{tail_kind} tail: {fr.problem} (not the last segment: "
                       "acknowledged entries are damaged)", s.name, off, end, **shared)


class _SegmentStats:
    """What one segment's ChunkReport counts; its exit code is filled in from the findings at the end."""
    __slots__ = ("records", "valid_bytes", "damaged", "first", "last", "code")

    def __init__(self):
        self.records = self.valid_bytes = self.damaged = 0
        self.first = self.last = None
        self.code = EXIT_OK

    def add(self, sequence: int, size: int) -> None:
        self.records += 1
        self.valid_bytes += size
        self.first = sequence if self.first is None else self.first
        self.last = sequence


def verify_segments(path: str, *, strict: bool = False, fs=DEFAULT_FS, lock_held_by_us: bool = False) -> PathReport:
    walk = SegmentWalk(path, fs, strict, lock_held_by_us)
    for _ in walk:
        pass
    return walk.report


def iter_entries(path: str, fs=DEFAULT_FS, after: int = 0,
                 on_report: Callable[[PathReport], None] | None = None) -> Iterator[tuple[str, seg.Entry]]:
    walk = SegmentWalk(path, fs)
    for name, e in walk:
        if e.sequence > after:
            yield name, e
    if on_report:
        on_report(walk.report)


ENTRY_VIEW_KEYS = ("encoding", "file", "offset")


def entry_json(name: str, e: seg.Entry) -> dict:
    """The `inspect --jsonl` / `replay --jsonl` object of an entry: every key of the entry (bytes as
    {"$bytes_hex": ...}), `data` even when the entry says `params`, plus where it was read. Lossless:
    entry_from_json gives the entry back, checksum and all."""
    obj = {k: _jsonable(v) for k, v in e.value.items()}
    obj.setdefault("data", _jsonable(e.data))
    obj.update(encoding=e.encoding, file=name, offset=e.offset)
    return obj


def entry_from_json(obj: dict) -> dict:
    """The entry an `entry_json` object shows (its checksum is for the caller to check)."""
    value = {k: _from_jsonable(v) for k, v in obj.items() if k not in ENTRY_VIEW_KEYS}
    if "params" in value:
        value.pop("data", None)  # the view's copy of params
    return value


def _from_jsonable(v):
    if isinstance(v, dict):
        if len(v) == 1 and "$bytes_hex" in v and isinstance(v["$bytes_hex"], str):
            return bytes.fromhex(v["$bytes_hex"])
        return {k: _from_jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_from_jsonable(x) for x in v]
    return v


def _jsonable(v):
    if isinstance(v, bytes):
        return {"$bytes_hex": v.hex()}
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def select_entries(walk, from_seq: int | None = None, to_seq: int | None = None, operations=None,
                   limit: int | None = None, since_ms: int | None = None, until_ms: int | None = None):
    """(segment name, entry) of a walk within the sequence bounds whose operation (or its value's) is one of
    `operations`, timed in since_ms..until_ms (seg.time_ms: seconds x 1000, exactly); stops after `limit`,
    leaving the walk unfinished (its report stays None)."""
    ops = set(operations or ())
    timed = since_ms is not None or until_ms is not None
    shown = 0
    for name, e in walk:
        if (from_seq is not None and e.sequence < from_seq) or (to_seq is not None and e.sequence > to_seq):
            continue
        if ops and e.operation not in ops and e.value.get("operation") not in ops:
            continue
        if timed and not seg.in_window(seg.time_ms(e.value["timestamp"]), since_ms, until_ms):
            continue
        yield name, e
        shown += 1
        if limit is not None and shown >= limit:
            return
