"""replay --jobs (and its default for a large log, auto_jobs): chunks encoded in forked workers, written
by the workers themselves, in order.

Worker k takes chunks k, k+J, k+2J, ...: it scans and encodes one, sends the parent the scan outcome
and the (offset, sequence) of each encoded record, and waits. The parent decides, with the same code
as a single-process replay, which records go out, and tells the worker to write them (writev straight
to the output descriptor: the stream never passes through the parent) and waits for the
acknowledgement before the next write, so the output keeps chunk order. Meanwhile the other workers
encode the next chunks. Each worker holds one encoded chunk at a time: memory stays bounded.
"""
from __future__ import annotations

import os
import pickle
import signal
import struct

from ...errors import EnvironmentProblem, OutputClosed
from ..parallel import read_exactly, write_all

AUTO_JOBS_BYTES = 64 << 20  # this much to replay is spread over one worker per core (forks cost ~10 ms each)


def auto_jobs(todo) -> int:
    """replay's default worker count: one per core when the chunks to read hold at least AUTO_JOBS_BYTES
    (encoding costs 2-3 times a scan, so less pays than for verify's 256 MiB), else one."""
    return (os.cpu_count() or 1) if sum(c.size for c in todo) >= AUTO_JOBS_BYTES else 1


_LEN = struct.Struct(">Q")
_CMD = struct.Struct(">Bqq")  # op, start, stop
OP_WRITE, OP_NEXT = 1, 2


def _read_exact(fd: int, n: int) -> bytes:
    got = read_exactly(fd, n)
    if got is None:
        raise EOFError
    return got


class _Worker:
    def __init__(self, pid: int, results: int, commands: int):
        self.pid, self.results, self.commands = pid, results, commands
        self.status: int | None = None  # once reaped

    def reap(self) -> int:
        if self.status is None:
            self.status = os.waitpid(self.pid, 0)[1]
        return self.status

    def died(self, what: str, path: str | None = None) -> Exception:
        """The error for a worker that stopped talking: a closed output (SIGPIPE, as `| head` does)
        is OutputClosed, ending quietly the way a single-process replay would end; anything else is reported."""
        status = self.reap()
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGPIPE:
            return OutputClosed()
        return EnvironmentProblem(f"replay worker died {what}", path)

    def receive(self):
        (n,) = _LEN.unpack(_read_exact(self.results, _LEN.size))
        return pickle.loads(_read_exact(self.results, n))

    def command(self, op: int, start: int = 0, stop: int = 0) -> None:
        write_all(self.commands, _CMD.pack(op, start, stop))


class RemoteChunk:
    """The parent's view of a chunk a worker holds: its marks, and a write that the worker performs."""

    def __init__(self, worker: _Worker, marks: list):
        self.worker, self.marks = worker, marks

    def write(self, start: int, stop: int) -> None:
        self.worker.command(OP_WRITE, start, stop)
        try:
            _read_exact(self.worker.results, 1)
        except EOFError:
            raise self.worker.died("while writing") from None


class ParallelChunks:
    """Iterate for (chunk, outcome, encoded chunk) in order; close() ends the workers."""

    draining = False  # workers encode regardless: a stop at damage is rare and the chunks are few

    def __init__(self, chunks, jobs: int, out_fd: int, encode_chunk):
        self.chunks = chunks
        self.workers: list[_Worker] = []
        jobs = max(1, min(jobs, len(chunks)))
        for k in range(jobs):
            r_res, w_res = os.pipe()
            r_cmd, w_cmd = os.pipe()
            pid = os.fork()
            if pid == 0:  # worker: never returns into the caller's code
                code = 0
                try:
                    os.close(r_res)
                    os.close(w_cmd)
                    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
                    _serve(chunks[k::jobs], encode_chunk, w_res, r_cmd, out_fd)
                except BaseException:  # noqa: BLE001 - the parent sees the pipe close and reports it
                    code = 1
                finally:
                    os._exit(code)
            os.close(w_res)
            os.close(r_cmd)
            self.workers.append(_Worker(pid, r_res, w_cmd))

    def __iter__(self):
        for pos, c in enumerate(self.chunks):
            w = self.workers[pos % len(self.workers)]
            try:
                outcome, marks = w.receive()
            except EOFError:
                raise w.died("before reporting this chunk", c.path) from None
            yield c, outcome, RemoteChunk(w, marks)
            w.command(OP_NEXT)

    def close(self) -> None:
        for w in self.workers:
            for fd in (w.results, w.commands):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if w.status is None:
                try:
                    os.kill(w.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                w.reap()
        self.workers = []


def _serve(chunks, encode_chunk, results: int, commands: int, out_fd: int) -> None:
    from .fdwrite import write_pieces_to_fd

    write = write_pieces_to_fd(out_fd)
    for c in chunks:
        outcome, pieces, marks = encode_chunk(c)
        blob = pickle.dumps((outcome, marks), pickle.HIGHEST_PROTOCOL)
        write_all(results, _LEN.pack(len(blob)) + blob)
        while True:
            op, start, stop = _CMD.unpack(_read_exact(commands, _CMD.size))
            if op == OP_NEXT:
                break
            write(pieces[start:stop])
            write_all(results, b"\x01")
