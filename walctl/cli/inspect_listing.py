"""inspect's record listings: the records of a walk as JSON lines, a table or annotated hex dumps, and
ADR-003 entries; damage is shown where it occurs."""
from __future__ import annotations

import os
import sys

import typer

from ..errors import EXIT_OK
from .inspect_bytes import emit_fields, emit_view
from .render import emit, paint, rich_console, safe, warn_line


def show_records(path: str, flt, jsonl: bool, hexdump: bool, payload: str, progress, strict: bool = False):
    """The matching records as JSON lines, hex dumps or a table; returns the finished (or limited) walk."""
    from ..ops.records import RecordWalk

    # --payload none and the hex dump (the raw record) show no decoded payload: nothing is inflated for them
    walk = RecordWalk(path, flt, keep_raw=hexdump, progress=progress, strict=strict,
                      payloads=payload != "none" and not hexdump)
    if jsonl:
        _render_jsonl(walk, payload)
    elif hexdump:
        _render_hexdump(walk)
    else:
        _render_table(walk, payload)
    return walk


def damage_text(item) -> str:
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
            large = payload_mode != "none" and len(item.payload) > STREAM_HEX_BYTES
            obj = item.to_json() if not large else dict(item._replace(payload=b"").to_json())
            if payload_mode == "none":  # the payload is neither inflated nor shown
                del obj["payload_hex"]
            elif payload_mode not in ("auto", "hex"):
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
            warn_line(damage_text(item))


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
                          safe(f"{item.file}@{item.damage.offset}"), Text(safe(damage_text(item)), style="red"))
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
            emit(paint(f"== {damage_text(item)}", "red"))
            d = item.damage
            chunk = os.path.join(walk.path, item.file) if os.path.isdir(walk.path) else walk.path
            emit_view(window(chunk, d.offset, min(d.end, d.offset + MAX_REGION_BYTES), d.offset))
            continue
        emit(f"== {item.file} offset {item.offset} seq {item.sequence} ({item.size} bytes)")
        fields = v1_record_fields if item.version == 1 else record_fields  # legacy V1: no CRCs to mark
        emit_fields(fields(item.raw, 0, base=item.offset))
        for line in hex_lines(item.raw, item.offset, item.offset + item.size, base=item.offset):
            emit(line)


def show_entries(path, jsonl, from_seq, to_seq, operations, limit, progress=None, strict=False) -> int:
    """ADR-003 entries: one JSON object per entry with --jsonl, else a table; --type filters operations."""
    import json

    from ..ops.segments import SegmentWalk, entry_json, select_entries

    walk = SegmentWalk(path, strict=strict, progress=progress)
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
