"""Reads one chunk file through the seam and scans it. The outcome pickles, so --jobs workers can
send it back."""
from __future__ import annotations

from typing import NamedTuple

from ..errors import WalctlError
from ..format.digest import sha256_hex
from ..format.scan import ChunkScan, Run, clean_scan, scan_chunk
from ..format.v2 import FILE_HEADER
from .fs import DEFAULT_FS


SEAL_VERIFIED, SEAL_TRUSTED, SEAL_MISMATCH = "verified", "trusted", "mismatch"


class Expect(NamedTuple):
    """A ledger seal for this file: what its bytes hash to and what they hold (records rise by one)."""
    size: int
    sha256: str
    first_seq: int | None
    last_seq: int | None
    records: int
    stat: dict  # ino, mtime_ns
    quick: bool  # trust unchanged stat data without hashing (verify --quick)


class ChunkOutcome(NamedTuple):
    scan: ChunkScan | None
    error: WalctlError | None = None
    seal: tuple | None = None  # (SEAL_*, computed sha256 or None) when the file was sealed


def scan_chunk_file(path: str, fs=DEFAULT_FS, visit=None, expect: Expect | None = None, start: int = 0) -> ChunkOutcome:
    """Scans the chunk; a sealed one (`expect`) is hashed instead, and scanned only when its hash differs.
    `start` > 0: only the records from that record boundary on (a reader the sequence index let skip the
    rest, ops/wal/seek.py); the scan then says nothing of the bytes before it."""
    try:
        if start:
            with fs.map_read(path) as buf:
                return ChunkOutcome(_scan_from(buf, start, visit))
        if expect is not None and expect.quick and _stat_matches(path, expect, fs):
            return ChunkOutcome(sealed_scan(expect), None, (SEAL_TRUSTED, None))
        with fs.map_read(path) as buf:
            if expect is None:
                return ChunkOutcome(scan_chunk(buf, visit))
            sha = sha256_hex(buf)
            if sha == expect.sha256 and len(buf) == expect.size:
                return ChunkOutcome(sealed_scan(expect), None, (SEAL_VERIFIED, sha))
            return ChunkOutcome(scan_chunk(buf, visit), None, (SEAL_MISMATCH, sha))
    except WalctlError as e:
        return ChunkOutcome(None, e)


def _scan_from(buf, start: int, visit) -> ChunkScan:
    from ..format.scan import HEADER_OK, scan_records
    from ..format.v2 import FILE_MAGIC, FORMAT_VERSION

    items = tuple(scan_records(buf, start, visit))
    runs = [i for i in items if type(i) is Run]
    return ChunkScan(len(buf), HEADER_OK, FORMAT_VERSION, FILE_MAGIC, items, sum(r.count for r in runs),
                     sum(r.end - r.offset for r in runs))


def _stat_matches(path: str, expect: Expect, fs) -> bool:
    ident = getattr(fs, "identity", None)
    if ident is None or not expect.stat.get("ino"):
        return False
    try:
        ino, mtime_ns = ident(path)
        return fs.stat(path).size == expect.size and (ino, mtime_ns) == (expect.stat["ino"], expect.stat["mtime_ns"])
    except WalctlError:
        return False


def sealed_scan(expect: Expect) -> ChunkScan:
    """What a scan of the sealed bytes found when they were sealed: a clean chunk, one run."""
    if expect.first_seq is None:
        return clean_scan(expect.size, ())
    return clean_scan(expect.size, (Run(expect.first_seq, expect.last_seq, expect.records, FILE_HEADER.size,
                                        expect.size),))


def usable_seal(seal_fields: dict) -> bool:
    """A seal the scan can stand in for: a V2 chunk whose records rise by one with no gap."""
    f, l, n = seal_fields.get("first_seq"), seal_fields.get("last_seq"), seal_fields.get("records")
    if f is None or l is None:
        return n == 0
    return n == l - f + 1 and n > 0
