from __future__ import annotations

import sys
from typing import Optional

import typer

from ..errors import EXIT_USAGE, UsageError
from .render import emit, error_line, json_document
from .writer_options import BATCH_MS, BATCH_RECORDS, COMPRESS_THRESHOLD, MAX_CHUNK_BYTES, SYNC, check_sync

HELP = """Append records to a V2 WAL directory (created if missing), durably, Java-compatible.

Events come from --type/--id/--payload, or as JSON lines on standard input:
{"type": "REMEMBER" or 0, "id": "mem-1", "payload": "text" | "payload_b64": ... | "payload_hex": ...,
"timestamp_ms": 1795300000000}. Opening cuts a torn tail (kept in .quarantine/) and continues with the next
sequence; a directory with corruption, a gap or an unsupported chunk is refused with its exit code. A
second writer is refused (exit 6). Prints the last durable sequence.

With --format segments it writes ADR-003 entry segments (wal_NNNNNNNN.log) instead: JSON lines
{"operation": "memory_add", "data": {...}, "timestamp": 1795300000?}; walctl assigns sequence and checksum.

Example: printf '{"type":"REMEMBER","id":"m1","payload":"hi"}\\n' | walctl write /var/lib/agent/wal --sync always"""


def write(
    directory: str = typer.Argument(..., help="The WAL directory."),
    sync: str = SYNC,
    batch_records: int = BATCH_RECORDS,
    batch_ms: int = BATCH_MS,
    max_chunk_bytes: int = MAX_CHUNK_BYTES,
    compress_threshold: Optional[int] = COMPRESS_THRESHOLD,
    max_drop_bytes: int = typer.Option(64 << 20, "--max-drop-bytes", min=0,
                                       help="Refuse (exit 7) to cut a torn tail larger than this on open."),
    type_: Optional[str] = typer.Option(None, "--type", help="One event: its type (name or ordinal)."),
    memory_id: str = typer.Option("", "--id", help="One event: its memoryId."),
    payload: Optional[str] = typer.Option(None, "--payload", metavar="TEXT", help="One event: payload as text."),
    payload_hex: Optional[str] = typer.Option(None, "--payload-hex", help="One event: payload as hex."),
    payload_b64: Optional[str] = typer.Option(None, "--payload-b64", help="One event: payload as base64."),
    timestamp_ms: Optional[int] = typer.Option(None, "--timestamp-ms", help="One event: its time (default now)."),
    fmt: str = typer.Option("v2", "--format", metavar="[v2|segments]", help="v2 (Spector chunks) or segments (ADR-003 entries)."),
    encoding: str = typer.Option("msgpack", "--encoding", metavar="[msgpack|json]", help="segments: msgpack (default) or json bodies."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.write/1) on stdout."),
) -> int:
    from ..format.jsonload import loads
    from ..ops.write import WalWriter, parse_entry_line, parse_event

    check_sync(sync)
    if fmt not in ("v2", "segments") or encoding not in ("msgpack", "json"):
        raise UsageError("--format is v2 or segments; --encoding is msgpack or json")
    if fmt == "segments":
        if type_ is not None:
            raise UsageError("--type/--id/--payload describe a V2 event; segments read entries from standard input")
    parse_line = parse_entry_line if fmt == "segments" else parse_event
    if type_ is not None:
        one = {"type": int(type_) if type_.isdigit() else type_, "id": memory_id}
        for key, value in (("payload", payload), ("payload_hex", payload_hex), ("payload_b64", payload_b64)):
            if value is not None:
                one[key] = value
        if timestamp_ms is not None:
            one["timestamp_ms"] = timestamp_ms
        try:
            events = [(1, parse_event(one))]
        except ValueError as e:
            raise UsageError(str(e)) from None
    elif any(v is not None for v in (payload, payload_hex, payload_b64, timestamp_ms)) or memory_id:
        raise UsageError("--id/--payload*/--timestamp-ms describe one event and need --type")
    else:
        events = None

    error, first = None, None
    source = iter(events if events is not None else _stdin_events(parse_line, loads))
    head = next(source, None)
    if head is not None and isinstance(head[1], str):  # refused before the writer creates anything
        error = f"stdin line {head[0]}: {head[1]}; nothing was written"
        if json_out:
            emit(json_document("walctl.write/1", {"directory": directory, "records": 0, "first_sequence": None,
                                                  "last_sequence": None, "error": error, "exit_code": EXIT_USAGE}))
        error_line(error)
        raise typer.Exit(EXIT_USAGE)
    with WalWriter(directory, sync=sync, batch_records=batch_records, batch_ms=batch_ms,
                   max_chunk_bytes=max_chunk_bytes, compress_threshold=compress_threshold,
                   max_drop_bytes=max_drop_bytes, format=fmt, encoding=encoding) as w:
        put = w.append_entry if fmt == "segments" else w.append
        for line_no, item in _chain(head, source):
            if isinstance(item, str):
                error = f"stdin line {line_no}: {item}; the records before it were written"
                break
            seq = put(*item)
            first = seq if first is None else first
    code = 2 if error else 0
    report = {"directory": directory, "records": w.records_written, "first_sequence": first,
              "last_sequence": w.last_sequence if first is not None else None,
              "durable_sequence": w.durable_sequence, "sync": sync, "chunks_created": w.chunks_created,
              "active_chunk": w.active_chunk, "continued_chunk": w.opened.continued,
              "repaired_on_open": w.opened.repair.to_json() if w.opened.repair else None,
              "error": error, "exit_code": code}
    if json_out:
        emit(json_document("walctl.write/1", report))
    else:
        if w.opened.repair:
            for cut, ev in zip(w.opened.repair.cuts, w.opened.repair.evidence):
                emit(f"cut a torn tail on open: {cut.file} at offset {cut.offset} ({cut.length} bytes), "
                     f"kept as {ev['evidence']}")
        span = f"seq {first}..{w.last_sequence}" if first is not None else "nothing"
        noun = "record" if w.records_written == 1 else "records"
        emit(f"wrote {w.records_written} {noun} to {directory} ({span}); durable through seq "
             f"{w.durable_sequence}; active chunk {w.active_chunk}")
    if error:
        error_line(error)
    raise typer.Exit(code)


def _chain(head, rest):
    if head is not None:
        yield head
        yield from rest


def _stdin_events(parse_event, loads):
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            yield n, parse_event(loads(line))
        except ValueError as e:  # json.JSONDecodeError is a ValueError
            yield n, str(e)
            return
