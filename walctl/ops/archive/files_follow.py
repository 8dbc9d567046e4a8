"""archive push --follow of a task-log directory or a Substrat root: each poll pushes what changed as new
file versions (ops/archive/files.py; a log's appended lines once they are complete), until SIGINT/SIGTERM
or the timeout. One follower per namespace, as for a WAL (ops/archive/lock.py)."""
from __future__ import annotations

import os
import time

from ...errors import EXIT_OK, UsageError
from ...store.objstore import open_store
from .objects import check_namespace
from .lock import MIN_HEARTBEAT_S, NamespaceLock


class FilesShipper:
    """poll() pushes the directory's changed files as versions; close() drops the namespace lock. Library
    use: poll() after the writer appends (or on a timer). Files whose size and mtime are as the last poll
    saw them are not read again."""

    def __init__(self, root: str, dest: str, *, namespace: str | None = None, endpoint_url: str | None = None,
                 interval: float = 1.0, store=None, wall=time.time, clock=time.monotonic,
                 checkpoints: str | None = None, **_):
        if checkpoints:
            raise UsageError("--checkpoints goes with a WAL directory, not a task-log directory or agent root", root)
        self.root, self.dest, self.endpoint_url, self.clock = root, dest, endpoint_url, clock
        self.store = store or open_store(dest, endpoint_url)
        self.ns = namespace or os.path.basename(os.path.abspath(root))
        check_namespace(self.ns)
        self.lock = NamespaceLock(self.store, self.ns, max(interval, MIN_HEARTBEAT_S), wall)
        self.uploaded: list[str] = []
        self.held_back: list[str] = []
        self.warnings: list[str] = []
        self.bytes_uploaded = 0
        self.seen: tuple | None = None

    def poll(self) -> None:
        from .push import push

        self.warnings += self.lock.hold()
        stamp = _stamp(self.root)
        if stamp == self.seen:
            return
        rep = push(self.root, self.dest, namespace=self.ns, endpoint_url=self.endpoint_url)
        self.uploaded += list(rep.uploaded)
        self.bytes_uploaded += rep.bytes_uploaded
        self.held_back += [f"{f.file}: {f.reason}" for f in rep.held_back if f"{f.file}: {f.reason}" not in
                           self.held_back]
        self.warnings += [w for w in rep.warnings if w not in self.warnings]
        if not rep.failed and not rep.conflicts:
            self.seen = stamp

    def close(self) -> None:
        self.lock.release()

    def report(self, ended_by: str, problem: str | None = None, code: int = EXIT_OK):
        from .follow import ShipReport  # (archive_follow reaches this class through the kinds table)

        return ShipReport(self.store.url, self.ns, 0, tuple(self.uploaded), (), tuple(self.held_back),
                          self.bytes_uploaded, None, ended_by, problem, code, tuple(self.warnings))


def _stamp(root: str) -> tuple:
    """(path, size, mtime) of every file a push would read: what a poll compares with the last one."""
    from ..kinds import KINDS
    from ..wal.verify import detect_kind

    sources = KINDS[detect_kind(root)].load("sources")(root)
    return tuple((rel, st.st_size, st.st_mtime_ns) for rel, path in sources if (st := _lstat(path)) is not None)


def _lstat(path: str):
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None
