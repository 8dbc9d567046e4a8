"""One error tree. Each class carries its exit code from the CLI contract (docs: man/walctl.1)."""
from __future__ import annotations

from typing import NamedTuple

EXIT_OK = 0
EXIT_TORN = 1
EXIT_USAGE = 2
EXIT_CORRUPT = 3
EXIT_SEQUENCE = 4
EXIT_UNSUPPORTED = 5
EXIT_ENVIRONMENT = 6
EXIT_REFUSED = 7

# When several findings are present the exit code is the first of these that occurs.
EXIT_PRECEDENCE = (EXIT_ENVIRONMENT, EXIT_CORRUPT, EXIT_SEQUENCE, EXIT_UNSUPPORTED, EXIT_TORN)


class ExitCode(NamedTuple):
    """One row of the exit-code contract (man/walctl.1, EXIT STATUS). `title` opens each man page's
    paragraph for the code (tests/test_classes.py checks them); `help` is its line in `walctl --help`."""
    code: int
    title: str
    help: str
    verdict: str | None  # a verified path's or chunk's verdict (ops/report.py); None: never a verdict
    severity: str  # a finding's severity at this code, unless its class fixes one (ops/classes.py)
    reason: str | None  # an error's `reason` word in JSON; None: no error exits so (REASON_IO stands in)


EXITS = (
    ExitCode(EXIT_OK, "Clean", "clean (anomalies are warnings unless --strict)", "clean", "warning", None),
    ExitCode(EXIT_TORN, "Torn tail only", "torn tail only: repair can cut it", "torn", "torn", "torn"),
    ExitCode(EXIT_USAGE, "Usage error", "usage error", None, "error", "usage"),
    ExitCode(EXIT_CORRUPT, "Corruption", "corruption: acknowledged data is damaged (under --strict, any anomaly)",
             "corrupt", "error", "corrupt"),
    ExitCode(EXIT_SEQUENCE, "Sequence discontinuity", "sequence discontinuity: gap, repeat or regression",
             "discontinuous", "error", "sequence"),
    ExitCode(EXIT_UNSUPPORTED, "Unsupported", "unsupported: not a known format or version", "unsupported",
             "error", "unsupported"),
    ExitCode(EXIT_ENVIRONMENT, "Environment", "environment: I/O error, permission, or locked by a live writer",
             "environment", "error", "io"),
    ExitCode(EXIT_REFUSED, "Refused", "refused: a safety bound would be exceeded; nothing was changed", None,
             "error", "refused"),
)


def combine_exit_codes(codes) -> int:
    present = set(codes)
    for code in EXIT_PRECEDENCE:
        if code in present:
            return code
    return EXIT_OK


def precedence_text() -> str:
    """`6, 3, 4, 5, 1`: the precedence as help and the man pages write it."""
    return ", ".join(map(str, EXIT_PRECEDENCE))


def exit_table() -> str:
    """The exit codes as `walctl --help` lists them, from EXITS."""
    return "\n".join([f"Exit codes (several findings: the first present in the order {precedence_text()}):"]
                     + [f"  {e.code} {e.help}" for e in EXITS])


# The `reason` of an error in a JSON document: a word a script can branch on (cron alerts on not-found,
# retries on locked). Exit 6 keeps lumping the environment's problems; its reasons tell them apart.
REASON_NOT_FOUND = "not-found"        # the path does not exist (or a component of it)
REASON_WRONG_KIND = "not-a-directory"  # a file (or FIFO, device) where a directory is expected
REASON_LOCKED = "locked"              # a live writer holds the directory's lock
REASON_PERMISSION = "permission"
REASON_IO = "io"                      # any other I/O failure: disk full, EIO, a dead worker...
_REASON_BY_CODE = {e.code: e.reason for e in EXITS if e.reason is not None}
assert _REASON_BY_CODE[EXIT_ENVIRONMENT] == REASON_IO


class WalctlError(Exception):
    """A failure the user can act on: one line, a path, maybe an offset."""
    exit_code = EXIT_ENVIRONMENT
    # What the command examined before it failed, as the body of its own --json document (docs/json.md, "A
    # failure is the command's own document"); None: it could not start, and walctl.error/1 says why.
    examined: dict | None = None

    @property
    def kind(self) -> str:
        """The error's `reason` word for JSON (usage, corrupt, refused, not-found, locked, ...)."""
        return _REASON_BY_CODE.get(self.exit_code, REASON_IO)

    def __init__(self, reason: str, path: str | None = None, offset: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.path = path
        self.offset = offset

    def __reduce__(self):  # keep path and offset across --jobs worker processes
        return (self.__class__, (self.reason, self.path, self.offset))

    def __str__(self) -> str:
        parts = [p for p in (self.path, None if self.offset is None else f"offset {self.offset}") if p]
        return ": ".join(parts + [self.reason])


class UsageError(WalctlError):
    exit_code = EXIT_USAGE


class EnvironmentProblem(WalctlError):
    """I/O error, permission, missing path, or a live writer holding the lock. `kind` says which
    (REASON_*); it is set where the problem is raised (the fs seam maps errno, the lock says locked)."""
    exit_code = EXIT_ENVIRONMENT

    def __init__(self, reason: str, path: str | None = None, offset: int | None = None, kind: str = REASON_IO):
        super().__init__(reason, path, offset)
        self._kind = kind

    @property
    def kind(self) -> str:
        return self._kind

    def __reduce__(self):
        return (self.__class__, (self.reason, self.path, self.offset, self._kind))


class WorkflowConflict(EnvironmentProblem):
    """A workflow step found the checkpoint in another state than the step needs (a resume of one that is not
    paused: another resume took it): like a lock held by a live writer, someone else has the workflow.
    Exit 6, reason `locked`; nothing was changed. `state`: what was found (running or paused)."""

    def __init__(self, reason: str, path: str | None = None, offset: int | None = None, state: str = ""):
        super().__init__(reason, path, offset, REASON_LOCKED)
        self.state = state

    def __reduce__(self):
        return (self.__class__, (self.reason, self.path, self.offset, self.state))


# errno -> (REASON_*, the words walctl says; None: the system's own words): the one errno map
def _errno_map() -> dict:
    import errno

    return {errno.ENOENT: (REASON_NOT_FOUND, "no such file or directory"),
            errno.ENOTDIR: (REASON_WRONG_KIND, "not a directory"),
            errno.EACCES: (REASON_PERMISSION, "permission denied"),
            errno.EPERM: (REASON_PERMISSION, "permission denied"),
            errno.EROFS: (REASON_PERMISSION, None),
            errno.ENOSPC: (REASON_IO, "no space left on device")}


_ERRNO: dict | None = None


def _errno_row(e: OSError) -> tuple[str, str | None]:
    global _ERRNO
    if _ERRNO is None:
        _ERRNO = _errno_map()
    return _ERRNO.get(e.errno, (REASON_IO, None))


def os_error_kind(e: OSError) -> str:
    """The REASON_* of an OSError."""
    return _errno_row(e)[0]


def describe_os_error(e: OSError) -> str:
    """An OSError in walctl's words (the system's own for an errno the map does not name)."""
    return _errno_row(e)[1] or e.strerror or str(e)


class UnsupportedInput(WalctlError):
    exit_code = EXIT_UNSUPPORTED


class Refused(WalctlError):
    exit_code = EXIT_REFUSED


class NotClean(WalctlError):
    """The target is not in a state the command may act on; the exit code is the state's own (3, 4, 5)."""

    def __init__(self, reason: str, path: str | None = None, offset: int | None = None, code: int = EXIT_CORRUPT):
        super().__init__(reason, path, offset)
        self.exit_code = code

    def __reduce__(self):
        return (self.__class__, (self.reason, self.path, self.offset, self.exit_code))


class OutputClosed(Exception):
    """The reader of our standard output went away (`walctl replay ... | head`): end quietly, with the
    status SIGPIPE would have given. Not an OSError, so that nothing on the way reports it as one."""
