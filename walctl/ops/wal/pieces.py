"""Quarantined and compacted pieces as first-class evidence: where each came from (the manifest line says
source and offset), what it holds (a whole chunk verified as one; cut bytes decoded at their original
offset, partial headers as far as the bytes go). Read-only.

Manifest lines are untrusted data: store.quarantine.read_manifest reports a line whose names or numbers
are not plausible and never hands it on; only its lines are used here.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...format.names import name_problem
from ...format.partial import PartialRecord, decode_pieces
from ...format.v2 import FILE_MAGIC
from ...store import quarantine as q
from ...store.fs import DEFAULT_FS

MAX_PIECE_DECODE_BYTES = 1 << 20  # a cut piece is decoded from its first MiB at most
SCAN_BUDGET_BYTES = 256 << 20  # whole quarantined chunks verified for their ranges, in all; beyond: first header

# One rule for which manifest lines may be followed: store.quarantine's (read_manifest drops the others
# and reports them with their line numbers). These names are kept for the callers here.
line_problem = q.entry_problem


def plain_name(name) -> bool:
    return name_problem(name) is None


class Piece(NamedTuple):
    """One moved or cut piece of the log, from a manifest line (later also from the ledger, issue #14)."""
    name: str | None  # file name in .quarantine/ (None: evidence lives elsewhere, e.g. an archive)
    evidence: str
    action: str
    source: str
    offset: int
    length: int
    time: str | None
    reason: str | None
    present: bool  # the evidence file is in .quarantine/ now
    kind: str  # "chunk" (a whole chunk file), "cut" (bytes cut from a chunk), "missing" (not here)
    first_sequence: int | None
    last_sequence: int | None
    sequence_checked: bool  # the range comes from CRC-checked headers (else: claimed by partial headers)
    origin: str = "quarantine-manifest"

    @property
    def end(self) -> int:
        return self.offset + self.length

    def to_json(self) -> dict:
        d = dict(self._asdict())
        d["end_offset"] = self.end
        d["sequence_range"] = None if self.first_sequence is None else [self.first_sequence, self.last_sequence]
        return d


class Pieces(NamedTuple):
    pieces: tuple[Piece, ...]
    problems: tuple[str, ...]


def read_pieces(directory: str, fs=DEFAULT_FS) -> Pieces:
    """Every piece the manifest says is set aside (not restored or purged since); read_manifest has
    already set aside (and reported) the lines that cannot be trusted."""
    if fs.stat(directory).kind != "dir":
        return Pieces((), ())
    good, problems = q.read_manifest(directory, fs)
    held = q.holding_lines(good)
    seen = set(held)
    budget = [SCAN_BUDGET_BYTES]  # compaction can leave hundreds of chunks here: the map stays cheap
    out = [_piece(directory, name, e, fs, budget) for name, e in sorted(held.items(), key=lambda kv: _order(kv[1]))]
    # Pieces whose evidence went elsewhere (compaction into an archive directory): listed, not opened.
    for e in good:
        ev = e["evidence"]
        if not ev.startswith(q.QUARANTINE_DIR + "/") and e.get("action") not in q.LEAVING_ACTIONS and ev not in seen:
            seen.add(ev)
            out.append(Piece(None, ev, str(e.get("action")), e["source"], e["offset"], e["length"], e.get("time"),
                             e.get("reason"), False, "elsewhere", None, None, False))
    out.extend(ledger_pieces(directory, fs))
    out.sort(key=lambda p: (_source_order(p.source), p.offset))
    return Pieces(tuple(out), tuple(problems))


def ledger_pieces(directory: str, fs=DEFAULT_FS) -> tuple[Piece, ...]:
    """Seam for issue #14: the directory ledger (`.walctl/ledger.jsonl`) records moves, cuts and accepted
    losses with their sequence ranges. When it lands, its entries become Pieces here (origin "ledger"),
    and the map and `quarantine show` list them with no other change. Until then: none."""
    return ()


def _order(e: dict):
    return (_source_order(e["source"]), e["offset"])


def _source_order(source: str):
    from ...format.names import parse_chunk_name

    idx = parse_chunk_name(source)
    return (0, idx, source) if idx is not None else (1, 0, source)


def _piece(directory: str, name: str, e: dict, fs, budget: list | None = None) -> Piece:
    path = os.path.join(q.qdir(directory), name)
    present = fs.exists(path) and fs.stat(path).kind == "file"
    base = (name, e["evidence"], str(e.get("action")), e["source"], e["offset"], e["length"], e.get("time"),
            e.get("reason"), present)
    if not present:
        return Piece(*base, "missing", None, None, False)
    size = fs.stat(path).size
    head = fs.read_head(path, len(FILE_MAGIC))
    if head == FILE_MAGIC and e["offset"] == 0:
        if budget is not None and size > budget[0]:
            # Over budget: the first record's sequence only (header CRC checked), the last unknown.
            first = decode_pieces(fs.read_range(path, 8, 4096), 0, max_records=1)
            seq = first[0].sequence if first and first[0].header_crc_ok else None
            return Piece(*base, "chunk", seq, None, False)
        if budget is not None:
            budget[0] -= size
        from .verify import verify_path

        rep = verify_path(path, fs=fs)
        return Piece(*base, "chunk", rep.first_sequence, rep.last_sequence, True)
    recs = decode_cut(fs.read_range(path, 0, min(size, MAX_PIECE_DECODE_BYTES)))
    seqs = [r.sequence for r in recs if r.sequence is not None and r.magic_ok is not False]
    checked = bool(seqs) and all(r.header_crc_ok for r in recs if r.sequence is not None)
    return Piece(*base, "cut", min(seqs) if seqs else None, max(seqs) if seqs else None, checked)


def decode_cut(data: bytes) -> list[PartialRecord]:
    return decode_pieces(data, 0)


class PieceView(NamedTuple):
    """A cut piece read at its original offset: each record's annotated fields and the hex lines."""
    piece: Piece
    size: int
    records: tuple  # (start offset in the source, tuple of hexdump Fields)
    lines: tuple[str, ...]
    shown_bytes: int


def view_cut(directory: str, piece: Piece, max_bytes: int = 4096, fs=DEFAULT_FS) -> PieceView:
    """The bytes of a cut piece as they were in their chunk: offsets are the source's offsets."""
    return _view(os.path.join(q.qdir(directory), piece.name), piece, piece.offset, max_bytes, fs)


def view_unrecorded(directory: str, name: str, max_bytes: int = 4096, fs=DEFAULT_FS) -> PieceView:
    """A file in .quarantine/ that no manifest line describes: decoded from its own offset 0."""
    if not plain_name(name):
        from ...errors import UsageError

        raise UsageError(f"{name!r} is not a plain file name", directory)
    return _view(os.path.join(q.qdir(directory), name), None, 0, max_bytes, fs)


def _view(path: str, piece: Piece | None, base: int, max_bytes: int, fs) -> PieceView:
    from ...format.hexdump import hex_lines, record_fields

    size = fs.stat(path).size
    data = fs.read_range(path, 0, min(size, MAX_PIECE_DECODE_BYTES))
    recs = []
    for r in decode_cut(data):
        recs.append((base + r.offset, tuple(record_fields(data, r.offset, base=base))))
    shown = min(len(data), max_bytes)
    lines = tuple(hex_lines(data[:shown], base, base + shown, base=base))
    return PieceView(piece, size, tuple(recs), lines, shown)


def quarantined_piece_target(path: str, fs=DEFAULT_FS) -> tuple[str, str] | None:
    """(directory, name) when `path` is a file in DIR/.quarantine/ that is not a whole chunk (a whole
    chunk is inspected as any chunk is)."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.basename(parent) != q.QUARANTINE_DIR or os.path.basename(path) == q.MANIFEST:
        return None
    try:
        if fs.stat(path).kind != "file" or fs.read_head(path, len(FILE_MAGIC)) == FILE_MAGIC:
            return None
    except OSError:
        return None
    return os.path.dirname(parent), os.path.basename(path)


def find_piece(directory: str, name: str, fs=DEFAULT_FS) -> tuple[Piece | None, tuple[str, ...]]:
    ps = read_pieces(directory, fs)
    return next((p for p in ps.pieces if p.name == name), None), ps.problems
