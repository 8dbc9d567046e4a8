from __future__ import annotations

from typing import Optional

import typer

from .render import emit, examined_document, json_document, next_lines, rerun, safe
from .targets import existing_dir

HELP = """Cut torn tails, keeping every cut byte in .quarantine/ first. Dry run unless --apply.

Only damage at the very end that nothing intact follows is cut; mid-log corruption, damaged closed chunks,
gaps and unsupported chunks are left alone (the plan says what to do instead). Refuses while a live
writer holds the lock (exit 6) and when more than --max-drop-bytes would go (exit 7). Exits with the
state after it ran: 0 once the tails are cut.

With --accept-loss A..B --reason TEXT it cuts nothing: it records in DIR/.walctl/ledger.jsonl the
operator's decision that sequences A..B are gone for good (after a salvage, a lost tail). Only ranges that
really are missing are accepted (else exit 7); afterwards verify reports them as warnings (exit 0,
--strict 3) and writers append after them.

Example: walctl repair /var/lib/agent/wal; walctl repair /var/lib/agent/wal --apply
Example: walctl repair /srv/wal.salvaged --accept-loss 41..57 --reason "chunk 3 rotted, INC-1234" --apply"""


def repair(
    path: str = typer.Argument(..., help="The WAL directory.", callback=existing_dir),
    apply: bool = typer.Option(False, "--apply", help="Cut the tails (default: print the plan only)."),
    max_drop_bytes: int = typer.Option(64 << 20, "--max-drop-bytes", min=0,
                                       help="Refuse (exit 7) to remove more than this many bytes in all."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.repair/2) on stdout."),
    accept_loss: Optional[str] = typer.Option(None, "--accept-loss", metavar="A..B",
                                              help="Record that sequences A..B are lost for good (no cut)."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Why the loss is accepted (kept in the ledger)."),
    archive: Optional[str] = typer.Option(None, "--from", metavar="DEST", help="An archive (file:///path, "
                                          "s3://bucket/prefix; default: $WALCTL_ARCHIVE): when it can heal a "
                                          "finding, next: names the walctl heal command."),
) -> int:
    from ..ops.wal.repair import repair as run_repair

    if accept_loss is not None or reason is not None:
        return _accept(path, accept_loss, reason, apply, json_out)

    from ..ops.advice import steps_json
    from ..ops.archive.heal_advice import heal_steps

    rep = run_repair(path, apply=apply, max_drop_bytes=max_drop_bytes)
    steps = heal_steps(rep.after or rep.before, archive) + rep.next_steps()  # heal first, when an archive can
    if json_out:
        emit(json_document("walctl.repair/2", dict(rep.to_json(), next_steps=steps_json(steps))))
        raise typer.Exit(rep.exit_code)
    verb = "cut" if rep.applied else "would cut"
    for cut in rep.cuts:
        emit(f"{verb} {cut.file} at offset {cut.offset}: {cut.length} bytes ({cut.reason})")
    for ev in rep.evidence:
        emit(f"  kept as {ev['evidence']} (sha256 {ev['sha256'][:16]}...)")
    for f in rep.left_alone:
        emit(f"left alone: {f.cls}: {f.one_line()}")
    if not rep.cuts:
        emit(f"{path}: no torn tail to cut ({rep.before.verdict})")
    elif not rep.applied:
        emit(f"dry run: nothing was changed ({rep.drop_bytes} bytes to cut)")
    else:
        emit(f"{path}: now {rep.after.verdict} (exit {rep.exit_code})")
    for line in next_lines(steps):
        emit(line)
    raise typer.Exit(rep.exit_code)


def _accept(path, rng, reason, apply, json_out) -> int:
    from ..errors import UsageError, WalctlError
    from ..ops.wal.ledger_ops import accept_loss, parse_range

    try:
        if rng is None or reason is None:
            raise UsageError("--accept-loss A..B and --reason TEXT go together")
        first, last = parse_range(rng)
        rep = accept_loss(path, first, last, reason, apply=apply)
    except WalctlError as e:  # its own document when it examined the directory; else walctl.error/1
        if e.examined is not None:
            e.examined = {"accept_loss": e.examined, **e.examined}
        examined_document("walctl.repair/2", e, json_out)
        raise
    if json_out:
        emit(json_document("walctl.repair/2", {"accept_loss": rep.to_json(), **rep.to_json()}))
        raise typer.Exit(rep.exit_code)
    if rep.already_accepted:
        emit(f"{path}: sequences {first}..{last} are already accepted as lost; nothing was changed")
    elif rep.applied:
        emit(f"{path}: recorded: sequences {first}..{last} accepted as lost ({reason}); now {rep.after.verdict} "
             f"(exit {rep.exit_code})")
    else:
        emit(f"would record: sequences {first}..{last} accepted as lost ({reason})")
        emit(f"dry run: nothing was changed; to record it: {safe(rerun('--apply'))}")
    raise typer.Exit(rep.exit_code)
