"""Annotated hex dumps of V2 records: every header field named, every CRC marked. Pure."""
from __future__ import annotations

import zlib
from typing import NamedTuple

from .v2 import (
    FILE_HEADER, HEADER_CRC_SPAN, RECORD_HEADER, RECORD_MAGIC, RECORD_VERSION, padding_len, type_name,
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


def _record_fields(buf, off: int) -> list[Field]:
    end = len(buf)
    if end - off < RECORD_HEADER.size:
        return [Field("partial header", off, end, bytes(buf[off:end]).hex(), "invalid")]
    (magic, ver, flags, typ, idlen, r8, seq, ts, plen, pcrc, r32, hcrc) = RECORD_HEADER.unpack_from(buf, off)
    computed_h = zlib.crc32(memoryview(buf)[off:off + HEADER_CRC_SPAN])
    p = off + RECORD_HEADER.size + idlen
    q = p + plen
    pad = padding_len(idlen, plen)
    fields = [
        Field("record magic", off, off + 2, f"0x{magic:04x}", "valid" if magic == RECORD_MAGIC else "invalid"),
        Field("record version", off + 2, off + 3, str(ver), "valid" if ver == RECORD_VERSION else "invalid"),
        Field("flags", off + 3, off + 4, f"0x{flags:02x}" + (" compressed" if flags & 1 else ""),
              "valid" if flags in (0, 1) else "invalid"),
        Field("type", off + 4, off + 5, f"{typ} {type_name(typ) or '(unknown)'}",
              "valid" if type_name(typ) else "invalid"),
        Field("idLen", off + 5, off + 7, str(idlen), None),
        Field("reserved", off + 7, off + 8, f"0x{r8:02x}", "valid" if r8 == 0 else "invalid"),
        Field("sequence", off + 8, off + 16, str(seq), None),
        Field("timestamp", off + 16, off + 24, f"{ts} ({format_timestamp_ms(ts)})", None),
        Field("payloadLen", off + 24, off + 28, str(plen), None),
    ]
    if q <= end:
        computed_p = zlib.crc32(memoryview(buf)[p:q])
        status = "valid" if computed_p == pcrc else "invalid"
        value = f"0x{pcrc:08x}" + ("" if status == "valid" else f" (computed 0x{computed_p:08x})")
    else:
        status, value = "unknown", f"0x{pcrc:08x} (payload runs past end of file)"
    fields.append(Field("payload CRC", off + 28, off + 32, value, status))
    fields.append(Field("reserved", off + 32, off + 36, f"0x{r32:08x}", "valid" if r32 == 0 else "invalid"))
    fields.append(Field("header CRC", off + 36, off + 40,
                        f"0x{hcrc:08x}" + ("" if computed_h == hcrc else f" (computed 0x{computed_h:08x})"),
                        "valid" if computed_h == hcrc else "invalid"))
    id_end = min(p, end)
    fields.append(Field("memoryId", off + 40, id_end,
                        repr(bytes(buf[off + 40:id_end]).decode("utf-8", "replace")),
                        None if id_end == p else "unknown"))
    if p < end:
        fields.append(Field("payload" + (" (compressed)" if flags & 1 else ""), p, min(q, end),
                            f"{plen} bytes", None if q <= end else "unknown"))
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
