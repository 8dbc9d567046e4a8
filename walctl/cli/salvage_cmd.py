from __future__ import annotations

from typing import Optional

import typer

from .progress import PROGRESS, Bar, on_interrupt, path_bytes
from .render import emit, json_document, seq_range
from .targets import existing_path

HELP = """Copy every valid record of a damaged WAL into a new directory; the original is untouched.

Reads past damage like inspect, copies each valid record verbatim (same bytes, same sequence), and reports
the sequences and byte ranges that were lost. OUT must not exist (or be empty); it appears only when
complete. Exits with OUT's verify state: 0, or 4 when damage left a sequence gap.

Example: walctl salvage /var/lib/agent/wal --out /var/lib/agent/wal.salvaged --json"""


def salvage(
    path: str = typer.Argument(..., help="The damaged WAL directory (or one chunk file).", callback=existing_path),
    out: str = typer.Option(..., "--out", help="The new directory to create."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.salvage/1) on stdout."),
    progress: Optional[bool] = PROGRESS,
) -> int:
    from ..ops.salvage import salvage as run_salvage

    on_interrupt(f"interrupted; {path} is untouched; the partial copy in {out.rstrip('/')}.tmp was removed (one a "
                 f"crash leaves, the next 'walctl salvage {path} --out {out}' removes first)")
    with Bar("salvage", path_bytes(path), progress) as bar:
        rep = run_salvage(path, out, progress=bar.callback)
    on_interrupt(None)
    if json_out:
        emit(json_document("walctl.salvage/1", rep.to_json()))
        raise typer.Exit(rep.exit_code)
    emit(f"copied {rep.records} valid records (seq {seq_range(rep.first_sequence, rep.last_sequence)}) "
         f"from {path} to {out}")
    for a, b in rep.lost_sequences:
        emit(f"  lost: seq {seq_range(a, b)}")
    for f in rep.damaged_ranges:
        emit(f"  damaged: {f.file} bytes {f.offset}..{f.end_offset} ({f.cls})")
    for s in rep.skipped:
        emit(f"  skipped: {s['file']}@{s['offset']}: {s['reason']}")
    emit(f"{out}: {rep.out_report.verdict} (exit {rep.exit_code})")
    if rep.lost_sequences:
        from ..ops.advice import cmd

        emit(f"  the lost bytes, annotated: {cmd('inspect', path, '--damaged')}")
        emit(f"  the copy, checked: {cmd('verify', out)}")
    raise typer.Exit(rep.exit_code)
