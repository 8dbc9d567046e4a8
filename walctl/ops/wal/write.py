"""write: the library writer and what `walctl write` does.

Opening a directory takes its lock, checks it, cuts a torn tail (evidence kept, as `repair --apply`
does) and continues with the next sequence in the last chunk. A directory with corruption, a sequence
gap or an unsupported chunk is refused with that state's exit code and never appended to: appending
after damage would bury it.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...errors import EXIT_OK, EXIT_SEQUENCE, NotClean, Refused, WalctlError
from ...format import scan as fscan
from ...format.ckptmeta import decode_checkpoint_meta
from ...format.v2 import EVENT_TYPES, MAX_SEQUENCE, check_writable_type
from ...store import durable
from ...store.appender import SYNC_BATCH, ChunkAppender
from ...store.chunkdir import list_chunks
from ...store.fs import DEFAULT_FS
from ...store.lock import DirectoryLock, holder_text
from ..advice import MISSING, accept_loss_step, cmd, missing_step
from ...store.ledger import Sealer
from .. import findings as F
from ..clock import utc_now
from .ledger_check import load_view
from .repair import DEFAULT_MAX_DROP_BYTES, RepairReport, repair
from .verify import verify_path

_TYPES = len(EVENT_TYPES)

CHECKPOINT_META = "checkpoint.meta"


class OpenReport(NamedTuple):
    directory: str
    first_sequence: int  # the sequence the next append gets
    chunk: str
    continued: bool  # appending to an existing chunk
    repair: RepairReport | None  # the torn tail cut on open, if any


FORMAT_V2 = "v2"
FORMAT_SEGMENTS = "segments"


class WalWriter:
    """Appends to a log directory; use as a context manager. Thread-safe.

    format "v2": Spector V2 chunks, `append(type, memory_id, payload, timestamp_ms)`.
    format "segments": ADR-003 entry segments, `append_entry(operation, data, timestamp)`: the writer
    assigns the global sequence and the checksum; 10,000 entries per segment."""

    def __init__(self, directory: str, *, fs=DEFAULT_FS, sync: str = SYNC_BATCH, batch_records: int = 100,
                 batch_ms: int = 1000, max_chunk_bytes: int = 8 << 20, compress_threshold: int | None = None,
                 max_drop_bytes: int = DEFAULT_MAX_DROP_BYTES, command: str = "write", clock_ms=None,
                 format: str = FORMAT_V2, encoding: str = "msgpack", start_sequence: int | None = None,
                 seal_on_close: bool = False):
        """start_sequence: the first sequence of a log that has none yet (an import that begins after a
        checkpoint); ignored once the directory holds records or a checkpoint.meta HWM.
        seal_on_close: a shutdown: close() also seals the last chunk in the ledger (a chunk that will not
        be appended to again; the next writer starts a new one), so `archive push --follow` ships it as
        a sealed object without waiting for a next chunk. V2 chunks only (a reopened segment writer fills
        its last segment, which a seal would forbid)."""
        if format not in (FORMAT_V2, FORMAT_SEGMENTS):
            raise ValueError(f"format is {FORMAT_V2} or {FORMAT_SEGMENTS}")
        if seal_on_close and format != FORMAT_V2:
            raise ValueError("seal_on_close is for V2 chunks: a reopened segment writer fills its last segment")
        self._seal_on_close = seal_on_close
        self.directory = directory
        fs = self.fs = fs.beneath(directory)
        self.format = format
        self.encoding = encoding
        durable.make_dir(directory, fs)
        self._lock = DirectoryLock(directory, holder_text(command), fs).__enter__()
        self._sealer = None
        try:
            self.opened = self._prepare(max_drop_bytes, start_sequence)
            if self.opened.first_sequence > MAX_SEQUENCE:
                raise Refused(f"the next sequence would be {self.opened.first_sequence}, past the largest a "
                              f"record can hold ({MAX_SEQUENCE}): this directory can take no more events",
                              directory)
            self._sealer = Sealer(directory, fs, utc_now, self._points_keeper())
            self._sealer.hwm_written = self._issued
            if format == FORMAT_V2:
                layout = dict(chunk_index=int(self.opened.chunk[4:-4]), records_in_file=self._in_last)
            else:
                from ...format.names import parse_segment_name, segment_name
                from ...format.segment import ENTRIES_PER_SEGMENT

                first, index = self.opened.chunk, parse_segment_name(self.opened.chunk)
                # the segment it continues keeps the name it has (`wal_3.log` is read as segment 3); new
                # segments get the writer's own 8-digit spelling
                layout = dict(chunk_index=index, naming=lambda i: first if i == index else segment_name(i),
                              file_header=b"", max_records_per_file=ENTRIES_PER_SEGMENT,
                              records_in_file=self._in_last)
            self._appender = ChunkAppender(
                directory, next_sequence=self.opened.first_sequence, chunk_exists=self.opened.continued, fs=fs,
                sync=sync, batch_records=batch_records, batch_ms=batch_ms, max_chunk_bytes=max_chunk_bytes,
                compress_threshold=compress_threshold, clock_ms=clock_ms, on_closed=self._sealer.closed,
                on_durable=self._sealer.durable,
                chunk_first_sequence=self._first_in_last, **layout)
        except BaseException:
            if self._sealer is not None:
                self._sealer.close()
            self._lock.release()
            raise
        if format == FORMAT_V2:
            self.append = self._appender.append  # the hot path skips a layer of calls

    def _points_keeper(self):
        """The sequence index's points of the file this writer appends to (store/seqpoints.py), after
        dropping those of files sealed or gone since the last writer."""
        from ...format import ledger as L
        from ...store import seqpoints
        from ...store.ledger import read_ledger

        keeper = seqpoints.Keeper(self.directory, self.fs, self.format == FORMAT_V2, utc_now)
        try:
            led = read_ledger(self.directory, self.fs)
        except WalctlError as e:  # _prepare read it already: this is a race, and points are only a hint
            keeper.broken = e
            return keeper
        keeper.sealed(L.fold(led.lines).sealed if led is not None else (), at_open=True)
        return keeper

    def append_entry(self, operation: str, data, timestamp: float | None = None) -> int:
        """ADR-003: appends {sequence, timestamp, operation, data, checksum}; returns the sequence."""
        import time as _time

        from ...format.segment import encode_frame, seal

        if self.format != FORMAT_SEGMENTS:
            raise ValueError("append_entry writes ADR-003 segments; this writer writes V2 chunks")
        ts = int(_time.time()) if timestamp is None else timestamp

        def encode(seq: int) -> bytes:
            return encode_frame(seal({"sequence": seq, "timestamp": ts, "operation": operation, "data": data}),
                                self.encoding)

        return self._appender.append_encoded(encode)

    def append_sealed_entry(self, entry: dict) -> int:
        """ADR-003: appends an entry that already carries its sequence and checksum (an import); the
        writer's next sequence must be that one."""
        from ...format.segment import encode_frame

        if self.format != FORMAT_SEGMENTS:
            raise ValueError("append_sealed_entry writes ADR-003 segments; this writer writes V2 chunks")
        seq = entry["sequence"]

        def encode(assigned: int) -> bytes:
            if assigned != seq:
                raise NotClean(f"the next sequence here is {assigned}, not the entry's {seq}", self.directory,
                               code=EXIT_SEQUENCE)
            return encode_frame(entry, self.encoding)

        return self._appender.append_encoded(encode)

    def _has_files(self) -> bool:
        if self.format == FORMAT_V2:
            return bool(list_chunks(self.directory, self.fs).chunks)
        from .segments import looks_like_segment_dir

        return looks_like_segment_dir(self.directory, self.fs)

    def _prepare(self, max_drop_bytes: int, start_sequence: int | None = None) -> OpenReport:
        fs, d = self.fs, self.directory
        cut = None
        self._in_last, self._first_in_last = 0, None
        view = load_view(d, fs)
        report = verify_path(d, fs=fs, lock_held_by_us=True) if self._has_files() else None
        if report is not None and report.exit_code == 1:
            cut = repair(d, apply=True, max_drop_bytes=max_drop_bytes, fs=fs, lock=self._lock)
            report = cut.after
            view = load_view(d, fs)
        if report is not None and report.chunks:  # (a 0-byte first chunk set aside by the cut left none)
            if report.exit_code != EXIT_OK:
                worst = next(f for f in report.findings if f.exit_code == report.exit_code)
                hint = ""
                bad = [f for f in report.findings if f.exit_code != EXIT_OK]
                gone = next((f for f in bad if f.cls != F.SEQUENCE_MISSING and (f.missing or f.sequence_range)), None)
                if gone is not None and all(f.cls in MISSING for f in bad):  # sequences no file holds, only
                    a, b = gone.missing or gone.sequence_range
                    step = missing_step(d, a, b, gone.extra)
                    hint = (f"; they are in .quarantine/: `{step.command}` puts them back" if "restore" in step.argv
                            else f"; if those sequences are lost for good, `{step.command}` records that and "
                                 f"lets writers go on")
                raise NotClean(f"refusing to append to a {report.verdict} directory: {worst.one_line()} "
                               f"(see `{cmd('inspect', d, '--damaged')}`){hint}", d, code=report.exit_code)
            last_seq = report.last_sequence or 0
            last = report.chunks[-1]
            index = last.index
            if self.format == FORMAT_V2:
                continued = last.state == fscan.HEADER_OK
                self._in_last, self._first_in_last = last.records, last.first_sequence
                if continued and last.file in view.exp.sealed:
                    continued = False  # a sealed chunk is never appended to: its seal would lie
            else:
                from ...format.segment import ENTRIES_PER_SEGMENT

                continued = last.records < ENTRIES_PER_SEGMENT  # a reopened writer fills a non-full segment
                self._in_last = last.records
            if not continued:
                index += 1
                self._in_last, self._first_in_last = 0, None
            elif self.format != FORMAT_V2:
                self._first_in_last = last.first_sequence
        else:
            last_seq, continued = 0, False
            index = 0 if self.format == FORMAT_V2 else 1
            top = view.horizon
            if view.issued > top and view.exp.accepted_cover(top + 1, view.issued) is None:
                a, b = top + 1, view.issued
                raise NotClean(f"sequences {a}..{b} were issued here but no chunk holds them; refusing to append "
                               f"(if they are lost for good: `{accept_loss_step(d, a, b).command}`)", d,
                               code=EXIT_SEQUENCE)
        self._issued = max(view.issued, last_seq)
        next_seq = max(last_seq, self._checkpoint_hwm(), view.issued) + 1
        if next_seq == 1 and start_sequence is not None:
            next_seq = start_sequence
        if self.format == FORMAT_V2:
            return OpenReport(d, next_seq, f"wal-{index:06d}.bin", continued, cut)
        # a continued segment keeps its own name (readers accept `wal_3.log`; never a second file numbered 3)
        return OpenReport(d, next_seq, last.file if continued else f"wal_{index:08d}.log", continued, cut)

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
        """Appends one record and returns its sequence (durable on return under sync=always only; see
        durable_sequence). memory_id may be str (UTF-8) or bytes; timestamp_ms defaults to now. A type
        ordinal outside 0..15 is refused (ValueError; format/v2.py WRITABLE_TYPES says why)."""
        if type_ordinal.__class__ is not int or not 0 <= type_ordinal < _TYPES:
            check_writable_type(type_ordinal)
        return self._appender.append(type_ordinal, memory_id, payload, timestamp_ms)

    def flush(self) -> int:
        return self._appender.flush()

    def close(self) -> int:
        try:
            try:
                durable_seq = self._appender.close()
            finally:
                sealer, self._sealer = self._sealer, None
                if sealer is not None:
                    sealer.close()  # the seals of rolled chunks, every one written before the lock goes
            if sealer is not None:
                last = self._last_chunk_seal(durable_seq) if self._seal_on_close else []
                if last or durable_seq > sealer.hwm_written:
                    sealer.closed(last, durable_seq)  # synchronous now: the background thread is gone
            return durable_seq
        finally:
            self._lock.release()

    def _last_chunk_seal(self, durable_seq: int) -> list:
        """(name, first_seq, last_seq, records) of the last chunk, synced by close(), when it holds records
        (a header-only chunk is left for the next writer to continue)."""
        a = self._appender
        if not a._in_file or a._chunk_first is None or durable_seq != a.next_sequence - 1:
            return []
        return [(a.active_chunk, a._chunk_first, durable_seq, a._in_file)]

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




def parse_event(obj) -> tuple[int, bytes, bytes, int | None]:
    """One JSON-lines event -> (type ordinal, memory id, payload, timestamp_ms or None). ValueError says
    what is wrong. Shape: {"type": name|ordinal, "id": str, "payload": text | "payload_b64": str |
    "payload_hex": str, "timestamp_ms": int?}"""
    import base64
    import binascii

    from ...format.v2 import check_memory_id, check_writable_type, parse_type

    if not isinstance(obj, dict):
        raise ValueError("an event is a JSON object")
    unknown = set(obj) - {"type", "id", "payload", "payload_b64", "payload_hex", "timestamp_ms"}
    if unknown:
        raise ValueError(f"unknown key(s): {', '.join(sorted(unknown))}")
    if "type" not in obj:
        raise ValueError("missing \"type\" (an event type name or ordinal)")
    t = obj["type"]
    if isinstance(t, bool) or not isinstance(t, (str, int)):
        raise ValueError("\"type\" is a name or an ordinal")
    ordinal = check_writable_type(t if isinstance(t, int) else parse_type(t))
    mid = obj.get("id", "")
    if not isinstance(mid, str):
        raise ValueError("\"id\" is a string")
    try:
        mid_bytes = check_memory_id(mid.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("\"id\" is not Unicode text (a lone surrogate)") from None
    forms = [k for k in ("payload", "payload_b64", "payload_hex") if k in obj]
    if len(forms) > 1:
        raise ValueError(f"give one payload form, not {', '.join(forms)}")
    payload = b""
    if "payload" in obj and not isinstance(obj["payload"], str):
        raise ValueError("\"payload\" is text; use payload_b64 or payload_hex for bytes")
    try:
        if "payload" in obj:
            payload = obj["payload"].encode("utf-8")
        elif "payload_b64" in obj:
            payload = base64.b64decode(obj["payload_b64"], validate=True)
        elif "payload_hex" in obj:
            payload = bytes.fromhex(obj["payload_hex"])
    except (binascii.Error, TypeError, ValueError, UnicodeEncodeError) as e:
        raise ValueError(f"payload does not decode: {e}") from None
    ts = obj.get("timestamp_ms")
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, int) or not -(1 << 63) <= ts < (1 << 63)):
        raise ValueError("\"timestamp_ms\" is an integer (epoch milliseconds)")
    return ordinal, mid_bytes, payload, ts


def parse_entry_line(obj) -> tuple[str, object, float | None]:
    """One JSON-lines ADR-003 entry -> (operation, data, timestamp or None). Shape: {"operation": str,
    "data": any (or "params"), "timestamp": number?}; sequence and checksum are the writer's."""
    if not isinstance(obj, dict):
        raise ValueError("an entry is a JSON object")
    unknown = set(obj) - {"operation", "data", "params", "timestamp"}
    if unknown:
        raise ValueError(f"unknown key(s): {', '.join(sorted(unknown))} (sequence and checksum are assigned)")
    op = obj.get("operation")
    if not isinstance(op, str) or not op:
        raise ValueError("missing \"operation\" (memory_add, tool_register, state_update, ...)")
    if "data" in obj and "params" in obj:
        raise ValueError("give data or params, not both")
    ts = obj.get("timestamp")
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float))):
        raise ValueError("\"timestamp\" is a number (Unix seconds)")
    from ...format.canonical import packb

    data = obj.get("data", obj.get("params", {}))
    try:  # what the writer will hash (an integer past 64 bits has no msgpack form): refused as a bad line
        packb({"timestamp": ts, "operation": op, "data": data})
    except ValueError as e:
        raise ValueError(f"the entry has no canonical form: {e}") from None
    return op, data, ts
