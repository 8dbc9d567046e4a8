"""The file-system seam. Production code uses OsFileSystem; tests substitute a simulated one.

Reads are mapped, never loaded whole: a chunk of any size costs address space, not memory.
"""
from __future__ import annotations

import errno
import mmap
import os
import stat
from contextlib import contextmanager
from typing import Iterator, NamedTuple

from ..errors import EnvironmentProblem, UnsupportedInput


class Entry(NamedTuple):
    name: str
    path: str
    kind: str  # "file" | "dir" | "other"
    size: int


def describe_os_error(e: OSError) -> str:
    if e.errno == errno.ENOENT:
        return "no such file or directory"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if e.errno == errno.ENOTDIR:
        return "not a directory"
    if e.errno == errno.ENOSPC:
        return "no space left on device"
    return e.strerror or str(e)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"


class OsFileSystem:
    def stat(self, path: str) -> Entry:
        try:
            st = os.stat(path)
        except OSError as e:
            raise EnvironmentProblem(describe_os_error(e), path) from None
        return Entry(os.path.basename(path), path, _kind(st.st_mode), st.st_size)

    def listdir(self, path: str) -> list[Entry]:
        try:
            names = os.listdir(path)
        except OSError as e:
            raise EnvironmentProblem(describe_os_error(e), path) from None
        out = []
        for name in names:
            full = os.path.join(path, name)
            try:
                st = os.stat(full)
                out.append(Entry(name, full, _kind(st.st_mode), st.st_size))
            except OSError:  # dangling link or raced away: not a chunk we can read
                out.append(Entry(name, full, "other", 0))
        return out

    @contextmanager
    def map_read(self, path: str) -> Iterator:
        """A read-only buffer over a regular file. Never opens FIFOs or devices (they could block)."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise EnvironmentProblem(describe_os_error(e), path) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsupportedInput("not a regular file", path)
            if st.st_size == 0:
                yield b""
                return
            try:
                mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as e:
                raise EnvironmentProblem(f"cannot map file: {e}", path) from None
            try:
                yield mm
            finally:
                try:
                    mm.close()
                except BufferError:  # a caller still holds a view; the GC closes it
                    pass
        finally:
            os.close(fd)

    def read_head(self, path: str, n: int) -> bytes:
        """The first n bytes of a regular file (fewer if it is shorter)."""
        with self.map_read(path) as buf:
            return bytes(buf[:n])


DEFAULT_FS = OsFileSystem()
