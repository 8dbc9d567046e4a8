"""What the archive does with each kind's files: the functions the `archive` columns of ops/kinds.py name
(describe a file as archived, order files by number, cut a file after an event, find the last event at or
before a time). One function per kind and column, reached through the table (`Kind.load`), never through
an `if kind == ...` chain; ops/archive/objects.py and archive_{push,follow,restore}.py call them.
"""
from __future__ import annotations

import hashlib

from ...errors import EXIT_CORRUPT, EXIT_OK, EXIT_SEQUENCE, EXIT_UNSUPPORTED, WalctlError
from ...format.archive_manifest import CHECKPOINTS, CHUNKS, SEGMENTS
from ...format.names import chunk_name, parse_chunk_name, parse_segment_name, segment_name
from ...format.record import SEQUENCE
from ...store.fs import DEFAULT_FS
from .. import classes as K
from .objects import Entry
from ..findings import Finding

chunk_number, segment_number = parse_chunk_name, parse_segment_name  # (KINDS: number)
chunk_file, segment_file = chunk_name, segment_name  # (KINDS: file_name)


def v2_file_header() -> bytes:
    """The 8 bytes every V2 chunk starts with (KINDS: file_header): a first live piece carries them."""
    from ...format.v2 import encode_file_header

    return encode_file_header()


# ---- describe(path, name, size, now, md5) -> (Entry, None) | (None, Finding): sealed, so damage is corruption

def describe_chunk(path: str, name: str, size: int, now: str, md5,
                   fs=DEFAULT_FS) -> tuple[Entry | None, Finding | None]:
    """A V2 chunk: one mapping for the hashes and the scan."""
    from ...format import scan as fscan
    try:
        with fs.map_read(path) as buf:
            sha = hashlib.sha256(buf).hexdigest()
            if md5 is not None:
                md5.append(hashlib.md5(buf).hexdigest())
            stamps: list = [None]  # the last record's time: the lag `archive list` reports

            def visit(b, off, h, p_, q, nxt, payload):
                stamps[0] = h[7]
                return False

            s = fscan.scan_chunk(buf, visit)
    except WalctlError as e:
        return None, Finding(K.UNREADABLE, e.exit_code, e.reason, name)
    if s.header != fscan.HEADER_OK:
        return None, Finding(K.UNSUPPORTED, EXIT_UNSUPPORTED, f"not a V2 chunk (file header {s.header})", name)
    if s.damage:
        d = s.damage[0]
        return None, Finding(K.ARCHIVED_DAMAGE, EXIT_CORRUPT, f"{d.kind} damage at offset {d.offset}: {d.reason}",
                             name, d.offset, d.end)
    if len(s.runs) > 1:
        return None, Finding(K.SEQUENCE_GAP, EXIT_SEQUENCE, "sequences inside the chunk do not rise by one", name)
    return Entry(name, CHUNKS, size, sha, s.first_seq, s.last_seq, now, last_time_ms=stamps[0]), None


def _hashes(path: str, md5) -> str:
    from ...store.objstore import file_hashes

    sha, m = file_hashes(path, md5=md5 is not None)
    if md5 is not None:
        md5.append(m)
    return sha


def describe_checkpoint(path: str, name: str, size: int, now: str, md5) -> tuple[Entry | None, Finding | None]:
    from ..checkpoints.checkpoint import check_path

    sha = _hashes(path, md5)
    rep = check_path(path, check_canonical=False)
    if not rep.checked.ok:
        f = rep.findings[0]
        return None, f._replace(file=name)
    h = rep.header
    return Entry(name, CHECKPOINTS, size, sha, None, None, now, h.wal_sequence, h.timestamp), None


def describe_segment(path: str, name: str, size: int, now: str, md5) -> tuple[Entry | None, Finding | None]:
    from ..wal.segments import verify_segments

    sha = _hashes(path, md5)
    rep = verify_segments(path)
    bad = [f for f in rep.findings if f.exit_code not in (EXIT_OK,)]
    if bad:
        f = bad[0]
        return None, f._replace(exit_code=max(f.exit_code, EXIT_CORRUPT) if f.exit_code == 1 else f.exit_code)
    return Entry(name, SEGMENTS, size, sha, rep.first_sequence, rep.last_sequence, now), None


# ---- restore: cut(path, seq) -> offset | None; until(directory, time_ms, fs) -> sequence | None

def end_in_chunk(path: str, seq: int) -> int | None:
    """The offset right after record `seq` in one chunk, or None if it is not there."""
    from ...store.chunkread import scan_chunk_file

    found: list[int] = []

    def visit(buf, off, h, p, q, nxt, payload):
        if h[SEQUENCE] == seq:
            found.append(nxt)
            return True
        return False

    scan_chunk_file(path, visit=visit)
    return found[0] if found else None


def end_in_segment(path: str, seq: int) -> int | None:
    """The offset right after entry `seq` in one segment, or None if it is not there."""
    from ..wal.segments import SegmentWalk

    for _, e in SegmentWalk(path):
        if e.sequence == seq:
            return e.offset + e.size
    return None


def v2_until(directory: str, to_time_ms: int, fs) -> int | None:
    """The last sequence before the first record stamped after the time (ms)."""
    from ..wal.records import Record, RecordWalk

    last = None
    for item in RecordWalk(directory, payloads=False, fs=fs):  # times only: nothing inflated
        if isinstance(item, Record):
            if item.timestamp_ms > to_time_ms:
                break
            last = item.sequence
    return last


def segments_until(directory: str, to_time_ms: int, fs) -> int | None:
    """The last sequence before the first entry stamped after the time (entries stamp seconds)."""
    from ..wal.segments import iter_entries

    last = None
    for _, e in iter_entries(directory, fs):
        if float(e.value.get("timestamp", 0)) * 1000 > to_time_ms:
            break
        last = e.sequence
    return last


# ---- piece(p, name, data) -> (first/last sequences, rising by one, last time ms) | Finding: a live piece's records

def chunk_piece(p, name: str, data: bytes):
    """A piece of a V2 chunk: its records scanned as the chunk's (the file header put back before a piece
    that starts after it)."""
    from ...format import scan as fscan
    from ...format.v2 import FILE_HEADER, encode_file_header

    if p.start == 0:
        buf = data
    elif p.start >= FILE_HEADER.size:
        buf = encode_file_header() + data
    else:
        return Finding(K.ARCHIVED_DAMAGE, EXIT_CORRUPT, "a piece that starts inside the file header", name)
    stamps: list = [None]

    def visit(b, off, h, p_, q, nxt, payload):
        stamps[0] = h[7]
        return False

    s = fscan.scan_chunk(buf, visit)
    if s.header != fscan.HEADER_OK:
        return Finding(K.UNSUPPORTED, EXIT_UNSUPPORTED, f"not a V2 chunk piece (file header {s.header})", name)
    if s.damage:
        d = s.damage[0]
        return Finding(K.ARCHIVED_DAMAGE, EXIT_CORRUPT, f"{d.kind} damage at piece offset "
                       f"{d.offset - (FILE_HEADER.size if p.start else 0)}: {d.reason}", name)
    return (s.first_seq, s.last_seq), len(s.runs) == 1, stamps[0]


def segment_piece(p, name: str, data: bytes):
    """A piece of an ADR-003 segment: whole frames (an entry re-sent with a lower sequence is skipped)."""
    from ...format import segment as seg

    off, seqs, last_ms = 0, [], None
    while off < len(data):
        fr = seg.read_frame(data, off)
        if fr.entry is None:
            return Finding(K.ARCHIVED_DAMAGE, EXIT_CORRUPT, f"{fr.kind} frame at piece offset {off}: {fr.problem}",
                           name, p.start + off)
        if not seqs or fr.entry.sequence > seqs[-1]:
            seqs.append(fr.entry.sequence)
            ts = fr.entry.value.get("timestamp") if isinstance(fr.entry.value, dict) else None
            last_ms = int(float(ts) * 1000) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None
        off += fr.entry.size
    got = (seqs[0], seqs[-1]) if seqs else (None, None)
    rising = seqs == list(range(seqs[0], seqs[0] + len(seqs))) if seqs else False
    return got, rising, last_ms
