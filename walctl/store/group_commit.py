"""Group commit for sync=batch: how ChunkAppender (store/appender.py) hands a gathered group of records
to the disk while appends go on filling the next one.

Every `batch_records` records, or once the oldest has waited `batch_ms`, the group is committed. On the
real file system the appending thread writes the group and a helper process (synchelper.py) fdatasyncs
it and answers through a socket: a thread would need the GIL back to report, and waiting for it cost
50-100 us a group here. Elsewhere (or if the helper cannot start or dies) a commit thread writes the
group with one O_DSYNC write. Groups reach the disk in order, each with its own sync, and few are in
flight (HELPER_DEPTH with the helper, one with the commit thread): a further full group waits, so memory
and what a crash can take stay bounded. A failed sync poisons the writer (`_failed`), as in the appender.

GroupCommit is a part of ChunkAppender, split out by responsibility (issue #13), not a class of its own:
it shares the appender's lock, condition, buffer and sequence counters. Every method expects the caller
to hold `self._lock`, except the set-up the appender's constructor calls and `_commit_loop`, the commit
thread's body, which takes it.
"""
from __future__ import annotations

import os
import threading
import time

# Groups written and waiting for the helper's fdatasync: with two, the helper finds the next request
# waiting when a sync ends, and the writer rarely waits for it (0.5x -> 0.7x of the raw loop here).
HELPER_DEPTH = 2


class GroupCommit:
    """The sync=batch half of ChunkAppender. Its own state is set by _init_group_commit; it also uses the
    appender's _lock, _cv, _buf, _pending, _pending_since, next_sequence, _durable, _failed, _stopping,
    batch_ms, fs, _fd, _path, _write, _fsync_active and _note_durable_locked."""

    def _init_group_commit(self, batch: bool, sync_helper: bool, next_sequence: int) -> None:
        self._inflight: tuple[bytes, int] | None = None  # (group, its last sequence) being committed
        self._dsync_fd: int | None = None  # batch: the commit thread's O_DSYNC descriptor on the chunk
        # batch where the file system allows a sync helper (store/fs.py): groups are written by the appending thread and synced by a helper
        # process (store/synchelper.py), started with the first group; None until then, or for good once
        # it could not start or stopped answering (the commit thread then syncs, as on other file systems)
        self._helper = None
        self._use_helper = batch and sync_helper
        self._last_written = next_sequence - 1  # helper mode: the last sequence handed to the kernel
        self._committer: threading.Thread | None = None

    def _start_committer(self) -> None:
        self._committer = threading.Thread(target=self._commit_loop, name="walctl-commit", daemon=True)
        self._committer.start()

    def _wait_idle_locked(self) -> None:
        while self._inflight is not None:
            self._cv.wait()
        if self._helper is not None and self._helper.outstanding:
            self._collect_helper_locked(block=True)
        if self._failed is not None:
            raise self._failed

    def _hand_off_locked(self) -> bool:
        """Commits the gathered group: written here and synced by the helper process (at most
        HELPER_DEPTH groups unanswered), or given to the commit thread (True; one group in flight)."""
        if self._helper is not None:
            self._collect_helper_locked(block=True, until=HELPER_DEPTH - 1)
            if self._failed is not None:
                raise self._failed
        else:
            self._wait_idle_locked()
        if self._use_helper and (self._helper is not None or self._start_helper_locked()):
            self._write(self._buf)  # to the page cache; the helper's fdatasync makes it durable
            self._buf = bytearray()
            self._pending = 0
            self._last_written = self.next_sequence - 1
            self._helper_call(self._helper.request, self._last_written)
            return False
        self._inflight = (bytes(self._buf), self.next_sequence - 1)
        self._buf = bytearray()
        self._pending = 0
        self._cv.notify_all()
        return True

    # ---- the sync helper ----

    def _start_helper_locked(self) -> bool:
        from .synchelper import HelperGone, SyncHelper

        try:
            self._helper = SyncHelper(self._fd)
        except (OSError, HelperGone):  # no interpreter to start, no processes left ...: the commit thread syncs
            self._use_helper = False
        return self._helper is not None

    def _helper_call(self, op, *args) -> None:
        from .synchelper import HelperGone

        try:
            op(*args)
        except HelperGone:
            self._helper_gone()

    def _collect_helper_locked(self, block: bool, until: int = 0) -> None:
        """Takes the helper's answers (with block, until at most `until` are outstanding): each success
        makes its group durable; a failed fdatasync poisons the writer like a failed O_DSYNC write."""
        from ..errors import EnvironmentProblem
        from .synchelper import HelperGone

        try:
            answers = self._helper.answers(block, until)
        except HelperGone:
            self._helper_gone()
            return
        for err, ticket in answers:
            if err and self._failed is None:
                self._failed = EnvironmentProblem(f"fdatasync failed: {os.strerror(err)}", self._path)
            elif not err:
                self._durable = max(self._durable, ticket)
        self._note_durable_locked()

    def _helper_gone(self) -> None:
        """The helper died (killed, out of memory): sync what it may not have, then go on with the commit
        thread. Nothing it had not confirmed was ever reported durable."""
        self._stop_helper()
        self._use_helper = False
        if self._failed is None and self._fd is not None:
            self._fsync_active()  # every group written so far, whatever the helper did with them
            self._durable = max(self._durable, self._last_written)

    def _stop_helper(self) -> None:
        helper, self._helper = self._helper, None
        if helper is not None:
            helper.close()

    # ---- the commit thread ----

    def _in_background(self, op, *args) -> None:
        """The commit thread's own steps: a failure is kept in _failed (every later call raises it), never
        raised in this thread, where nobody would see it but stderr."""
        try:
            op(*args)
        except BaseException:  # noqa: BLE001
            if self._failed is None:
                raise

    def _commit_loop(self) -> None:
        with self._lock:
            while True:
                if self._inflight is None and not self._stopping and self._pending and self._failed is None \
                        and (time.monotonic() - self._pending_since) * 1000 >= self.batch_ms:
                    self._in_background(self._hand_off_locked)  # the time bound: a quiet writer's group goes
                if self._inflight is not None:
                    group, last = self._inflight
                    fd, path = self._dsync_fd, self._path
                    self._lock.release()  # appends go on filling the next group meanwhile
                    try:
                        self.fs.write(fd, group, path)  # O_DSYNC: durable when it returns
                        error = None
                    except BaseException as e:  # noqa: BLE001 - kept in _failed; every later call raises it
                        error = e
                    finally:
                        self._lock.acquire()
                    if error is None:
                        self._durable = max(self._durable, last)
                        self._in_background(self._note_durable_locked)
                    elif self._failed is None:
                        self._failed = error
                    self._inflight = None
                    self._cv.notify_all()
                    continue
                if self._helper is not None and self._helper.outstanding:
                    # A quiet writer's last group: nobody else would take its answer. An answer waited
                    # for a quarter period is surely there, or about to be.
                    asked = self._helper.outstanding[0][1]
                    self._in_background(self._collect_helper_locked,
                                        (time.monotonic() - asked) * 1000 >= self.batch_ms / 4)
                if self._stopping:
                    return
                # Wake four times per period: a record waits at most ~1.25 x batch_ms for its commit.
                self._cv.wait(self.batch_ms / 4000)
