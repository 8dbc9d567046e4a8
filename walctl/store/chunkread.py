"""Reads one chunk file through the seam and scans it. Picklable in and out, so --jobs can run it
in worker processes."""
from __future__ import annotations

from typing import NamedTuple

from ..errors import WalctlError
from ..format.scan import ChunkScan, scan_chunk
from .fs import DEFAULT_FS


class ChunkOutcome(NamedTuple):
    scan: ChunkScan | None
    error: WalctlError | None = None


def scan_chunk_file(path: str, fs=DEFAULT_FS, visit=None) -> ChunkOutcome:
    try:
        with fs.map_read(path) as buf:
            return ChunkOutcome(scan_chunk(buf, visit))
    except WalctlError as e:
        return ChunkOutcome(None, e)


def scan_chunk_file_default(path: str) -> ChunkOutcome:
    """Module-level entry for worker processes (they use the real file system)."""
    return scan_chunk_file(path)
