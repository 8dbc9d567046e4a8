"""write: the library writer and what `walctl write` does.

Opening a directory takes its lock, checks it, cuts a torn tail (evidence kept, as `repair --apply`
does) and continues with the next sequence in the last chunk. A directory with corruption, a sequence
gap or an unsupported chunk is refused with that state's exit code and never appended to: appending
after damage would bury it.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ..errors import EXIT_OK, NotClean, WalctlError
from ..format import scan as fscan
from ..format.ckptmeta import decode_checkpoint_meta
from ..store import durable
from ..store.appender import SYNC_BATCH, ChunkAppender
from ..store.chunkdir import list_chunks
from ..store.fs import DEFAULT_FS
from ..store.lock import DirectoryLock, holder_text
from .repair import DEFAULT_MAX_DROP_BYTES, RepairReport, repair
from .verify import verify_path

CHECKPOINT_META = "checkpoint.meta"


class OpenReport(NamedTuple):
    directory: str
    first_sequence: int  # the sequence the next append gets
    chunk: str
    continued: bool  # appending to an existing chunk
    repair: RepairReport | None  # the torn tail cut on open, if any


class WalWriter:
    """Appends records to a V2 directory; use as a context manager. Thread-safe."""

    def __init__(self, directory: str, *, fs=DEFAULT_FS, sync: str = SYNC_BATCH, batch_records: int = 100,
                 batch_ms: int = 1000, max_chunk_bytes: int = 8 << 20, compress_threshold: int | None = None,
                 max_drop_bytes: int = DEFAULT_MAX_DROP_BYTES, command: str = "write", clock_ms=None):
        self.directory = directory
        self.fs = fs
        durable.make_dir(directory, fs)
        self._lock = DirectoryLock(directory, holder_text(command), fs).__enter__()
        try:
            self.opened = self._prepare(max_drop_bytes)
            chunk_index = int(self.opened.chunk[4:-4])
            self._appender = ChunkAppender(
                directory, next_sequence=self.opened.first_sequence, chunk_index=chunk_index,
                chunk_exists=self.opened.continued, fs=fs, sync=sync, batch_records=batch_records,
                batch_ms=batch_ms, max_chunk_bytes=max_chunk_bytes, compress_threshold=compress_threshold,
                clock_ms=clock_ms)
        except BaseException:
            self._lock.release()
            raise

    def _prepare(self, max_drop_bytes: int) -> OpenReport:
        fs, d = self.fs, self.directory
        cut = None
        if list_chunks(d, fs).chunks:
            report = verify_path(d, fs=fs, lock_held_by_us=True)
            if report.exit_code == 1:
                cut = repair(d, apply=True, max_drop_bytes=max_drop_bytes, fs=fs, lock=self._lock)
                report = cut.after
            if report.exit_code != EXIT_OK:
                worst = next(f for f in report.findings if f.exit_code == report.exit_code)
                raise NotClean(f"refusing to append to a {report.verdict} directory: {worst.one_line()} "
                               f"(see `walctl verify {d}`)", d, code=report.exit_code)
            last_seq = report.last_sequence or 0
            last = report.chunks[-1]
            index = last.index
            continued = last.state == fscan.HEADER_OK
            if not continued:
                index += 1
        else:
            last_seq, index, continued = 0, 0, False
        next_seq = max(last_seq, self._checkpoint_hwm()) + 1
        return OpenReport(d, next_seq, f"wal-{index:06d}.bin", continued, cut)

    def _checkpoint_hwm(self) -> int:
        """A Spector checkpoint.meta beside the chunks: never hand out a sequence at or below its HWM, even
        when compaction left no record to continue from (the reference writer restarts at 1 then)."""
        path = os.path.join(self.directory, CHECKPOINT_META)
        if not self.fs.exists(path):
            return 0
        meta = decode_checkpoint_meta(self.fs.read_head(path, 64))
        return meta.hwm if meta.valid else 0

    # ---- the API ----

    def append(self, type_ordinal: int, memory_id: bytes | str, payload: bytes = b"",
               timestamp_ms: int | None = None) -> int:
        if isinstance(memory_id, str):
            memory_id = memory_id.encode("utf-8")
        return self._appender.append(type_ordinal, memory_id, payload, timestamp_ms)

    def flush(self) -> int:
        return self._appender.flush()

    def close(self) -> int:
        try:
            return self._appender.close()
        finally:
            self._lock.release()

    def __enter__(self) -> "WalWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.close()
        except WalctlError:
            if exc is None:
                raise

    @property
    def durable_sequence(self) -> int:
        return self._appender.durable_sequence

    @property
    def last_sequence(self) -> int:
        return self._appender.last_sequence

    @property
    def records_written(self) -> int:
        return self._appender.records_written

    @property
    def chunks_created(self) -> list[str]:
        return list(self._appender.chunks_created)

    @property
    def active_chunk(self) -> str:
        return self._appender.active_chunk


