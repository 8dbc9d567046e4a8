"""Spector V2 chunk layout: bytes <-> values. Pure: no I/O, no clock.

docs/format.md is the source of truth; tests/test_docs_format.py checks these constants against it.
"""
from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

FILE_MAGIC = b"SPEC"
FORMAT_VERSION = 2
LEGACY_VERSION = 1
FILE_HEADER = struct.Struct(">4sI")
assert FILE_HEADER.size == 8

# magic, version, flags, type, idLen, reserved8, sequence, timestamp_ms, payloadLen, payloadCrc,
# reserved32: the bytes the header CRC covers; then the header CRC itself.
CRC_COVERED_HEADER = struct.Struct(">HBBBHBqqIII")
MAX_SEQUENCE = (1 << 63) - 1  # the sequence field is a Java long: the last one a writer may issue

RECORD_HEADER = struct.Struct(CRC_COVERED_HEADER.format + "I")
HEADER_CRC_SPAN = CRC_COVERED_HEADER.size
assert RECORD_HEADER.size == 40 and HEADER_CRC_SPAN == 36
RECORD_MAGIC = 0x5741  # "WA"
RECORD_VERSION = 2
FLAG_COMPRESSED = 0x01
KNOWN_FLAGS = FLAG_COMPRESSED
ALIGNMENT = 8
MAX_ID_BYTES = 0xFFFF
MAX_PAYLOAD_BYTES = 0xFFFFFFFF

EVENT_TYPES = (
    "REMEMBER", "FORGET", "REINFORCE", "REFLECT", "TAG_MERGE", "RECALL_HIT", "RECORD_WRITE",
    "ADJ_ADD_EDGE", "ADJ_DEL_EDGE", "REGISTRY_INTERN", "APPEND", "SNAPSHOT_MARK", "GRAPH_ADD_NODE",
    "GRAPH_LINK_MEMORY", "CHAIN_LINK", "HYPEREDGE_ADD",
)
TYPE_ORDINALS = {name: i for i, name in enumerate(EVENT_TYPES)}
# What walctl writes: the reference Java reader maps the ordinal to its 16-value enum on every open and
# crashes on any other value, so a record typed 16..255 would make the whole directory unreadable to it.
# Readers still show such records (as an unknown ordinal); writers refuse them.
WRITABLE_TYPES = range(len(EVENT_TYPES))


def check_writable_type(ordinal) -> int:
    """The ordinal, when walctl may write it; ValueError otherwise."""
    if isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal not in WRITABLE_TYPES:
        raise ValueError(f"type ordinal {ordinal!r} is outside 0..{len(EVENT_TYPES) - 1} (the reference reader "
                         "crashes on a directory holding one)")
    return ordinal


def check_memory_id(memory_id: bytes) -> bytes:
    """ValueError for a memoryId longer than the 16-bit idLen field holds."""
    if len(memory_id) > MAX_ID_BYTES:
        raise ValueError(f"memoryId of {len(memory_id)} bytes is longer than a V2 record holds ({MAX_ID_BYTES})")
    return memory_id

# DEFLATE cannot expand by more than ~1032x; this cap never rejects a real payload but bounds a bomb.
INFLATE_RATIO_CAP = 1032
INFLATE_SLACK_BYTES = 1024


class RecordHeader(NamedTuple):
    """RECORD_HEADER's fields by name, in layout order (format/record.py reads records through it)."""
    magic: int
    version: int
    flags: int
    type_ordinal: int
    id_len: int
    reserved8: int
    sequence: int
    timestamp_ms: int
    stored_len: int
    payload_crc: int
    reserved32: int
    header_crc: int


def type_name(ordinal: int) -> str | None:
    return EVENT_TYPES[ordinal] if 0 <= ordinal < len(EVENT_TYPES) else None


def parse_type(text: str) -> int:
    """A type given by name (any case) or ordinal -> ordinal. Raises ValueError."""
    key = text.strip().upper()
    if key in TYPE_ORDINALS:
        return TYPE_ORDINALS[key]
    if key.isascii() and key.isdigit() and int(key) < 256:  # ASCII digits only (never "²" nor "١٢")
        return int(key)
    raise ValueError(f"unknown event type {text!r} (names: {', '.join(EVENT_TYPES)}; or an ordinal 0..255)")


_PADDING = tuple(bytes(n) for n in range(ALIGNMENT))
# The writer's hot path: bound methods, looked up once.
_pack_covered = CRC_COVERED_HEADER.pack
_pack_u32 = struct.Struct(">I").pack
_crc32 = zlib.crc32


def padding_len(id_len: int, stored_len: int) -> int:
    return -(id_len + stored_len) % ALIGNMENT


def record_size(id_len: int, stored_len: int) -> int:
    return RECORD_HEADER.size + id_len + stored_len + padding_len(id_len, stored_len)


def encode_file_header(version: int = FORMAT_VERSION) -> bytes:
    return FILE_HEADER.pack(FILE_MAGIC, version)


def compress_payload(payload: bytes, threshold: int | None) -> tuple[bytes, int]:
    """(stored bytes, flags). Compresses when strictly longer than threshold, as the Java writer does,
    even when the result is larger."""
    if threshold is not None and len(payload) > threshold:
        return zlib.compress(payload), FLAG_COMPRESSED
    return payload, 0


def encode_record(sequence: int, type_ordinal: int, memory_id: bytes, timestamp_ms: int, stored: bytes,
                  flags: int = 0, *, version: int = RECORD_VERSION, reserved8: int = 0,
                  reserved32: int = 0) -> bytes:
    """One record, padded to 8 bytes. `stored` is the payload as written (already compressed when the
    compressed flag is set). The keyword arguments exist so tests can build anomalous records."""
    id_len, stored_len = len(memory_id), len(stored)
    if id_len > MAX_ID_BYTES:
        raise ValueError(f"memory id is {id_len} bytes; the format allows {MAX_ID_BYTES}")
    if stored_len > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload is {stored_len} bytes; the format allows {MAX_PAYLOAD_BYTES}")
    head = _pack_covered(RECORD_MAGIC, version, flags, type_ordinal, id_len, reserved8, sequence, timestamp_ms,
                         stored_len, _crc32(stored), reserved32)
    return b"".join((head, _pack_u32(_crc32(head)), memory_id, stored, _PADDING[-(id_len + stored_len) & 7]))


class Inflated(NamedTuple):
    payload: bytes | bytearray | None  # None: undecodable (bytearray for a large one: filled in place)
    error: str | None  # why it is undecodable
    trailing: int  # bytes after the end of the zlib stream (an anomaly, not damage)


class InflateCheck(NamedTuple):
    length: int | None  # the decoded length; None: undecodable
    error: str | None
    trailing: int


# Output is produced (and, when only checked, dropped) this many bytes at a time: a 510 KB record that
# inflates to 512 MiB is judged holding 4 MiB of it, never the whole.
INFLATE_PIECE_BYTES = 4 << 20


def _inflate_pieces(stored, cap: int, sink) -> InflateCheck:
    """Inflates `stored` in pieces of at most INFLATE_PIECE_BYTES, handing each to `sink(piece, pos)`
    (None: count only). Stops as soon as the output passes `cap`."""
    if len(stored) == 0:
        return InflateCheck(None, "compressed flag set on an empty payload", 0)
    d = zlib.decompressobj()
    data = stored
    total = 0
    try:
        while True:
            piece = d.decompress(data, INFLATE_PIECE_BYTES)
            if total + len(piece) > cap:
                return InflateCheck(None, f"zlib stream inflates beyond {cap} bytes (cap {INFLATE_RATIO_CAP}x "
                                          f"stored + {INFLATE_SLACK_BYTES})", 0)
            if sink is not None and piece:
                sink(piece, total)
            total += len(piece)
            if d.eof:
                break
            data = d.unconsumed_tail
            if not data and len(piece) < INFLATE_PIECE_BYTES:
                break  # the input is used up and zlib holds nothing more back
    except zlib.error as e:
        return InflateCheck(None, f"zlib stream does not decode: {e}", 0)
    if not d.eof:
        return InflateCheck(None, "zlib stream ends before its end marker (truncated)", 0)
    return InflateCheck(total, None, len(d.unused_data))


def inflate_cap(stored_len: int) -> int:
    return INFLATE_RATIO_CAP * stored_len + INFLATE_SLACK_BYTES


def inflate_check(stored) -> InflateCheck:
    """What verify and stats need of a compressed payload: does it inflate completely, to how many
    bytes, and what follows the stream. Holds one piece of output at a time, whatever the decoded size."""
    return _inflate_pieces(stored, inflate_cap(len(stored)), None)


def inflate_scan(stored) -> Inflated | InflateCheck:
    """What a scan hands its visitor for a compressed payload (memory follows the record, never the
    inflated size): the decoded bytes when they fit one piece (the common case, inflated once), else
    only the decoded length, checked holding one piece at a time. A visitor that emits a larger payload
    inflates it then (`visited_payload`); one that only counts, filters or copies never does."""
    if len(stored) == 0:
        return InflateCheck(None, "compressed flag set on an empty payload", 0)
    d = zlib.decompressobj()
    try:
        first = d.decompress(stored, INFLATE_PIECE_BYTES)
    except zlib.error as e:
        return InflateCheck(None, f"zlib stream does not decode: {e}", 0)
    if d.eof:
        return Inflated(first, None, len(d.unused_data))
    del first, d
    return inflate_check(stored)


def visited_payload(stored, payload):
    """The decoded payload of a record a scan visitor emits, from its stored bytes and the `payload` the
    scan handed the visitor: None (stored as is), the decoded bytes, or a decoded length (a payload
    larger than one piece, inflated only now; the scan already found that it inflates)."""
    if payload is None:
        return stored
    if isinstance(payload, int):
        return inflate_bounded(stored).payload
    return payload


def inflate_bounded(stored) -> Inflated:
    """Inflates a zlib stream without trusting it: a truncated stream, garbage, or output beyond the
    ratio cap is undecodable; nothing loops or allocates without bound. A payload that fits one piece
    is inflated at once (the common case); a larger one is checked first (its length, holding one piece)
    and then inflated into a buffer of exactly that length, so the peak is the payload plus one piece,
    not the payload twice over as a growing buffer would be."""
    check = inflate_scan(stored)  # one piece's worth, or the checked length of a larger payload
    if isinstance(check, Inflated):
        return check
    if check.length is None:
        return Inflated(None, check.error, 0)
    out = bytearray(check.length)
    view = memoryview(out)

    def fill(piece, pos):
        view[pos:pos + len(piece)] = piece

    again = _inflate_pieces(stored, check.length, fill)
    view.release()
    if again.length != check.length:  # (the same bytes inflate the same way; never expected)
        return Inflated(None, again.error or "zlib stream inflated differently twice", 0)
    return Inflated(out, None, check.trailing)
