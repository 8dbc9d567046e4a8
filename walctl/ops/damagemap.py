"""map: where the damage is, as data. One row per chunk (segment, checkpoint, task log) with its sequence
range and its regions; the gaps between chunks; the pieces set aside in `.quarantine/` (and, once issue
#14 lands, in the ledger) with the ranges they came from. Read-only.

Nothing is judged here: the regions are verify's findings, one region per finding, in verify's order
(`verify_path` is the one judge); this module only places them. Rendering (text, SVG) is the CLI's.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ..errors import WalctlError
from ..store.fs import DEFAULT_FS
from .classes import (
    MARK_ANOMALY, MARK_CORRUPT_TAIL, MARK_DAMAGED, MARK_GAP, MARK_IN_PROGRESS, MARK_MID_LOG, MARK_NOTE, MARK_REPEAT,
    MARK_SHORT, MARK_TORN, MARK_UNDECODABLE, MARK_UNSUPPORTED, MARK_ZERO_FILL, row,
)
from .findings import Finding
from .wal.pieces import Piece, read_pieces
from .report import PathReport
from .wal.verify import verify_path

# What a region looks like on the map: a mark per kind of trouble (the legend, in this order). The marks
# and the class each stands for are columns of the finding-class table (ops/classes.py).
MARKS = (MARK_MID_LOG, MARK_TORN, MARK_ZERO_FILL, MARK_CORRUPT_TAIL, MARK_UNDECODABLE, MARK_SHORT,
         MARK_UNSUPPORTED, MARK_IN_PROGRESS, MARK_GAP, MARK_REPEAT, MARK_ANOMALY, MARK_NOTE, MARK_DAMAGED)


def mark_of(f: Finding) -> str:
    """The map's mark for a finding: its class's, a tail's refined by what kind of tail it is."""
    mark = row(f.cls).mark
    if mark == MARK_TORN:
        if f.tail_kind == "zero-fill":
            return MARK_ZERO_FILL
        return MARK_TORN if f.torn else MARK_CORRUPT_TAIL
    if mark is not None:
        return mark
    if f.exit_code == 0:
        return MARK_NOTE
    # Other artifact kinds (segments, checkpoints, task logs) have their own classes: a torn end is
    # still torn (exit 1); anything else is shown as damage of that format, its class in the detail.
    return MARK_TORN if f.exit_code == 1 else MARK_DAMAGED


class Region(NamedTuple):
    """One verify finding, placed: `chunk` is the row it belongs to (None: the directory itself)."""
    index: int  # position in verify's findings
    chunk: int | None
    mark: str
    finding: Finding

    def to_json(self) -> dict:
        full = self.finding.to_json()  # a region repeats its finding's keys exactly as verify writes them
        d = {"mark": self.mark, "chunk": self.chunk}
        d.update((k, full[k]) for k in ("class", "severity", "exit_code", "file", "offset", "end_offset", "length",
                                        "sequence_range", "reason"))
        for key in ("lost_sequence_range", "missing", "repeated", "tail_kind", "torn", "next_good_sequence",
                    "last_good_sequence", "code"):
            if full.get(key) is not None:
                d[key] = full[key]
        return d


def whole_file(f: Finding, size: int) -> bool:
    """A finding about the file as a whole (a seal mismatch, an unreadable file): no byte range of its own,
    or one that spans every byte."""
    return f.offset is None or (f.offset <= 0 and f.end_offset is not None and f.end_offset >= size > 0)


def drawing_order(regions, size: int) -> list:
    """The regions of one row in the order a picture paints them: the widest first, so that a finding about
    the whole file (`seal-mismatch`) is the ground and the exact regions inside it (a mid-log region, a torn
    tail) are painted over it, never under it. Ties keep verify's order."""
    def extent(r) -> int:
        f = r.finding
        if whole_file(f, size):
            return size + 1
        return (f.end_offset if f.end_offset is not None else f.offset) - f.offset

    return sorted(regions, key=lambda r: -extent(r))


class Row(NamedTuple):
    file: str
    index: int
    size: int
    first_sequence: int | None
    last_sequence: int | None
    records: int
    verdict: str
    regions: tuple[int, ...]  # indices into DamageMap.regions


class Gap(NamedTuple):
    """Between two rows: sequences missing, chunk indices absent, and the pieces that hold them."""
    after: int | None  # the row before it (None: before the first row)
    missing: tuple[int, int] | None
    absent_indices: tuple[int, int] | None
    pieces: tuple[int, ...]  # indices into DamageMap.pieces whose range or source falls in the gap
    region: int | None  # the sequence-gap region, when verify reported one
    absent: tuple[int, ...] = ()  # regions about a file that belonged here and is not there (sealed, deleted)

    def to_json(self) -> dict:
        return {"after_chunk": self.after, "missing": list(self.missing) if self.missing else None,
                "absent_indices": list(self.absent_indices) if self.absent_indices else None,
                "pieces": list(self.pieces), "region": self.region, "absent_regions": list(self.absent)}


class DamageMap(NamedTuple):
    path: str
    kind: str | None
    exit_code: int
    verdict: str
    rows: tuple[Row, ...]
    regions: tuple[Region, ...]
    gaps: tuple[Gap, ...]
    pieces: tuple[Piece, ...]
    problems: tuple[str, ...]
    report: PathReport

    def to_json(self) -> dict:
        return {
            "path": self.path, "kind": self.kind, "exit_code": self.exit_code, "verdict": self.verdict,
            "chunks": [dict(r._asdict(), regions=list(r.regions)) for r in self.rows],
            "regions": [r.to_json() for r in self.regions],
            "gaps": [g.to_json() for g in self.gaps],
            "pieces": [p.to_json() for p in self.pieces],
            "problems": list(self.problems),
        }


def damage_map(path: str, *, strict: bool = False, fs=DEFAULT_FS) -> DamageMap:
    return map_from_report(verify_path(path, strict=strict, fs=fs), fs=fs)


def map_from_report(report: PathReport, fs=DEFAULT_FS) -> DamageMap:
    """Places an existing verify report (so `verify --map` scans once)."""
    rows_by_file = {c.file: i for i, c in enumerate(report.chunks)}
    regions = []
    per_row: dict[int, list[int]] = {}
    for i, f in enumerate(report.findings):
        row = rows_by_file.get(f.file) if f.file is not None else None
        regions.append(Region(i, row, mark_of(f), f))
        if row is not None:
            per_row.setdefault(row, []).append(i)
    rows = tuple(Row(c.file, c.index, c.size, c.first_sequence, c.last_sequence, c.records, c.verdict,
                     tuple(per_row.get(i, ()))) for i, c in enumerate(report.chunks))
    directory = report.path if _is_dir(report.path, fs) else os.path.dirname(report.path) or "."
    pieces: tuple[Piece, ...] = ()
    problems: tuple[str, ...] = ()
    if report.kind is not None:
        try:
            got = read_pieces(directory, fs)
            pieces, problems = got.pieces, got.problems
        except (OSError, WalctlError) as e:
            problems = (f".quarantine: {getattr(e, 'strerror', None) or e}",)
    gaps = _gaps(report, rows, regions, pieces)
    return DamageMap(report.path, report.kind, report.exit_code, report.verdict, rows, tuple(regions), gaps,
                     pieces, problems, report)


def _is_dir(path: str, fs) -> bool:
    try:
        return fs.stat(path).kind == "dir"
    except (OSError, WalctlError):
        return False


def _gaps(report: PathReport, rows, regions, pieces) -> tuple[Gap, ...]:
    """A gap after row k when verify reported a sequence gap at row k+1, or chunk indices are absent
    between k and k+1 (not a finding by itself: compaction moves chunks out). Pieces are attached to
    the gap whose missing sequences or absent indices they cover."""
    from ..format.names import parse_chunk_name

    from .kinds import kind_of

    k = kind_of(report.kind)
    is_chunk_dir = k is not None and k.indexed
    out = []
    gap_region = {r.chunk: r.index for r in regions if r.mark == MARK_GAP and r.chunk is not None}
    for k in range(-1, len(rows) - 1):
        nxt = rows[k + 1]
        region = gap_region.get(k + 1)
        missing = None
        if region is not None:
            missing = regions[region].finding.missing
        absent = None
        if is_chunk_dir:  # chunk indexes count: an index not there is a missing file
            lo = rows[k].index + 1 if k >= 0 else None
            if lo is not None and nxt.index > lo:
                absent = (lo, nxt.index - 1)
        absent_regions = tuple(r.index for r in regions if r.chunk is None and _belongs(r, absent, nxt, k < 0))
        if missing is None and absent is None and not absent_regions:
            continue
        attached = []
        for i, p in enumerate(pieces):
            idx = parse_chunk_name(p.source)
            in_idx = absent is not None and idx is not None and absent[0] <= idx <= absent[1]
            last = p.last_sequence if p.last_sequence is not None else p.first_sequence
            in_seq = (missing is not None and p.first_sequence is not None
                      and p.first_sequence <= missing[1] and last >= missing[0])
            if in_idx or in_seq:
                attached.append(i)
        out.append(Gap(k if k >= 0 else None, missing, absent, tuple(attached), region, absent_regions))
    last = len(rows) - 1
    after_all = tuple(r.index for r in regions if r.chunk is None and rows and _belongs(r, None, None, False, rows[-1]))
    if after_all:  # a file that belonged after the last one present (a deleted tail chunk): its index is absent
        top = max(parse_chunk_name(regions[i].finding.file) for i in after_all)
        out.append(Gap(last, None, (rows[-1].index + 1, top), (), None, after_all))
    return tuple(out)


def at_gap(m: "DamageMap", r: Region) -> bool:
    """Is this region drawn at a gap (a file that belonged there and is not there)?"""
    return any(r.index in g.absent for g in m.gaps)


def _belongs(r: Region, absent, nxt, first: bool, prev=None) -> bool:
    """A finding about a chunk file that is not there belongs in the gap where its index would be: between
    absent indices, before the first row (`first`, its index below `nxt`'s), or after the last (`prev`)."""
    from ..format.names import parse_chunk_name

    idx = parse_chunk_name(r.finding.file) if r.finding.file else None
    if idx is None:
        return False
    if prev is not None:
        return idx > prev.index
    if absent is not None:
        return absent[0] <= idx <= absent[1]
    return first and nxt is not None and idx < nxt.index


def save_picture(target: str, text: str, fs=DEFAULT_FS) -> str:
    """Writes a rendered map (the SVG) by durable create, confined to the directory the operator named
    for it: a crash leaves no half file, an existing file is refused (exit 7), never overwritten."""
    from ..store import durable

    target = os.path.abspath(target)
    durable.create_file(target, text.encode("utf-8"), fs.beneath(os.path.dirname(target)))
    return target
