"""The writer's lock file. A writer holds an exclusive flock on it; readers only probe.

Probing takes a shared lock for an instant and releases it: it writes nothing and creates nothing,
so read-only commands stay read-only.
"""
from __future__ import annotations

import fcntl
import os

LOCK_NAME = ".walctl.lock"


def probe_writer(directory: str, name: str = LOCK_NAME) -> str | None:
    """A description of the live process holding `directory`/`name` (walctl's lock by default, or another
    program's flock file such as Substrat's daemon.lock), or None when nobody holds it."""
    path = os.path.join(directory, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None  # no lock file (or unreadable): no walctl writer to detect
    return probe_fd(fd)


def probe_fd(fd: int) -> str | None:
    """probe_writer on an open lock file (closed here): the fs seam opens it from the target's descriptor."""
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 512).decode("utf-8", "replace").strip()
            return holder or "unknown holder"
        except OSError:
            return None
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class DirectoryLock:
    """The writer's lock, taken without waiting: a mutating command that cannot have it exits 6
    naming the holder."""

    def __init__(self, directory: str, holder: str, fs):
        self.directory, self.holder = directory, holder
        # The lock file is never reached through a link: beneath the caller's own target when it has one
        # (a lock in a subdirectory is then reached from the target, so that subdirectory cannot be
        # swapped for a link), else beneath `directory`.
        self.fs = fs if getattr(fs, "roots", ()) else fs.beneath(directory)
        self.handle = None

    def __enter__(self) -> "DirectoryLock":
        from ..errors import REASON_LOCKED, EnvironmentProblem

        path = os.path.join(self.directory, LOCK_NAME)
        self.handle = self.fs.lock(path, self.holder)
        if self.handle is None:
            other = self.fs.probe_writer(self.directory) or "another process"
            raise EnvironmentProblem(f"locked by a live writer ({other}); nothing was changed", self.directory,
                                     kind=REASON_LOCKED)
        return self

    def release(self) -> None:
        if self.handle is not None:
            self.fs.unlock(self.handle)
            self.handle = None

    def __exit__(self, *exc) -> None:
        self.release()


def holder_text(command: str) -> str:
    import socket

    return f"pid {os.getpid()} on {socket.gethostname()}: walctl {command}"
