from __future__ import annotations

from typing import Optional

import typer

from .render import emit, examined_document, json_document, rerun, safe, seq_range
from .targets import existing_dir

HELP = """Move closed chunks whose records a checkpoint covers into DIR/.quarantine/ (or --archive-to another
directory). Dry run unless --apply.

The high-water mark comes from --to N (every sequence <= N is covered), a Spector checkpoint.meta, or
a checkpoint directory (--checkpoints: the wal_sequence of the oldest valid checkpoint kept for fallback).
A chunk's last sequence is read from the first record header of the next chunk, so old chunks are not
scanned. Never removes the last chunk, a foreign, unsupported or damaged chunk, or anything past a gap.
An ADR-003 segment directory goes by whole segments at or below the HWM (each read for its sequences;
never the last, a damaged one, or one before a gap). Every move is recorded in .quarantine/MANIFEST.jsonl
with its sha256. walctl deletes no chunk: remove
.quarantine/ or archive files yourself once no recovery can need them.

Example: walctl compact /var/lib/agent/wal --checkpoint-meta /var/lib/agent/checkpoint.meta --apply"""


def compact(
    directory: str = typer.Argument(..., help="The WAL directory.", callback=existing_dir),
    to: Optional[int] = typer.Option(None, "--to", help="The HWM: sequences <= N are covered."),
    checkpoint_meta: Optional[str] = typer.Option(None, "--checkpoint-meta", help="Take the HWM from this file."),
    checkpoints: Optional[str] = typer.Option(None, "--checkpoints",
                                              help="Take the HWM from the oldest valid checkpoint in this directory."),
    archive_to: Optional[str] = typer.Option(None, "--archive-to", help="Move chunks here instead of into .quarantine/."),
    apply: bool = typer.Option(False, "--apply", help="Move the chunks (default: print the plan only)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.compact/2) on stdout."),
) -> int:
    from ..errors import NotClean
    from ..ops.wal.compact import compact as run_compact

    try:
        rep = run_compact(directory, before=to, checkpoint_meta=checkpoint_meta, checkpoints=checkpoints,
                          archive_to=archive_to, apply=apply)
    except NotClean as e:  # its own document when it examined the directory; else walctl.error/1
        examined_document("walctl.compact/2", e, json_out)
        raise
    if json_out:
        emit(json_document("walctl.compact/2", rep.to_json()))
        raise typer.Exit(rep.exit_code)
    emit(f"HWM {rep.hwm} from {rep.hwm_source}")
    moved = {e["source"]: e["evidence"] for e in rep.evidence}
    for r in rep.removals:
        what = f"{r.file} ({r.size} bytes, seq {seq_range(r.first_sequence or r.last_sequence, r.last_sequence)})"
        emit(f"moved {what} to {moved[r.file]}" if rep.applied else
             f"would move {what} to {archive_to or '.quarantine/'}")
    if rep.stopped_at:
        emit(f"kept from here on: {rep.stopped_at}")
    if not rep.applied and rep.removals:
        emit(f"dry run: nothing was changed; to do it: {safe(rerun('--apply'))}")
    raise typer.Exit(rep.exit_code)
