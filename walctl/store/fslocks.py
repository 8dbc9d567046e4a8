"""The seam's locks (a part of OsFileSystem, kept apart for size): walctl's own exclusive lock file, the
probe of another writer's, and the shared hold on a runtime's lock (Substrat's daemon.lock) that keeps a
daemon from starting while walctl changes its root. Each opens its file through the seam's confinement
(`_open_at`: beneath the target, never through a link)."""
from __future__ import annotations

import fcntl
import os

from ..errors import EnvironmentProblem, WalctlError


class Flocks:
    def lock(self, path: str, holder: str):
        """An exclusive, non-blocking flock on `path` (created if missing, never through a link), with
        the holder's description written into it; None when another process holds it."""
        fd = self._open_at(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, "locks")
        self._regular_only(fd, path, "locks")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:  # the holder's note: a full disk fails here first, naming the lock file
            self._os(os.ftruncate, path, fd, 0, _pass_path=False)
            self.pwrite(fd, holder.encode("utf-8"), 0, path)
        except EnvironmentProblem:
            os.close(fd)
            raise
        return fd

    def probe_writer(self, directory: str, name: str | None = None) -> str | None:
        from .lock import LOCK_NAME, probe_fd

        try:
            fd = self.open_read(os.path.join(directory, name or LOCK_NAME))
        except WalctlError:
            return None  # no lock file (or unreadable): no walctl writer to detect
        return probe_fd(fd)

    def hold_shared(self, path: str):
        """A shared, non-blocking flock on `path` if it exists, never creating or writing it (nor opening it
        through a link): while it is held, a process that wants the file exclusively (a daemon starting on a
        root walctl is changing) cannot have it. None when there is no such file; False when another process
        holds it exclusively. Released by release_shared."""
        try:
            fd = self._open_at(path, os.O_RDONLY | os.O_NONBLOCK, "locks")
        except EnvironmentProblem as e:
            if e.kind == "not-found":
                return None
            raise
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        return fd

    def release_shared(self, handle) -> None:
        os.close(handle)  # closing releases the flock

    def unlock(self, handle) -> None:
        try:
            os.ftruncate(handle, 0)
        finally:
            os.close(handle)  # closing releases the flock

