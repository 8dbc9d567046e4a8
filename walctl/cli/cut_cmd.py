from __future__ import annotations

from typing import Optional

import typer

from .render import emit, examined_document, json_document, next_lines, safe, warn_line
from .targets import existing_dir

HELP = """Keep a log directory's records through sequence N (--after N) or through the last record before the
first one stamped after T (--until T), and set everything after aside in .quarantine/ (manifest lines
first), as redis-check-aof --truncate-to-timestamp does. Dry run unless --apply.

The cut is recorded in the directory's ledger: the next writer continues at N+1 knowingly (the sequences
after N are issued again, a recorded reuse), verify is clean and says where the cut was, and `quarantine
restore` puts the cut part back while no writer has gone on from it. Refused: damage or a gap at or below
N, N below a compaction horizon, a live writer. A crash at any step: run it again. Spector V2 chunk
directories and ADR-003 segment directories.

Example: walctl cut /var/lib/agent/wal --after 1200 && walctl cut /var/lib/agent/wal --after 1200 --apply"""


def cut(
    directory: str = typer.Argument(..., help="The chunk or segment directory.", callback=existing_dir),
    after: Optional[int] = typer.Option(None, "--after", help="Keep sequences through N; set the rest aside."),
    until: Optional[str] = typer.Option(None, "--until", help="Keep records through the last one before the first "
                                        "stamped after T (epoch ms or ISO-8601)."),
    at_time: Optional[str] = typer.Option(None, "--at-time", hidden=True, help="The old spelling of --until."),
    apply: bool = typer.Option(False, "--apply", help="Do it (default: print the plan only)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.cut/1) on stdout."),
) -> int:
    from ..errors import EXIT_OK, UsageError, WalctlError
    from ..ops.wal.cut import cut as run_cut
    from .units import parse_time

    if at_time is not None:
        warn_line("note: --at-time is now --until")
        if until is not None:
            raise UsageError("give --until T once (--at-time is its old spelling)")
        until = at_time
    if (after is None) == (until is None):
        raise UsageError("give --after N or --until T")
    try:
        rep = run_cut(directory, after=after, until_ms=parse_time(until, "--until"), apply=apply)
    except WalctlError as e:
        examined_document("walctl.cut/1", e, json_out)
        raise
    if json_out:
        emit(json_document("walctl.cut/1", rep.to_json()))
        raise typer.Exit(EXIT_OK)
    _render(rep)
    raise typer.Exit(EXIT_OK)


def _render(rep) -> None:
    verb = "moved" if rep.applied else "would move"
    where = f"after sequence {rep.after}" + (f" (the last record before {rep.until_ms} ms)" if rep.until_ms is not None
                                             else "")
    if rep.nothing:
        emit(f"{rep.path}: nothing after sequence {rep.after}; nothing to cut")
        return
    emit(f"{rep.path}: cut {where}: the last sequence {'was' if rep.applied else 'is'} {rep.last_sequence}, "
         f"{rep.cut_bytes} bytes {'set' if rep.applied else 'to set'} aside in .quarantine/")
    if rep.truncate is not None:
        t = rep.truncate
        seqs = f"sequences {t.first_seq}..{t.last_seq}, " if t.first_seq is not None else ""
        emit(f"  {'cut' if rep.applied else 'would cut'} {t.file} at offset {t.offset}: {seqs}{t.length} bytes")
    for p in rep.moves:
        seqs = f"sequences {p.first_seq}..{p.last_seq}, " if p.first_seq is not None else "no records, "
        emit(f"  {verb} {p.file} whole: {seqs}{p.length} bytes")
    if rep.rewind:
        emit(f"  {'recorded' if rep.applied else 'would record'} in the ledger: sequences {rep.after + 1}.."
             f"{rep.issued} are issued again; the next writer continues at {rep.after + 1}")
    if rep.applied:
        emit(f"  verify after the cut: {rep.verify['verdict']} (exit {rep.verify['exit_code']})")
    else:
        emit("dry run: nothing was changed")
    for line in next_lines(rep.next_steps(), "  "):
        emit(safe(line))
