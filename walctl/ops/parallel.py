"""Scanning chunks in forked worker processes (--jobs).

Plain fork + pipes rather than concurrent.futures: importing the process pool costs ~30 ms, a large
share of a 2-process verify of a few hundred MB. Chunks are dealt to workers largest first (each to
the least loaded one); each worker streams back one pickled (position, outcome) per chunk, so the
parent can show progress and notice a worker that died.
"""
from __future__ import annotations

import os
import pickle
import selectors
import struct

from ..errors import EnvironmentProblem
from ..store.chunkread import ChunkOutcome, scan_chunk_file
from ..store.fs import DEFAULT_FS

_LEN = struct.Struct(">Q")


def deal(sizes: list[int], workers: int) -> list[list[int]]:
    """Positions per worker: longest-processing-time-first greedy partition."""
    loads = [0] * workers
    plan: list[list[int]] = [[] for _ in range(workers)]
    for pos in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        w = loads.index(min(loads))
        plan[w].append(pos)
        loads[w] += sizes[pos]
    return plan


def parallel_scan(paths: list[str], sizes: list[int], jobs: int, progress=None, expects=None,
                  fs=DEFAULT_FS) -> list[ChunkOutcome]:
    """`fs`: a confined file system's workers read through the target's descriptor, which they inherit."""
    expects = expects or [None] * len(paths)
    plan = [p for p in deal(sizes, jobs) if p]
    out: list[ChunkOutcome | None] = [None] * len(paths)
    sel = selectors.DefaultSelector()
    children = []
    for positions in plan:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # worker: scan, stream results, never return into the caller's code
            code = 0
            try:
                os.close(r)
                for pos in positions:
                    blob = pickle.dumps((pos, scan_chunk_file(paths[pos], fs, expect=expects[pos])), pickle.HIGHEST_PROTOCOL)
                    _write_all(w, _LEN.pack(len(blob)) + blob)
            except BaseException:  # noqa: BLE001 - the parent reports the missing chunks
                code = 1
            finally:
                os._exit(code)
        os.close(w)
        children.append(pid)
        sel.register(r, selectors.EVENT_READ, bytearray())
    open_fds = len(plan)
    while open_fds:
        for key, _ in sel.select():
            data = os.read(key.fd, 1 << 20)
            if not data:
                sel.unregister(key.fd)
                os.close(key.fd)
                open_fds -= 1
                continue
            buf = key.data
            buf += data
            while len(buf) >= _LEN.size:
                (n,) = _LEN.unpack_from(buf)
                if len(buf) < _LEN.size + n:
                    break
                pos, outcome = pickle.loads(bytes(buf[_LEN.size:_LEN.size + n]))
                del buf[:_LEN.size + n]
                out[pos] = outcome
                if progress:
                    progress(sizes[pos])
    sel.close()
    for pid in children:
        os.waitpid(pid, 0)
    return [o if o is not None else ChunkOutcome(None, EnvironmentProblem("worker process died before "
                                                                          "reporting this chunk", paths[i]))
            for i, o in enumerate(out)]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
