"""A private scratch directory for downloads that are checked before anything keeps them (archive
verify, restore, prune). tempfile.mkdtemp gives a fresh name no one else can have chosen, mode 0700;
everything inside it goes through the confined seam, and the whole directory is removed at the end.
Names inside it come from object keys, so they are validated as plain names first."""
from __future__ import annotations

import os
import shutil
import tempfile

from ..errors import UsageError
from ..format.names import name_problem
from .fs import DEFAULT_FS


class Scratch:
    def __init__(self, parent: str | None = None, prefix: str = "walctl-"):
        self.dir = tempfile.mkdtemp(prefix=prefix, dir=parent)
        self.fs = DEFAULT_FS.beneath(self.dir)

    def path(self, name: str) -> str:
        why = name_problem(name)
        if why:
            raise UsageError(f"not used as a file name: {why}", self.dir)
        return os.path.join(self.dir, name)

    def open_write(self, name: str) -> "SeamFile":
        """A new file (never an existing one) for a download, written through the seam (a full disk
        names this file), as a binary file object."""
        path = self.path(name)
        return SeamFile(self.fs, self.fs.open_new(path), path)

    def truncate(self, name: str, size: int) -> None:
        self.fs.truncate(self.path(name), size)

    def remove(self, name: str) -> None:
        self.fs.unlink(self.path(name))

    def clear(self) -> None:
        """Every file in it removed (a download started over: each name is created anew)."""
        for e in self.fs.listdir(self.dir):
            self.fs.unlink(os.path.join(self.dir, e.name))

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)  # our own fresh directory; rmtree never follows links

    def __enter__(self) -> "Scratch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SeamFile:
    """The write side of a binary file object over a descriptor the seam opened: each write goes through
    fs.write, so an error (ENOSPC) is reported with the file's path."""

    def __init__(self, fs, fd: int, path: str):
        self.fs, self.fd, self.path = fs, fd, path

    def write(self, data) -> int:
        self.fs.write(self.fd, data, self.path)
        return len(data)

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            self.fs.close(fd)

    def __enter__(self) -> "SeamFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
