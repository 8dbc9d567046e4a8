"""Reads one chunk file through the seam and scans it. The outcome pickles, so --jobs workers can
send it back."""
from __future__ import annotations

from typing import NamedTuple

from ..errors import WalctlError
from ..format.scan import ChunkScan, scan_chunk
from .fs import DEFAULT_FS


class ChunkOutcome(NamedTuple):
    scan: ChunkScan | None
    error: WalctlError | None = None


def scan_chunk_file(path: str, fs=DEFAULT_FS, visit=None, *, materialize: bool = True) -> ChunkOutcome:
    try:
        with fs.map_read(path) as buf:
            return ChunkOutcome(scan_chunk(buf, visit, materialize=materialize))
    except WalctlError as e:
        return ChunkOutcome(None, e)
