"""Faults at the operating system under walctl's seam (walctl/store/fs.py), for the real file system:

- `FullDisk(room)`: a disk with `room` bytes left. write(2)/pwrite(2) take what fits (a short write, as
  the kernel does) and then fail with ENOSPC, exactly as a disk that fills up. Installed with
  `full_disk(monkeypatch, room)`: every write walctl makes goes through the seam, so every one is
  subject to it, and the seam's own error mapping is what is under test.
- `interrupt_at(monkeypatch, n, ops)`: KeyboardInterrupt (Ctrl-C) raised at the n-th call of one of the
  seam's mutating primitives named in `ops`: an interrupt at a chosen step, without sleeping.
"""
from __future__ import annotations

import errno
import os

import walctl.store.fs as fs_module


class FullDisk:
    """The `os` module as the seam sees it, on a disk with `room` bytes left."""

    def __init__(self, room: int):
        self.room = room
        self.refused = 0  # write calls that failed with ENOSPC

    def __getattr__(self, name):
        return getattr(os, name)

    def _take(self, n: int) -> int:
        if n and self.room <= 0:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        k = min(n, self.room)
        self.room -= k
        return k

    def write(self, fd, data):
        return os.write(fd, memoryview(data)[:self._take(len(data))])

    def pwrite(self, fd, data, offset):
        return os.pwrite(fd, memoryview(data)[:self._take(len(data))], offset)


def full_disk(monkeypatch, room: int) -> FullDisk:
    disk = FullDisk(room)
    monkeypatch.setattr(fs_module, "os", disk)
    return disk


class Interrupt:
    def __init__(self, n: int, again: tuple[int, ...] = ()):
        self.n, self.again, self.calls, self.fired, self.fired_again = n, again, 0, None, []

    def hit(self, what: str, path: str) -> None:
        self.calls += 1
        if self.calls == self.n:
            self.fired = (what, path)
            raise KeyboardInterrupt
        if self.calls in self.again:  # Ctrl-C pressed again (during the cleanup, say)
            self.fired_again.append((what, path))
            raise KeyboardInterrupt


def interrupt_at(monkeypatch, n: int, ops=("rename", "mkdir", "open_new", "unlink", "fsync_dir"),
                 again: tuple[int, ...] = ()) -> Interrupt:
    """Ctrl-C at the n-th call of the seam's primitives named in `ops` (counted together), and again at
    each call numbered in `again`."""
    state = Interrupt(n, again)
    cls = fs_module.OsFileSystem
    for op in ops:
        real = getattr(cls, op)

        def wrapped(self, path, *a, _real=real, _op=op, **kw):
            state.hit(_op, path)
            return _real(self, path, *a, **kw)

        monkeypatch.setattr(cls, op, wrapped)
    return state
