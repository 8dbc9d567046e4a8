from __future__ import annotations

import typer

from ..errors import EXIT_OK
from .render import emit, json_document, plain_table, say_command, seq_range
from .targets import existing_dir

app = typer.Typer(help="""What walctl set aside in DIR/.quarantine/, what it holds, putting it back, purging it.

Every byte repair cuts and every chunk moved aside lands in .quarantine/ (never overwriting anything there)
with a line in .quarantine/MANIFEST.jsonl: time, action, source, offset, length, sha256, reason.

Example: walctl quarantine list /var/lib/agent/wal""", no_args_is_help=True)


@app.command("list", help="""List the quarantined files with the manifest line that put each there.

Example: walctl quarantine list /var/lib/agent/wal --json""")
def list_(directory: str = typer.Argument(..., help="The WAL directory.", callback=existing_dir),
          json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.quarantine/1).")):
    from ..ops.wal.quarantine import list_quarantine, said

    lst = list_quarantine(directory)
    if json_out:
        emit(json_document("walctl.quarantine/1", lst.to_json()))
        raise typer.Exit(EXIT_OK)
    from .shown import shown

    rows = [[shown(i.name), i.size, said(i.entry, "action", "UNRECORDED"), said(i.entry, "source", ""),
             (i.entry or {}).get("offset", ""), said(i.entry, "time", ""), said(i.entry, "reason", "")]
            for i in lst.items]
    rows = [[shown(c) if isinstance(c, str) else c for c in r] for r in rows]
    if rows:
        for line in plain_table(["file", "bytes", "action", "source", "offset", "time", "reason"], rows, indent=""):
            emit(line)
    else:
        emit(f"{shown(directory)}: nothing in quarantine")
    for p in lst.problems:
        emit(f"warning: {shown(p)}")
    if rows:
        from ..ops.advice import cmd

        say_command("what a piece holds:", shown(cmd('quarantine', 'show', directory, lst.items[0].name)))
    raise typer.Exit(EXIT_OK)


@app.command("show", help="""What a quarantined file holds: a chunk is verified like `walctl verify`; cut tail
bytes are read at the offset they were cut from: every record in them decoded as far as the bytes go
(a partial header still names its sequence, type and lengths; each CRC marked valid, invalid or not
checkable), the payload bytes present shown, and the hex dump at the chunk's own offsets.

Example: walctl quarantine show /var/lib/agent/wal wal-000003.bin""")
def show(directory: str = typer.Argument(..., help="The WAL directory.", callback=existing_dir),
         name: str = typer.Argument(..., help="A file name from `quarantine list`."),
         json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.quarantine-show/1).")):
    from ..ops.wal.quarantine import said, show as run_show

    s = run_show(directory, name)
    if json_out:
        body = {"item": s.item.to_json(), "kind": s.kind,
                "verify": s.report.to_json() if s.report else None,
                "fields": [f._asdict() for f in s.fields], "source_offset": s.offset,
                "records": [{"offset": off, "fields": [f._asdict() for f in fields]} for off, fields in s.records],
                "problems": list(s.problems)}
        emit(json_document("walctl.quarantine-show/1", body))
        raise typer.Exit(EXIT_OK)
    import os

    from ..ops.advice import cmd
    from .shown import shown

    e = s.item.entry or {}
    emit(shown(f"{name}: {s.item.size} bytes; {said(e, 'action', 'unrecorded')} from {said(e, 'source')} at "
               f"offset {said(e, 'offset')} on {said(e, 'time')}: {said(e, 'reason', '')}"))
    if s.report is not None:
        seqs = (f"seq {seq_range(s.report.first_sequence, s.report.last_sequence)}"
                if s.report.first_sequence is not None else "no sequences")
        emit(f"  as a {s.kind}: {s.report.verdict}, {s.report.records} valid records, {seqs}, findings:")
        for f in s.report.findings:
            emit(f"    {f.cls}: {shown(f.one_line())}")
        emit(f"  records: {shown(cmd('inspect', os.path.join(directory, '.quarantine', name)))}")
    for off, fields in s.records:
        emit(f"-- record at offset {off} of {shown(e.get('source', name))}")
        for f in fields:
            emit(f"  {f.start:>10}..{f.end:<10} {f.name:<20} {shown(f.value)} {f.status or ''}".rstrip())
    for line in s.lines:
        emit(line)
    for p in s.problems:
        emit(f"warning: {shown(p)}")
    if e.get("source"):
        emit(f"  put back: {shown(cmd('quarantine', 'restore', directory, name, '--apply'))}")
    raise typer.Exit(EXIT_OK)


@app.command("move", help="""Move a chunk, an ADR-003 segment or a checkpoint into .quarantine/ (never
overwriting), recording why. Dry run unless --apply. A chunk's or segment's sequences then show as a gap
to verify, by design; a rotten checkpoint stops being listed as a candidate.

Example: walctl quarantine move /var/lib/agent/wal wal-000003.bin --reason "bit rot, salvaged" --apply
Example: walctl quarantine move ckpts/ 3f2a...e1.ckpt --reason "step 8: body SHA-256 mismatch" --apply""")
def move(directory: str = typer.Argument(..., help="The WAL, segment or checkpoint directory.", callback=existing_dir),
         chunk: str = typer.Argument(..., help="The file name: wal-000003.bin, wal_00000003.log or <uuid>.ckpt."),
         reason: str = typer.Option(..., "--reason", help="Why, for the manifest."),
         apply: bool = typer.Option(False, "--apply", help="Move it (default: print the plan only)."),
         json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.quarantine-move/1).")):
    from ..ops.wal.quarantine import move as run_move

    from ..ops.advice import cmd

    act = run_move(directory, chunk, reason=reason, apply=apply)
    _render_action(act, json_out, "walctl.quarantine-move/1",
                   cmd("quarantine", "move", directory, chunk, "--reason", reason, "--apply"))


@app.command("restore", help="""Put a quarantined file back: a chunk under its old name (refused if that name is
taken), cut tail bytes onto the end of their chunk (refused unless the chunk still ends where they were
cut). Dry run unless --apply.

Example: walctl quarantine restore /var/lib/agent/wal wal-000003.bin --apply""")
def restore(directory: str = typer.Argument(..., help="The WAL directory.", callback=existing_dir),
            name: str = typer.Argument(..., help="A file name from `quarantine list`."),
            apply: bool = typer.Option(False, "--apply", help="Restore it (default: print the plan only)."),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.quarantine-restore/1).")):
    from ..ops.wal.quarantine import restore as run_restore

    from ..ops.advice import cmd

    act = run_restore(directory, name, apply=apply)
    _render_action(act, json_out, "walctl.quarantine-restore/1", cmd("quarantine", "restore", directory, name, "--apply"))


@app.command("purge", help="""Delete quarantined files whose manifest line is older than --older-than: the only
walctl command that destroys evidence. Each deletion is first recorded in the manifest (action purge, with
the file's sha256); files no manifest line describes are never purged. Dry run unless --apply; takes the
directory's lock.

Example: walctl quarantine purge /var/lib/agent/wal --older-than 30d --apply""")
def purge(directory: str = typer.Argument(..., help="The directory whose .quarantine/ to purge.", callback=existing_dir),
          older_than: str = typer.Option(..., "--older-than", help="Only files quarantined longer ago than this "
                                                                   "(a duration: 30d, 12h; 0 for all)."),
          apply: bool = typer.Option(False, "--apply", help="Delete them (default: print the plan only)."),
          json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.quarantine-purge/1).")):
    from ..ops.wal.quarantine import purge as run_purge, said
    from .units import parse_duration

    rep = run_purge(directory, older_than_s=parse_duration(older_than, "--older-than"), apply=apply)
    if json_out:
        emit(json_document("walctl.quarantine-purge/1", rep.to_json()))
        raise typer.Exit(EXIT_OK)
    verb = "purged" if rep.applied else "would purge"
    emit(f"{directory}: {verb} {len(rep.removals)} files ({rep.bytes} bytes); kept {len(rep.kept)}")
    for i in rep.removals:
        e = i.entry or {}
        emit(f"  {verb}: {i.name} ({i.size} bytes; {said(e, 'action', 'purge recorded')} of {said(e, 'source')} "
             f"on {said(e, 'time')})")
    for i, why in rep.kept:
        emit(f"  kept: {i.name}: {why}")
    if not rep.applied and rep.removals:
        from ..ops.advice import cmd
        from .shown import shown

        emit(f"dry run: nothing was changed; to do it: "
             f"{shown(cmd('quarantine', 'purge', directory, '--older-than', older_than, '--apply'))}")
    raise typer.Exit(EXIT_OK)


def _render_action(act, json_out: bool, schema: str, again: str | None = None):
    from ..ops.wal.quarantine import said
    from .shown import shown

    if json_out:
        emit(json_document(schema, act.to_json()))
    elif act.already:
        emit(shown(f"already restored: {act.source} -> {act.target} (restored at {said(act.entry, 'time')}); "
                   f"nothing to do"))
    elif act.applied:
        emit(shown(f"{act.action}: {act.source} -> {act.target}"))
    else:
        emit(shown(f"would {act.action}: {act.source} -> {act.target}; dry run: nothing was changed; "
                   f"to do it: {again or 'run again with --apply'}"))
    raise typer.Exit(EXIT_OK)
