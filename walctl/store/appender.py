"""Appends V2 records to a chunk directory: sequence assignment, sync policy, chunk rolling.

It trusts its caller (ops/wal/write.py) to have taken the directory's lock, checked the directory and cut
any torn tail: it starts from a known-good state and keeps it good. Assigning a sequence and encoding
its record happen under one lock, so threads can share a writer.

sync=always: every record is on disk before append returns: the chunk is open with O_DSYNC, so one
  write system call does what write + fdatasync would do in two (PostgreSQL's open_datasync).
sync=batch (group commit, store/group_commit.py): records gather in memory; every `batch_records`
  records, or once the oldest has waited `batch_ms`, the group is committed (synced by a helper process
  or a commit thread) while appends go on filling the next group; few groups are in flight, so memory
  and what a crash can take stay bounded. durable_sequence says what has been synced.
sync=none: records gather in memory and are written when 1 MiB has gathered, at a roll and at close;
  nothing is synced before close.
Every policy syncs at close (a durability point), and batch also at each chunk roll.

A failed write or fsync poisons the writer: after it the kernel may have dropped dirty pages, so no
later acknowledgement could be trusted (the PostgreSQL fsync lesson). Every later call raises it.
"""
from __future__ import annotations

import os
import threading
import time

from ..format.names import chunk_name
from ..format.seqindex import MARK_BYTES, MARK_RECORDS
from ..format.v2 import compress_payload, encode_file_header, encode_record
from .fs import DEFAULT_FS
from .group_commit import GroupCommit

SYNC_ALWAYS = "always"
SYNC_BATCH = "batch"
SYNC_NONE = "none"
SYNC_POLICIES = (SYNC_ALWAYS, SYNC_BATCH, SYNC_NONE)
WRITE_BUFFER_BYTES = 1 << 20
# Durable records between two updates of the points of the file being appended to: an update costs its
# sealer thread ~0.7 ms under the GIL (1,024 cost batch writes 15-20% here, 4,096 within the noise), and a
# reader seeking in the active file scans at most this many records past its last point.
POINTS_EVERY = 4096


class ChunkAppender(GroupCommit):
    def __init__(self, directory: str, *, next_sequence: int, chunk_index: int, chunk_exists: bool,
                 fs=DEFAULT_FS, sync: str = SYNC_BATCH, batch_records: int = 100, batch_ms: int = 1000,
                 max_chunk_bytes: int = 8 << 20, compress_threshold: int | None = None,
                 clock_ms=None, naming=chunk_name, file_header: bytes | None = None,
                 max_records_per_file: int | None = None, records_in_file: int = 0,
                 chunk_first_sequence: int | None = None, on_closed=None, on_durable=None):
        """naming/file_header/max_records_per_file describe the layout: V2 chunks by default; ADR-003
        segments pass segment_name, no header, and 10,000 entries per file.
        on_closed(items, durable_sequence): called once chunks closed for good are synced, with
        (name, first_seq, last_seq, records) for each (the ledger's seal lines); records_in_file and
        chunk_first_sequence describe a continued chunk.
        on_durable(name, first_seq, durable_sequence, marks): records first_seq..durable_sequence of the
        file being appended to are durable (told every POINTS_EVERY records, and at flush and close), with
        the marks (sequence, offset) among them not told before: the sequence index's points
        (store/seqpoints.py). A mark is the first record this writer puts in a file, then one every
        MARK_RECORDS records or MARK_BYTES bytes, noted as the record is accepted (cheaper than any
        reading back)."""
        self.on_closed = on_closed
        self._init_marks(on_durable, next_sequence)
        self._closed_pending: list[tuple] = []
        self._chunk_first = chunk_first_sequence if chunk_exists else None
        self.naming = naming
        self.file_header = encode_file_header() if file_header is None else file_header
        self.max_records_per_file = max_records_per_file
        self._in_file = records_in_file
        if sync not in SYNC_POLICIES:
            raise ValueError(f"sync policy must be one of {', '.join(SYNC_POLICIES)}")
        self.directory = directory
        self.fs = fs
        self.sync = sync
        self._always, self._batch = sync == SYNC_ALWAYS, sync == SYNC_BATCH
        self.batch_records = max(1, batch_records)
        self.batch_ms = max(1, batch_ms)
        self.max_chunk_bytes = max_chunk_bytes
        self.compress_threshold = compress_threshold
        self.clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self.next_sequence = next_sequence
        self._durable = next_sequence - 1  # everything before us was read back from disk
        self.first_sequence = next_sequence
        self._raw_records = 0
        self.chunks_created: list[str] = []
        self._pending = 0  # records in _buf (batch)
        self._pending_since = 0.0
        self._fd: int | None = None
        self._buf = bytearray()  # records not yet handed to the kernel
        self._init_group_commit(self._batch, fs.sync_helper, next_sequence)
        self._unsynced_closed: list[str] = []  # chunks rolled away under sync=none
        self._new_names = False  # a chunk was created under sync=none: its directory entry is unsynced
        self._failed: BaseException | None = None
        self._stopping = False
        self._index = chunk_index
        self._path_of: tuple[int | None, str] = (None, "")
        self._open_chunk(chunk_exists)
        if self._batch:
            self._start_committer()

    def _init_marks(self, on_durable, next_sequence: int) -> None:
        self.on_durable = on_durable
        self._noted = next_sequence - 1  # the durable sequence on_durable was last told
        self._last_off = 0  # where the last record accepted starts
        self._new_file_notes(whole=False)  # a continued file: others' records come first

    def _new_file_notes(self, whole: bool) -> None:
        """What this writer notes of the file it starts appending to (_index_hint, on_durable)."""
        self._marks: list = []  # of the file being appended to, by this writer
        self._marks_told = 0
        self._mark_n = MARK_RECORDS  # records since the last mark, itself included: the next one is a mark
        self._mark_off = 0
        self._whole = whole  # this writer wrote every record of the file with append(): the hint holds
        self._ts_lo, self._ts_hi = 1 << 63, -(1 << 63)

    # ---- public ----

    def append(self, type_ordinal: int, memory_id: bytes | str, payload: bytes = b"",
               timestamp_ms: int | None = None) -> int:
        """Writes one record; returns its sequence. Durable on return only under sync=always."""
        # The hot path of every writer (~3 us a record here): acquire/release costs half of `with`.
        if memory_id.__class__ is str:
            memory_id = memory_id.encode("utf-8")
        stored, flags = (payload, 0) if self.compress_threshold is None else \
            compress_payload(payload, self.compress_threshold)
        lock = self._lock
        lock.acquire()
        try:
            if self._failed is not None or self._fd is None:
                self._check()
            seq = self.next_sequence
            ts = self.clock_ms() if timestamp_ms is None else timestamp_ms
            record = encode_record(seq, type_ordinal, memory_id, ts, stored, flags)
            if ts < self._ts_lo:  # the file's least and greatest time, for its index line (store/seqindex.py)
                self._ts_lo = ts
            if ts > self._ts_hi:
                self._ts_hi = ts
            handed_off = self._accept_locked(record, seq)
        finally:
            lock.release()
        if handed_off:
            # Let the commit thread take the group and enter its write and fdatasync now (they release
            # the GIL), instead of waiting for this thread's next switch interval: that is what lets the
            # sync overlap the encoding of the next group.
            time.sleep(0)
        return seq

    def append_encoded(self, encode) -> int:
        """Appends `encode(sequence)` under the lock that assigns the sequence (formats other than V2)."""
        with self._lock:
            self._check()
            seq = self.next_sequence
            handed_off = self._accept_locked(encode(seq), seq)
        if handed_off:
            time.sleep(0)
        return seq

    def append_raw(self, record: bytes, sequence: int) -> int:
        """Copies an already-encoded record verbatim (salvage keeps the original bytes and CRCs). The
        sequence may jump forward (salvaged WALs keep their gaps); it may never go back."""
        with self._lock:
            self._check()
            if sequence < self.next_sequence:
                raise ValueError(f"sequence {sequence} would go back (next is {self.next_sequence})")
            self._raw_records += 1
            self._whole = False  # copied records: the index line is built from the file's bytes
            handed_off = self._accept_locked(record, sequence)
        if handed_off:
            time.sleep(0)
        return sequence

    def flush(self) -> int:
        """Makes everything written so far durable; returns the durable sequence."""
        with self._lock:
            self._check()
            self._sync_locked()
            self._note_durable_locked(force=True)
            return self._durable

    def close(self) -> int:
        """Syncs (whatever the policy: closing is a durability point) and closes; returns the durable
        sequence."""
        with self._lock:
            self._stopping = True
            self._cv.notify_all()
        if self._committer is not None:
            self._committer.join()
        with self._lock:
            if self._fd is not None:
                try:
                    if self._failed is None:
                        self._sync_locked()
                        self._note_durable_locked(force=True)
                finally:
                    self._close_fds()
                    self._stop_helper()
            if self._failed is not None:
                raise self._failed
            return self._durable

    @property
    def durable_sequence(self) -> int:
        """The last sequence known to be on disk. With a sync helper, answers that have arrived are taken
        here, so polling this sees a group durable as soon as its fdatasync returns; it never waits for
        the lock (a busy writer takes the answers itself at its next group)."""
        if self._helper is not None and self._helper.outstanding and self._lock.acquire(blocking=False):
            try:
                if self._helper is not None and self._failed is None:
                    self._collect_helper_locked(block=False)
            except BaseException:  # noqa: BLE001 - kept in _failed for the writer's next call
                if self._failed is None:
                    raise
            finally:
                self._lock.release()
        return self._durable

    @property
    def records_written(self) -> int:
        # append hands out consecutive sequences; append_raw (salvage) may jump, so it counts itself
        return self._raw_records or self.next_sequence - self.first_sequence

    @property
    def last_sequence(self) -> int:
        return self.next_sequence - 1

    @property
    def active_chunk(self) -> str:
        return self.naming(self._index)

    # ---- internals (callers hold self._lock) ----

    @property
    def _path(self) -> str:
        if self._path_of[0] != self._index:  # one join per chunk, not one per write
            self._path_of = (self._index, os.path.join(self.directory, self.naming(self._index)))
        return self._path_of[1]

    def _check(self) -> None:
        if self._failed is not None:
            raise self._failed
        if self._fd is None:
            raise ValueError("writer is closed")

    def _close_fds(self) -> None:
        for fd in (self._fd, self._dsync_fd):
            if fd is not None:
                self.fs.close(fd)
        self._fd = self._dsync_fd = None

    def _open_chunk(self, exists: bool) -> None:
        path = self._path
        if exists:
            self._fd = self.fs.open_append(path, dsync=self._always)
            self._size = self.fs.file_size(self._fd)
            if self._batch:
                self._dsync_fd = self.fs.open_append(path, dsync=True)
            return
        self._fd = self.fs.open_append(path, create=True, exclusive=True, dsync=self._always)
        header = self.file_header
        if header:
            self.fs.write(self._fd, header, path)
        self._size = len(header)
        self._in_file = 0
        self._chunk_first = None
        self._new_file_notes(whole=not self.max_records_per_file)  # V2 chunks: append() notes times; segments: not
        self.chunks_created.append(self.naming(self._index))
        if self.sync != SYNC_NONE:
            # The new name must survive a crash before any record in it is acknowledged.
            self.fs.fsync(self._fd, path)
            self.fs.fsync_dir(self.directory)
        else:
            self._new_names = True
        if self._batch:
            self._dsync_fd = self.fs.open_append(path, dsync=True)
        if self._helper is not None:
            self._helper_call(self._helper.open, self._fd)

    def _guard(self, op, *args) -> None:
        try:
            op(*args)
        except BaseException as e:
            self._failed = e
            raise

    def _write(self, data) -> None:
        self._guard(self.fs.write, self._fd, data, self._path)

    def _fsync_active(self) -> None:
        self._guard(self.fs.fsync, self._fd, self._path)

    def _drain(self) -> None:
        if self._buf:
            self._write(self._buf)
            self._buf = bytearray()

    def _accept_locked(self, data, seq: int) -> bool:
        """Takes one encoded record (or frame) holding sequence `seq`: written now under sync=always, else
        gathered for its group. True when a group was handed to the commit thread."""
        self.next_sequence = seq + 1
        self._last_off = off = self._size
        self._size = off + len(data)
        if not self._in_file:
            self._chunk_first = seq
        self._in_file += 1
        n = self._mark_n + 1
        if n > MARK_RECORDS or off - self._mark_off >= MARK_BYTES:
            self._marks.append((seq, off))
            self._mark_off, n = off, 1
        self._mark_n = n
        handed_off = False
        if self._always:
            self._write(data)  # O_DSYNC: durable when it returns
            self._durable = seq
            if seq - self._noted >= POINTS_EVERY:
                self._note_durable_locked()
        else:
            self._buf += data
            if self._batch:
                self._pending += 1
                if self._pending == 1:
                    self._pending_since = time.monotonic()
                elif self._pending >= self.batch_records:
                    handed_off = self._hand_off_locked()
            elif len(self._buf) >= WRITE_BUFFER_BYTES:
                self._drain()
        # Java's rule: roll once a write brings the file to the size (segments also roll by count)
        if self._size >= self.max_chunk_bytes or (
                self.max_records_per_file is not None and self._in_file >= self.max_records_per_file):
            self._roll_locked()
        return handed_off

    def _sync_locked(self) -> None:
        """Everything written so far reaches the disk, in this thread."""
        self._wait_idle_locked()
        self._drain()
        for path in self._unsynced_closed:
            self._guard(self.fs.fsync_path, path)
        if self._unsynced_closed or self._new_names:
            self._guard(self.fs.fsync_dir, self.directory)
            self._new_names = False
        self._unsynced_closed.clear()
        if not self._always:
            self._fsync_active()
        self._pending = 0
        self._durable = self.next_sequence - 1
        if self._closed_pending and self.on_closed is not None:
            closed, self._closed_pending = self._closed_pending, []
            self._guard(self.on_closed, closed, self._durable)

    def _note_durable_locked(self, force: bool = False) -> None:
        """Tells on_durable how far the file being appended to is durable, every POINTS_EVERY records
        (or now, `force`). A file rolled away is sealed instead: it is not told."""
        upto = self._durable
        if self.on_durable is None or upto <= self._noted or (not force and upto - self._noted < POINTS_EVERY):
            return
        self._noted = upto
        if self._chunk_first is not None and upto >= self._chunk_first and self._fd is not None:
            told = new = self._marks_told
            while new < len(self._marks) and self._marks[new][0] <= upto:
                new += 1
            self._marks_told = new
            # the commit thread calls this too: what escapes a hint (a simulated crash, a bug) poisons the
            # writer like a failed write, so that the appending thread sees it instead of waiting forever
            self._guard(self.on_durable, self.naming(self._index), self._chunk_first, upto,
                        tuple(self._marks[told:new]))

    def _index_hint(self):
        """What the sealer needs to index the file being closed without reading every record again:
        (marks, where the last record starts, least and greatest time), when this writer wrote all of it
        with append(); None otherwise (store/seqindex.py then builds the line from the file's bytes)."""
        if not self._whole or not self._in_file or self._ts_lo > self._ts_hi:
            return None
        return tuple(self._marks), self._last_off, self._ts_lo, self._ts_hi

    def _roll_locked(self) -> None:
        if self.on_closed is not None:  # sealed once synced: at once, or (sync=none) at the next sync
            self._closed_pending.append((self.naming(self._index), self._chunk_first, self.next_sequence - 1,
                                         self._in_file, self._index_hint()))
        if self.sync != SYNC_NONE:
            self._sync_locked()
        else:
            self._drain()
            self._unsynced_closed.append(self._path)
        self._close_fds()
        self._index += 1
        self._open_chunk(False)

