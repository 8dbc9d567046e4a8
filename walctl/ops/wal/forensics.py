"""Forensic views: the annotated bytes around an offset of a chunk, every damaged region of a directory,
the record holding a sequence. Read-only."""
from __future__ import annotations

import os
from typing import NamedTuple

from ...errors import EXIT_OK, UsageError, combine_exit_codes
from ...format import scan as fscan
from ...format.hexdump import Field, file_header_fields, hex_lines, record_fields
from ...format.v2 import FILE_HEADER, RECORD_HEADER
from ...store.fs import DEFAULT_FS
from .. import findings as F
from ..kinds import kind_of


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
    [offset - context, offset + context], and dumps those bytes. An offset outside the file is a usage
    error: there are no bytes to show."""
    size = fs.stat(path).size
    if offset >= size:
        raise UsageError(f"--around {offset} is outside the file ({size} bytes: offsets 0..{size - 1})"
                         if size else "--around: the file is empty", path)
    return window(path, max(0, offset - context), offset + context + 1, offset, fs)


def window(path: str, lo: int, hi: int, mark: int | None = None, fs=DEFAULT_FS, annotate: bool = True,
           from_record: bool = False) -> AroundView:
    """Annotates every record whose header overlaps file bytes [lo, hi) and dumps them; `mark` is
    bracketed in the dump. `annotate=False`: bytes only (a file that is not a V2 chunk). `from_record`:
    `lo` is a record boundary known to be intact, and the scan starts there instead of at the file's start."""
    with fs.map_read(path) as buf:
        size = len(buf)
        lo, hi = max(0, min(lo, size)), max(0, min(hi, size))
        offset = lo if mark is None else mark
        note = None
        if not annotate:
            lines = tuple(hex_lines(buf, lo, hi, mark=mark if mark is not None and mark < size else None))
            return AroundView(path, size, offset, lo, hi, (), lines, None)
        starts: list[tuple[int, bool]] = []

        def visit(_buf, off, h, p, q, nxt, payload):
            if off < hi and nxt > lo:
                starts.append((off, False))
            return off >= hi

        scan = fscan.scan_chunk(buf, visit) if not (from_record and lo >= fscan.LOOK_BEHIND) else \
            fscan.ChunkScan(size, fscan.HEADER_OK, items=tuple(fscan.scan_records(buf, lo, visit)))
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
        lines = tuple(hex_lines(buf, lo, hi, mark=mark if mark is not None and mark < size else None))
    return AroundView(path, size, offset, lo, hi, tuple(anns), lines, note)


MAX_REGION_BYTES = 512  # of a large damaged region (a zero-filled tail), the start and the end are shown


class DamagedView(NamedTuple):
    """One damaged region of a directory, as the investigator needs it: what verify said, what was lost,
    what resumes after it, and the annotated bytes (the start, and for a long region also its end)."""
    finding: object  # ops.findings.Finding
    path: str  # the chunk file
    lost: str
    resumes: str
    views: tuple[AroundView, ...]
    hidden_bytes: int  # damaged bytes between the two views, not dumped


def damaged_views(path: str, context: int = 32, fs=DEFAULT_FS, *,
                  strict: bool = False) -> tuple[object, tuple[DamagedView, ...]]:
    """(verify's report, one view per finding that is not clean, in verify's order). A finding without a
    file offset (an unreadable chunk) gets no bytes, only its text. `strict`: as verify --strict."""
    from .verify import verify_path

    from ..kinds import kind_of

    report = verify_path(path, fs=fs, strict=strict)
    is_dir = fs.stat(path).kind == "dir"
    v2 = report.kind is not None and kind_of(report.kind).annotated  # other formats: the bytes, without V2 record annotations
    out = []
    for f in report.findings:
        if f.exit_code == 0:
            continue
        chunk = os.path.join(path, f.file) if is_dir and f.file else path
        views: list[AroundView] = []
        hidden = 0
        if f.offset is not None and f.file and fs.exists(chunk) and fs.stat(chunk).kind == "file":
            end = f.end_offset if f.end_offset is not None else f.offset
            size = fs.stat(chunk).size
            tail = RECORD_HEADER.size  # enough to show the header of what resumes
            if end - f.offset <= MAX_REGION_BYTES:
                views.append(window(chunk, f.offset - context, min(size, end + max(context, tail)), f.offset, fs, v2))
            else:
                views.append(window(chunk, f.offset - context, f.offset + MAX_REGION_BYTES // 2, f.offset, fs, v2))
                views.append(window(chunk, end - MAX_REGION_BYTES // 4, min(size, end + max(context, tail)), None, fs,
                                    v2))
                hidden = max(0, (end - MAX_REGION_BYTES // 4) - (f.offset + MAX_REGION_BYTES // 2))
        out.append(DamagedView(f, chunk, _lost_text(f), _resumes_text(f, report), tuple(views), hidden))
    return report, tuple(out)


def _rng(r) -> str:
    a, b = r
    return str(a) if a == b else f"{a}..{b}"


def _seqs(r) -> str:
    return f"sequence {r[0]}" if r[0] == r[1] else f"sequences {r[0]}..{r[1]}"


def _lost_text(f) -> str:
    bits = []
    if f.offset is not None and f.end_offset is not None and f.end_offset > f.offset:
        bits.append(f"{f.end_offset - f.offset} bytes at offsets {f.offset}..{f.end_offset}")
    if f.lost_sequence_range:
        bits.append(_seqs(f.lost_sequence_range))
    elif f.cls == F.SEALED_MISSING and f.sequence_range:  # the whole chunk, as its seal describes it
        a, b = f.sequence_range
        records = f.extra.get("records")
        held = f" in {records} records" if records is not None else ""
        bits.append(f"{b - a + 1} {'sequence' if a == b else 'sequences'} ({_rng(f.sequence_range)}){held}: the "
                    f"whole chunk, as ledger line {f.extra.get('ledger_line')} sealed it (not in this directory)")
    elif f.missing:
        bits.append(f"{_seqs(f.missing)} (not in this directory)")
    elif f.repeated:
        bits.append(f"nothing lost; sequences {_rng(f.repeated)} appear twice")
    elif f.claimed_sequence is not None:
        bits.append(f"the record claiming sequence {f.claimed_sequence}")
    if f.last_good_sequence is not None:
        bits.append(f"last good sequence before it {f.last_good_sequence}")
    return "; ".join(bits) or "-"


def _resumes_text(f, report) -> str:
    x = f.extra
    if x.get("next_good_sequence") is not None:
        n = x.get("salvageable_records")
        rng = x.get("salvageable_sequence_range")
        more = f" ({n} records, seq {_rng(rng)}, in this chunk)" if n and rng else ""
        return f"intact record at offset {f.end_offset}, sequence {x['next_good_sequence']}{more}"
    if f.previous_sequence is not None:
        return f"this record, after sequence {f.previous_sequence}"
    names = [c.file for c in report.chunks]
    later = []
    if f.file in names:
        later = [c for c in report.chunks[names.index(f.file) + 1:] if c.first_sequence is not None]
    elif f.sequence_range:  # a chunk that is not there (sealed, then deleted): what follows its range
        later = [c for c in report.chunks if c.first_sequence is not None and c.first_sequence > f.sequence_range[1]]
    if later:
        after = f" (right after {f.sequence_range[1]})" if f.file not in names and \
            later[0].first_sequence == f.sequence_range[1] + 1 else ""
        return f"{later[0].file}, sequence {later[0].first_sequence}{after}"
    return "nothing after it in this directory"


class SequenceView(NamedTuple):
    sequence: int
    path: str  # the chunk file
    record: object | None  # ops.wal.records.Record, when a valid record carries the sequence
    view: AroundView | None
    where: str  # when no valid record carries it: the damage or piece that does, or why not
    exit_code: int = EXIT_OK  # verify's code for what became of it: that of the finding that lost, missed or accepted it
    index: tuple = ()  # what was wrong with the sequence index the record was sought through (warnings)


def _v2_record(path: str, sequence: int, fs, is_dir: bool) -> SequenceView | None:
    """The valid V2 record carrying `sequence`, sought through the index, with its annotated bytes."""
    from .records import RecordFilter, RecordWalk

    walk = RecordWalk(path, RecordFilter(from_seq=sequence, to_seq=sequence, limit=1), fs=fs, seek_from=sequence)
    rec = next((r for r in walk if not hasattr(r, "damage")), None)
    if rec is None:
        return None
    chunk = os.path.join(path, rec.file) if is_dir else path
    view = window(chunk, rec.offset, rec.offset + rec.size, rec.offset, fs, from_record=True)
    return SequenceView(sequence, chunk, rec, view, f"{rec.file} offset {rec.offset}",
                        index=walk.seek.findings if walk.seek else ())


def _segment_entry(path: str, sequence: int, fs) -> SequenceView | None:
    """The ADR-003 entry carrying `sequence`, sought through the index, with its frame's bytes (None: no
    intact entry carries it)."""
    from .segments import SegmentWalk

    walk = SegmentWalk(path, fs, seek_from=sequence)
    for name, e in walk:
        if e.sequence == sequence:
            seg_path = os.path.join(path, name) if fs.stat(path).kind == "dir" else path
            view = window(seg_path, e.offset, e.offset + e.size, e.offset, fs, annotate=False)
            return SequenceView(sequence, seg_path, e, view, f"{name} offset {e.offset}",
                                index=walk.seek.findings if walk.seek else ())
        if e.sequence > sequence and not walk.findings:
            break  # past it, nothing to account for yet: verify says what became of it
    return None


def find_sequence(path: str, sequence: int, fs=DEFAULT_FS, *, strict: bool = False) -> SequenceView:
    """The bytes of the record carrying `sequence` in a directory (or chunk); when no valid record does,
    the damaged region that lost it, the ledger line that accepted its loss, or the quarantined piece that
    holds it, with the exit code verify (`strict`: verify --strict) gives the finding that accounts for it."""
    from .verify import detect_kind, verify_path

    is_dir = fs.stat(path).kind == "dir"
    kind = detect_kind(path, fs)
    if kind_of(kind).replay == "wal.replay:replay_segments":  # ADR-003 entries
        found = _segment_entry(path, sequence, fs)
        if found is not None:
            return found
    else:
        found = _v2_record(path, sequence, fs, is_dir)
        if found is not None:
            return found

    report = verify_path(path, fs=fs, strict=strict)

    def covers(f) -> bool:
        rng = f.lost_or_missing or (f.sequence_range if f.cls == F.SEALED_MISSING else None)  # a chunk's range
        return bool(rng and rng[0] <= sequence <= rng[1]) or f.claimed_sequence == sequence

    covering = [f for f in report.findings if covers(f)]
    v2 = report.kind is not None and kind_of(report.kind).annotated
    # Damage that lost it first; then the ledger's acceptance of its loss; then a piece set aside that
    # holds it; a bare gap says least.
    for f in covering:
        if f.cls not in (F.SEQUENCE_GAP, F.ACCEPTED_LOSS):
            chunk = os.path.join(path, f.file) if is_dir and f.file else path
            view = None
            if f.offset is not None and fs.exists(chunk):
                view = window(chunk, f.offset, min(f.end_offset or f.offset + 64, f.offset + MAX_REGION_BYTES),
                              f.offset, fs, v2)
            return SequenceView(sequence, chunk, None, view, f"lost: {f.cls} in {f.file}: {f.one_line()}",
                                f.exit_code)
    for f in covering:
        if f.cls == F.ACCEPTED_LOSS:
            return SequenceView(sequence, path, None, None, _accepted_text(f), f.exit_code)
    code = combine_exit_codes(f.exit_code for f in covering)  # nothing covers it: verify misses nothing there
    if is_dir:
        from .pieces import read_pieces

        for p in read_pieces(path, fs).pieces:
            if p.first_sequence is not None and p.first_sequence <= sequence <= (p.last_sequence or p.first_sequence):
                from ..advice import cmd

                look = cmd("inspect", os.path.join(path, p.evidence), *(("--seq", sequence) if p.kind == "chunk" else ()))
                return SequenceView(sequence, path, None, None,
                                    f"set aside: {p.evidence} ({p.action} of {p.source}, bytes {p.offset}..{p.end}); "
                                    f"see: {look}", code)
    if covering:
        return SequenceView(sequence, path, None, None, f"missing: {covering[0].one_line()}", code)
    first, last = report.first_sequence, report.last_sequence
    raise UsageError(f"--seq {sequence}: no record, damage or quarantined piece carries it "
                     f"(this WAL holds sequences {first}..{last})", path)


def _accepted_text(f) -> str:
    """An accepted loss as the ledger recorded it: which sequences, ledger line, when and why."""
    by = f.extra.get("accepted_by") or {}
    a, b = f.lost_or_missing or f.sequence_range
    return (f"accepted as lost: {_seqs((a, b))} (ledger line {by.get('ledger_line')}, {by.get('time')}: "
            f"{by.get('reason')}); verify warns of it (an error under --strict)")


def findings_at(report, chunk: str, offset: int) -> tuple:
    """verify's findings (of `report`) about byte `offset` of the chunk named `chunk`: those whose damaged
    range [offset, end_offset) holds it, or that name exactly that offset (a gap at the record after it)."""
    out = []
    for f in report.findings:
        if f.file != chunk or f.offset is None:
            continue
        end = f.end_offset if f.end_offset is not None and f.end_offset > f.offset else f.offset + 1
        if f.offset <= offset < end:
            out.append(f)
    return tuple(out)


def around_findings(verify_target: str, chunk_path: str, offset: int, fs=DEFAULT_FS, *,
                    strict: bool = False) -> tuple[int, tuple]:
    """(exit code, findings) of what verify (`strict`: --strict) reports at `offset` of `chunk_path`, judged
    where the operator pointed: the directory `verify_target` (CHUNK:OFFSET) or the chunk file itself. 0
    when verify finds nothing there, as inspect --damaged gives each region the code of its finding."""
    from .verify import verify_path

    report = verify_path(verify_target, fs=fs, strict=strict)
    found = findings_at(report, os.path.basename(chunk_path), offset)
    return combine_exit_codes(f.exit_code for f in found), found


def parse_around(spec: str) -> tuple[str | None, int]:
    """`OFFSET` or `CHUNK:OFFSET` -> (chunk name or None, offset). Usage errors for anything else."""
    chunk, sep, num = spec.rpartition(":")
    if not (num.isascii() and num.isdigit()) or len(num) > 19:  # ASCII digits only
        raise UsageError(f"--around {spec!r}: expected OFFSET or CHUNK:OFFSET with a byte offset >= 0")
    if sep and (not chunk or "/" in chunk or chunk in (".", "..")):
        raise UsageError(f"--around {spec!r}: CHUNK must be a file name in the directory")
    return (chunk if sep else None), int(num)
