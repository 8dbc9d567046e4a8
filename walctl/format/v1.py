"""Legacy Spector V1 records: read by `inspect` and `migrate` (which rewrites them as V2). Pure.
walctl never writes V1 into a WAL; the encoders exist so tests can build V1 corpora from the spec.

Record: [u32 len][i64 seq][u8 type][u32 idLen][id][i64 ts][u32 payloadLen][payload], where len counts
everything after itself. No CRC, no padding: a V1 chunk can be read but not verified.
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

from .v2 import FILE_HEADER, FILE_MAGIC, LEGACY_VERSION

V1_PREFIX = struct.Struct(">IqBI")  # len, seq, type, idLen
assert V1_PREFIX.size == 17
V1_TAIL = struct.Struct(">qI")  # timestamp_ms, payloadLen
assert V1_TAIL.size == 12


# len counts everything after itself: the prefix's seq, type and idLen, then id, tail, payload
_LEN_COUNTED = V1_PREFIX.size - 4 + V1_TAIL.size


def encode_v1_file_header() -> bytes:
    return FILE_HEADER.pack(FILE_MAGIC, LEGACY_VERSION)


def encode_v1_record(sequence: int, type_ordinal: int, memory_id: bytes, timestamp_ms: int,
                     payload: bytes) -> bytes:
    """One V1 record, the layout iter_v1_records reads (the Java V1 writer's, per the spec)."""
    return b"".join((V1_PREFIX.pack(_LEN_COUNTED + len(memory_id) + len(payload), sequence, type_ordinal,
                                    len(memory_id)),
                     memory_id, V1_TAIL.pack(timestamp_ms, len(payload)), payload))


class V1Record(NamedTuple):
    offset: int
    size: int
    sequence: int
    type_ordinal: int
    memory_id: bytes
    timestamp_ms: int
    payload: bytes


class V1Stop(NamedTuple):
    offset: int
    reason: str


def iter_v1_records(buf, start: int = 8) -> Iterator[V1Record | V1Stop]:
    """Yields records in order; a V1Stop ends the iteration when a record does not parse."""
    off, end = start, len(buf)
    while off < end:
        if end - off < V1_PREFIX.size:
            yield V1Stop(off, f"{end - off} bytes left, fewer than a record prefix")
            return
        length, seq, typ, idlen = V1_PREFIX.unpack_from(buf, off)
        rec_end = off + 4 + length
        id_end = off + V1_PREFIX.size + idlen
        if length < _LEN_COUNTED or rec_end > end or id_end + V1_TAIL.size > rec_end:
            yield V1Stop(off, f"record length {length} does not fit the file")
            return
        ts, plen = V1_TAIL.unpack_from(buf, id_end)
        p = id_end + V1_TAIL.size
        if p + plen != rec_end:
            yield V1Stop(off, f"payload length {plen} disagrees with record length {length}")
            return
        yield V1Record(off, 4 + length, seq, typ, bytes(buf[off + V1_PREFIX.size:id_end]), ts, bytes(buf[p:rec_end]))
        off = rec_end
