from __future__ import annotations

from typing import Optional

import typer

from .render import emit, json_document
from .targets import existing_dir, existing_path

HELP = """The SHA-256 of the canonical folded state at a sequence: the same number whether the state is reached
from a checkpoint and the log after it, a replay of the whole log, a restored archive, a replica an import
wrote, or a merge. Two replicas agree at N when their fingerprints at N are equal.

PATH is a Spector V2 chunk directory or an ADR-003 segment directory (with --checkpoints: start from the
newest valid checkpoint at or below N, as recover does), a checkpoint file or directory, or merge's
state.json (or its directory). An archive: restore it first (walctl archive restore). --to defaults to
the last sequence. Damage at or below N refuses (exit 3 or 4); damage after N is a warning. Reads only.

Example: walctl fingerprint /var/lib/agent/wal --to 1200 --checkpoints /var/lib/agent/ckpts"""

REDUCER_HELP = ("auto (spector for a Spector V2 log, else adr003), adr003, spector, merge (merge's per-memory "
                "CRDT fold, to compare with a merge's state.json), or module:function (as recover loads it).")


def fingerprint(
    path: str = typer.Argument(..., help="A log directory, a checkpoint file or directory, or merge's state.json.",
                              callback=existing_path),
    at: Optional[int] = typer.Option(None, "--to", help="The sequence whose state is fingerprinted (default: the "
                                     "last one)."),
    checkpoints: Optional[str] = typer.Option(None, "--checkpoints", help="Start from the newest valid checkpoint "
                                              "of this directory at or below --to.", callback=existing_dir),
    reducer: str = typer.Option("auto", "--reducer", metavar="[auto|adr003|spector|merge|MODULE:FUNCTION]",
                                help=REDUCER_HELP),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.fingerprint/1)."),
) -> int:
    from ..errors import EXIT_OK
    from ..ops.checkpoints.fingerprint import fingerprint as run
    rep = run(path, at=at, checkpoints=checkpoints, reducer=reducer)
    if json_out:
        emit(json_document("walctl.fingerprint/1", dict(rep.to_json(), exit_code=EXIT_OK)))
        raise typer.Exit(EXIT_OK)
    at_text = "" if rep.sequence is None else f" at sequence {rep.sequence}"
    emit(f"{rep.sha256}  {rep.form}{at_text}")
    how = rep.source + (f" ({rep.checkpoint['file']}, wal_sequence {rep.checkpoint['wal_sequence']})"
                        if rep.checkpoint else "")
    emit(f"  reducer {rep.reducer}; from {how}; {rep.entries_folded} entries folded")
    for w in rep.warnings:
        emit(f"  warning: {w}")
    raise typer.Exit(EXIT_OK)
