"""ADR-003 entry segments: `wal_<N>.log` files of `[u32 length][body]` frames. Pure.

A body is a msgpack map (walctl writes these) or a UTF-8 JSON object (first byte `{`), detected per frame.
An entry is valid when it has `sequence` (int >= 1), `timestamp`, `operation`, `data` or `params`, and a
`checksum` equal to the lowercase hex SHA-256 of the canonical msgpack of the entry without it.

An entry's `timestamp` is Unix seconds, an integer or a fraction (V2 records stamp milliseconds); where
walctl compares it with a time in ms (inspect --since/--until, the sequence index) it takes ts x 1000
exactly, a fraction at its decimal value (1.001 s is 1001 ms, not the binary float's 1000.9999...).
"""
from __future__ import annotations

import itertools
import json
import math
import re
import struct
from decimal import Decimal
from typing import NamedTuple

from .jsonload import loads
from .canonical import entry_checksum, packb, unpackb


FRAME_LENGTH = struct.Struct(">I")
assert FRAME_LENGTH.size == 4
MAX_FRAME_BYTES = 16 << 20
ENTRIES_PER_SEGMENT = 10_000
ERLANG_TERM_TAG = 0x83  # what the ADR's public implementation really writes: unsupported legacy
OPERATION_ALIASES = {"memory-add": "memory_add", "tool-register": "tool_register", "state-update": "state_update"}
_HEX64 = re.compile(r"[0-9a-f]{64}")
_MAP_MARKERS = frozenset(range(0x80, 0x90)) | {0xDE, 0xDF}


class Entry(NamedTuple):
    offset: int
    size: int  # frame bytes, length prefix included
    encoding: str  # "msgpack" | "json"
    value: dict

    @property
    def sequence(self) -> int:
        return self.value["sequence"]

    @property
    def checksum(self) -> str:
        return self.value["checksum"]

    @property
    def operation(self) -> str:
        op = self.value.get("operation")
        return OPERATION_ALIASES.get(op, op)

    @property
    def data(self):
        return self.value["data"] if "data" in self.value else self.value.get("params")


def seal(entry: dict) -> dict:
    """The entry with its checksum set."""
    body = {k: v for k, v in entry.items() if k != "checksum"}
    body["checksum"] = entry_checksum(body)
    return body


def encode_frame(entry: dict, encoding: str = "msgpack") -> bytes:
    """One frame for an entry that already carries its checksum (see seal)."""
    if encoding == "json":
        body = json.dumps(entry, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    else:
        body = packb(entry)
    if not 0 < len(body) <= MAX_FRAME_BYTES:
        raise ValueError(f"an entry of {len(body)} bytes does not fit a frame (1..{MAX_FRAME_BYTES})")
    return FRAME_LENGTH.pack(len(body)) + body


def decode_body(body) -> tuple[dict | None, str, str | None]:
    """(entry, encoding, problem)."""
    if not body:
        return None, "", "empty body"
    first = body[0]
    if first == 0x7B:
        try:
            value = loads(body, allow_nan=True)
        except (UnicodeDecodeError, ValueError) as e:
            return None, "json", f"not a JSON object: {e}"
        encoding = "json"
    elif first == ERLANG_TERM_TAG:
        return None, "erlang", "Erlang term format (legacy, unsupported)"
    else:
        try:
            value = unpackb(body)  # any buffer: no copy
        except ValueError as e:
            return None, "msgpack", str(e)
        encoding = "msgpack"
    if not isinstance(value, dict):
        return None, encoding, f"the body is a {type(value).__name__}, not a map"
    return value, encoding, validate(value)


def validate(e: dict) -> str | None:
    seq = e.get("sequence")
    if type(seq) is not int or seq < 1:
        return "sequence is not an integer >= 1"
    if type(e.get("timestamp")) not in (int, float):
        return "timestamp is not a number"
    if type(e.get("operation")) is not str:
        return "operation is not a string"
    if "data" not in e and "params" not in e:
        return "neither data nor params"
    checksum = e.get("checksum")
    if type(checksum) is not str:
        return "checksum is not a string"
    # The checksum covers the entry without itself: take it out of the (freshly decoded) map for the
    # hash and put it back, rather than copy the map.
    del e["checksum"]
    try:
        computed = entry_checksum(e)
    except ValueError as err:
        return f"entry has no canonical form: {err}"
    finally:
        e["checksum"] = checksum
    if computed != checksum:  # equal means it is also 64 lowercase hex digits
        shape = "" if _HEX64.fullmatch(checksum) else " (not 64 lowercase hex digits)"
        return f"checksum mismatch (stored {checksum}{shape}, computed {computed})"
    return None


def time_ms(ts):
    """A valid entry's timestamp (seconds) in ms, exactly: an int's x 1000 (an int), a float's decimal value
    (its shortest repr) x 1000 (a Decimal, +-Infinity for infinities: a JSON body may say so); None for NaN,
    which no time window holds."""
    if type(ts) is int:
        return ts * 1000
    if ts != ts:
        return None
    return Decimal(repr(ts)) * 1000 if math.isfinite(ts) else Decimal(ts)


def in_window(ms, since: int | None, until: int | None) -> bool:
    """Whether a time_ms value lies in since..until (ms, inclusive; None: open)."""
    if ms is None:
        return since is None and until is None
    return (since is None or ms >= since) and (until is None or ms <= until)


def body_timestamp(body):
    """The timestamp of a frame body (msgpack map or JSON object), decoded without the checksum check (the
    caller knows the bytes are sealed and intact); None when the body does not decode to a map."""
    try:
        value = loads(body, allow_nan=True) if body[:1] == b"{" else unpackb(body)
    except ValueError:
        return None
    return value.get("timestamp") if isinstance(value, dict) else None


# The key, and the value after it when it is what a writer stamping seconds now writes: a uint32 (an int) or
# a float64. Matched by lookahead: a match consumes only the key, so no occurrence hides in a value.
_STAMPED = re.compile(rb"timestamp(?:(?=\xce(.{4}))|(?=\xcb(.{8})))?", re.S)
_BIG_DOUBLE_INF = b"\x7f\xf0"  # a big-endian float64 at or above this (or negative) is not a finite >= 0


def timestamp_range(buf, frames: list, end: int) -> tuple | None:
    """(least, greatest) timestamp of the valid entries framed at `frames` (offsets, in order; the last frame
    ends at `end`); None when one is not a finite number (or there are none). `buf`: bytes or mmap.

    Without decoding when every body is msgpack and the bytes `timestamp` occur in `buf` exactly once a
    body: every msgpack spelling of a str holds its bytes and a valid entry has the key, so each occurrence
    is then a top-level key and its value follows it; when all those values are uint32 (or all non-negative
    finite float64), big-endian, their byte strings order as their numbers. Otherwise each body is decoded."""
    n = FRAME_LENGTH.size
    if frames and all(buf[a + n] != 0x7B for a in frames):
        found = list(itertools.islice(_STAMPED.finditer(buf), len(frames) + 1))
        if len(found) == len(frames):
            for group, fmt, below in ((1, ">I", None), (2, ">d", _BIG_DOUBLE_INF)):
                vals = [m[group] for m in found]
                if None not in vals and (below is None or max(vals) < below):
                    return struct.unpack(fmt, min(vals))[0], struct.unpack(fmt, max(vals))[0]
    stamps = [body_timestamp(memoryview(buf)[a + n:b]) for a, b in zip(frames, frames[1:] + [end])]
    if not stamps or any(type(t) is not int and (type(t) is not float or not math.isfinite(t)) for t in stamps):
        return None
    return min(stamps), max(stamps)


class Frame(NamedTuple):
    entry: Entry | None
    problem: str | None  # why the frame at this offset is not an intact entry
    kind: str  # "ok" | "incomplete" | "invalid" | "legacy"


def frame_end(buf, off: int) -> int | None:
    """Where the frame at `off` ends, when its length is one a frame may have and it fits in `buf` (its body
    is not read: the hop of readers that check bodies elsewhere, the sequence index's)."""
    end = len(buf)
    if end - off < FRAME_LENGTH.size:
        return None
    (n,) = FRAME_LENGTH.unpack_from(buf, off)
    if n == 0 or n > MAX_FRAME_BYTES or off + FRAME_LENGTH.size + n > end:
        return None
    return off + FRAME_LENGTH.size + n


def read_frame(buf, off: int, view: memoryview | None = None) -> Frame:
    """The frame at `off`. `view`: a memoryview of buf, when the caller reads many frames of it."""
    end = len(buf)
    if end - off < FRAME_LENGTH.size:
        return Frame(None, f"{end - off} bytes left, fewer than a 4-byte length", "incomplete")
    (n,) = FRAME_LENGTH.unpack_from(buf, off)
    if n == 0 or n > MAX_FRAME_BYTES:
        return Frame(None, f"frame length {n} is outside 1..{MAX_FRAME_BYTES}", "invalid")
    if off + 4 + n > end:
        return Frame(None, f"frame of {n} bytes runs past the end of the file ({end - off - 4} present)",
                     "incomplete")
    value, encoding, problem = decode_body((view if view is not None else memoryview(buf))[off + 4:off + 4 + n])
    if encoding == "erlang":
        return Frame(None, problem, "legacy")
    if problem is not None or value is None:
        return Frame(None, problem, "invalid")
    return Frame(Entry(off, 4 + n, encoding, value), None, "ok")


def resync(buf, start: int, budget: list[int]) -> int | None:
    """The next byte offset >= start holding an intact frame. Only plausible candidates (a length that
    fits, a body starting like a map or a JSON object) are decoded; `budget` bounds the bytes decoded."""
    end = len(buf)
    for pos in range(start, end - 4):
        n = FRAME_LENGTH.unpack_from(buf, pos)[0]
        if not 0 < n <= MAX_FRAME_BYTES or pos + 4 + n > end:
            continue
        first = buf[pos + 4]
        if first != 0x7B and first not in _MAP_MARKERS:
            continue
        budget[0] -= n
        if budget[0] < 0:
            return None
        if read_frame(buf, pos).entry is not None:
            return pos
    return None
