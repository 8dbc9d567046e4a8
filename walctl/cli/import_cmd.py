from __future__ import annotations

import sys
from typing import Optional

import typer

from ..errors import EXIT_OK, UsageError
from .progress import PROGRESS, Bar, on_interrupt, path_bytes
from .render import emit, json_document
from .writer_options import BATCH_INTERVAL, BATCH_RECORDS, COMPRESS_THRESHOLD, MAX_CHUNK_BYTES, SYNC, batch_ms, check_sync
from .targets import existing_path

HELP = """Apply a replay stream (from walctl replay) to a WAL directory, idempotently and durably.

Reads standard input (or --from FILE); the form (jsonl, msgpack or the Spector sync blob) is detected
from the first byte, or given with --format. Events at or below the directory's high-water mark are
skipped, so a re-run changes nothing; the event at the HWM, when the stream carries it, must equal the
local one (else exit 4: the logs diverged). Above the HWM the sequence must continue exactly: a gap is
refused (exit 4), and what came before it stays applied. The directory is created if missing and takes
the stream's kind (V2 events or ADR-003 entries); the writer's lock, torn-tail repair and sync policies
are those of `walctl write`. Prints the new durable HWM; --show-hwm only prints the current one.

Example: walctl replay leader/wal --after "$(walctl import follower/wal --show-hwm)" | walctl import follower/wal
Example: walctl import restored/wal --from outbox/wal-000000005000.bin --sync always"""


def import_(
    directory: str = typer.Argument(..., help="The WAL (or ADR-003 segment) directory to apply to."),
    from_: Optional[str] = typer.Option(None, "--from", help="Read the stream from FILE instead of stdin.", callback=existing_path),
    form: Optional[str] = typer.Option(None, "--format", metavar="[jsonl|msgpack|sync]", help="jsonl, msgpack or sync (default: detected)."),
    sync: str = SYNC,
    batch_records: int = BATCH_RECORDS,
    batch_interval: str = BATCH_INTERVAL,
    max_chunk_bytes: int = MAX_CHUNK_BYTES,
    compress_threshold: Optional[int] = COMPRESS_THRESHOLD,
    max_payload: int = typer.Option(256 << 20, "--max-payload", min=1,
                                    help="Refuse stream items whose payload is larger than N bytes."),
    allow_initial_gap: bool = typer.Option(False, "--allow-initial-gap",
                                           help="An empty directory may start at the stream's first sequence "
                                                "(after restoring a checkpoint)."),
    show_hwm: bool = typer.Option(False, "--show-hwm", help="Print the directory's HWM (0 if none) and exit."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.import/1) on stdout."),
    progress: Optional[bool] = PROGRESS,
) -> int:
    from ..format import events as ev
    from ..ops.wal.importer import import_stream, local_hwm, read_stream

    if show_hwm:
        emit(str(local_hwm(directory)))
        return EXIT_OK
    check_sync(sync)
    if form is not None and form not in ev.FORMS:
        raise UsageError(f"--format must be one of {', '.join(ev.FORMS)} (got {form!r})")
    if from_ is None and sys.stdin.isatty():
        raise UsageError("the stream comes on standard input (a pipe from walctl replay) or from --from FILE")
    f = open(from_, "rb") if from_ is not None else sys.stdin.buffer
    on_interrupt(f"interrupted; {directory} holds the events applied before it (--show-hwm says how far); "
                 "the same import run again skips those and goes on")
    try:
        with Bar("import", path_bytes(from_) if from_ else None, progress) as bar:
            got_form, items = read_stream(f, form, max_payload, progress=bar.callback)
            report = import_stream(directory, items, got_form, sync=sync, batch_records=batch_records,
                                   batch_ms=batch_ms(batch_interval), max_chunk_bytes=max_chunk_bytes,
                                   compress_threshold=compress_threshold, allow_initial_gap=allow_initial_gap)
        on_interrupt(None)
    finally:
        if from_ is not None:
            f.close()
    if json_out:
        emit(json_document("walctl.import/1", dict(report.to_json(), exit_code=EXIT_OK)))
    else:
        span = f"seq {report.first_applied}..{report.last_applied}" if report.applied else "nothing new"
        emit(f"imported {report.applied} of {report.received} events into {directory} ({span}; "
             f"{report.skipped_at_or_below_hwm} already present); hwm {report.hwm_after}")
    return EXIT_OK
