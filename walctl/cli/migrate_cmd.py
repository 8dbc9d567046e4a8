from __future__ import annotations

from typing import Optional

import typer

from .progress import PROGRESS, Bar, on_interrupt, path_bytes
from .render import emit, json_document, seq_range
from .targets import existing_path
from .writer_options import COMPRESS_THRESHOLD, MAX_CHUNK_BYTES

HELP = """Rewrite a WAL holding legacy V1 chunks as V2 chunks in a new directory; the source is untouched.

Reads the chunks in directory order; V1 records keep their sequence, type, memoryId, timestamp and payload
and get V2 CRCs (payloads compressed per --compress-threshold), V2 records are copied verbatim. Reports per
chunk what was converted, what was damaged, and what V1 (no CRCs) let it check. OUT must not exist (or be
empty); it appears only when complete. Exits with OUT's verify state: 0, or 4 when damage left a gap.

Example: walctl migrate /var/lib/agent/wal --out /var/lib/agent/wal.v2 --json"""


def migrate(
    path: str = typer.Argument(..., help="The WAL directory (or one chunk file) holding V1 chunks.",
                               callback=existing_path),
    out: str = typer.Option(..., "--out", help="The new directory to create."),
    max_chunk_bytes: int = MAX_CHUNK_BYTES,
    compress_threshold: Optional[int] = COMPRESS_THRESHOLD,
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.migrate/1) on stdout."),
    progress: Optional[bool] = PROGRESS,
) -> int:
    from ..ops.wal.migrate import migrate as run_migrate

    on_interrupt(f"interrupted; {path} is untouched; the partial copy in {out.rstrip('/')}.tmp was removed (one a "
                 f"crash leaves, the next 'walctl migrate {path} --out {out}' removes first)")
    with Bar("migrate", path_bytes(path), progress) as bar:
        rep = run_migrate(path, out, max_chunk_bytes=max_chunk_bytes, compress_threshold=compress_threshold,
                          progress=bar.callback)
    on_interrupt(None)
    if json_out:
        emit(json_document("walctl.migrate/1", rep.to_json()))
        raise typer.Exit(rep.exit_code)
    emit(f"wrote {rep.records} records (seq {seq_range(rep.first_sequence, rep.last_sequence)}) from {path} to "
         f"{out}: {rep.converted} converted from V1, {rep.copied} copied from V2")
    for c in rep.chunks:
        _render_chunk(c)
    for a, b in rep.lost_sequences:
        emit(f"  lost: seq {seq_range(a, b)}")
    for s in rep.skipped:
        emit(f"  skipped: {s['file']}@{s['offset']}: {s['reason']}")
    emit(f"{out}: {rep.out_report.verdict} (exit {rep.exit_code})")
    raise typer.Exit(rep.exit_code)


def _render_chunk(c) -> None:
    into = f" -> {', '.join(c.out_chunks)}" if c.out_chunks else ""
    emit(f"  {c.file} ({c.state}): {c.action}, {c.records} records "
         f"(seq {seq_range(c.first_sequence, c.last_sequence)}){into}")
    for d in c.damaged:
        emit(f"    damaged: bytes {d['offset']}..{d['end_offset']} ({d['length']} bytes): {d['reason']}")
    for u in c.unconvertible:
        emit(f"    not convertible: seq {u['sequence']} at offset {u['offset']}: {u['reason']}")
    if c.checked:
        emit(f"    checked: {'; '.join(c.checked)}")
    for u in c.unchecked:
        emit(f"    not checkable: {u}")
