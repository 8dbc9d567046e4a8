"""inspect's forensic views, from a finding to its bytes: --around, --seq, --damaged and pieces of
.quarantine/ read at the offset they were cut from. Each exits with verify's code for what it shows."""
from __future__ import annotations

import os

import typer

from ..errors import EXIT_OK, UsageError
from .render import emit, paint, warn_line
from .shown import shown


def forensic_view(path: str, around_offset, seq, damaged: bool, context: int, strict: bool) -> int:
    """From a finding to its bytes: --around, --seq or --damaged (one of them), with verify's exit code."""
    if sum(x is not None and x is not False for x in (around_offset, seq, damaged or None)) > 1:
        raise UsageError("--around, --seq and --damaged each choose what to show: give one")
    if around_offset is not None:
        return _render_around(*_around_target(path, around_offset), context, strict)
    if seq is not None:
        return _render_seq(path, seq, strict)
    return _render_damaged(path, context, strict)


def emit_fields(fields) -> None:
    for f in fields:
        status = {"valid": paint("valid", "green"), "invalid": paint("INVALID", "red"),
                  "unknown": paint("unknown", "yellow")}.get(f.status, "")
        emit(f"  {f.start:>10}..{f.end:<10} {f.name:<20} {f.value} {status}".rstrip())


def _around_target(path: str, spec: str) -> tuple[str, int, str]:
    """(the chunk file, the offset, the path verify judges it in: the directory given, or the file)."""
    from ..format.names import parse_chunk_name
    from ..ops.wal.forensics import parse_around

    chunk, offset = parse_around(spec)
    if os.path.isdir(path):
        if chunk is None:
            raise UsageError(f"--around on a directory needs CHUNK:OFFSET (e.g. wal-000000.bin:{offset})", path)
        if parse_chunk_name(chunk) is None and not os.path.isfile(os.path.join(path, chunk)):
            raise UsageError(f"--around: {shown(chunk)} is not a chunk of this directory", path)
        target = os.path.join(path, chunk)
        if not os.path.isfile(target):
            raise UsageError(f"--around: no chunk {shown(chunk)} in this directory", path)
        return target, offset, path
    if chunk is not None and chunk != os.path.basename(path):
        raise UsageError(f"--around {shown(spec)}: {shown(chunk)} is not this file", path)
    return path, offset, path


def _render_around(path: str, offset: int, verify_target: str, context: int, strict: bool = False) -> int:
    """The bytes around `offset`, and verify's findings about that byte; the exit code is theirs (as
    --damaged gives each region its finding's code), 0 where verify finds nothing."""
    from ..ops.wal.forensics import around, around_findings

    view = around(path, offset, context)
    code, found = around_findings(verify_target, path, offset, strict=strict)
    emit(f"== {shown(path)}: {view.size} bytes; offset {offset} +/- {context}: bytes {view.window_start}..{view.window_end}")
    for f in found:
        line = f"  verify: {shown(f.one_line())} ({f.cls}, exit {f.exit_code})"
        emit(paint(line, "red") if f.exit_code else line)
    emit_view(view)
    raise typer.Exit(code)


def emit_view(view) -> None:
    if view.note:
        emit(f"  note: {view.note}")
    for rec in view.records:
        label = "file header" if rec.start == 0 and rec.fields and rec.fields[0].name.startswith("file") else \
            f"record at offset {rec.start}"
        emit(f"-- {label}" + (paint(" (damaged)", "red") if rec.damaged else ""))
        emit_fields(rec.fields)
    for line in view.lines:
        emit(line)


def _render_damaged(path: str, context: int, strict: bool = False) -> int:
    from ..ops.advice import cmd
    from ..ops.wal.forensics import damaged_views

    report, views = damaged_views(path, context=min(context, 256), strict=strict)
    if not views:
        emit(f"{shown(path)}: {report.verdict} (exit {report.exit_code}): no damaged region")
        raise typer.Exit(report.exit_code)
    emit(f"{shown(path)}: {report.verdict.upper()} (exit {report.exit_code}): {len(views)} damaged "
         f"region{'s' if len(views) != 1 else ''}")
    for n, v in enumerate(views, 1):
        f = v.finding
        emit("")
        emit(paint(f"=== {n}/{len(views)} {shown(f.file or path)}: {f.cls} (exit {f.exit_code})", "red"))
        emit(f"  verify: {shown(f.one_line())}")
        emit(f"  lost:    {v.lost}")
        emit(f"  resumes: {shown(v.resumes)}")
        for i, view in enumerate(v.views):
            if i:
                emit(f"  ... {v.hidden_bytes} more damaged bytes not shown "
                     f"(`{cmd('inspect', v.path, '--around', str(view.window_start - v.hidden_bytes // 2))}`)")
            emit(f"-- bytes {view.window_start}..{view.window_end} of {view.size}")
            emit_view(view)
    raise typer.Exit(report.exit_code)


def _render_seq(path: str, sequence: int, strict: bool = False) -> int:
    """The record carrying `sequence`, or what accounts for its absence, exiting with verify's code for it."""
    from ..ops.wal.forensics import find_sequence

    sv = find_sequence(path, sequence, strict=strict)
    for f in sv.index:
        warn_line(shown(f"{path}: {f.file + ': ' if f.file else ''}{f.reason}"))
    if sv.record is not None and not hasattr(sv.record, "type_ordinal"):  # an ADR-003 entry
        e = sv.record
        emit(f"== sequence {sequence}: {shown(sv.path)} offset {e.offset} ({e.size} bytes, {e.encoding}, "
             f"operation {shown(str(e.operation))})")
        emit_view(sv.view)
        return EXIT_OK
    if sv.record is not None:
        r = sv.record
        emit(f"== sequence {sequence}: {shown(sv.path)} offset {r.offset} ({r.size} bytes, {r.type}, "
             f"memoryId {shown(r.memory_id_text)!s})")
        emit_view(sv.view)
        return EXIT_OK
    line = f"== sequence {sequence}: no valid record carries it; {shown(sv.where)}"
    emit(paint(line, "red") if sv.exit_code else line)
    if sv.view is not None:
        emit_view(sv.view)
    raise typer.Exit(sv.exit_code)


def quarantined_piece(path: str):
    """A file in DIR/.quarantine/ that is not a chunk: decoded at the offset its manifest line gives."""
    from ..ops.wal.pieces import find_piece, quarantined_piece_target

    target = quarantined_piece_target(path)
    if target is None:
        return None
    directory, name = target
    piece, problems = find_piece(directory, name)
    render_piece(directory, name, piece)
    for p in problems:
        warn_line(shown(p))
    return EXIT_OK


def render_piece(directory: str, name: str, piece) -> None:
    """A cut piece read at its original offset: every record in it decoded as far as its bytes go."""
    from ..ops.wal.pieces import view_cut, view_unrecorded

    if piece is None:
        emit(f"== {shown(name)}: not described by .quarantine/MANIFEST.jsonl; offsets below are the piece's own")
        view = view_unrecorded(directory, name)
    else:
        emit(f"== {shown(name)}: {piece.length} bytes cut from {shown(piece.source)} at offset {piece.offset} "
             f"({shown(piece.action)}, {shown(piece.time)}): {shown(piece.reason)}")
        view = view_cut(directory, piece)
    for start, fields in view.records:
        emit(f"-- record at offset {start} of {shown(view.piece.source if view.piece else name)}")
        emit_fields(fields)
    for line in view.lines:
        emit(line)
    if view.shown_bytes < view.size:
        emit(f"  ... {view.size - view.shown_bytes} more bytes not shown")
