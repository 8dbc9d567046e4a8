"""The target directory, opened once (Go's os.Root, systemd's chase()).

A confined file system (`fs.beneath(target)`) opens each directory it is confined to when it is made and
keeps that descriptor for the whole run; every later step, a read as well as a change, is resolved from
it one component at a time, never by the path again. So swapping the target itself for a symbolic link
while a command runs redirects nothing: the lock, `.quarantine/`, a `.tmp` and every chunk stay in the
directory the run started in (the plan and the act concern one directory).

| step | recipe | why |
|---|---|---|
| open | `open(path, O_DIRECTORY)`, once | a path the operator typed through a link is followed here, once, and said (`target: /a -> /b`, JSON `targets`) |
| not there yet | the parent opened instead; the directory made with `mkdirat` and opened from the parent with `O_NOFOLLOW` | a directory a command creates (restore's OUT) is pinned the moment it exists, and a link planted in its place is refused |
| below it | `openat(..., O_NOFOLLOW)` per directory component | a link inside the target is never followed (store/fs.py refuses it) |
| close | when the confined file system is dropped | the descriptor lives as long as the run that uses it |
"""
from __future__ import annotations

import errno
import os
import stat
import weakref
from contextlib import contextmanager

from ..errors import Refused, WalctlError
from .oserror import os_problem

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

# (typed, resolved) of every root of this run that was reached through a symbolic link, in order: the CLI
# edge says them (`target: /a -> /b`, and `targets` in a --json document). Cleared per run.
FOLLOWED: list[tuple[str, str]] = []


def forget_followed() -> None:
    FOLLOWED.clear()


def _note_followed(typed: str, resolved: str) -> None:
    if (typed, resolved) not in FOLLOWED:
        FOLLOWED.append((typed, resolved))


def _where(fd: int, path: str) -> str:
    """Where an open directory is (Linux: its /proc link, exact whatever raced); else the path resolved."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return os.path.realpath(path)


class Root:
    """One directory a confined file system may change: its typed path (absolute), where it led when it
    was opened (`resolved`), and its descriptor. `hook(op, path)`, when set, is called before each step
    that opens from the descriptor (tests swap the target there)."""

    def __init__(self, path: str, hook=None):
        self.path = self.resolved = os.path.abspath(path)
        self.hook = hook
        self._fd: int | None = None
        self._parent: tuple[int, str] | None = None  # (descriptor, name) while the directory does not exist
        self._error: OSError | None = None
        try:
            fd = os.open(self.path, DIR_FLAGS)  # follows a link the operator typed: once, here
        except FileNotFoundError as e:
            self._error = e
            try:
                pfd = os.open(os.path.dirname(self.path), DIR_FLAGS)
            except OSError:
                return  # nor its parent: opened by its path at first use
            weakref.finalize(self, os.close, pfd)
            self._parent = (pfd, os.path.basename(self.path))
            return
        except OSError as e:  # not a directory, permission...: said at first use, as the path would have
            self._error = e
            return
        self._pin(fd)

    def _pin(self, fd: int, note: bool = True) -> None:
        self._fd, self._error = fd, None
        weakref.finalize(self, os.close, fd)
        self.resolved = _where(fd, self.path)
        if note and self.resolved != self.path:
            _note_followed(self.path, self.resolved)

    def below(self, parts: list[str]) -> "Root":
        """A root for the directory `parts` below this one, opened from this one's descriptor (never by its
        path: a use case that confines itself again, to its target or below it, keeps the directory the
        run started in), a link on the way refused."""
        if not parts:
            return self
        child = Root.__new__(Root)
        child.path, child.hook = os.path.join(self.path, *parts), self.hook
        child.resolved = os.path.join(self.resolved, *parts)
        child._fd, child._parent, child._error = None, None, None
        try:
            child._pin(self.walk(parts, "opens", child.path), note=False)
        except WalctlError as e:
            if e.kind != "not-found":
                raise
            pfd = self.walk(parts[:-1], "opens", child.path)
            weakref.finalize(child, os.close, pfd)
            child._parent, child._error = (pfd, parts[-1]), FileNotFoundError(errno.ENOENT, "not found")
        return child

    def fd(self) -> int:
        """The directory's descriptor; a directory made since the root was (restore's OUT) is opened now,
        from its parent and never through a link."""
        if self._fd is None:
            if self._parent is not None:
                pfd, name = self._parent
                try:
                    fd = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=pfd)
                except OSError as e:
                    raise self._refusal(e) from None
            else:
                try:
                    fd = os.open(self.path, DIR_FLAGS)
                except OSError as e:
                    raise os_problem(e, self.path) from None
            self._pin(fd)
        return self._fd

    def _refusal(self, e: OSError):
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EEXIST) and os.path.islink(self.path):
            return Refused(f"{self.path} became a symbolic link; walctl never follows a link it did not start "
                           f"with (nothing was changed there)", self.path)
        return os_problem(e, self.path)

    def mkdir(self, mode: int = 0o755) -> None:
        """Creates the directory itself (from its parent's descriptor when it had none), then pins it."""
        if self._fd is not None:
            raise os_problem(OSError(errno.EEXIST, os.strerror(errno.EEXIST)), self.path)
        try:
            if self._parent is not None:
                os.mkdir(self._parent[1], mode, dir_fd=self._parent[0])
            else:
                os.mkdir(self.path, mode)
        except OSError as e:
            raise self._refusal(e) from None
        self.fd()

    def fsync_parent(self) -> bool:
        """fsyncs the directory holding the root, from its descriptor when it has one (False: it has none)."""
        if self._parent is None:
            return False
        os.fsync(self._parent[0])
        return True

    def relative(self, path: str) -> list[str] | None:
        """The components of `path` below this root ([] for the root itself), or None when it is not
        below it. A path is matched by the typed path and by where that led."""
        target = os.path.abspath(path)
        for base in (self.path, self.resolved):
            rel = os.path.relpath(target, base)
            if rel == ".":
                return []
            if rel != ".." and not rel.startswith(".." + os.sep):
                return rel.split(os.sep)
        return None

    def walk(self, parts: list[str], what: str, path: str, follow: bool = False) -> int:
        """A new descriptor of the directory `parts` below the root, each component opened from the one
        before without following a link (a link at any step is refused: nothing is done through it).
        `follow`: a read follows a link below the root as it always did (the mutation that would act on
        what it read refuses that link: store/contain.py); the root itself is never looked up again."""
        if self.hook is not None:
            self.hook(what, path)
        fd = os.dup(self.fd())
        for i, part in enumerate(parts):
            try:
                nfd = os.open(part, DIR_FLAGS | (0 if follow else os.O_NOFOLLOW), dir_fd=fd)
            except OSError as e:
                os.close(fd)
                step = os.path.join(self.path, *parts[:i + 1])
                if e.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link_at(self, parts[:i + 1]):
                    raise Refused(f"{step} is a symbolic link; walctl never {what} through a link "
                                  f"(nothing was changed there)", path) from None
                raise os_problem(e, step) from None
            os.close(fd)
            fd = nfd
        return fd


def _is_link_at(root: Root, parts: list[str]) -> bool:
    try:
        fd = os.dup(root.fd())
    except OSError:
        return False
    try:
        for part in parts[:-1]:
            nfd = os.open(part, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nfd
        return stat.S_ISLNK(os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False
    finally:
        os.close(fd)


def confine(roots, paths, hook=None) -> tuple:
    """The roots for `paths`: one already held (or below one) is derived from it, never opened again by its
    path; any other is opened now."""
    out = []
    for path in paths:
        root, parts = _find(roots, path)
        out.append(Root(path, hook) if root is None else root.below(parts))
    return tuple(out)


def _find(roots, path: str):
    """(root, components below it) for a path below one of the roots, else (None, None)."""
    for root in roots:
        parts = root.relative(path)
        if parts is not None:
            return root, parts
    return None, None


@contextmanager
def opened_in(roots, path: str, what: str = "reads"):
    """(descriptor of the directory holding `path`, its name) for a path below a root ("." for the root
    itself), resolved from the root's descriptor; (None, path) for any other path (reads only)."""
    root, parts = _find(roots, path)
    if root is None:
        yield None, path
        return
    fd = root.walk(parts[:-1], what, path, follow=what == "reads")
    try:
        yield fd, parts[-1] if parts else "."
    finally:
        os.close(fd)


@contextmanager
def changed_at(roots, path: str, what: str):
    """As opened_in, for a change: (None, the Root) for a root itself; refused outside every root."""
    root, parts = _find(roots, path)
    if root is None:
        if not roots:  # a use case that forgot fs.beneath(target): refuse rather than guess
            raise Refused(f"no target directory was named for this change; walctl never {what} unconfined", path)
        raise Refused(f"outside {' or '.join(r.path for r in roots)}; walctl never {what} anything outside its "
                      f"target", path)
    if not parts:
        yield None, root
        return
    with opened_in(roots, path, what) as pair:
        yield pair
