from __future__ import annotations

import typer

from .render import emit, examined_document, json_document, rerun, safe
from .targets import existing_dir

HELP = """Seal the closed chunks of a directory written by other software (the Java writer): record each
one's size, SHA-256, records and sequences in DIR/.walctl/ledger.jsonl. Dry run unless --apply.

Only chunks that verify clean are sealed, never the last chunk (it may still grow); a chunk already sealed
is left as it is, so running it again changes nothing. Afterwards verify reports a sealed chunk that goes
missing, changes size or changes content (exit 3), and checks sealed chunks at hash speed. walctl's own
writers seal their chunks themselves. Exit 0, or the state's code when the directory cannot be read.

Example: walctl seal /var/lib/agent/wal && walctl seal /var/lib/agent/wal --apply"""


def seal(
    directory: str = typer.Argument(..., help="The chunk (or segment) directory.", callback=existing_dir),
    apply: bool = typer.Option(False, "--apply", help="Write the seal lines (default: print the plan only)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.seal/2) on stdout."),
) -> int:
    from ..errors import WalctlError
    from ..ops.wal.ledger_ops import seal as run_seal

    try:
        rep = run_seal(directory, apply=apply)
    except WalctlError as e:  # its own document when it examined the directory; else walctl.error/1
        examined_document("walctl.seal/2", e, json_out)
        raise
    if json_out:
        emit(json_document("walctl.seal/2", rep.to_json()))
        raise typer.Exit(rep.exit_code)
    verb = "sealed" if rep.applied else "would seal"
    for i in rep.items:
        if i.action == "seal":
            emit(f"{verb} {i.file}: {i.records} records, seq {i.first_seq}..{i.last_seq}, {i.size} bytes")
        elif i.action == "already-sealed":
            emit(f"already sealed {i.file} ({i.reason})")
        else:
            emit(f"not sealed {i.file}: {i.reason}")
    todo = sum(i.action == "seal" for i in rep.items)
    if not rep.applied and todo:
        emit(f"dry run: nothing was changed; to seal {todo} chunk(s): {safe(rerun('--apply'))}")
    raise typer.Exit(rep.exit_code)
