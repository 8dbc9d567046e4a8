"""Record headers decoded as far as the bytes go: a piece cut from a torn tail may end after 29 bytes,
yet its sequence (bytes 8..15) is already there. Pure: values in, values out, never raises.

Each field of RECORD_HEADER is decoded when all of its bytes are present; the header CRC can be checked
only with all 40 bytes, the payload CRC only with the whole stored payload. The field offsets are derived
from the one RECORD_HEADER layout, not written a second time.
"""
from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from .v2 import ALIGNMENT, HEADER_CRC_SPAN, RECORD_HEADER, RECORD_MAGIC, RecordHeader

FIELD_NAMES = RecordHeader._fields  # magic, version, ... header_crc, in layout order


def _field_spans() -> tuple[tuple[str, int, int, str], ...]:
    """(name, start, end, struct code) of each header field, from RECORD_HEADER's own format."""
    codes = [c for c in RECORD_HEADER.format.lstrip(">")]
    out, pos = [], 0
    for name, code in zip(FIELD_NAMES, codes):
        size = struct.calcsize(">" + code)
        out.append((name, pos, pos + size, code))
        pos += size
    assert pos == RECORD_HEADER.size and len(out) == len(FIELD_NAMES)
    return tuple(out)


FIELD_SPANS = _field_spans()


class PartialRecord(NamedTuple):
    """What the bytes at `offset` say, as far as they go. Missing fields are None."""
    offset: int  # where the record starts, relative to the buffer
    available: int  # bytes present from offset to the end of the buffer
    fields: dict  # header field name -> int, for every field whose bytes are all present
    header_complete: bool
    header_crc_ok: bool | None  # None: fewer than 40 bytes, cannot be checked
    computed_header_crc: int | None
    id_present: int  # memoryId bytes present
    payload_present: int  # stored payload bytes present
    payload_crc_ok: bool | None  # None: the payload is not all there (or the header is not)
    computed_payload_crc: int | None
    record_size: int | None  # header + id + payload + padding, when idLen and payloadLen are known

    @property
    def complete(self) -> bool:
        return self.record_size is not None and self.available >= self.record_size

    @property
    def sequence(self) -> int | None:
        return self.fields.get("sequence")

    @property
    def magic_ok(self) -> bool | None:
        m = self.fields.get("magic")
        return None if m is None else m == RECORD_MAGIC


def decode_partial(buf, offset: int = 0) -> PartialRecord:
    """Decodes the record that should start at `offset` of buf, as far as the bytes go."""
    n = len(buf)
    offset = max(0, min(offset, n))
    avail = n - offset
    fields: dict = {}
    for name, start, end, code in FIELD_SPANS:
        if end <= avail:
            fields[name] = struct.unpack_from(">" + code, buf, offset + start)[0]
    complete = avail >= RECORD_HEADER.size
    mv = memoryview(buf)
    hcrc_ok = computed_h = None
    if complete:
        computed_h = zlib.crc32(mv[offset:offset + HEADER_CRC_SPAN])
        hcrc_ok = computed_h == fields["header_crc"]
    id_len, plen = fields.get("id_len"), fields.get("stored_len")
    id_present = payload_present = 0
    pcrc_ok = computed_p = None
    size = None
    if id_len is not None:
        id_present = max(0, min(id_len, avail - RECORD_HEADER.size))
    if id_len is not None and plen is not None:
        p = RECORD_HEADER.size + id_len
        payload_present = max(0, min(plen, avail - p))
        size = p + plen + (-(id_len + plen) % ALIGNMENT)
        if payload_present == plen and "payload_crc" in fields:
            computed_p = zlib.crc32(mv[offset + p:offset + p + plen])
            pcrc_ok = computed_p == fields["payload_crc"]
    return PartialRecord(offset, avail, fields, complete, hcrc_ok, computed_h, id_present, payload_present,
                         pcrc_ok, computed_p, size)


def decode_pieces(buf, offset: int = 0, max_records: int = 64) -> list[PartialRecord]:
    """The records laid end to end from `offset` (a cut tail may hold a complete record that failed its
    CRC and then a torn one). Stops at the end of the buffer, at a record whose lengths cannot be read
    or do not fit, at a zero-filled rest, or after `max_records` (a bound: the buffer is untrusted)."""
    out: list[PartialRecord] = []
    pos = offset
    n = len(buf)
    while pos < n and len(out) < max_records:
        rec = decode_partial(buf, pos)
        out.append(rec)
        if not rec.complete or rec.magic_ok is False or rec.record_size is None or rec.record_size <= 0:
            break
        pos += rec.record_size
        if pos < n and not any(bytes(buf[pos:min(n, pos + 4096)])):
            break
    return out
