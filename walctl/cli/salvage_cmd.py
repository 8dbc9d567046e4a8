from __future__ import annotations

from typing import Optional

import typer

from .progress import PROGRESS, Bar, on_interrupt, path_bytes
from .render import emit, json_document, seq_range
from .targets import existing_path

HELP = """Copy every valid record of a damaged WAL into a new directory; the original is untouched.

Reads past damage like inspect and copies each valid record verbatim (same bytes, same sequence), from the
directory's chunks and from the recorded pieces of its .quarantine/ (a chunk `quarantine move` set aside,
tail bytes repair cut), saying which records came from where. The copy keeps the source's chunk names and
boundaries (an intact chunk is copied byte for byte) and gets a ledger, so verify of the copy names every
lost range and `repair --accept-loss` can record it. OUT must not exist (or be empty); it appears only when
complete. Exits with OUT's verify state: 0, or 4 when damage left a sequence gap.

Example: walctl salvage /var/lib/agent/wal --out /var/lib/agent/wal.salvaged --json"""


def salvage(
    path: str = typer.Argument(..., help="The damaged WAL directory (or one chunk file).", callback=existing_path),
    out: str = typer.Option(..., "--out", help="The new directory to create."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.salvage/1) on stdout."),
    progress: Optional[bool] = PROGRESS,
) -> int:
    from ..ops.advice import cmd
    from ..ops.wal.salvage import salvage as run_salvage

    again = cmd("salvage", path, "--out", out)
    on_interrupt(f"interrupted before the copy began; {path} is untouched; `{again}` starts it again (and clears "
                 f"what an interrupted run left)")
    aftermath: list = []
    try:
        with Bar("salvage", path_bytes(path), progress) as bar:
            rep = run_salvage(path, out, progress=bar.callback, aftermath=aftermath)
    except KeyboardInterrupt:
        if aftermath:
            on_interrupt(interrupt_text(path, out, aftermath[-1]))
        raise
    on_interrupt(f"interrupted after the copy was made; {path} is untouched; {out} is complete: "
                 f"`{cmd('verify', out)}` checks it")
    if json_out:
        emit(json_document("walctl.salvage/1", rep.to_json()))
        raise typer.Exit(rep.exit_code)
    render(rep, path, out)
    raise typer.Exit(rep.exit_code)


def render(rep, path: str, out: str) -> None:
    from ..ops.advice import cmd
    from .shown import shown

    emit(shown(f"copied {rep.records} valid records (seq {seq_range(rep.first_sequence, rep.last_sequence)}) "
               f"from {path} to {out}" + (f"; {rep.from_quarantine} of them from .quarantine/"
                                          if rep.from_quarantine else "")))
    same = {c.identical_to for c in rep.chunks}
    for u in rep.sources:
        emit(shown("  " + source_line(u) + (" (byte for byte)" if u.scanned.source.label in same else "")))
    for a, b in rep.lost_sequences:
        emit(f"  lost: seq {seq_range(a, b)} (no source holds it)")
    for f in rep.damaged_ranges:
        emit(shown(f"  damaged: {f.file} bytes {f.offset}..{f.end_offset} ({f.cls})"))
    for s in rep.skipped:
        emit(shown(f"  skipped: {s['file']}@{s['offset']}: {s['reason']}"))
    for n in rep.notes:
        emit(shown(f"  note: {n}"))
    from ..ops.wal.salvage import sealable

    sealed = len(sealable(rep.chunks))
    emit(shown(f"{out}: {rep.out_report.verdict} (exit {rep.exit_code}); its ledger: {sealed} chunk"
               f"{'' if sealed == 1 else 's'} sealed, highest sequence issued {rep.hwm}"))
    for a, b in rep.lost_before_first:
        emit(f"  sequences {seq_range(a, b)} come before the copy's first sequence {rep.first_sequence}: the copy "
             f"starts after them and cannot show them as missing")
    steps = [cmd(*argv[1:]) for argv in rep.accept_loss_argv()] + [cmd("verify", out)]
    if rep.lost_sequences:
        steps.append(cmd("inspect", path, "--damaged"))
    for i, s in enumerate(steps):
        emit(shown(("next: " if i == 0 else "      ") + s))


def source_line(u) -> str:
    from ..ops.wal.quarantine import said

    s = u.scanned.source
    e = s.entry or {}
    what = s.label if not e else \
        f"{s.label} ({said(e, 'action')} of {said(e, 'source')} at {said(e, 'time')}: {said(e, 'reason', '')})"
    if not u.records:
        took = "nothing copied"
    else:
        took = f"{u.records} records, seq " + ", ".join(seq_range(a, b) for a, b in u.ranges) + f" -> {u.out_file}"
    if s.entry is None and u.scanned.header is None and not u.records and not u.scanned.damage:
        took = "nothing copied (not a readable chunk)"
    extra = [f"{u.skipped} skipped"] if u.skipped else []
    extra += ["damaged bytes " + ", ".join(f"{a}..{b}" for a, b in u.scanned.damage)] if u.scanned.damage else []
    extra += [s.note] if s.note else []
    return f"from {what}: {took}" + (f" ({'; '.join(extra)})" if extra else "")


def interrupt_text(path: str, out: str, left) -> str:
    """The Ctrl-C line, from what the cleanup really did (ops.wal.salvage.Aftermath)."""
    from ..ops.advice import cmd

    tmp = out.rstrip("/") + ".tmp"
    again = cmd("salvage", path, "--out", out)
    if left.stage == "copying" and left.removed:
        return f"interrupted; {path} is untouched; the partial copy in {tmp} was removed; `{again}` starts again"
    if left.stage == "copying" and left.left_bytes:
        why = f": {left.problem}" if left.problem else ""
        return (f"interrupted; {path} is untouched; the partial copy in {tmp} is still there ({left.left_bytes} "
                f"bytes{why}); `{again}` removes it first and copies again")
    if left.stage == "copying":
        return (f"interrupted; {path} is untouched; the partial copy in {tmp} may still be there ({left.problem}); "
                f"`{again}` removes it first and copies again")
    if left.problem:  # interrupted again while finding out how far the final rename got
        return (f"interrupted; {path} is untouched; the whole copy is in {out} or {tmp}, and may be marked "
                f"unfinished ({left.problem}); `{again}` clears a copy marked unfinished and copies again; if it "
                f"refuses because {out} exists, that copy is final: `{cmd('verify', out)}` checks it")
    if left.stage == "copied":
        return (f"interrupted; {path} is untouched; {out} holds the whole copy ({left.left_bytes} bytes) but "
                f"still marked unfinished; `{again}` clears it and copies again")
    size = f"{left.left_bytes} bytes, " if left.left_bytes else ""
    return (f"interrupted; {path} is untouched; {out} is complete ({size}synced, with its ledger); only its final "
            f"check was cut short: `{cmd('verify', out)}` checks it")
