"""Annotated hex dumps of V2 records: every header field named, every CRC marked. Pure."""
from __future__ import annotations

from typing import NamedTuple

from .v2 import (
    FILE_HEADER, RECORD_HEADER, RECORD_MAGIC, RECORD_VERSION, padding_len, type_name,
)

BYTES_PER_LINE = 16


class Field(NamedTuple):
    name: str
    start: int
    end: int
    value: str
    status: str | None  # "valid", "invalid", "unknown" or None when there is nothing to check


def _ts(ms: int) -> str:
    # Pure: no time module. Days from the epoch to a civil date (Howard Hinnant's algorithm).
    days, rem = divmod(ms, 86_400_000)
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    y += m <= 2
    h, rem = divmod(rem, 3_600_000)
    mi, rem = divmod(rem, 60_000)
    s, milli = divmod(rem, 1000)
    return f"{y:04d}-{m:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{milli:03d}Z"


def format_timestamp_ms(ms: int) -> str:
    try:
        return _ts(ms)
    except (ValueError, OverflowError):
        return str(ms)


def file_header_fields(buf) -> list[Field]:
    if len(buf) < FILE_HEADER.size:
        return [Field("file header (short)", 0, len(buf), bytes(buf[:len(buf)]).hex(), "invalid")]
    magic, version = FILE_HEADER.unpack_from(buf, 0)
    return [Field("file magic", 0, 4, f"{magic!r}", "valid" if magic == b"SPEC" else "invalid"),
            Field("file version", 4, 8, str(version), "valid" if version == 2 else "invalid")]


def record_fields(buf, off: int, base: int = 0) -> list[Field]:
    """Every field of the record that should start at off, with CRCs checked where the bytes exist.
    `base` is the file offset of buf[0] (buf may be a slice of the file); reported offsets include it."""
    return [f._replace(start=f.start + base, end=f.end + base) for f in _record_fields(buf, off)]


_FIELD_LABELS = {"magic": "record magic", "version": "record version", "flags": "flags", "type_ordinal": "type",
                 "id_len": "idLen", "reserved8": "reserved", "sequence": "sequence", "timestamp_ms": "timestamp",
                 "stored_len": "payloadLen", "payload_crc": "payload CRC", "reserved32": "reserved",
                 "header_crc": "header CRC"}
PAYLOAD_PREVIEW_BYTES = 32  # hex shown inline for a payload; the dump below shows every byte present


def _field_value(name: str, v: int, rec) -> tuple[str, str | None]:
    if name == "magic":
        return f"0x{v:04x}", "valid" if v == RECORD_MAGIC else "invalid"
    if name == "version":
        return str(v), "valid" if v == RECORD_VERSION else "invalid"
    if name == "flags":
        return f"0x{v:02x}" + (" compressed" if v & 1 else ""), "valid" if v in (0, 1) else "invalid"
    if name == "type_ordinal":
        return f"{v} {type_name(v) or '(unknown)'}", "valid" if type_name(v) else "invalid"
    if name == "reserved8":
        return f"0x{v:02x}", "valid" if v == 0 else "invalid"
    if name == "reserved32":
        return f"0x{v:08x}", "valid" if v == 0 else "invalid"
    if name == "timestamp_ms":
        return f"{v} ({format_timestamp_ms(v)})", None
    if name == "payload_crc":
        if rec.payload_crc_ok is None:
            return f"0x{v:08x} (payload not all present: cannot be checked)", "unknown"
        return (f"0x{v:08x}" + ("" if rec.payload_crc_ok else f" (computed 0x{rec.computed_payload_crc:08x})"),
                "valid" if rec.payload_crc_ok else "invalid")
    if name == "header_crc":
        return (f"0x{v:08x}" + ("" if rec.header_crc_ok else f" (computed 0x{rec.computed_header_crc:08x})"),
                "valid" if rec.header_crc_ok else "invalid")
    return str(v), None


def _record_fields(buf, off: int) -> list[Field]:
    """Decoded as far as the bytes go (format/partial.py): a partial header still names its sequence."""
    from .partial import FIELD_SPANS, decode_partial

    end = len(buf)
    rec = decode_partial(buf, off)
    fields = []
    for name, a, b, _ in FIELD_SPANS:
        if name in rec.fields:
            value, status = _field_value(name, rec.fields[name], rec)
            fields.append(Field(_FIELD_LABELS[name], off + a, off + b, value, status))
        elif off + a < end:  # the bytes stop inside this field
            fields.append(Field(_FIELD_LABELS[name] + " (partial)", off + a, end, bytes(buf[off + a:end]).hex(),
                                "unknown"))
    if not rec.header_complete:
        missing = RECORD_HEADER.size - rec.available
        fields.append(Field("header ends early", end, end,
                            f"{rec.available} of {RECORD_HEADER.size} header bytes present ({missing} missing): "
                            f"header CRC cannot be checked", "unknown"))
    idlen, plen = rec.fields.get("id_len"), rec.fields.get("stored_len")
    if idlen is None or not rec.header_complete:
        return fields
    flags = rec.fields["flags"]
    p = off + RECORD_HEADER.size + idlen
    q = p + plen
    id_end = min(p, end)
    fields.append(Field("memoryId", off + 40, id_end,
                        repr(bytes(buf[off + 40:id_end]).decode("utf-8", "replace")),
                        None if id_end == p else "unknown"))
    if p < end or plen == 0:
        present = rec.payload_present
        preview = bytes(buf[p:p + min(present, PAYLOAD_PREVIEW_BYTES)]).hex()
        more = "..." if present > PAYLOAD_PREVIEW_BYTES else ""
        what = f"{plen} bytes" if present == plen else f"{present} of {plen} bytes present ({plen - present} missing)"
        fields.append(Field("payload" + (" (compressed)" if flags & 1 else ""), p, min(q, end),
                            f"{what}" + (f": {preview}{more}" if present else ""),
                            None if q <= end else "unknown"))
    pad = padding_len(idlen, plen)
    if pad and q + pad <= end:
        padding = bytes(buf[q:q + pad])
        fields.append(Field("padding", q, q + pad, padding.hex(), "valid" if not any(padding) else "invalid"))
    return fields


def v1_record_fields(buf, off: int, base: int = 0) -> list[Field]:
    """The fields of a legacy V1 record (format/v1.py). V1 has no CRC: nothing can be marked valid."""
    from .v1 import V1_PREFIX, V1_TAIL

    end = len(buf)
    if end - off < V1_PREFIX.size:
        return [Field("partial V1 prefix", off + base, end + base, bytes(buf[off:end]).hex(), "invalid")]
    length, seq, typ, idlen = V1_PREFIX.unpack_from(buf, off)
    fields = [Field("length", off, off + 4, f"{length} (no CRC in V1)", None),
              Field("sequence", off + 4, off + 12, str(seq), None),
              Field("type", off + 12, off + 13, f"{typ} {type_name(typ) or '(unknown)'}",
                    "valid" if type_name(typ) else "invalid"),
              Field("idLen", off + 13, off + 17, str(idlen), None)]
    p = off + V1_PREFIX.size
    id_end = min(p + idlen, end)
    fields.append(Field("memoryId", p, id_end, repr(bytes(buf[p:id_end]).decode("utf-8", "replace")),
                        None if id_end == p + idlen else "unknown"))
    t = p + idlen
    if t + V1_TAIL.size <= end:
        ts, plen = V1_TAIL.unpack_from(buf, t)
        fields.append(Field("timestamp", t, t + 8, f"{ts} ({format_timestamp_ms(ts)})", None))
        fields.append(Field("payloadLen", t + 8, t + 12, str(plen), None))
        q = t + V1_TAIL.size
        fields.append(Field("payload", q, min(q + plen, end), f"{plen} bytes", None if q + plen <= end else "unknown"))
    return [f._replace(start=f.start + base, end=f.end + base) for f in fields]


def hex_lines(buf, start: int, end: int, mark: int | None = None, base: int = 0) -> list[str]:
    """Classic 16-byte lines over file offsets [start, end); buf[0] is file offset `base`. The line
    holding `mark` gets a '>' and that byte is bracketed."""
    start = max(base, start - start % BYTES_PER_LINE)
    end = min(base + len(buf), end)
    out = []
    for line in range(start, end, BYTES_PER_LINE):
        chunk = bytes(buf[line - base:min(line + BYTES_PER_LINE, end) - base])
        cells = []
        for i, b in enumerate(chunk):
            cell = f"{b:02x}"
            cells.append(f"[{cell}]" if mark == line + i else f" {cell} ")
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        flag = ">" if mark is not None and line <= mark < line + BYTES_PER_LINE else " "
        out.append(f"{flag}{line:08x} {line:>10d} {''.join(cells):<{BYTES_PER_LINE * 4}} |{text}|")
    return out
