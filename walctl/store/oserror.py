"""How an OSError becomes an EnvironmentProblem (exit 6, with its reason kind: not-found, permission,
...), and the checks that a path the operator named exists and is the kind expected, which report the
same way. Split from fs.py (issue #13): the seam's primitives and its containment stay there.
"""
from __future__ import annotations

import errno
import os
import stat

from ..errors import REASON_WRONG_KIND, EnvironmentProblem, os_error_kind


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


def os_problem(e: OSError, path: str | None) -> EnvironmentProblem:
    """The EnvironmentProblem for an OSError, with its reason kind (not-found, permission, ...) and the
    file it was about: `path` (what the caller was doing it to), else the one the OSError names. A disk
    that fills up fails a write(2), which names no file; the seam passes the file it writes to."""
    return EnvironmentProblem(describe_os_error(e), path or e.filename or None, kind=os_error_kind(e))


def require_dir(path: str, fs=None) -> None:
    """A target directory the operator named: missing or the wrong kind is exit 6 (not-found,
    not-a-directory), never an empty, clean result. A link to a directory is the operator's choice.
    `fs`: ask this file system (a test's simulated one) instead of the operating system."""
    if fs is not None and not getattr(fs, "real", False):
        if fs.stat(path).kind != "dir":
            raise EnvironmentProblem("not a directory (a file where a directory is expected)", path,
                                     kind=REASON_WRONG_KIND)
        return
    if fs is not None and getattr(fs, "roots", ()):  # confined: the target opened once, not its path again
        try:
            if fs.stat(path).kind == "dir":
                return
        except EnvironmentProblem:
            pass  # (not opened: the path itself says why, in the words below)
    try:
        st = os.stat(path)
    except OSError as e:
        raise os_problem(e, path) from None
    if not stat.S_ISDIR(st.st_mode):
        raise EnvironmentProblem(f"not a directory (a {_kind_word(st.st_mode)} where a directory is expected)",
                                 path, kind=REASON_WRONG_KIND)


def require_path(path: str) -> None:
    """A file or directory the operator named must exist (exit 6, not-found)."""
    try:
        os.stat(path)
    except OSError as e:
        raise os_problem(e, path) from None


def _kind_word(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"
