"""inspect's record listings: the records of a walk as JSON lines, a table or annotated hex dumps, and
ADR-003 entries; damage is shown where it occurs."""
from __future__ import annotations

import os
import sys

import typer

from ..errors import EXIT_OK
from .inspect_bytes import emit_fields, emit_view
from .render import emit, paint, safe, warn_line


def show_records(path: str, flt, jsonl: bool, hexdump: bool, payload: str, progress, strict: bool = False):
    """The matching records as JSON lines, hex dumps or a table; returns the finished (or limited) walk."""
    from ..ops.wal.records import RecordWalk

    # --payload none and the hex dump (the raw record) show no decoded payload: nothing is inflated for them
    walk = RecordWalk(path, flt, keep_raw=hexdump, progress=progress, strict=strict,
                      payloads=payload != "none" and not hexdump, seek_times=True)
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

    from ..ops.wal.records import Record, render_payload

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
    """A plain table fitted to the terminal (cli/fit.py): a long memoryId or payload is cut as
    `start…(N B)`; where even cut values leave no room, the payload gets a line of its own. Printed in slices
    of 2,000 rows: a big WAL streams instead of building one table."""
    from .fit import term_width

    width, rows, header = term_width(), [], True
    for item in walk:
        rows.append(_row(item, payload_mode))
        if len(rows) >= 2000:
            _print_rows(rows, width, header)
            rows, header = [], False
    if rows or (header and not walk.matched):
        _print_rows(rows, width, header)


_HEADERS = ["seq", "type", "memoryId", "timestamp (UTC)", "z", "stored", "at", "payload"]
_ID, _PAYLOAD = 2, 7


def _row(item, payload_mode: str) -> list[str]:
    from ..format.hexdump import format_timestamp_ms
    from ..ops.wal.records import Record, render_payload
    from .fit import Sized

    if not isinstance(item, Record):
        return ["!!", "DAMAGE", "", "", "", "", safe(f"{item.file}@{item.damage.offset}"), safe(damage_text(item))]
    # a prefix is rendered, never a whole large payload; the byte count is the payload's own
    view = "" if payload_mode == "none" else render_payload(bytes(item.payload[:4096]), payload_mode)[1]
    mid = item.memory_id_text
    return [str(item.sequence), safe(item.type), Sized(safe(mid[:4096]), len(item.memory_id)),
            format_timestamp_ms(item.timestamp_ms), "z" if item.compressed else "", str(item.stored_len),
            safe(f"{item.file}@{item.offset}"), Sized(view, len(item.payload)) if view else ""]


def _print_rows(rows: list[list[str]], width: int | None, header: bool) -> None:
    """Prints the rows (with the header when asked), fitted to `width`."""
    from .fit import MIN_CUT, cut, fit_rows

    # on a pipe: whole rows, but a memoryId over 40 and a payload over 160 characters are still cut
    cells = [[cut(v, 40) if i == _ID else cut(v, 160) if i == _PAYLOAD else v for i, v in enumerate(r)]
             for r in rows]
    fixed = tuple(i for i in range(len(_HEADERS)) if i not in (_ID, _PAYLOAD))
    rest = sum(max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(_HEADERS) if i in fixed)
    ids = max([len(_HEADERS[_ID])] + [min(len(r[_ID]), MIN_CUT) for r in cells])
    if width is None or rest + ids + MIN_CUT + 2 * (len(_HEADERS) - 1) <= width:
        lines = fit_rows(_HEADERS, cells, "", width, fixed)
        out = lines if header else lines[1:]
    else:  # too narrow for memoryId and payload beside the rest: they go on a line under their row
        keep = [i for i in range(len(_HEADERS)) if i in fixed]
        lines = fit_rows([_HEADERS[i] for i in keep], [[r[i] for i in keep] for r in cells], "", width,
                         tuple(range(len(keep))))
        out = lines[:1] if header else []
        for line, r in zip(lines[1:], cells):
            out.append(line)
            if r[_ID] or r[_PAYLOAD]:
                out.append(_under(r[_ID], r[_PAYLOAD], width, cut))
    for line in out:
        emit(line)


def _under(memory_id: str, payload: str, width: int, cut) -> str:
    """`    memoryId M  payload P`, cut to the width: the memoryId gets at most a third of it."""
    room = max(width - len("    memoryId   payload "), 2 * 10)
    mid = cut(memory_id, max(room // 3, 10)) if memory_id else ""
    parts = [f"memoryId {mid}"] if mid else []
    if payload:
        parts.append(f"payload {cut(payload, max(room - len(mid), 10))}")
    return ("    " + "  ".join(parts)).rstrip()


def _render_hexdump(walk) -> None:
    from ..format.hexdump import hex_lines, record_fields, v1_record_fields
    from ..ops.wal.records import RawDamage

    from ..ops.wal.forensics import MAX_REGION_BYTES, window

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


def show_entries(path, jsonl, from_seq, to_seq, operations, limit, progress=None, strict=False, since_ms=None,
                 until_ms=None) -> int:
    """ADR-003 entries: one JSON object per entry with --jsonl, else a table; --type filters operations,
    --since/--until times (an entry's seconds x 1000, exactly), through the sequence index where it helps."""
    import json

    from ..ops.wal.segments import SegmentWalk, entry_json, select_entries

    walk = SegmentWalk(path, strict=strict, progress=progress, seek_window=(since_ms, until_ms))
    shown = 0
    rows = []
    for name, e in select_entries(walk, from_seq, to_seq, operations, limit, since_ms, until_ms):
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
    for f in [f for f in rep.findings if f.exit_code] + list(walk.seek.findings if walk.seek else ()):
        warn_line(f"{rep.path}: {f.cls}: {f.one_line()}")
    sys.stderr.write(f"walctl: {shown} entries shown; {rep.path} is {rep.verdict} (exit {rep.exit_code})\n")
    raise typer.Exit(rep.exit_code)
