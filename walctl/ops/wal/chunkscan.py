"""Scanning a directory's chunk files, in this process or in --jobs workers (ops/parallel.py), and how
many workers a verify uses when the operator does not say.

A sealed chunk is hashed instead of scanned (store/chunkread.py). Hashing is faster than scanning, but it
is the same kind of work: one core per chunk at a time, so a sealed directory gains from the second core
exactly as an unsealed one does (issue #27: counting a hash as half a scan left a sealed 256 MB directory
on one process while its unsealed copy got two).
"""
from __future__ import annotations

import os
from typing import Callable

from ...errors import UnsupportedInput
from ...store.chunkdir import ChunkFile
from ...store.chunkread import ChunkOutcome, scan_chunk_file
from ...store.fs import DEFAULT_FS

AUTO_JOBS_BYTES = 256 << 20  # this much to read is spread over one process per core (forks cost ~10 ms)


def auto_jobs(jobs: int | None, chunks, expects, order=None) -> int:
    """`jobs` when given; else one per core when the bytes to read (the chunks in `order`, default all)
    reach AUTO_JOBS_BYTES. A chunk --quick may trust by its stat data is not counted (nothing to read)."""
    if jobs is not None:
        return jobs
    expects = expects or [None] * len(chunks)
    positions = range(len(chunks)) if order is None else order
    work = sum(chunks[i].size for i in positions if expects[i] is None or not expects[i].quick)
    return (os.cpu_count() or 1) if work >= AUTO_JOBS_BYTES else 1


def not_a_file(c: ChunkFile) -> ChunkOutcome:
    """The one judgement of an entry with a chunk's name that is not a regular file (a directory, a FIFO,
    a dangling link): unsupported (exit 5) for verify, inspect, stats, map and replay alike."""
    return ChunkOutcome(None, UnsupportedInput("not a regular file", c.path))


def scan_chunks(chunks: list[ChunkFile], *, jobs: int = 1, fs=DEFAULT_FS,
                progress: Callable[[int], None] | None = None, expects=None, order=None,
                stop=None) -> list[ChunkOutcome | None]:
    """One outcome per chunk. `order`: the positions to read, in this order (default: all); `stop(pos)`:
    asked before each one is started, True to start nothing more. A position not read is None."""
    expects = expects or [None] * len(chunks)
    order = list(range(len(chunks))) if order is None else list(order)
    out: list[ChunkOutcome | None] = [None] * len(chunks)
    readable = [i for i in order if chunks[i].kind == "file"]
    if jobs > 1 and len(readable) > 1 and fs.worker_processes and hasattr(os, "fork"):
        from ..parallel import parallel_scan

        # each worker is handed a chunk at a time, so a deadline stops them all at a chunk boundary
        got = parallel_scan([chunks[i].path for i in readable], [chunks[i].size for i in readable], jobs, progress,
                            [expects[i] for i in readable], fs, order=_largest_first(chunks, readable, stop),
                            stop=None if stop is None else (lambda k: stop(readable[k])))
        for k, i in enumerate(readable):
            out[i] = got[k]
    else:
        for i in readable:
            if stop is not None and stop(i):
                break
            out[i] = scan_chunk_file(chunks[i].path, fs, expect=expects[i])
            if progress:
                progress(chunks[i].size)
    for i in order:
        if chunks[i].kind != "file":
            out[i] = not_a_file(chunks[i])
    return out


def _largest_first(chunks, readable, stop) -> list[int]:
    """Without a deadline the order is free: largest first balances the workers. With one, the caller's
    order stands (what was read must be a prefix of it)."""
    if stop is not None:
        return list(range(len(readable)))
    return sorted(range(len(readable)), key=lambda k: -chunks[readable[k]].size)
