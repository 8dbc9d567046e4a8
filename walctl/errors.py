"""One error tree. Each class carries its exit code from the CLI contract (docs: man/walctl.1)."""
from __future__ import annotations

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


def combine_exit_codes(codes) -> int:
    present = set(codes)
    for code in EXIT_PRECEDENCE:
        if code in present:
            return code
    return EXIT_OK


# The `reason` of an error in a JSON document: a word a script can branch on (cron alerts on not-found,
# retries on locked). Exit 6 keeps lumping the environment's problems; its reasons tell them apart.
REASON_NOT_FOUND = "not-found"        # the path does not exist (or a component of it)
REASON_WRONG_KIND = "not-a-directory"  # a file (or FIFO, device) where a directory is expected
REASON_LOCKED = "locked"              # a live writer holds the directory's lock
REASON_PERMISSION = "permission"
REASON_IO = "io"                      # any other I/O failure: disk full, EIO, a dead worker...
_REASON_BY_CODE = {EXIT_USAGE: "usage", EXIT_CORRUPT: "corrupt", EXIT_SEQUENCE: "sequence",
                   EXIT_UNSUPPORTED: "unsupported", EXIT_ENVIRONMENT: REASON_IO, EXIT_REFUSED: "refused",
                   EXIT_TORN: "torn"}


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


def os_error_kind(e: OSError) -> str:
    """The REASON_* of an OSError."""
    import errno

    if e.errno == errno.ENOENT:
        return REASON_NOT_FOUND
    if e.errno == errno.ENOTDIR:
        return REASON_WRONG_KIND
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return REASON_PERMISSION
    return REASON_IO


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
