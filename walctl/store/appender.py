"""Appends V2 records to a chunk directory: sequence assignment, sync policy, chunk rolling.

It trusts its caller (ops/write.py) to have taken the directory's lock, checked the directory and cut
any torn tail: it starts from a known-good state and keeps it good. Assigning a sequence and writing
its record happen under one lock, so threads can share a writer.

Under sync=always every record is written and fdatasync'ed before append returns. Under batch and
none, records are gathered in memory and written in one system call at each sync point (group
commit), when 1 MiB has gathered, at a chunk roll and at close: a crash loses the same records it
would have lost from the page cache, and the writer does ~100x fewer system calls.
"""
from __future__ import annotations

import os
import threading
import time

from ..format.names import chunk_name
from ..format.v2 import compress_payload, encode_file_header, encode_record
from .fs import DEFAULT_FS

SYNC_ALWAYS = "always"
SYNC_BATCH = "batch"
SYNC_NONE = "none"
SYNC_POLICIES = (SYNC_ALWAYS, SYNC_BATCH, SYNC_NONE)
WRITE_BUFFER_BYTES = 1 << 20


class ChunkAppender:
    def __init__(self, directory: str, *, next_sequence: int, chunk_index: int, chunk_exists: bool,
                 fs=DEFAULT_FS, sync: str = SYNC_BATCH, batch_records: int = 100, batch_ms: int = 1000,
                 max_chunk_bytes: int = 8 << 20, compress_threshold: int | None = None,
                 clock_ms=None):
        if sync not in SYNC_POLICIES:
            raise ValueError(f"sync policy must be one of {', '.join(SYNC_POLICIES)}")
        self.directory = directory
        self.fs = fs
        self.sync = sync
        self.batch_records = max(1, batch_records)
        self.batch_ms = max(1, batch_ms)
        self.max_chunk_bytes = max_chunk_bytes
        self.compress_threshold = compress_threshold
        self.clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._lock = threading.Lock()
        self.next_sequence = next_sequence
        self.durable_sequence = next_sequence - 1  # everything before us was read back from disk
        self.records_written = 0
        self.chunks_created: list[str] = []
        self._pending = 0
        self._pending_since = 0.0
        self._fd: int | None = None
        self._buf = bytearray()  # records not yet handed to the kernel (batch and none)
        self._unsynced_closed: list[str] = []  # chunks rolled away under sync=none
        self._failed: BaseException | None = None  # a failed fsync poisons the writer (see _check)
        self._new_names = False  # a chunk was created under sync=none: its directory entry is unsynced
        self._index = chunk_index
        self._open_chunk(chunk_exists)
        self._stop = threading.Event()
        self._flusher = None
        if sync == SYNC_BATCH:
            # Group commit's time bound must hold even when the caller goes quiet.
            self._flusher = threading.Thread(target=self._flush_loop, name="walctl-flush", daemon=True)
            self._flusher.start()

    # ---- public ----

    def append(self, type_ordinal: int, memory_id: bytes, payload: bytes, timestamp_ms: int | None = None) -> int:
        """Writes one record; returns its sequence. Durable on return only under sync=always."""
        stored, flags = compress_payload(payload, self.compress_threshold)
        with self._lock:
            self._check()
            seq = self.next_sequence
            ts = self.clock_ms() if timestamp_ms is None else timestamp_ms
            record = encode_record(seq, type_ordinal, memory_id, ts, stored, flags)
            self.next_sequence = seq + 1
            self._size += len(record)
            self.records_written += 1
            if self.sync == SYNC_ALWAYS:
                self._write(record)
                self._fsync_active()
                self.durable_sequence = seq
            else:
                self._buf += record
                if self.sync == SYNC_BATCH:
                    if not self._pending:
                        self._pending_since = time.monotonic()
                    self._pending += 1
                    if (self._pending >= self.batch_records
                            or (time.monotonic() - self._pending_since) * 1000 >= self.batch_ms):
                        self._sync_locked()
                if len(self._buf) >= WRITE_BUFFER_BYTES:
                    self._drain()
            if self._size >= self.max_chunk_bytes:  # Java's rule: roll once a write reaches the size
                self._roll_locked()
            return seq

    def append_raw(self, record: bytes, sequence: int) -> int:
        """Copies an already-encoded record verbatim (salvage keeps the original bytes and CRCs). The
        sequence may jump forward (salvaged WALs keep their gaps); it may never go back."""
        with self._lock:
            self._check()
            if sequence < self.next_sequence:
                raise ValueError(f"sequence {sequence} would go back (next is {self.next_sequence})")
            self.next_sequence = sequence + 1
            self._size += len(record)
            self.records_written += 1
            self._buf += record
            if len(self._buf) >= WRITE_BUFFER_BYTES:
                self._drain()
            if self._size >= self.max_chunk_bytes:
                self._roll_locked()
            return sequence

    def flush(self) -> int:
        """Makes everything written so far durable; returns the durable sequence."""
        with self._lock:
            self._check()
            self._sync_locked()
            return self.durable_sequence

    def close(self) -> int:
        """Syncs (whatever the policy: closing is a durability point) and closes; returns the durable
        sequence."""
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
        with self._lock:
            if self._fd is not None:
                try:
                    if self._failed is None:
                        self._sync_locked()
                finally:
                    self.fs.close(self._fd)
                    self._fd = None
            if self._failed is not None:
                raise self._failed
            return self.durable_sequence

    @property
    def last_sequence(self) -> int:
        return self.next_sequence - 1

    @property
    def active_chunk(self) -> str:
        return chunk_name(self._index)

    # ---- internals ----

    @property
    def _path(self) -> str:
        return os.path.join(self.directory, chunk_name(self._index))

    def _open_chunk(self, exists: bool) -> None:
        path = self._path
        if exists:
            self._fd = self.fs.open_append(path)
            self._size = self.fs.file_size(self._fd)
            return
        self._fd = self.fs.open_append(path, create=True, exclusive=True)
        header = encode_file_header()
        self.fs.write(self._fd, header, path)
        self._size = len(header)
        self.chunks_created.append(chunk_name(self._index))
        if self.sync != SYNC_NONE:
            # The new name must survive a crash before any record in it is acknowledged.
            self.fs.fsync(self._fd, path)
            self.fs.fsync_dir(self.directory)
        else:
            self._new_names = True

    def _check(self) -> None:
        if self._failed is not None:
            # After a failed fsync the kernel may have dropped the dirty pages: nothing written since
            # the last good sync can be trusted, so the writer refuses to go on.
            raise self._failed
        if self._fd is None:
            raise ValueError("writer is closed")

    def _write(self, data) -> None:
        try:
            self.fs.write(self._fd, data, self._path)
        except BaseException as e:
            self._failed = e  # a partial write may sit in the file: nothing more may follow it
            raise

    def _drain(self) -> None:
        if self._buf:
            self._write(self._buf)
            self._buf = bytearray()

    def _fsync_active(self) -> None:
        try:
            self.fs.fsync(self._fd, self._path)
        except BaseException as e:
            self._failed = e
            raise

    def _sync_locked(self) -> None:
        self._drain()
        try:
            for path in self._unsynced_closed:
                self.fs.fsync_path(path)
            if self._unsynced_closed or self._new_names:
                self.fs.fsync_dir(self.directory)
                self._new_names = False
            self._unsynced_closed.clear()
        except BaseException as e:
            self._failed = e
            raise
        if self.sync != SYNC_ALWAYS or self._pending:
            self._fsync_active()
        self._pending = 0
        self.durable_sequence = self.next_sequence - 1

    def _roll_locked(self) -> None:
        if self.sync != SYNC_NONE:
            self._sync_locked()
        else:
            self._drain()
            self._unsynced_closed.append(self._path)
        self.fs.close(self._fd)
        self._index += 1
        self._open_chunk(False)

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.batch_ms / 1000):
            with self._lock:
                if self._fd is not None and self._pending:
                    try:
                        self._sync_locked()
                    except BaseException:  # noqa: BLE001 - kept in _failed; the next call raises it
                        return
