"""The file-system seam. Production code uses OsFileSystem; tests substitute a simulated one that
forgets unsynced bytes, tears writes and crashes at the Nth operation (tests/simfs.py).

Only primitives live here; the recipes that make a change durable (fsync file, rename, fsync
directory) live in durable.py, and nothing else in walctl calls fsync, rename or truncate.
Reads are mapped, never loaded whole: a chunk of any size costs address space, not memory.
"""
from __future__ import annotations

import copy
import errno
import mmap
import os
import stat
from contextlib import contextmanager
from typing import Iterator, NamedTuple

from ..errors import EnvironmentProblem, Refused, UnsupportedInput, WalctlError
from .fslocks import Flocks
from .oserror import os_problem, require_os_dir


class Entry(NamedTuple):
    name: str
    path: str
    kind: str  # "file" | "dir" | "other"
    size: int


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    return "other"


class OsFileSystem(Flocks):
    # Reads and changes alike: a path below a root of a confined instance is resolved from the root's
    # descriptor, opened once (store/root.py), never by its path again. `_in(path)` gives (directory
    # descriptor or None, name): "." for a root itself; (None, path) for a path outside every root (an
    # unconfined instance reads everything by its path).

    def stat(self, path: str) -> Entry:
        with self._in(path) as (dfd, name):
            try:
                st = os.stat(name, dir_fd=dfd)
            except OSError as e:
                raise os_problem(e, path) from None
        return Entry(os.path.basename(path), path, _kind(st.st_mode), st.st_size)

    def listdir(self, path: str) -> list[Entry]:
        with self._in(path) as (dfd, name):
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dfd)
            except OSError as e:
                raise os_problem(e, path) from None
            try:
                names = os.listdir(fd)
                out = []
                for n in names:
                    try:
                        st = os.stat(n, dir_fd=fd)
                        out.append(Entry(n, os.path.join(path, n), _kind(st.st_mode), st.st_size))
                    except OSError:  # dangling link or raced away: not a chunk we can read
                        out.append(Entry(n, os.path.join(path, n), "other", 0))
            finally:
                os.close(fd)
        return out

    def open_read(self, path: str, follow: bool = True) -> int:
        """A descriptor for reading (check that it is a regular file). Never blocks on a FIFO or a device.
        follow=False: a link is no file (ELOOP)."""
        with self._in(path) as (dfd, name):
            try:
                return os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW),
                               dir_fd=dfd)
            except OSError as e:
                raise os_problem(e, path) from None

    @contextmanager
    def map_read(self, path: str) -> Iterator:
        """A read-only buffer over a regular file. Never opens FIFOs or devices (they could block)."""
        fd = self.open_read(path)
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

    def read_tail(self, path: str, base: int) -> tuple[bytes, int | None]:
        """(the bytes of a regular file from `base` to its end, or b"" when it is gone; its size when it is
        now shorter than `base`, else None). Never opens a FIFO or a device for long (a FIFO named like a
        chunk would block a follower forever, /dev/zero would feed it without end)."""
        try:
            fd = self.open_read(path)
        except EnvironmentProblem as e:
            if e.kind == "not-found":
                return b"", None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise UnsupportedInput("not a regular file", path)
            if st.st_size < base:
                return b"", st.st_size
            return os.pread(fd, st.st_size - base, base), None
        finally:
            os.close(fd)

    def read_input(self, path: str) -> bytes:
        """The whole of a small input file the operator named (a --state file, merge's STATE), read as a
        stream, not mapped: it may be a pipe (`--state <(jq ...)`). Raises OSError as open() does; the
        caller words it (a usage error: the input is not the target)."""
        with open(path, "rb") as f:
            return f.read()

    def read_head(self, path: str, n: int) -> bytes:
        """The first n bytes of a regular file (fewer if it is shorter)."""
        return self.read_range(path, 0, n)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        with self.map_read(path) as buf:
            return bytes(buf[offset:offset + length])

    def require_dir(self, path: str) -> None:
        """A directory the operator named (store/oserror.require_dir): exit 6 when missing or not one."""
        if self._roots:  # confined: the target opened once, not its path again
            try:
                if self.stat(path).kind == "dir":
                    return
            except EnvironmentProblem:
                pass  # (not opened: the path itself says why, in the words below)
        require_os_dir(path)

    def lstat(self, path: str):
        """The entry itself (a link is not followed), or None when there is none."""
        try:
            with self._in(path) as (dfd, name):
                return os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except (OSError, WalctlError):
            return None

    def exists(self, path: str) -> bool:
        return self.lstat(path) is not None

    def identity(self, path: str) -> tuple[int, int]:
        """(inode, mtime_ns): with the size, what says a file was not rewritten (git's index rule)."""
        with self._in(path) as (dfd, name):
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError as e:
                raise os_problem(e, path) from None
        return st.st_ino, st.st_mtime_ns

    def is_symlink(self, path: str) -> bool:
        """True for a symbolic link (dangling or not): mutations refuse them (containment)."""
        st = self.lstat(path)
        return st is not None and stat.S_ISLNK(st.st_mode)

    def link_count(self, path: str) -> int:
        """How many names the file has (1 for a file of its own; 0 when it does not exist). A directory
        counts as 1: its other links are its subdirectories' `..` entries, not other names."""
        st = self.lstat(path)
        if st is None:
            return 0
        return 1 if stat.S_ISDIR(st.st_mode) else st.st_nlink

    # ---- write primitives (durable.py composes them) ----
    #
    # Containment: every primitive that changes the file system resolves its path beneath one of the
    # roots this instance was confined to (`beneath`), one component at a time from a descriptor of
    # the root, never following a symbolic link (openat + O_NOFOLLOW, the discipline of systemd's
    # chase() and Go's os.Root). `..`, a path outside every root, a link at any step, and a file that
    # is not a regular file or has other hard links (its bytes also live under another name) are
    # refused before anything changes. An unconfined instance changes nothing at all.

    _roots: tuple = ()  # store/root.Root, one per directory this instance was confined to
    hook = None  # hook(op, path), called before each step resolved from a root (tests swap the target there)
    # Capabilities: what a use case may do with this file system beyond its primitives. Each is True here,
    # where the files are the operating system's; a simulated file system (tests/simfs.py) says False,
    # and the use case takes its one-thread, in-process path.
    worker_processes = True  # other processes may read its files by their paths (verify's, replay's workers)
    sync_helper = True  # a helper process may fdatasync a chunk it writes (group commit, store/synchelper.py)
    background_threads = True  # a thread may work on it beside the caller's (the ledger's sealer)

    @property
    def roots(self) -> tuple[str, ...]:
        return tuple(r.path for r in self._roots)

    def beneath(self, *roots: str) -> "OsFileSystem":
        """This file system, allowed to change things only beneath `roots` (directories the operator
        named), each opened now, once: every later step, read or change, is resolved from that descriptor
        (store/root.py). A root itself may be reached through a link, since the operator chose it: it is
        followed here, once, and said (`root.FOLLOWED`)."""
        from .root import confine

        confined = copy.copy(self)  # a subclass (a test's faulty file system) stays itself
        confined._roots = confine(self._roots, roots, self.hook)  # a root already held is kept, never reopened
        return confined

    def beneath_too(self, *roots: str) -> "OsFileSystem":
        """This confined file system with more roots; the ones it has stay as they were opened."""
        more = self.beneath(*roots)
        more._roots = self._roots + more._roots
        return more

    def _in(self, path: str, what: str = "reads"):
        from .root import opened_in

        return opened_in(self._roots, path, what)

    def _at(self, path: str, what: str):
        from .root import changed_at

        return changed_at(self._roots, path, what)

    def _regular_only(self, fd: int, path: str, what: str) -> None:
        """Refuses to change a file that is not a plain regular file of its own (a FIFO, a device, or a
        file with other hard links, whose bytes live under a name outside the target too). Closes `fd`
        when it refuses."""
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise Refused(f"not a regular file; walctl never {what} it", path)
        if st.st_nlink > 1:
            os.close(fd)
            raise Refused(f"has {st.st_nlink} hard links; walctl never {what} a file that also lives under "
                          f"another name", path)

    def _open_at(self, path: str, flags: int, what: str, mode: int = 0o644) -> int:
        with self._at(path, what) as (dfd, name):
            if dfd is None:
                raise Refused(f"the target directory itself; walctl never {what} it as a file", path)
            try:
                return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise Refused(f"a symbolic link; walctl never {what} through a link", path) from None
                raise os_problem(e, path) from None

    def open_append(self, path: str, create: bool = False, exclusive: bool = False, dsync: bool = False) -> int:
        """dsync: every write on this descriptor returns only once its data is on disk (O_DSYNC), one
        system call where write + fdatasync would be two."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | (os.O_DSYNC if dsync else 0)
        if create:
            flags |= os.O_CREAT
        if exclusive:
            flags |= os.O_EXCL
        fd = self._open_at(path, flags, "writes")
        self._regular_only(fd, path, "writes")
        return fd

    def open_new(self, path: str) -> int:
        """A new file for writing at chosen offsets (no O_APPEND: on Linux pwrite would append)."""
        return self._open_at(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, "creates")

    def pwrite(self, fd: int, data, offset: int, path: str = "") -> None:
        view = memoryview(data)
        while view:
            n = self._os(os.pwrite, path, fd, view, offset, _pass_path=False)
            view, offset = view[n:], offset + n

    def write(self, fd: int, data, path: str = "") -> None:
        try:
            done = os.write(fd, data)  # whole, nearly always: the loop below is for the rest
        except OSError as e:
            raise os_problem(e, path) from None
        if done < len(data):
            view = memoryview(data)[done:]
            while view:
                view = view[self._os(os.write, path, fd, view, _pass_path=False):]

    def fsync(self, fd: int, path: str = "") -> None:
        self._os(os.fdatasync if hasattr(os, "fdatasync") else os.fsync, path, fd, _pass_path=False)

    def start_writeback(self, fd: int, offset: int, length: int) -> None:
        """Asks the kernel to start writing these bytes back now, without waiting: a later fsync then
        has little left to do. A hint only (durability still comes from fsync); PostgreSQL's
        pg_flush_data uses the same call where sync_file_range is missing (Python has no binding)."""
        if hasattr(os, "posix_fadvise"):
            try:
                os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
            except OSError:
                pass

    def close(self, fd: int) -> None:
        os.close(fd)

    def file_size(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def truncate(self, path: str, size: int) -> None:
        fd = self._open_at(path, os.O_WRONLY | os.O_NONBLOCK, "truncates")
        self._regular_only(fd, path, "truncates")  # (closes fd when it refuses)
        try:
            self._os(os.ftruncate, path, fd, size, _pass_path=False)
        finally:
            os.close(fd)

    # Syncing changes no name and no byte, so it needs no containment (a new root's parent is synced);
    # below a root it still goes through the root's descriptor, so it syncs what the run changed.
    def fsync_path(self, path: str) -> None:
        self._fsync_opened(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)

    def fsync_dir(self, path: str) -> None:
        for root in self._roots:  # the parent of a root made by this run: from the descriptor it was made in
            if os.path.abspath(path) == os.path.dirname(root.path) and root.fsync_parent():
                return
        self._fsync_opened(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def _fsync_opened(self, path: str, flags: int) -> None:
        with self._in(path) as (dfd, name):
            fd = self._os(os.open, path, name, flags, dir_fd=dfd, _pass_path=False)
        try:
            self._os(os.fsync, path, fd, _pass_path=False)
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        with self._at(src, "moves") as (sfd, sname), self._at(dst, "moves") as (dfd, dname):
            if sfd is None or dfd is None:
                raise Refused("walctl never moves the target directory itself", src)
            self._no_link(sname, sfd, src, "moves")
            self._os(os.rename, src, sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd, _pass_path=False)

    def unlink(self, path: str) -> None:
        with self._at(path, "deletes") as (dfd, name):
            if dfd is None:
                raise Refused("walctl never deletes the target directory itself", path)
            self._no_link(name, dfd, path, "deletes")
            self._os(os.unlink, path, name, dir_fd=dfd, _pass_path=False)

    def mkdir(self, path: str) -> None:
        with self._at(path, "creates") as (dfd, name):
            if dfd is None:
                name.mkdir(0o755)  # the root itself: made from its parent's descriptor, then held
                return
            self._os(os.mkdir, path, name, 0o755, dir_fd=dfd, _pass_path=False)

    def rmdir(self, path: str) -> None:
        with self._at(path, "deletes") as (dfd, name):
            if dfd is None:
                raise Refused("walctl never deletes the target directory itself", path)
            self._no_link(name, dfd, path, "deletes")
            self._os(os.rmdir, path, name, dir_fd=dfd, _pass_path=False)

    def _no_link(self, name: str, dfd: int, path: str, what: str) -> None:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError as e:
            raise os_problem(e, path) from None
        if stat.S_ISLNK(st.st_mode):
            raise Refused(f"a symbolic link; walctl never {what} a link", path)

    def same_device(self, a: str, b: str) -> bool:
        try:
            devices = []
            for p in (a, b):
                with self._in(p) as (dfd, name):
                    devices.append(os.stat(name, dir_fd=dfd).st_dev)
            return devices[0] == devices[1]
        except (OSError, WalctlError):
            return False

    @staticmethod
    def _os(func, path, *args, _pass_path=True, **kw):
        try:
            return func(path, *args, **kw) if _pass_path else func(*args, **kw)
        except OSError as e:
            raise os_problem(e, path) from None


DEFAULT_FS = OsFileSystem()
