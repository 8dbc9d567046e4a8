from __future__ import annotations

import os
import sys
from typing import List, Optional

import typer

from ..errors import EXIT_CORRUPT, EXIT_OK, UsageError
from ..ops.kinds import VIEW_AGENTS, VIEW_CHECKPOINTS, VIEW_TASKLOGS, VIEW_WORKFLOWS
from .progress import PROGRESS, Bar, path_bytes
from .render import emit, paint, rich_console, safe, warn_line
from .shown import shown
from .targets import existing_path

# Kept here, not imported: the command modules load their ops only when run (cold start of verify).
PAYLOAD_MODES = ("auto", "text", "hex", "base64", "json", "msgpack")

HELP = """Show the records of a WAL chunk or directory, and the bytes around damage. Read-only.

Reads past damage: every valid record is shown, damaged ranges are listed where they occur. Filters
combine (AND). Payloads are shown decoded (inflated when compressed): as JSON, text or msgpack when
they are one, else hex. Exit code as for verify (0 when --limit stopped the walk early).

From a finding to its bytes: --damaged dumps every damaged region of a directory (fields named, CRCs
marked, what was lost and what resumes after it); --seq N and --around CHUNK:OFFSET go straight to the
bytes. A piece in DIR/.quarantine/ is read at the offset it was cut from.

Example: walctl inspect wal/ --from-seq 100 --type REMEMBER --jsonl | jq .payload_hex
Example: walctl inspect wal/ --damaged
Example: walctl inspect wal/ --around wal-000003.bin:2368 --context 64"""


def _parse_time(text: str | None, name: str) -> int | None:
    if text is None:
        return None
    from datetime import datetime, timezone

    t = text.strip()
    if t.isascii() and t.lstrip("-").isdigit():  # ASCII digits only (never '١٢' nor '²')
        return int(t)
    try:
        dt = datetime.fromisoformat(t[:-1] + "+00:00" if t.endswith(("Z", "z")) else t)
    except ValueError:
        raise UsageError(f"{name}: {text!r} is neither epoch milliseconds nor an ISO-8601 time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def inspect(
    path: str = typer.Argument(..., help="A chunk directory or one chunk file (also a quarantined one).", callback=existing_path),
    jsonl: bool = typer.Option(False, "--jsonl", help="One JSON object per valid record on stdout."),
    from_seq: Optional[int] = typer.Option(None, "--from-seq", help="Only sequences >= N."),
    to_seq: Optional[int] = typer.Option(None, "--to-seq", help="Only sequences <= N."),
    types: Optional[List[str]] = typer.Option(None, "--type", help="Only this event type (name or ordinal); repeatable."),
    memory_id: Optional[str] = typer.Option(None, "--id", help="Only records with this memoryId."),
    since: Optional[str] = typer.Option(None, "--since", help="Only timestamps >= T (epoch ms or ISO-8601)."),
    until: Optional[str] = typer.Option(None, "--until", help="Only timestamps <= T (epoch ms or ISO-8601)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Stop after N matching records."),
    payload: str = typer.Option("auto", "--payload", metavar="[" + "|".join((*PAYLOAD_MODES, "none")) + "]", help=f"Payload view: {', '.join(PAYLOAD_MODES)}, none."),
    hexdump: bool = typer.Option(False, "--hexdump", help="Annotated hex dump of each matching record."),
    around_offset: Optional[str] = typer.Option(None, "--around", metavar="[CHUNK:]OFFSET",
                                                help="Annotated bytes around this offset of a chunk file "
                                                     "(of a directory: CHUNK:OFFSET)."),
    damaged: bool = typer.Option(False, "--damaged", help="Every damaged region of the path as an annotated "
                                                          "dump, in order, with what was lost and what resumes."),
    seq: Optional[int] = typer.Option(None, "--seq", min=0, help="The annotated bytes of the record carrying "
                                                                 "sequence N (or the damage that lost it)."),
    context: int = typer.Option(64, "--context", min=0, max=1 << 20, help="Bytes each side of --around."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing records as a live writer appends "
                                                              "(filters --from-seq/--to-seq/--limit apply)."),
    interval: float = typer.Option(0.2, "--interval", min=0.01, max=60, help="--follow: poll every S seconds."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0, help="--follow: stop after S seconds."),
    progress: Optional[bool] = PROGRESS,
) -> int:
    from ..ops.records import RecordFilter
    from ..ops.kinds import KINDS, VIEW_ENTRIES
    from ..ops.verify import detect_kind

    if payload not in PAYLOAD_MODES + ("none",):
        raise UsageError(f"--payload must be one of {', '.join(PAYLOAD_MODES)}, none (got {payload!r})")
    since_ms, until_ms = _parse_time(since, "--since"), _parse_time(until, "--until")
    if follow:
        return _follow(path, jsonl, payload, from_seq, to_seq, limit, interval, timeout)
    if sum(x is not None and x is not False for x in (around_offset, seq, damaged or None)) > 1:
        raise UsageError("--around, --seq and --damaged each choose what to show: give one")
    if around_offset is not None:
        return _render_around(*_around_target(path, around_offset), context)
    if seq is not None:
        return _render_seq(path, seq)
    if damaged:
        return _render_damaged(path, context)
    piece = _quarantined_piece(path)
    if piece is not None:
        return piece
    view = KINDS[detect_kind(path)].inspect
    if view in _OTHER_TOOLS:  # shown by the command that owns the artifact
        return _OTHER_TOOLS[view](path, jsonl)
    if view == VIEW_ENTRIES:
        with Bar("inspect", path_bytes(path), progress) as bar:
            return _inspect_segments(path, jsonl, from_seq, to_seq, types, limit, bar.callback)
    flt = RecordFilter.from_options(from_seq, to_seq, types, memory_id, since_ms, until_ms, limit)
    with Bar("inspect", path_bytes(path), progress) as bar:
        walk = _show_records(path, flt, jsonl, hexdump, payload, bar.callback)
    if walk.report is None:
        return EXIT_OK
    _summarise(walk)
    raise typer.Exit(walk.report.exit_code)


def _show_records(path: str, flt, jsonl: bool, hexdump: bool, payload: str, progress):
    """The matching records as JSON lines, hex dumps or a table; returns the finished (or limited) walk."""
    from ..ops.records import RecordWalk

    walk = RecordWalk(path, flt, keep_raw=hexdump, progress=progress)
    if jsonl:
        _render_jsonl(walk, payload)
    elif hexdump:
        _render_hexdump(walk)
    else:
        _render_table(walk, payload)
    return walk


def _inspect_checkpoints(path: str, jsonl: bool) -> int:
    from .checkpoint_cmd import inspect as inspect_checkpoint

    return inspect_checkpoint(path=path, json_out=jsonl)


def _inspect_tasklogs(path: str, jsonl: bool) -> int:
    from .tasklog_cmd import inspect as inspect_tasklog

    return inspect_tasklog(path=path, json_out=jsonl)


def _inspect_agents(path: str, jsonl: bool) -> int:
    from .agents_cmd import tree

    return tree(root=path, json_out=jsonl)


def _inspect_workflows(path: str, jsonl: bool) -> int:
    from .workflow_cmd import list_

    return list_(root=path, workflow=None, json_out=jsonl)


# ops/kinds.py inspect view -> the command that shows it (for kinds that hold no records of their own)
_OTHER_TOOLS = {VIEW_CHECKPOINTS: _inspect_checkpoints, VIEW_TASKLOGS: _inspect_tasklogs,
                VIEW_AGENTS: _inspect_agents, VIEW_WORKFLOWS: _inspect_workflows}


def _follow(path, jsonl, payload_mode, from_seq, to_seq, limit, interval, timeout) -> int:
    import json

    from ..format.hexdump import format_timestamp_ms
    from ..ops.follow import follow
    from ..ops.records import render_payload

    def show(recs) -> None:
        from ..ops.records import Record
        from ..ops.segments import entry_json

        for r in recs:
            if not isinstance(r, Record):  # (segment, entry): its inspect --jsonl object either way
                line = json.dumps(entry_json(*r), ensure_ascii=False, sort_keys=True)
            elif jsonl:
                line = json.dumps(r.to_json(), ensure_ascii=False)
            else:
                view = "" if payload_mode == "none" else render_payload(r.payload, payload_mode)[1]
                line = (f"{r.sequence:>8} {str(r.type):<14} {r.memory_id_text[:40]:<24} "
                        f"{format_timestamp_ms(r.timestamp_ms)} {r.file}@{r.offset} {view[:120]}")
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    after = from_seq - 1 if from_seq else 0
    res = follow(path, show, after=after, to=to_seq, limit=limit, interval=interval, timeout=timeout)
    sys.stderr.write(f"walctl: followed {path}: {res.events} records; stopped by {res.ended_by}\n")
    if res.problem:
        warn_line(res.problem)
    return res.exit_code


def _summarise(walk) -> None:
    rep = walk.report
    bad = [f for f in rep.findings if f.exit_code != 0]
    for f in bad:
        warn_line(f"{rep.path}: {f.cls}: {f.one_line()}")
    sys.stderr.write(f"walctl: {walk.matched} records shown; {rep.path} is {rep.verdict} (exit {rep.exit_code})\n")


def _damage_text(item) -> str:
    d = item.damage
    what = f"{d.kind}" + (f" ({d.tail_kind})" if d.tail_kind else "")
    return f"{item.file}: offset {d.offset}..{d.end}: {what} damage: {d.reason}"


def _render_jsonl(walk, payload_mode: str) -> None:
    import json

    from ..ops.records import Record, render_payload

    from ..format.events import STREAM_HEX_BYTES, HexLine

    out = sys.stdout
    for item in walk:
        if isinstance(item, Record):
            large = len(item.payload) > STREAM_HEX_BYTES
            obj = item.to_json() if not large else dict(item._replace(payload=b"").to_json())
            if payload_mode not in ("auto", "hex", "none"):
                obj["payload_view"], obj["payload"] = render_payload(item.payload, payload_mode)
            line = json.dumps(obj, ensure_ascii=False) + "\n"
            if not large:
                out.write(line)
                continue
            # The hex of a large payload is written in pieces (never a 2x string, then a 2x line).
            for part in HexLine.around(line.encode("utf-8"), b'"payload_hex": "', item.payload).parts():
                out.flush()
                out.buffer.write(part) if hasattr(out, "buffer") else out.write(part.decode("utf-8"))
        else:
            warn_line(_damage_text(item))


def _render_table(walk, payload_mode: str) -> None:
    from rich.table import Table
    from rich.text import Text

    from ..format.hexdump import format_timestamp_ms
    from ..ops.records import Record, render_payload

    console = rich_console()

    def new_table(header: bool):
        t = Table(box=None, pad_edge=False, header_style="bold", show_header=header)
        for col in ("seq", "type", "memoryId", "timestamp (UTC)", "z", "stored", "at", "payload"):
            folds = col in ("memoryId", "payload")
            t.add_column(col, no_wrap=not folds, overflow="fold" if folds else "ignore",
                         ratio=1 if col == "payload" else None)
        return t

    table = new_table(True)
    for item in walk:
        if isinstance(item, Record):
            # A table cell shows 160 characters: render a prefix, never a whole large payload.
            view = "" if payload_mode == "none" else render_payload(bytes(item.payload[:4096]), payload_mode)[1]
            if len(view) > 160:
                view = view[:157] + "..."
            table.add_row(str(item.sequence), safe(item.type), Text(safe(item.memory_id_text[:40])),
                          format_timestamp_ms(item.timestamp_ms), "z" if item.compressed else "",
                          str(item.stored_len), safe(f"{item.file}@{item.offset}"), Text(safe(view)))
        else:
            table.add_row("!!", Text("DAMAGE", style="bold red"), "", "", "", "",
                          safe(f"{item.file}@{item.damage.offset}"), Text(safe(_damage_text(item)), style="red"))
        if table.row_count >= 2000:  # print in slices: a big WAL streams instead of building one table
            console.print(table)
            table = new_table(False)
    if table.row_count or not walk.matched:
        console.print(table)


def _render_hexdump(walk) -> None:
    from ..format.hexdump import hex_lines, record_fields, v1_record_fields
    from ..ops.records import RawDamage

    from ..ops.forensics import MAX_REGION_BYTES, window

    for item in walk:
        if isinstance(item, RawDamage):
            emit(paint(f"== {_damage_text(item)}", "red"))
            d = item.damage
            chunk = os.path.join(walk.path, item.file) if os.path.isdir(walk.path) else walk.path
            _emit_view(window(chunk, d.offset, min(d.end, d.offset + MAX_REGION_BYTES), d.offset))
            continue
        emit(f"== {item.file} offset {item.offset} seq {item.sequence} ({item.size} bytes)")
        fields = v1_record_fields if item.version == 1 else record_fields  # legacy V1: no CRCs to mark
        _emit_fields(fields(item.raw, 0, base=item.offset))
        for line in hex_lines(item.raw, item.offset, item.offset + item.size, base=item.offset):
            emit(line)


def _emit_fields(fields) -> None:
    for f in fields:
        status = {"valid": paint("valid", "green"), "invalid": paint("INVALID", "red"),
                  "unknown": paint("unknown", "yellow")}.get(f.status, "")
        emit(f"  {f.start:>10}..{f.end:<10} {f.name:<20} {f.value} {status}".rstrip())


def _around_target(path: str, spec: str) -> tuple[str, int]:
    from ..format.names import parse_chunk_name
    from ..ops.forensics import parse_around

    chunk, offset = parse_around(spec)
    if os.path.isdir(path):
        if chunk is None:
            raise UsageError(f"--around on a directory needs CHUNK:OFFSET (e.g. wal-000000.bin:{offset})", path)
        if parse_chunk_name(chunk) is None and not os.path.isfile(os.path.join(path, chunk)):
            raise UsageError(f"--around: {shown(chunk)} is not a chunk of this directory", path)
        target = os.path.join(path, chunk)
        if not os.path.isfile(target):
            raise UsageError(f"--around: no chunk {shown(chunk)} in this directory", path)
        return target, offset
    if chunk is not None and chunk != os.path.basename(path):
        raise UsageError(f"--around {shown(spec)}: {shown(chunk)} is not this file", path)
    return path, offset


def _render_around(path: str, offset: int, context: int) -> int:
    from ..ops.forensics import around

    view = around(path, offset, context)
    emit(f"== {shown(path)}: {view.size} bytes; offset {offset} +/- {context}: bytes {view.window_start}..{view.window_end}")
    _emit_view(view)
    return EXIT_OK


def _emit_view(view) -> None:
    if view.note:
        emit(f"  note: {view.note}")
    for rec in view.records:
        label = "file header" if rec.start == 0 and rec.fields and rec.fields[0].name.startswith("file") else \
            f"record at offset {rec.start}"
        emit(f"-- {label}" + (paint(" (damaged)", "red") if rec.damaged else ""))
        _emit_fields(rec.fields)
    for line in view.lines:
        emit(line)


def _render_damaged(path: str, context: int) -> int:
    from ..ops.advice import cmd
    from ..ops.forensics import damaged_views

    report, views = damaged_views(path, context=min(context, 256))
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
                     f"({cmd('inspect', v.path, '--around', str(view.window_start - v.hidden_bytes // 2))})")
            emit(f"-- bytes {view.window_start}..{view.window_end} of {view.size}")
            _emit_view(view)
    raise typer.Exit(report.exit_code)


def _render_seq(path: str, sequence: int) -> int:
    from ..ops.forensics import find_sequence

    sv = find_sequence(path, sequence)
    if sv.record is not None:
        r = sv.record
        emit(f"== sequence {sequence}: {shown(sv.path)} offset {r.offset} ({r.size} bytes, {r.type}, "
             f"memoryId {shown(r.memory_id_text)!s})")
        _emit_view(sv.view)
        return EXIT_OK
    emit(paint(f"== sequence {sequence}: no valid record carries it; {shown(sv.where)}", "red"))
    if sv.view is not None:
        _emit_view(sv.view)
    raise typer.Exit(EXIT_CORRUPT)


def _quarantined_piece(path: str):
    """A file in DIR/.quarantine/ that is not a chunk: decoded at the offset its manifest line gives."""
    from ..ops.pieces import find_piece, quarantined_piece_target

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
    from ..ops.pieces import view_cut, view_unrecorded

    if piece is None:
        emit(f"== {shown(name)}: not described by .quarantine/MANIFEST.jsonl; offsets below are the piece's own")
        view = view_unrecorded(directory, name)
    else:
        emit(f"== {shown(name)}: {piece.length} bytes cut from {shown(piece.source)} at offset {piece.offset} "
             f"({shown(piece.action)}, {shown(piece.time)}): {shown(piece.reason)}")
        view = view_cut(directory, piece)
    for start, fields in view.records:
        emit(f"-- record at offset {start} of {shown(view.piece.source if view.piece else name)}")
        _emit_fields(fields)
    for line in view.lines:
        emit(line)
    if view.shown_bytes < view.size:
        emit(f"  ... {view.size - view.shown_bytes} more bytes not shown")


def _inspect_segments(path, jsonl, from_seq, to_seq, operations, limit, progress=None) -> int:
    """ADR-003 entries: one JSON object per entry with --jsonl, else a table; --type filters operations."""
    import json

    from ..ops.segments import SegmentWalk, entry_json, select_entries

    walk = SegmentWalk(path, progress=progress)
    shown = 0
    rows = []
    for name, e in select_entries(walk, from_seq, to_seq, operations, limit):
        obj = entry_json(name, e)
        if jsonl:
            sys.stdout.write(json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n")
        else:
            data = json.dumps(obj["data"], ensure_ascii=False, sort_keys=True)
            rows.append([obj["sequence"], obj["operation"], obj["timestamp"], obj["encoding"], f"{name}@{e.offset}",
                         data if len(data) <= 100 else data[:97] + "..."])
        shown += 1
    if rows:
        from .render import plain_table

        for line in plain_table(["seq", "operation", "timestamp", "enc", "at", "data"], rows, indent=""):
            emit(line)
    rep = walk.report
    if rep is None:  # stopped by --limit
        return EXIT_OK
    for f in rep.findings:
        if f.exit_code:
            warn_line(f"{rep.path}: {f.cls}: {f.one_line()}")
    sys.stderr.write(f"walctl: {shown} entries shown; {rep.path} is {rep.verdict} (exit {rep.exit_code})\n")
    raise typer.Exit(rep.exit_code)
