"""Replay streams: the three forms a V2 event travels in between walctl processes. Pure.

An event is what a V2 record means, without where it was stored: sequence, type ordinal, memoryId
bytes, timestamp and the decoded payload. The forms:

- jsonl: one JSON object per line, the `inspect --jsonl` object of the CLI contract (`payload_hex` is
  the decoded payload, so the line is lossless; `memory_id_hex` keeps ids that are not UTF-8).
- msgpack: a stream of msgpack maps {"sequence", "type_ordinal", "memory_id" (bin), "timestamp_ms",
  "payload" (bin)}; readers ignore other keys.
- sync: Spector CloudSync's upload blob, per event `[i64 seq][u8 type][i32 idLen][id][i64 ts_ms]
  [i32 payloadLen][payload]`, big-endian, no header, no checksum; a blob file is named
  `wal-%012d.bin` after its last sequence.

Decoders take bounded input: an id longer than a V2 id can be, or a payload over `max_payload`, is an
error, never an allocation of what a damaged length claims.
"""
from __future__ import annotations

import binascii
import json
import re
import struct
from typing import Callable, Iterator, NamedTuple

from .fields import shown
from .record import FLAGS, HEADER_SIZE, SEQUENCE, STORED_LEN, TIMESTAMP_MS, TYPE
from .v2 import EVENT_TYPES, FLAG_COMPRESSED, MAX_ID_BYTES, visited_payload

FORM_JSONL = "jsonl"
FORM_MSGPACK = "msgpack"
FORM_SYNC = "sync"
FORMS = (FORM_JSONL, FORM_MSGPACK, FORM_SYNC)
DEFAULT_MAX_PAYLOAD = 256 << 20
MAX_LINE_BYTES = 2 * DEFAULT_MAX_PAYLOAD + (1 << 20)  # payload_hex doubles the bytes

SYNC_HEAD = struct.Struct(">qBi")  # sequence, type, idLen
SYNC_MID = struct.Struct(">qi")  # timestamp, payloadLen
I64_MIN, I64_MAX = -(1 << 63), (1 << 63) - 1


class Event(NamedTuple):
    sequence: int
    type_ordinal: int
    memory_id: bytes
    timestamp_ms: int
    payload: bytes


class StreamError(ValueError):
    """The stream is not a well-formed replay stream; `offset` is the byte (sync) or line number (jsonl)."""

    def __init__(self, reason: str, offset: int | None = None, where: str = "offset"):
        super().__init__(reason)
        self.reason, self.offset, self.where = reason, offset, where

    def __str__(self) -> str:
        return self.reason if self.offset is None else f"{self.where} {self.offset}: {self.reason}"


# ---- encoding --------------------------------------------------------------------------------------

_TYPE_JSON = tuple(json.dumps(n).encode() for n in EVENT_TYPES)
_NEEDS_ESCAPE = re.compile(rb'[\x00-\x1f"\\\x7f-\xff]').search
_hex = binascii.hexlify


def json_string(raw: bytes) -> bytes:
    """A JSON string for id bytes: invalid UTF-8 becomes U+FFFD (the hex field keeps the truth)."""
    if _NEEDS_ESCAPE(raw) is None:
        return b'"' + raw + b'"'
    return json.dumps(raw.decode("utf-8", "replace"), ensure_ascii=False).encode("utf-8")


JSONL_FORMAT = (b'{"sequence":%d,"type":%s,"type_ordinal":%d,"memory_id":%s,"memory_id_hex":"%s","timestamp_ms":%d,'
                b'"compressed":%s,"payload_hex":"%s","stored_len":%d,"file":%s,"offset":%d}\n')


_HEX_KEY = b'"payload_hex":"'
STREAM_HEX_BYTES = 1 << 20  # payloads above this are hexed piece by piece as they are written
HEX_PIECE_BYTES = 4 << 20


class HexLine(NamedTuple):
    """One output piece produced while it is written: `head`, then `payload` in pieces (as hex when
    `hexed`, else as it is), then `tail`. A 512 MiB payload then costs 8 MiB of hex at a time, not a
    1 GiB string and another for the formatted line (or, raw, no copy at all)."""
    head: bytes
    payload: object  # bytes-like
    tail: bytes
    hexed: bool = True

    @classmethod
    def around(cls, line: bytes, key: bytes, payload) -> "HexLine":
        """`line` holds `key` followed by the (empty) hex value: split it there. The key is the first
        occurrence: whatever comes before it is JSON-escaped, so it cannot hold a bare quote."""
        cut = line.index(key) + len(key)
        return cls(line[:cut], payload, line[cut:])

    def parts(self):
        yield self.head
        view = memoryview(self.payload)
        for pos in range(0, len(view), HEX_PIECE_BYTES):
            yield _hex(view[pos:pos + HEX_PIECE_BYTES]) if self.hexed else view[pos:pos + HEX_PIECE_BYTES]
        if self.tail:
            yield self.tail


def streamed_binary(form: str, e: Event) -> HexLine:
    """The msgpack or sync encoding of an event with a large payload, as a head (everything up to and
    including the payload's length) followed by the payload itself, uncopied. Byte for byte what
    encode_msgpack / encode_sync give."""
    n = len(e.payload)
    if form == FORM_MSGPACK:
        packed = encode_msgpack(e._replace(payload=b""))
        assert packed.endswith(b"\xc4\x00")  # the empty payload, last: bin 8 of length 0
        return HexLine(packed[:-2] + b"\xc6" + n.to_bytes(4, "big"), e.payload, b"", False)
    if n > 0x7FFFFFFF:
        raise ValueError("payload too large for the sync blob's i32 length")
    return HexLine(SYNC_HEAD.pack(e.sequence, e.type_ordinal, len(e.memory_id)) + bytes(e.memory_id)
                   + SYNC_MID.pack(e.timestamp_ms, n), e.payload, b"", False)


def expand_pieces(pieces: list) -> Iterator[list]:
    """Lists of byte strings to write in order: `pieces` itself when it holds no HexLine (the common
    case, untouched), else runs of plain pieces with each HexLine's parts between them."""
    if HexLine not in map(type, pieces):
        yield pieces
        return
    run: list = []
    for piece in pieces:
        if type(piece) is HexLine:
            if run:
                yield run
                run = []
            for part in piece.parts():
                yield [part]
        else:
            run.append(piece)
    if run:
        yield run


def jsonl_visitor(file_name: str, after: int, to: int, add: Callable[[bytes], None],
                  mark: Callable[[tuple], None]):
    """A scan visitor that encodes each valid record with after < sequence <= to as its `--jsonl` line
    (`add`) and notes (offset, sequence) (`mark`). One formatting step per record: this is the hot
    path of `replay --jsonl`."""
    fmt, types, n_types, hexl, name = JSONL_FORMAT, _TYPE_JSON, len(_TYPE_JSON), _hex, json.dumps(file_name).encode()
    plain = _NEEDS_ESCAPE

    def visit(buf, off, h, p, q, nxt, payload):
        seq = h[SEQUENCE]
        if after < seq <= to:
            typ = h[TYPE]
            mid = buf[off + HEADER_SIZE:p]
            body = visited_payload(buf[p:q], payload)  # a large compressed one is inflated only here
            large = len(body) > STREAM_HEX_BYTES
            line = fmt % (seq, types[typ] if typ < n_types else b"%d" % typ, typ,
                          b'"' + mid + b'"' if plain(mid) is None else json_string(mid), hexl(mid), h[TIMESTAMP_MS],
                          b"true" if h[FLAGS] & FLAG_COMPRESSED else b"false", b"" if large else hexl(body),
                          h[STORED_LEN], name, off)
            add(HexLine.around(line, _HEX_KEY, body) if large else line)
            mark((off, seq))
        return False

    return visit


def encode_msgpack(e: Event) -> bytes:
    import msgpack

    return msgpack.packb({"sequence": e.sequence, "type_ordinal": e.type_ordinal, "memory_id": e.memory_id,
                          "timestamp_ms": e.timestamp_ms, "payload": e.payload}, use_bin_type=True)


def encode_sync(e: Event) -> bytes:
    if len(e.payload) > 0x7FFFFFFF:
        raise ValueError("payload too large for the sync blob's i32 length")
    return b"".join((SYNC_HEAD.pack(e.sequence, e.type_ordinal, len(e.memory_id)), e.memory_id,
                     SYNC_MID.pack(e.timestamp_ms, len(e.payload)), e.payload))


def sync_blob_name(last_sequence: int) -> str:
    return f"wal-{last_sequence:012d}.bin"


# ---- decoding --------------------------------------------------------------------------------------

def sniff(first: bytes) -> str:
    """The form of a stream from its first byte: 0x00 sync (the top byte of an i64 sequence below
    2^56), a msgpack map marker msgpack, anything else jsonl (text gets the most useful error)."""
    if not first:
        return FORM_JSONL
    b = first[0]
    if b == 0:
        return FORM_SYNC
    if 0x80 <= b <= 0x8F or b in (0xDE, 0xDF):
        return FORM_MSGPACK
    return FORM_JSONL


def event_from_json(obj, line: int, max_payload: int = DEFAULT_MAX_PAYLOAD) -> Event:
    if not isinstance(obj, dict):
        raise StreamError("a replay line is a JSON object", line, "line")
    try:
        seq, typ, ts = obj["sequence"], obj["type_ordinal"], obj["timestamp_ms"]
        hexed = obj["payload_hex"]
        for key in ("memory_id_hex", "memory_id", "payload_hex"):
            if key in obj and not isinstance(obj[key], str):
                raise ValueError(f"{key} {shown(obj[key])} is not a string")
        mid = bytes.fromhex(obj["memory_id_hex"]) if "memory_id_hex" in obj else obj["memory_id"].encode("utf-8")
        if not isinstance(hexed, str) or len(hexed) > 2 * max_payload:
            raise ValueError("payload_hex is not a string within the payload bound")
        payload = bytes.fromhex(hexed)
    except KeyError as e:
        raise StreamError(f"missing key {e.args[0]!r} (a replay line has sequence, type_ordinal, memory_id_hex, "
                          "timestamp_ms, payload_hex)", line, "line") from None
    except (AttributeError, TypeError, ValueError) as e:
        raise StreamError(f"bad field: {e}", line, "line") from None
    event = _checked(seq, typ, mid, ts, payload, line, "line")
    if "type" in obj:  # replay writes both; a line whose two disagree says two things: refused
        named = obj["type"]
        expected = EVENT_TYPES[typ] if isinstance(typ, int) and not isinstance(typ, bool) and \
            0 <= typ < len(EVENT_TYPES) else typ
        if isinstance(named, bool) or named != expected:
            raise StreamError(f"type {named!r} and type_ordinal {typ!r} disagree", line, "line")
    return event


def event_from_msgpack(obj, index: int, max_payload: int = DEFAULT_MAX_PAYLOAD) -> Event:
    if not isinstance(obj, dict):
        raise StreamError("a msgpack replay item is a map", index, "item")
    try:
        seq, typ, mid, ts, payload = (obj["sequence"], obj["type_ordinal"], obj["memory_id"], obj["timestamp_ms"],
                                      obj["payload"])
    except KeyError as e:
        raise StreamError(f"missing key {e.args[0]!r}", index, "item") from None
    if isinstance(mid, str):
        mid = mid.encode("utf-8")
    if not isinstance(mid, bytes) or not isinstance(payload, bytes):
        raise StreamError("memory_id and payload are binary", index, "item")
    if len(payload) > max_payload:
        raise StreamError(f"payload of {len(payload)} bytes is over the bound of {max_payload}", index, "item")
    return _checked(seq, typ, mid, ts, payload, index, "item")


def _checked(seq, typ, mid, ts, payload, where_n, where) -> Event:
    for name, v, lo, hi in (("sequence", seq, 1, I64_MAX), ("type_ordinal", typ, 0, len(EVENT_TYPES) - 1),
                            ("timestamp_ms", ts, I64_MIN, I64_MAX)):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise StreamError(f"{name} {shown(v)} is not an integer in {lo}..{hi}", where_n, where)
    if len(mid) > MAX_ID_BYTES:
        raise StreamError(f"memoryId of {len(mid)} bytes is longer than a V2 record holds ({MAX_ID_BYTES})",
                          where_n, where)
    return Event(seq, typ, mid, ts, payload)


class SyncReader:
    """Decodes a sync blob from a binary file object, one event at a time, reading only what each
    length field says after checking it against the bounds."""

    def __init__(self, f, max_payload: int = DEFAULT_MAX_PAYLOAD, prefix: bytes = b""):
        self.f, self.max_payload, self._prefix = f, max_payload, prefix
        self.offset = 0

    def _read(self, n: int, what: str, start: int) -> bytes:
        out = self._prefix[:n]
        self._prefix = self._prefix[n:]
        while len(out) < n:
            chunk = self.f.read(n - len(out))
            if not chunk:
                raise StreamError(f"stream ends inside an event ({what}: {len(out)} of {n} bytes)", start)
            out += chunk
        self.offset += n
        return out

    def __iter__(self) -> Iterator[Event]:
        while True:
            start = self.offset
            first = self._prefix[:1] or self.f.read(1)
            if not first:
                return
            if not self._prefix:
                self._prefix = first
            seq, typ, id_len = SYNC_HEAD.unpack(self._read(SYNC_HEAD.size, "header", start))
            if not 0 <= id_len <= MAX_ID_BYTES:
                raise StreamError(f"idLen {id_len} is outside 0..{MAX_ID_BYTES}", start)
            mid = self._read(id_len, "memoryId", start)
            ts, plen = SYNC_MID.unpack(self._read(SYNC_MID.size, "timestamp and length", start))
            if not 0 <= plen <= self.max_payload:
                raise StreamError(f"payloadLen {plen} is outside 0..{self.max_payload}", start)
            payload = self._read(plen, "payload", start)
            yield _checked(seq, typ, mid, ts, payload, start, "offset")
