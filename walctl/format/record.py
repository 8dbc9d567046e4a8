"""One definition of an intact V2 record, and the record header's fields by name. Pure.

A record at `off` (with `end` the end of the bytes that may hold it) is intact when, in this order:
  1. its 40 header bytes are there                      (else: field "length")
  2. its record magic is 0x5741                          (else: "record-magic")
  3. the CRC of header bytes 0..35 equals bytes 36..39   (else: "header-crc")
  4. header, memoryId, payload and padding fit before end (else: "length"; the length itself may be
     corrupted, which is why the header CRC is checked first)
  5. the CRC of the stored payload equals payloadCrc      (else: "payload-crc")
`check_record` is that rule; `scan.check_intact`, `scan.describe_invalid` and compaction's first-sequence
read derive from it. The scanner's hot loop inlines the same predicate for speed, and
tests/test_record_view.py checks on random buffers that the two agree.

A scan visitor receives the header as the raw 12-tuple RECORD_HEADER unpacks to (building a named tuple
per record would cost the replay hot path); callers index it with the constants below, never with a bare
number.
"""
from __future__ import annotations

import zlib
from typing import NamedTuple

from .v2 import ALIGNMENT, HEADER_CRC_SPAN, RECORD_HEADER, RECORD_MAGIC, RecordHeader

(MAGIC, VERSION, FLAGS, TYPE, ID_LEN, RESERVED8, SEQUENCE, TIMESTAMP_MS, STORED_LEN, PAYLOAD_CRC, RESERVED32,
 HEADER_CRC) = range(12)
assert RecordHeader._fields == ("magic", "version", "flags", "type_ordinal", "id_len", "reserved8", "sequence",
                                "timestamp_ms", "stored_len", "payload_crc", "reserved32", "header_crc")
HEADER_SIZE = RECORD_HEADER.size
assert len(RecordHeader._fields) == len(RECORD_HEADER.format.lstrip(">"))

# The check that failed (Damage.field and the JSON's "field")
FIELD_LENGTH = "length"
FIELD_RECORD_MAGIC = "record-magic"
FIELD_HEADER_CRC = "header-crc"
FIELD_PAYLOAD_CRC = "payload-crc"
FIELD_ZLIB = "zlib"


class Invalid(NamedTuple):
    """Why the bytes at an offset are not an intact record."""
    field: str  # FIELD_*
    stored: int | None = None  # the value found in the bytes
    computed: int | None = None  # the value walctl computed
    sequence: int | None = None  # the sequence the header claims, once its header CRC passes
    record_end: int | None = None  # "length" after a good header: where the record would end


def record_size(h) -> int:
    """Bytes the record with header `h` spans, header and padding included."""
    body = h[ID_LEN] + h[STORED_LEN]
    return RECORD_HEADER.size + body + (-body % ALIGNMENT)


def payload_span(h, off: int) -> tuple[int, int]:
    """(start, end) of the stored payload of the record at off."""
    p = off + RECORD_HEADER.size + h[ID_LEN]
    return p, p + h[STORED_LEN]


def check_header(buf, off: int, end: int) -> RecordHeader | Invalid:
    """Steps 1-3: the header by name when it is all there with its magic and header CRC right."""
    if end - off < RECORD_HEADER.size:
        return Invalid(FIELD_LENGTH)
    h = RecordHeader._make(RECORD_HEADER.unpack_from(buf, off))
    if h.magic != RECORD_MAGIC:
        return Invalid(FIELD_RECORD_MAGIC, h.magic, RECORD_MAGIC)
    computed = zlib.crc32(memoryview(buf)[off:off + HEADER_CRC_SPAN])
    if computed != h.header_crc:
        return Invalid(FIELD_HEADER_CRC, h.header_crc, computed)
    return h


def check_record(buf, off: int, end: int, budget=None) -> RecordHeader | Invalid:
    """Steps 1-5: the header by name when the record at off is intact, else why not. It need not
    decode (a compressed payload that does not inflate is judged by the scanner). `budget` (an object
    with a `left` byte count) is charged the payload bytes CRC'd."""
    h = check_header(buf, off, end)
    if type(h) is Invalid:
        return h
    rec_end = off + record_size(h)
    if rec_end > end:
        return Invalid(FIELD_LENGTH, sequence=h.sequence, record_end=rec_end)
    p, q = payload_span(h, off)
    if budget is not None:
        budget.left -= q - p
    computed = zlib.crc32(memoryview(buf)[p:q])
    if computed != h.payload_crc:
        return Invalid(FIELD_PAYLOAD_CRC, h.payload_crc, computed, h.sequence)
    return h
