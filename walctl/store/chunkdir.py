"""Lists a V2 chunk directory: chunks in numeric order, and everything else it holds."""
from __future__ import annotations

from typing import NamedTuple

from ..format.names import LEDGER_DIR, QUARANTINE_DIR, TMP_SUFFIX, parse_chunk_name
from .fs import DEFAULT_FS
from .lock import LOCK_NAME

CHECKPOINT_META = "checkpoint.meta"  # Spector's HWM file: validated by verify, not foreign


class ChunkFile(NamedTuple):
    index: int
    name: str
    path: str
    kind: str
    size: int


class ChunkListing(NamedTuple):
    path: str
    chunks: list  # ChunkFile, in numeric order
    foreign: list  # Entry: anything that is not a chunk and not ours
    ignored: list  # names: *.tmp, .quarantine/, .walctl/, checkpoint.meta, the lock file


def list_chunks(directory: str, fs=DEFAULT_FS) -> ChunkListing:
    listing = ChunkListing(directory, [], [], [])
    for e in fs.listdir(directory):
        index = parse_chunk_name(e.name)
        if index is not None:
            listing.chunks.append(ChunkFile(index, e.name, e.path, e.kind, e.size))
        elif e.name in (QUARANTINE_DIR, LOCK_NAME, LEDGER_DIR, CHECKPOINT_META) or e.name.endswith(TMP_SUFFIX):
            listing.ignored.append(e.name)
        else:
            listing.foreign.append(e)
    listing.chunks.sort(key=lambda c: (c.index, c.name))
    listing.foreign.sort(key=lambda e: e.name)
    return listing


def looks_like_chunk_dir(directory: str, fs=DEFAULT_FS) -> bool:
    return any(parse_chunk_name(e.name) is not None for e in fs.listdir(directory))
