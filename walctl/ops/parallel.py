"""Scanning (or hashing) chunks in forked worker processes (--jobs).

Plain fork + pipes rather than concurrent.futures: importing the process pool costs ~30 ms, a large
share of a 2-process verify of a few hundred MB. The parent hands out one chunk at a time to whichever
worker is free, in the order it was given (largest first by default: the longest-processing-time rule,
here decided as workers finish instead of up front), and each worker streams back one pickled outcome
per chunk. Handing out from the parent is what lets a deadline (verify --max-duration) stop cleanly: a
chunk is either handed out and finished, or never started, and the chunks started are always a prefix
of the order. A worker that dies is noticed (its pipe closes) and its chunk reported as not scanned.
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
_POS = struct.Struct(">q")  # a position to scan; -1: no more work, exit
_STOP = -1


def largest_first(sizes: list[int]) -> list[int]:
    return sorted(range(len(sizes)), key=lambda i: -sizes[i])


def parallel_scan(paths: list[str], sizes: list[int], jobs: int, progress=None, expects=None,
                  fs=DEFAULT_FS, order: list[int] | None = None, stop=None) -> list[ChunkOutcome | None]:
    """Outcomes by position. `order`: the positions to scan, in the order to hand them out (default: all,
    largest first); `stop(k)`: asked before position k is handed out, True to start nothing more (what it
    kept from being handed out stays None). `fs`: a confined file system's workers read through the
    target's descriptor, which they inherit."""
    expects = expects or [None] * len(paths)
    todo = list(largest_first(sizes) if order is None else order)
    todo.reverse()  # popped from the end
    out: list[ChunkOutcome | None] = [None] * len(paths)
    sel = selectors.DefaultSelector()
    workers: list[list] = []
    for _ in range(max(1, min(jobs, len(todo)))):
        workers.append(_fork_worker(paths, expects, fs, [fd for w in workers for fd in w[1:] if fd is not None]))
        sel.register(workers[-1][1], selectors.EVENT_READ, (workers[-1], bytearray()))
    busy: dict[int, int] = {}  # result fd -> the position its worker is scanning
    stopped = [False]
    for w in workers:
        _hand_out(w, todo, busy, stop, stopped)
    while sel.get_map():
        for key, _ in sel.select():
            w, buf = key.data
            data = os.read(key.fd, 1 << 20)
            if not data:  # the worker is gone (done, or died): a chunk in its hands stays unreported
                lost = busy.pop(key.fd, None)
                if lost is not None:
                    out[lost] = ChunkOutcome(None, EnvironmentProblem("worker process died before reporting "
                                                                      "this chunk", paths[lost]))
                sel.unregister(key.fd)
                os.close(key.fd)
                _close_quietly(w[2])
                w[2] = None
                continue
            buf += data
            while len(buf) >= _LEN.size and len(buf) >= _LEN.size + _LEN.unpack_from(buf)[0]:
                (n,) = _LEN.unpack_from(buf)
                pos, outcome = pickle.loads(bytes(buf[_LEN.size:_LEN.size + n]))
                del buf[:_LEN.size + n]
                out[pos] = outcome
                busy.pop(key.fd, None)
                if progress:
                    progress(sizes[pos])
                _hand_out(w, todo, busy, stop, stopped)
    sel.close()
    for w in workers:
        os.waitpid(w[0], 0)
    if not stopped[0]:  # left over without a stop: the workers died first, so it was not scanned either
        for pos in todo:
            out[pos] = ChunkOutcome(None, EnvironmentProblem("worker process died before reporting this chunk",
                                                             paths[pos]))
    return out


def _hand_out(w: list, todo: list[int], busy: dict, stop, stopped: list) -> None:
    """The next position to this worker, or the word to exit (nothing left, or `stop()` says so)."""
    _pid, rfd, wfd = w
    if wfd is None:
        return
    if todo and not stopped[0]:
        if stop is not None and stop(todo[-1]):
            stopped[0] = True  # (only a stop leaves positions unreported on purpose)
        else:
            pos = todo.pop()
            if _send(wfd, _POS.pack(pos)):
                busy[rfd] = pos
                return
            todo.append(pos)  # this worker is gone: another one takes it, or it is reported as not scanned
    _send(wfd, _POS.pack(_STOP))
    _close_quietly(wfd)
    w[2] = None


def _send(fd: int, data: bytes) -> bool:
    try:
        write_all(fd, data)
        return True
    except OSError:
        return False


def _close_quietly(fd) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def _fork_worker(paths, expects, fs, others: list[int]) -> list:
    """[pid, result fd (parent reads), task fd (parent writes)]. `others`: the parent's ends of the
    workers forked before, closed in this one (else a worker would keep another's pipe open)."""
    task_r, task_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # worker: scan what it is handed, stream results, never return into the caller's code
        code = 0
        try:
            for fd in (task_w, res_r, *others):
                os.close(fd)
            while True:
                raw = read_exactly(task_r, _POS.size)
                if raw is None:
                    break
                (pos,) = _POS.unpack(raw)
                if pos == _STOP:
                    break
                blob = pickle.dumps((pos, scan_chunk_file(paths[pos], fs, expect=expects[pos])),
                                    pickle.HIGHEST_PROTOCOL)
                write_all(res_w, _LEN.pack(len(blob)) + blob)
        except BaseException:  # noqa: BLE001 - the parent reports the chunk as not scanned
            code = 1
        finally:
            os._exit(code)
    os.close(task_r)
    os.close(res_w)
    return [pid, res_r, task_w]


def read_exactly(fd: int, n: int) -> bytes | None:
    """n bytes, or None at end of file (the parent closed the task pipe: no more work)."""
    got = b""
    while len(got) < n:
        part = os.read(fd, n - len(got))
        if not part:
            return None
        got += part
    return got


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
