"""import: applies a replay stream to a log directory, idempotently.

The local high-water mark (HWM) is the last sequence the directory holds (or its checkpoint.meta HWM
after a compaction). Events at or below it are skipped, so re-running an import, or a follower
re-asking for what it already has, changes nothing. The event *at* the HWM, when the stream carries
it, is compared with the local one: a follower whose log differs from its leader's is refused, not
extended. Above the HWM the stream must continue the sequence exactly: a gap is refused (exit 4) and
everything before it stays applied and durable.

Input is read and applied one event at a time (bounded memory), under the directory's writer lock and
the chosen sync policy; the writer's open repairs a torn tail (evidence kept) as `walctl write` does.
"""
from __future__ import annotations

from typing import BinaryIO, Callable, Iterator, NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_SEQUENCE, NotClean, UnsupportedInput, UsageError
from ...format import events as ev
from ...format.jsonload import loads
from ...store.fs import DEFAULT_FS

KIND_EVENTS = "v2-events"
KIND_ENTRIES = "adr003-entries"
READ_BLOCK = 1 << 20


class ImportReport(NamedTuple):
    directory: str
    form: str
    kind: str
    received: int
    skipped_at_or_below_hwm: int
    applied: int
    first_applied: int | None
    last_applied: int | None
    hwm_before: int
    hwm_after: int  # durable
    checked_overlap: bool  # the event at the old HWM was in the stream and matched

    def to_json(self) -> dict:
        return dict(self._asdict())


# ---- reading a stream --------------------------------------------------------------------------------

class _Counted:
    """A binary stream that reports the bytes read from it (for a progress bar)."""

    def __init__(self, f, progress):
        self._f, self._progress = f, progress

    def peek(self, n: int = 1) -> bytes:
        return self._f.peek(n)

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self._progress(len(data))
        return data

    def readline(self, limit: int = -1) -> bytes:
        data = self._f.readline(limit)
        self._progress(len(data))
        return data

    def __getattr__(self, name):
        return getattr(self._f, name)


def read_stream(f: BinaryIO, form: str | None = None, max_payload: int = ev.DEFAULT_MAX_PAYLOAD,
                progress: Callable[[int], None] | None = None) -> tuple[str, Iterator]:
    """(form, items): items are format.events.Event (V2 events) or dict (ADR-003 entries). `progress` is
    called with the bytes read from `f` as they are read."""
    if progress is not None:
        f = _Counted(f, progress) if hasattr(f, "peek") else f
    head = f.peek(1)[:1] if hasattr(f, "peek") else b""
    form = form or ev.sniff(head)
    if form == ev.FORM_JSONL:
        return form, _jsonl_items(f, max_payload)
    if form == ev.FORM_MSGPACK:
        return form, _msgpack_items(f, max_payload)
    if form == ev.FORM_SYNC:
        return form, iter(ev.SyncReader(f, max_payload))
    raise UsageError(f"unknown stream form {form!r} (jsonl, msgpack, sync)")


def _jsonl_items(f, max_payload: int):
    from .segments import entry_from_json

    limit = 2 * max_payload + (1 << 20)
    n = 0
    while True:
        line = f.readline(limit + 1)
        if not line:
            return
        n += 1
        if len(line) > limit:
            raise ev.StreamError(f"line longer than {limit} bytes (the payload bound is {max_payload})", n, "line")
        if not line.strip():
            continue
        try:
            obj = loads(line, allow_lone_surrogates=False)
        except ValueError as e:
            raise ev.StreamError(f"not JSON: {e}", n, "line") from None
        if isinstance(obj, dict) and "operation" in obj and "type_ordinal" not in obj:
            yield entry_from_json(obj)
        else:
            yield ev.event_from_json(obj, n, max_payload)


def _msgpack_items(f, max_payload: int):
    import msgpack

    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max_payload + (1 << 20))
    fed = n = last_end = 0  # last_end: where the last complete item ended (tell() runs ahead into a partial one)
    while True:
        block = f.read(READ_BLOCK)
        if block:
            try:
                unpacker.feed(block)
            except msgpack.BufferFull:
                raise ev.StreamError(f"an item is larger than the bound of {max_payload} bytes", n + 1,
                                     "item") from None
            fed += len(block)
        try:
            for obj in unpacker:
                last_end = unpacker.tell()
                n += 1
                if isinstance(obj, dict) and "operation" in obj and "type_ordinal" not in obj:
                    yield obj
                else:
                    yield ev.event_from_msgpack(obj, n, max_payload)
        except (ValueError, TypeError, msgpack.UnpackException) as e:  # FormatError, StackError, a map as a key...
            if isinstance(e, ev.StreamError):
                raise
            raise ev.StreamError(f"not msgpack: {e}", n + 1, "item") from None
        if not block:
            if last_end < fed:
                raise ev.StreamError(f"stream ends inside an item ({fed - last_end} bytes left over)",
                                     n + 1, "item")
            return


# ---- applying ------------------------------------------------------------------------------------------

def _seq(item) -> int:
    return item.sequence if isinstance(item, ev.Event) else item.get("sequence")


def _directory_kind(directory: str, fs) -> str | None:
    from ...store.chunkdir import looks_like_chunk_dir
    from .segments import looks_like_segment_dir

    if not fs.exists(directory):
        return None
    if looks_like_chunk_dir(directory, fs):
        return KIND_EVENTS
    if looks_like_segment_dir(directory, fs):
        return KIND_ENTRIES
    return None


def local_event(directory: str, seq: int, fs=DEFAULT_FS):
    """The local event (V2: Event; segments: the entry dict) with this sequence, or None."""
    from .replay import ReplayOptions, replay

    got: list[bytes] = []
    replay(directory, got.extend, ReplayOptions(after=seq - 1, to=seq, form=ev.FORM_MSGPACK), fs)
    if not got:
        return None
    import msgpack

    obj = msgpack.unpackb(got[0], raw=False, strict_map_key=False)
    if "operation" in obj and "type_ordinal" not in obj:
        return obj
    return ev.event_from_msgpack(obj, 1)


def import_stream(directory: str, items: Iterator, form: str, *, fs=DEFAULT_FS, sync: str = "batch",
                  batch_records: int = 100, batch_ms: int = 1000, max_chunk_bytes: int = 8 << 20,
                  compress_threshold: int | None = None, allow_initial_gap: bool = False,
                  encoding: str = "msgpack") -> ImportReport:
    from .write import FORMAT_SEGMENTS, FORMAT_V2, WalWriter

    try:
        first = next(items, None)
    except ev.StreamError as e:
        raise UsageError(f"bad replay stream: {e}; nothing applied", directory) from None
    item_kind = None if first is None else (KIND_EVENTS if isinstance(first, ev.Event) else KIND_ENTRIES)
    dir_kind = _directory_kind(directory, fs)
    if first is None:
        hwm = local_hwm(directory, fs) if dir_kind else 0
        return ImportReport(directory, form, dir_kind or KIND_EVENTS, 0, 0, 0, None, None, hwm, hwm, False)
    _refuse_before_writing(directory, first, item_kind, dir_kind, allow_initial_gap, fs)
    start = _seq(first) if allow_initial_gap else None
    writer = WalWriter(directory, fs=fs, sync=sync, batch_records=batch_records, batch_ms=batch_ms,
                       max_chunk_bytes=max_chunk_bytes, compress_threshold=compress_threshold,
                       command="import", format=FORMAT_V2 if item_kind == KIND_EVENTS else FORMAT_SEGMENTS,
                       encoding=encoding, start_sequence=start)
    hwm = writer.opened.first_sequence - 1
    tally = _Tally()
    error: BaseException | None = None
    try:
        _apply(directory, writer, first, items, item_kind, hwm, tally, fs)
    except BaseException as e:  # close (and sync) what was applied before reporting the failure
        error = e
    durable = _close(directory, writer, error, tally.applied)
    return ImportReport(directory, form, item_kind, tally.received, tally.skipped, tally.applied,
                        tally.first_applied, tally.last_applied, hwm, durable, tally.checked)


def _refuse_before_writing(directory: str, first, item_kind: str, dir_kind: str | None, allow_initial_gap: bool,
                           fs) -> None:
    """A stream of the other kind than the directory's, or one that would start an empty directory past
    sequence 1: refused before the writer creates anything."""
    if dir_kind is not None and dir_kind != item_kind:
        raise UnsupportedInput(f"the stream carries {item_kind}; the directory holds {dir_kind}", directory)
    if dir_kind is None and _seq(first) > 1 and not allow_initial_gap and local_hwm(directory, fs) == 0:
        raise NotClean(f"sequence gap: the stream starts at {_seq(first)} but the directory has no events; "
                       f"1..{_seq(first) - 1} are missing (--allow-initial-gap starts it there)", directory,
                       code=EXIT_SEQUENCE)


class _Tally:
    """What the import has done so far: kept outside the loop, so that a failure part-way can say how
    much was applied before it."""
    __slots__ = ("received", "skipped", "applied", "first_applied", "last_applied", "checked")

    def __init__(self) -> None:
        self.received = self.skipped = self.applied = 0
        self.first_applied: int | None = None
        self.last_applied: int | None = None
        self.checked = False  # the event at the old HWM was in the stream and matched


def _apply(directory: str, writer, first, items: Iterator, item_kind: str, hwm: int, tally: _Tally, fs) -> None:
    """Feeds the stream to the writer: at or below the HWM skipped (the event at it compared), above it
    appended while it continues the sequence exactly; a gap or a step back is refused."""
    expected = hwm + 1
    item = first
    while item is not None:
        tally.received += 1
        seq = _seq(item)
        if (item_kind == KIND_EVENTS) != isinstance(item, ev.Event):
            raise ev.StreamError("the stream mixes V2 events and ADR-003 entries", tally.received, "item")
        if seq < expected:
            _skip(directory, item, seq, expected, hwm, tally, fs)
        elif seq > expected:
            what = "the directory is empty" if expected == 1 and hwm == 0 else f"the local HWM is {expected - 1}"
            hint = " (--allow-initial-gap starts an empty directory there)" if hwm == 0 and tally.applied == 0 else ""
            raise NotClean(f"sequence gap: the stream jumps to {seq} but {what}; "
                           f"{expected}..{seq - 1} are missing{hint}", directory, code=EXIT_SEQUENCE)
        else:
            if item_kind == KIND_EVENTS:
                got = writer.append(item.type_ordinal, item.memory_id, item.payload, item.timestamp_ms)
            else:
                got = _append_entry(writer, item)
            if got != seq:  # the writer assigns sequences: it must agree with the stream
                raise NotClean(f"writer assigned {got} to stream sequence {seq}", directory, code=EXIT_SEQUENCE)
            tally.applied += 1
            tally.first_applied = seq if tally.first_applied is None else tally.first_applied
            tally.last_applied = seq
            expected = seq + 1
        item = next(items, None)


def _skip(directory: str, item, seq: int, expected: int, hwm: int, tally: _Tally, fs) -> None:
    """An event the directory already holds: skipped (the one at the HWM compared with the local one),
    unless something was applied before it, when the stream went back."""
    if tally.applied:
        raise NotClean(f"the stream goes back from {expected - 1} to {seq} (a replay stream only rises)",
                       directory, code=EXIT_SEQUENCE)
    if seq == hwm and hwm > 0 and not tally.checked:
        _check_overlap(directory, item, hwm, fs)
        tally.checked = True
    tally.skipped += 1


def _close(directory: str, writer, error: BaseException | None, applied: int) -> int:
    """Closes (and syncs) the writer; returns the durable sequence, or raises the loop's failure once
    what came before it is durable."""
    try:
        durable = writer.close()
    except BaseException:
        if error is None:
            raise
        durable = writer.durable_sequence
    if error is not None:
        if isinstance(error, ev.StreamError):
            raise UsageError(f"bad replay stream: {error}; {applied} events before it applied "
                             f"(durable through {durable})", directory) from None
        raise error
    return durable


def _append_entry(writer, entry: dict) -> int:
    from ...format.segment import validate

    problem = validate(entry)
    if problem is not None:
        raise NotClean(f"entry {entry.get('sequence')}: {problem}; not applied", writer.directory, code=EXIT_CORRUPT)
    return writer.append_sealed_entry(entry)


def _check_overlap(directory: str, item, hwm: int, fs) -> None:
    local = local_event(directory, hwm, fs)
    if local is None:
        return  # compacted away (checkpoint.meta HWM): nothing to compare with
    same = local == item if isinstance(item, ev.Event) else local.get("checksum") == item.get("checksum")
    if not same:
        raise NotClean(f"diverged: the stream's event {hwm} differs from the local one; this directory is not a "
                       "copy of the stream's source (nothing applied)", directory, code=EXIT_SEQUENCE)


def local_hwm(directory: str, fs=DEFAULT_FS) -> int:
    """The last sequence a directory holds (read-only), or its checkpoint.meta HWM when higher."""
    import os

    from ...format.ckptmeta import decode_checkpoint_meta
    from .verify import verify_path
    from .write import CHECKPOINT_META

    if _directory_kind(directory, fs) is None:
        return 0
    report = verify_path(directory, fs=fs)
    hwm = report.last_sequence or 0
    meta = os.path.join(directory, CHECKPOINT_META)
    if fs.exists(meta):
        m = decode_checkpoint_meta(fs.read_head(meta, 64))
        if m.valid:
            hwm = max(hwm, m.hwm)
    return hwm
