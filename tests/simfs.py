"""A simulated file system behind walctl's seam (walctl/store/fs.py), after LevelDB's
fault_injection_test and Substrat's tests/stress/vfs.py.

What it models:
- file data written but not fsynced is lost in a crash, or survives only as a prefix (a torn write);
- a created, renamed or removed name is durable only once its directory is fsynced;
- an unsynced truncation survives a crash or not, at random;
- `crash_at=N` raises SimCrash at the Nth mutating operation; a write that crashes lands part-way;
- the target opened once (walctl/store/root.py): `beneath(root)` pins the directory a root names when it
  is confined (following a link the operator typed, once), and every later step below it goes to that
  directory wherever it has moved since, never through a link planted in its place; `symlink` and `hook`
  (called before each step resolved from a root) let a test swap the target mid-run.

After SimCrash the test calls `crash()`, which throws away everything volatile and leaves exactly what
a machine would find on reboot; the same object is then used again.
"""
from __future__ import annotations

import errno
import os
import random
from contextlib import contextmanager

from walctl.errors import REASON_WRONG_KIND, EnvironmentProblem, Refused, UnsupportedInput, WalctlError
from walctl.store.fs import Entry


class SimCrash(Exception):
    """The machine lost power here."""


class Inode:
    __slots__ = ("data", "synced")

    def __init__(self, data: bytes = b""):
        self.data = bytearray(data)  # what reads see (the page cache)
        self.synced = bytes(data)  # what the disk holds


class SimFS:
    # capabilities (store/fs.py): not the operating system's, so no worker processes, no sync helper, no
    # background thread: every step runs in the caller's thread, where a crash can be simulated
    worker_processes = sync_helper = background_threads = False
    hook = None  # hook(op, path): called before each step resolved from a root (as OsFileSystem.hook)

    def beneath(self, *roots: str) -> "Confined":
        return Confined(self, tuple(Pin(self, r) for r in roots))

    def require_dir(self, path: str) -> None:
        _require_dir(self, path)

    def __init__(self, seed: int = 0, crash_at: int | None = None):
        self.rng = random.Random(seed)
        self.crash_at = crash_at
        self.ops = 0
        self.files: dict[str, Inode] = {}  # the namespace as processes see it
        self.dirs: set[str] = {"/"}
        self.d_files: dict[str, Inode] = {}  # the namespace the disk holds
        self.d_dirs: set[str] = {"/"}
        self.fds: dict[int, tuple[str, Inode]] = {}
        self.dsync_fds: set[int] = set()
        self.locks: dict[str, str] = {}
        self.next_fd = 100
        self.log: list[str] = []  # the mutating operations, for a failing case's report
        self.links: dict[str, str] = {}  # symbolic links: path -> absolute target (a test's hostile swap)
        self.dir_ids: dict[str, int] = {"/": 0}  # a directory's identity, which moves with it (an inode)

    # ---- fault control ----

    def _tick(self, what: str) -> bool:
        """Counts a mutating operation; True when this one is where the power fails."""
        self.ops += 1
        self.log.append(what)
        return self.crash_at is not None and self.ops == self.crash_at

    def crash(self) -> None:
        """Power loss and reboot: keep only what was durable (plus torn prefixes of unsynced appends)."""
        survivors: dict[str, Inode] = {}
        for path, inode in self.d_files.items():
            synced, data = inode.synced, bytes(inode.data)
            if len(data) > len(synced) and data.startswith(synced):
                keep = self.rng.choice((0, 0, self.rng.randint(0, len(data) - len(synced))))
                kept = data[:len(synced) + keep]
            elif data != synced and len(data) < len(synced) and synced.startswith(data):
                kept = self.rng.choice((data, synced))  # an unsynced truncation may or may not stick
            else:
                kept = synced
            fresh = Inode(kept)
            survivors[path] = fresh
        self.files = survivors
        self.d_files = dict(survivors)
        self.dirs = set(self.d_dirs)
        self.dir_ids = {d: self.dir_ids.get(d, self._new_id()) for d in self.dirs}
        self.fds.clear()
        self.dsync_fds.clear()
        self.locks.clear()
        self.crash_at = None

    def settle(self) -> None:
        """Everything volatile becomes durable (a clean shutdown of the machine)."""
        for inode in self.files.values():
            inode.synced = bytes(inode.data)
        self.d_files = dict(self.files)
        self.d_dirs = set(self.dirs)

    # ---- helpers ----

    @staticmethod
    def _lex(path: str) -> str:
        return os.path.normpath(os.path.join("/", path))

    def _norm(self, path: str) -> str:
        """The path with every symbolic link on it followed, as the operating system resolves a path."""
        p = self._lex(path)
        for _ in range(40):
            parts, out = p.split("/")[1:], "/"
            for i, part in enumerate(parts):
                out = os.path.join(out, part)
                if out in self.links:
                    p = self._lex(os.path.join(self.links[out], *parts[i + 1:]))
                    break
            else:
                return p
        raise EnvironmentProblem("too many levels of symbolic links", path)

    def _new_id(self) -> int:
        self._last_id = getattr(self, "_last_id", 0) + 1
        return self._last_id

    def symlink(self, target: str, path: str) -> None:
        """A link at `path` (a test's hostile swap: not counted, never crashes)."""
        p = self._lex(path)
        if p in self.files or p in self.dirs or p in self.links:
            raise EnvironmentProblem(os.strerror(errno.EEXIST), path)
        self.links[p] = self._lex(target)

    def unlink_link(self, path: str) -> None:
        del self.links[self._lex(path)]

    def move_dir_now(self, src: str, dst: str) -> None:
        """A test's hostile rename of a directory (not counted, never crashes, durable at once)."""
        self.rename(src, dst, hostile=True)
        self.d_dirs, self.d_files = set(self.dirs), dict(self.files)

    def _parent(self, path: str) -> str:
        return os.path.dirname(self._norm(path))

    def _need_dir(self, path: str) -> None:
        if self._parent(path) not in self.dirs:
            raise EnvironmentProblem("no such file or directory", path)

    # ---- reads ----

    def stat(self, path: str) -> Entry:
        p = self._norm(path)
        if p in self.files:
            return Entry(os.path.basename(p), path, "file", len(self.files[p].data))
        if p in self.dirs:
            return Entry(os.path.basename(p), path, "dir", 0)
        raise EnvironmentProblem("no such file or directory", path)

    def listdir(self, path: str) -> list[Entry]:
        p = self._norm(path)
        if p not in self.dirs:
            raise EnvironmentProblem("no such file or directory", path)
        out = [Entry(os.path.basename(f), os.path.join(path, os.path.basename(f)), "file", len(i.data))
               for f, i in self.files.items() if os.path.dirname(f) == p]
        out += [Entry(os.path.basename(d), os.path.join(path, os.path.basename(d)), "dir", 0)
                for d in self.dirs if d != p and os.path.dirname(d) == p]
        return out

    def exists(self, path: str) -> bool:
        p = self._norm(path)
        return p in self.files or p in self.dirs or self.is_symlink(path)

    def is_symlink(self, path: str) -> bool:
        p = self._lex(path)
        return os.path.join(self._norm(os.path.dirname(p)), os.path.basename(p)) in self.links

    def link_count(self, path: str) -> int:
        return 1 if self._norm(path) in self.files else 0

    @contextmanager
    def map_read(self, path: str):
        p = self._norm(path)
        if p in self.dirs:
            raise UnsupportedInput("not a regular file", path)
        if p not in self.files:
            raise EnvironmentProblem("no such file or directory", path)
        yield bytes(self.files[p].data)

    def read_input(self, path: str) -> bytes:
        with self.map_read(path) as buf:
            return bytes(buf)

    def read_head(self, path: str, n: int) -> bytes:
        return self.read_range(path, 0, n)

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        with self.map_read(path) as buf:
            return buf[offset:offset + length]

    def read_durable(self, path: str) -> bytes | None:
        inode = self.d_files.get(self._norm(path))
        return None if inode is None else inode.synced

    # ---- writes ----

    def open_append(self, path: str, create: bool = False, exclusive: bool = False, dsync: bool = False) -> int:
        p = self._norm(path)
        self._need_dir(p)
        if p in self.files:
            if exclusive:
                raise EnvironmentProblem(os.strerror(errno.EEXIST), path)
            inode = self.files[p]
        elif create:
            if self._tick(f"create {p}"):
                raise SimCrash(f"create {p}")
            inode = self.files[p] = Inode()
        else:
            raise EnvironmentProblem("no such file or directory", path)
        fd = self.next_fd
        self.next_fd += 1
        self.fds[fd] = (p, inode)
        if dsync:
            self.dsync_fds.add(fd)
        return fd

    def write(self, fd: int, data, path: str = "") -> None:
        p, inode = self.fds[fd]
        data = bytes(data)
        if self._tick(f"write {p} +{len(data)}"):
            inode.data += data[:self.rng.randint(0, len(data))]  # the write tore part-way
            raise SimCrash(f"write {p}")
        inode.data += data
        if fd in self.dsync_fds:  # O_DSYNC: the data is on disk when write returns
            inode.synced = bytes(inode.data)

    def open_new(self, path: str) -> int:
        return self.open_append(path, create=True, exclusive=True)

    def pwrite(self, fd: int, data, offset: int, path: str = "") -> None:
        p, inode = self.fds[fd]
        data = bytes(data)
        if self._tick(f"pwrite {p} @{offset} +{len(data)}"):
            raise SimCrash(f"pwrite {p}")
        end = offset + len(data)
        if len(inode.data) < end:
            inode.data += bytes(end - len(inode.data))
        inode.data[offset:end] = data

    def start_writeback(self, fd: int, offset: int, length: int) -> None:
        pass  # a hint: it makes nothing durable, so the simulation has nothing to do

    def fsync(self, fd: int, path: str = "") -> None:
        p, inode = self.fds[fd]
        if self._tick(f"fsync {p}"):
            raise SimCrash(f"fsync {p}")
        inode.synced = bytes(inode.data)

    def close(self, fd: int) -> None:
        self.fds.pop(fd, None)

    def file_size(self, fd: int) -> int:
        return len(self.fds[fd][1].data)

    def truncate(self, path: str, size: int) -> None:
        p = self._norm(path)
        if self._tick(f"truncate {p} {size}"):
            raise SimCrash(f"truncate {p}")
        del self.files[p].data[size:]

    def fsync_path(self, path: str) -> None:
        p = self._norm(path)
        if self._tick(f"fsync {p}"):
            raise SimCrash(f"fsync {p}")
        self.files[p].synced = bytes(self.files[p].data)

    def fsync_dir(self, path: str) -> None:
        d = self._norm(path)
        if self._tick(f"fsync_dir {d}"):
            raise SimCrash(f"fsync_dir {d}")
        for f in [f for f in self.d_files if os.path.dirname(f) == d]:
            del self.d_files[f]
        for f, inode in self.files.items():
            if os.path.dirname(f) == d:
                self.d_files[f] = inode
        for sub in [s for s in self.d_dirs if os.path.dirname(s) == d and s != d]:
            if sub not in self.dirs:
                self.d_dirs.discard(sub)
        for sub in self.dirs:
            if os.path.dirname(sub) == d and sub != d:
                self.d_dirs.add(sub)
                old = getattr(self, "_renamed_dirs", {}).pop(sub, None)
                if old is not None:  # a renamed directory's durable contents now live under its new name
                    for f in [f for f in self.d_files if f.startswith(old + "/")]:
                        self.d_files[sub + f[len(old):]] = self.d_files.pop(f)
                    for x in [x for x in self.d_dirs if x == old or x.startswith(old + "/")]:
                        self.d_dirs.discard(x)
                        self.d_dirs.add(sub + x[len(old):])

    def rename(self, src: str, dst: str, hostile: bool = False) -> None:
        s, t = self._norm(src), self._norm(dst)
        self._need_dir(t)
        if not hostile and self._tick(f"rename {s} {t}"):
            raise SimCrash(f"rename {s}")
        if s in self.dirs:  # a directory moves with everything below it
            for old in [d for d in self.dir_ids if d == s or d.startswith(s + "/")]:
                self.dir_ids[t + old[len(s):]] = self.dir_ids.pop(old)
            for old in [f for f in self.files if f.startswith(s + "/")]:
                self.files[t + old[len(s):]] = self.files.pop(old)
            for old in [d for d in self.dirs if d == s or d.startswith(s + "/")]:
                self.dirs.discard(old)
                self.dirs.add(t + old[len(s):])
            self._durable_subtree_follows(s, t)
            return
        self.files[t] = self.files.pop(s)

    def _durable_subtree_follows(self, s: str, t: str) -> None:
        # The entries inside a renamed directory were durable under the old name; the directory's own
        # entry in its parent becomes durable when the parent is fsynced (fsync_dir), so record that
        # the subtree now lives under t once that happens.
        self._renamed_dirs = getattr(self, "_renamed_dirs", {})
        self._renamed_dirs[t] = s

    def rmdir(self, path: str) -> None:
        p = self._norm(path)
        if any(os.path.dirname(f) == p for f in self.files) or any(os.path.dirname(d) == p for d in self.dirs if d != p):
            raise EnvironmentProblem("directory not empty", path)
        if self._tick(f"rmdir {p}"):
            raise SimCrash(f"rmdir {p}")
        self.dirs.discard(p)
        self.dir_ids.pop(p, None)

    def unlink(self, path: str) -> None:
        p = self._norm(path)
        if self._tick(f"unlink {p}"):
            raise SimCrash(f"unlink {p}")
        del self.files[p]

    def mkdir(self, path: str) -> None:
        p = self._norm(path)
        self._need_dir(p)
        if p in self.dirs or p in self.files or p in self.links:
            raise EnvironmentProblem(os.strerror(errno.EEXIST), path)
        if self._tick(f"mkdir {p}"):
            raise SimCrash(f"mkdir {p}")
        self.dirs.add(p)
        self.dir_ids[p] = self._new_id()

    def makedirs_durable(self, path: str) -> None:
        """Test setup: a directory that exists on disk before the story starts."""
        parts = self._norm(path).split("/")
        for i in range(2, len(parts) + 1):
            d = "/".join(parts[:i])
            self.dirs.add(d)
            self.d_dirs.add(d)
            self.dir_ids.setdefault(d, self._new_id())

    def same_device(self, a: str, b: str) -> bool:
        return True

    def lock(self, path: str, holder: str):
        p = self._norm(path)
        if p in self.locks:
            return None
        if p not in self.files:
            self.files[p] = Inode()
        self.locks[p] = holder
        self.files[p].data = bytearray(holder.encode())
        return p

    def hold_shared(self, path: str):
        p = self._norm(path)
        if p in self.locks:
            return False
        return p if p in self.files else None

    def release_shared(self, handle) -> None:
        pass

    def unlock(self, handle) -> None:
        self.locks.pop(handle, None)
        if handle in self.files:
            self.files[handle].data = bytearray()

    def probe_writer(self, directory: str, name: str | None = None) -> str | None:
        return self.locks.get(self._norm(os.path.join(directory, name or ".walctl.lock")))


class Pin:
    """A root of a confined SimFS, as store/root.Root holds one: the directory its path named when it was
    confined (a link the operator typed followed once, and noted as the real seam notes it), found again
    by its identity wherever it has moved; a root that did not exist yet is pinned when it first does,
    from its parent, never through a link."""

    def __init__(self, base: SimFS, path: str):
        from walctl.store.root import _note_followed

        self.base, self.path = base, base._lex(path)
        self.resolved = base._norm(path)
        self.id = base.dir_ids.get(self.resolved) if self.resolved in base.dirs else None
        self.parent = base.dir_ids.get(base._norm(os.path.dirname(self.path)))
        if self.id is not None and self.resolved != self.path:
            _note_followed(self.path, self.resolved)

    def sub(self, rel: str) -> "Pin":
        """The pin of a directory `rel` below this one, found from where this one is now."""
        if not rel:
            return self
        child = Pin.__new__(Pin)
        child.base, child.path = self.base, os.path.join(self.path, rel)
        here = os.path.join(self.location(), rel)
        if here in self.base.links:
            raise Refused(f"{child.path} is a symbolic link; walctl never opens through a link", child.path)
        child.resolved = os.path.join(self.resolved, rel)
        child.id = self.base.dir_ids.get(here) if here in self.base.dirs else None
        child.parent = self.base.dir_ids.get(os.path.dirname(here))
        return child

    def _where(self, ident) -> str | None:
        return next((d for d, i in self.base.dir_ids.items() if i == ident and d in self.base.dirs), None)

    def location(self, creating: bool = False) -> str:
        """Where the pinned directory is now (EnvironmentProblem when it is gone, Refused when a link took
        the place of a root that did not exist yet)."""
        if self.id is None:
            parent = self._where(self.parent)
            spot = None if parent is None else os.path.join(parent, os.path.basename(self.path))
            if spot is not None and spot in self.base.links:
                raise Refused(f"{self.path} became a symbolic link; walctl never follows a link it did not "
                              f"start with", self.path)
            if spot is not None and (creating or spot not in self.base.dirs):
                return spot
            if spot is None:
                raise EnvironmentProblem("no such file or directory", self.path)
            self.id = self.base.dir_ids[spot]
        here = self._where(self.id)
        if here is None:
            raise EnvironmentProblem("no such file or directory", self.path)
        return here

    def below(self, path: str) -> str | None:
        """The part of `path` below this root ("" for the root itself), or None."""
        p = self.base._lex(path)
        for top in (self.path, self.resolved):
            if p == top:
                return ""
            if p.startswith(top.rstrip("/") + "/"):
                return p[len(top.rstrip("/")) + 1:]
        return None


def _require_dir(fs, path: str) -> None:
    """store/oserror.require_dir on a simulated file system: its stat says the kind."""
    if fs.stat(path).kind != "dir":
        raise EnvironmentProblem("not a directory (a file where a directory is expected)", path,
                                 kind=REASON_WRONG_KIND)


class Confined:
    """A SimFS allowed to change things only beneath its roots, each pinned when it was confined: a path
    below a root goes to the pinned directory wherever it is now, never through a link below it (the
    real seam's descriptor discipline, store/root.py)."""
    MUTATIONS = ("open_append", "open_new", "truncate", "unlink", "mkdir", "rmdir", "lock")
    READS = ("is_symlink", "link_count", "map_read", "read_head", "read_range", "read_durable", "read_input",
             "fsync_path", "fsync_dir")

    def __init__(self, base: SimFS, pins: tuple):
        self.base, self.pins = base, pins
        self.roots = tuple(p.path for p in pins)

    def beneath(self, *roots: str) -> "Confined":
        """A root already pinned (or below one) is derived from its pin, never pinned again by its path."""
        pins = []
        for r in roots:
            held = next(((p, p.below(r)) for p in self.pins if p.below(r) is not None), None)
            pins.append(Pin(self.base, r) if held is None else held[0].sub(held[1]))
        return Confined(self.base, tuple(pins))

    def beneath_too(self, *roots: str) -> "Confined":
        return Confined(self.base, self.pins + self.base.beneath(*roots).pins)

    def _physical(self, path: str, what: str, change: bool, hook: bool = True) -> str:
        for pin in self.pins:
            rel = pin.below(path)
            if rel is None:
                continue
            if hook and self.base.hook is not None:
                self.base.hook(what, path)
            here = pin.location(creating=change and rel == "")
            for i, part in enumerate(rel.split("/")[:-1] if rel and change else []):  # (reads follow, as the seam's)
                step = os.path.join(here, *rel.split("/")[:i + 1])
                if step in self.base.links:
                    raise Refused(f"{step} is a symbolic link; walctl never {what} through a link", path)
            out = os.path.join(here, rel) if rel else here
            if change and out in self.base.links:
                raise Refused(f"a symbolic link; walctl never {what} through a link", path)
            return out
        if change:
            raise Refused(f"outside {' or '.join(self.roots) or 'no target directory'}", path)
        return path

    def rename(self, src: str, dst: str) -> None:
        self._physical(src, "moves", True)
        dst = self._physical(dst, "moves", True)
        # both ends as two descriptors would hold them: wherever the pinned directory is now
        self.base.rename(self._physical(src, "moves", True, hook=False), dst)

    def stat(self, path: str) -> Entry:
        return self.base.stat(self._physical(path, "reads", False))._replace(path=path)

    def listdir(self, path: str) -> list[Entry]:
        return [e._replace(path=os.path.join(path, e.name))
                for e in self.base.listdir(self._physical(path, "reads", False))]

    def probe_writer(self, directory: str, name: str | None = None) -> str | None:
        return self.base.probe_writer(self._physical(directory, "reads", False), name)

    def same_device(self, a: str, b: str) -> bool:
        return True

    def require_dir(self, path: str) -> None:
        _require_dir(self, path)

    def exists(self, path: str) -> bool:
        try:
            return self.base.exists(self._physical(path, "reads", False))
        except WalctlError:  # the root is gone, or a link stands on the way: nothing there for this run
            return False

    def __getattr__(self, name):
        attr = getattr(self.base, name)
        if name in self.MUTATIONS or name in self.READS:
            change = name in self.MUTATIONS

            def resolved(path, *a, **kw):
                return attr(self._physical(path, name, change), *a, **kw)
            return resolved
        return attr


def load_tree(src: str, target: str = "/r", *, seed: int = 0, crash_at: int | None = None) -> SimFS:
    """A SimFS holding a copy of the real directory tree `src` under `target`, all of it durable; its
    operation counter then says how many steps the copy took (count crash points from there)."""
    fs = SimFS(seed=seed, crash_at=crash_at)
    for d, _, files in os.walk(src):
        rel = os.path.relpath(d, src)
        into = target if rel == "." else f"{target}/{rel}"
        fs.makedirs_durable(into)
        for name in files:
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            fd = fs.open_append(f"{into}/{name}", create=True)
            fs.write(fd, data)
            fs.fsync(fd)
            fs.close(fd)
    fs.settle()
    return fs
