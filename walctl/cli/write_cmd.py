from __future__ import annotations

from typing import Optional

import typer

from ..errors import UsageError
from .render import emit, error_line, json_document
from .stdin import stdin_lines
from .writer_options import BATCH_INTERVAL, BATCH_RECORDS, COMPRESS_THRESHOLD, MAX_CHUNK_BYTES, SYNC, batch_ms, check_sync

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
    batch_interval: str = BATCH_INTERVAL,
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
    seal_on_close: bool = typer.Option(False, "--seal-on-close",
                                       help="v2: a shutdown: seal the last chunk in the ledger on close (the next "
                                            "writer starts a new chunk; archive push --follow ships it sealed)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.write/1) on stdout."),
) -> int:
    from ..ops.wal.write_events import check_format, event_from_options, parse_lines, write_events

    check_sync(sync)
    check_format(fmt, encoding)
    if fmt == "segments" and seal_on_close:
        raise UsageError("--seal-on-close seals V2 chunks; a reopened segment writer fills its last segment")
    if fmt == "segments" and type_ is not None:
        raise UsageError("--type/--id/--payload describe a V2 event; segments read entries from standard input")
    if type_ is not None:
        payloads = {"payload": payload, "payload_hex": payload_hex, "payload_b64": payload_b64}
        events = [(1, event_from_options(type_, memory_id, payloads, timestamp_ms))]
    elif any(v is not None for v in (payload, payload_hex, payload_b64, timestamp_ms)) or memory_id:
        raise UsageError("--id/--payload*/--timestamp-ms describe one event and need --type")
    else:
        events = parse_lines(stdin_lines(), fmt)
    r = write_events(directory, events, fmt=fmt, sync=sync, batch_records=batch_records, batch_ms=batch_ms(batch_interval),
                     max_chunk_bytes=max_chunk_bytes, compress_threshold=compress_threshold,
                     max_drop_bytes=max_drop_bytes, encoding=encoding,
                     **({"seal_on_close": True} if seal_on_close else {}))
    if json_out:
        emit(json_document("walctl.write/1", r.to_json()))
    elif r.opened:
        if r.repair:
            for cut, ev in zip(r.repair.cuts, r.repair.evidence):
                emit(f"cut a torn tail on open: {cut.file} at offset {cut.offset} ({cut.length} bytes), "
                     f"kept as {ev['evidence']}")
        span = f"seq {r.first_sequence}..{r.last_sequence}" if r.first_sequence is not None else "nothing"
        noun = "record" if r.records == 1 else "records"
        emit(f"wrote {r.records} {noun} to {directory} ({span}); durable through seq "
             f"{r.durable_sequence}; active chunk {r.active_chunk}")
    if r.error:
        error_line(r.error)
    raise typer.Exit(r.exit_code)
