"""archive: how the live pieces of a chunk or segment (`<ns>/live/<piece>`, uploaded by `push --follow`)
lay out its file: which pieces count, byte-exact from offset 0, and the WAL units restore lays out.
Rules: docs/format.md section 13; the manifest and its entries: ops/archive/objects.py.
"""
from __future__ import annotations

from ...errors import EXIT_SEQUENCE
from .objects import WAL_KINDS, Entry, piece_kind
from .. import classes as K
from ..findings import Finding
from .. import judge as J


def live_files(entries) -> dict:
    """file -> its live pieces in offset order, for each chunk or segment that has no sealed object:
    once a file's sealed object is archived, its pieces are stale (kept only until deleted)."""
    sealed = {e.name for e in entries if e.kind in WAL_KINDS}
    out: dict = {}
    for e in entries:
        p = e.piece
        if p is not None and p.file not in sealed:
            out.setdefault(p.file, []).append(e)
    for v in out.values():
        v.sort(key=lambda e: (e.piece.start, e.piece.end))
    return out


def contiguous_pieces(pieces: list) -> tuple[list, list[Finding]]:
    """The pieces that lay the file out from byte 0 without a hole or an overlap (byte-exact reassembly)
    and findings for the others: a hole ends the usable prefix; an overlap is a sequence finding."""
    used, findings, at = [], [], 0
    for e in pieces:
        p = e.piece
        if p.start == at and (not used or J.continues(used[-1].last_sequence, p.first_sequence) or p.is_segment):
            used.append(e)
            at = p.end
            continue
        kind = K.PIECE_OVERLAP if p.start < at else K.PIECE_HOLE
        findings.append(Finding(kind, EXIT_SEQUENCE, f"starts at byte {p.start} of {p.file}, "
                                f"{'before' if p.start < at else 'after'} the end of the pieces before it ({at})",
                                e.name, p.start, sequence_range=(p.first_sequence, p.last_sequence)))
        if p.start > at:
            break
    return used, findings


def wal_units(entries) -> list[Entry]:
    """What restore lays out: the sealed WAL objects, and for each file with live pieces and no sealed
    object, one Entry (kind of the file, sha256 "") for its contiguous pieces from byte 0."""
    entries = list(entries)
    out = [e for e in entries if e.kind in WAL_KINDS]
    for file, pieces in live_files(entries).items():
        used, _ = contiguous_pieces(pieces)
        if used:
            kind = piece_kind(used[0].piece).archive
            out.append(Entry(file, kind, sum(e.size for e in used), "", used[0].first_sequence,
                             used[-1].last_sequence, max(e.uploaded_at for e in used),
                             last_time_ms=used[-1].last_time_ms))
    return out
