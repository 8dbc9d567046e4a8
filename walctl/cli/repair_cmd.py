from __future__ import annotations

import typer

from .render import emit, json_document

HELP = """Cut torn tails, keeping every cut byte in .quarantine/ first. Dry run unless --apply.

Only damage at the very end that nothing intact follows is cut; mid-log corruption, damaged closed chunks,
gaps and unsupported chunks are left alone (the plan says what to do instead). Refuses while a live
writer holds the lock (exit 6) and when more than --max-drop-bytes would go (exit 7). Exits with the
state after it ran: 0 once the tails are cut.

Example: walctl repair /var/lib/agent/wal && walctl repair /var/lib/agent/wal --apply"""


def repair(
    path: str = typer.Argument(..., help="The WAL directory."),
    apply: bool = typer.Option(False, "--apply", help="Cut the tails (default: print the plan only)."),
    max_drop_bytes: int = typer.Option(64 << 20, "--max-drop-bytes", min=0,
                                       help="Refuse (exit 7) to remove more than this many bytes in all."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.repair/1) on stdout."),
) -> int:
    from ..ops.advice import cmd
    from ..ops.repair import repair as run_repair
    from .shown import shown

    rep = run_repair(path, apply=apply, max_drop_bytes=max_drop_bytes)
    if json_out:
        emit(json_document("walctl.repair/1", rep.to_json()))
        raise typer.Exit(rep.exit_code)
    verb = "cut" if rep.applied else "would cut"
    for cut in rep.cuts:
        emit(f"{verb} {cut.file} at offset {cut.offset}: {cut.length} bytes ({cut.reason})")
    for ev in rep.evidence:
        emit(f"  kept as {ev['evidence']} (sha256 {ev['sha256'][:16]}...)")
    for f in rep.left_alone:
        emit(f"left alone: {f.cls}: {f.one_line()}")
    for line in rep.advice():
        emit(f"  {shown(line)}")
    if not rep.cuts:
        emit(f"{path}: no torn tail to cut ({rep.before.verdict})")
    elif not rep.applied:
        emit(f"dry run: nothing was changed; to cut {rep.drop_bytes} bytes: {shown(cmd('repair', path, '--apply'))}")
    else:
        emit(f"{path}: now {rep.after.verdict} (exit {rep.exit_code})")
    raise typer.Exit(rep.exit_code)
