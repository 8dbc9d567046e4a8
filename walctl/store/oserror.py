"""How an OSError becomes an EnvironmentProblem (exit 6, with its reason kind: not-found, permission,
...), and the checks that a path the operator named exists and is the kind expected, which report the
same way. Split from fs.py (issue #13): the seam's primitives and its containment stay there.
"""
from __future__ import annotations

import os
import stat

from ..errors import REASON_WRONG_KIND, EnvironmentProblem, describe_os_error, os_error_kind


def os_problem(e: OSError, path: str | None) -> EnvironmentProblem:
    """The EnvironmentProblem for an OSError, with its reason kind (not-found, permission, ...) and the
    file it was about: `path` (what the caller was doing it to), else the one the OSError names. A disk
    that fills up fails a write(2), which names no file; the seam passes the file it writes to."""
    return EnvironmentProblem(describe_os_error(e), path or e.filename or None, kind=os_error_kind(e))


def require_dir(path: str, fs=None) -> None:
    """A target directory the operator named: missing or the wrong kind is exit 6 (not-found,
    not-a-directory), never an empty, clean result. A link to a directory is the operator's choice.
    `fs`: ask this file system (a test's simulated one, a confined one) instead of the operating system."""
    if fs is not None:
        fs.require_dir(path)
    else:
        require_os_dir(path)


def require_os_dir(path: str) -> None:
    """require_dir, asking the operating system by the path (the kind of a non-directory in words)."""
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
