"""Walking the records of a V2 path in directory order, for inspect, stats and (later) replay.

The walk yields each chunk's valid records and raw damage in file order as it goes (memory stays
bounded by one chunk's matches), and afterwards the same stitched PathReport that verify gives.
"""
from __future__ import annotations

import base64
import json
from typing import Callable, Iterator, NamedTuple

from ...format import scan as fscan
from ...format.jsonload import loads
from ...format.record import FLAGS, HEADER_CRC, PAYLOAD_CRC, SEQUENCE, STORED_LEN, TIMESTAMP_MS, TYPE, VERSION
from ...format.scan import Damage
from ...format.v1 import V1Record, iter_v1_records
from ...format.v2 import FLAG_COMPRESSED, RECORD_HEADER, type_name, visited_payload
from ...store.chunkread import ChunkOutcome, scan_chunk_file
from ...store.fs import DEFAULT_FS
from .ledger_check import accepted_gaps_only
from ..report import PathReport
from .verify import assemble, not_a_file, resolve_chunks


class Record(NamedTuple):
    file: str
    offset: int
    size: int
    version: int
    flags: int
    type_ordinal: int
    sequence: int
    timestamp_ms: int
    memory_id: bytes
    stored_len: int
    payload: bytes  # decoded (inflated when compressed)
    payload_crc: int | None = None
    header_crc: int | None = None
    raw: bytes | None = None  # the record's bytes on disk, when the walk keeps them (--hexdump)
    decoded_len: int | None = None  # the decoded payload's length (set even when the walk keeps no payloads)

    @property
    def type(self) -> str | int:
        return type_name(self.type_ordinal) or self.type_ordinal

    @property
    def compressed(self) -> bool:
        return bool(self.flags & FLAG_COMPRESSED)

    @property
    def memory_id_text(self) -> str:
        return self.memory_id.decode("utf-8", "replace")

    def to_json(self) -> dict:
        """The `--jsonl` record object of the CLI contract."""
        return {
            "sequence": self.sequence, "type": self.type, "type_ordinal": self.type_ordinal,
            "memory_id": self.memory_id_text, "memory_id_hex": self.memory_id.hex(),
            "timestamp_ms": self.timestamp_ms, "compressed": self.compressed,
            "payload_hex": self.payload.hex(), "stored_len": self.stored_len,
            "file": self.file, "offset": self.offset,
        }


class RecordFilter(NamedTuple):
    from_seq: int | None = None
    to_seq: int | None = None
    types: frozenset | None = None
    memory_id: bytes | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    limit: int | None = None

    @classmethod
    def from_options(cls, from_seq=None, to_seq=None, types=None, memory_id: str | None = None, since_ms=None,
                     until_ms=None, limit=None) -> "RecordFilter":
        """From inspect's options: event types by name or ordinal, the memoryId as text."""
        from ...errors import UsageError
        from ...format.v2 import parse_type

        try:
            type_set = frozenset(parse_type(t) for t in types) if types else None
        except ValueError as e:
            raise UsageError(f"--type: {e}") from None
        return cls(from_seq, to_seq, type_set, memory_id.encode("utf-8") if memory_id is not None else None,
                   since_ms, until_ms, limit)

    def header_matches(self, seq: int, typ: int, ts: int) -> bool:
        return not ((self.from_seq is not None and seq < self.from_seq)
                    or (self.to_seq is not None and seq > self.to_seq)
                    or (self.types is not None and typ not in self.types)
                    or (self.since_ms is not None and ts < self.since_ms)
                    or (self.until_ms is not None and ts > self.until_ms))


class _Inflate(bytes):
    """The stored bytes of a compressed payload larger than one inflate piece, inflated when handed on."""


class RawDamage(NamedTuple):
    """Damage met while walking, before the directory-level judgement (torn or corrupt)."""
    file: str
    damage: Damage


class RecordWalk:
    """Iterate for Record and RawDamage items in directory order; `report` is set when done."""

    def __init__(self, path: str, flt: RecordFilter | None = None, fs=DEFAULT_FS, keep_raw: bool = False,
                 payloads: bool = True, progress: Callable[[int], None] | None = None, strict: bool = False,
                 set_aside: bool = False, seek_from: int = 0, seek_times: bool = False):
        """`payloads=False`: compressed records carry no payload (b""), only `decoded_len` (stats: memory
        stays bounded by one inflate piece, whatever a payload inflates to). `progress` is called with each
        chunk's size once it is read. `strict`: the report judged as verify --strict judges. `set_aside`: whole
        chunks `.quarantine/` holds for indexes the directory lacks are read in their place (recover)."""
        self.path = path
        self.strict = strict
        # > 1: only sequences >= seek_from are wanted; the sequence index may let the walk start past the
        # chunks and records before them (ops/wal/seek.py), and the report then covers what was read
        self.seek_from, self.seek = seek_from, None
        # the filter's since/until may let the walk start past chunks wholly outside them (inspect)
        self.seek_times = seek_times
        self.set_aside = set_aside
        self.payloads = payloads
        self.progress = progress
        self.keep_raw = keep_raw
        self.filter = flt or RecordFilter()
        self.fs = fs
        self.report: PathReport | None = None
        self.matched = 0
        self.truncated = False  # stopped by --limit

    def __iter__(self) -> Iterator[Record | RawDamage]:
        chunks, foreign, kind, writer = resolve_chunks(self.path, self.fs)
        own = len(chunks)
        if self.set_aside:
            from .salvage_sources import with_set_aside

            chunks = with_set_aside(self.path, chunks, self.fs)
        chunks, offset = self._seek(chunks) if len(chunks) == own else (chunks, 0)  # the index knows no pieces
        outcomes: list[ChunkOutcome] = []
        for c in chunks:
            if self.truncated:
                break
            if c.kind != "file":
                outcomes.append(not_a_file(c))
                continue
            found: list = []
            # The scan decodes a compressed payload only when it fits one inflate piece; the walk inflates
            # a larger one it keeps when it hands the record on, so at most one is alive at a time.
            outcome = scan_chunk_file(c.path, self.fs, self._visitor(c.name, found), start=offset)
            offset = 0
            outcomes.append(outcome)
            if self.progress is not None:
                self.progress(c.size)
            if outcome.scan is not None and outcome.scan.header == fscan.HEADER_LEGACY:
                found = self._legacy(c.path, c.name)
            elif outcome.scan is not None:
                found.extend(RawDamage(c.name, d) for d in outcome.scan.damage)
                found.sort(key=lambda x: x.offset if isinstance(x, Record) else x.damage.offset)
            for i, item in enumerate(found):
                found[i] = None
                if isinstance(item, Record) and type(item.payload) is _Inflate:
                    item = item._replace(payload=visited_payload(item.payload, item.decoded_len))
                yield item
        if not self.truncated:
            self.report = accepted_gaps_only(assemble(self.path, kind, chunks, outcomes, foreign, writer,
                                                      self.strict), self.fs, strict=self.strict)

    def _seek(self, chunks: list) -> tuple[list, int]:
        """(the chunks to read, the record offset to start the first at): all from 0 unless the index says less."""
        from .seek import seek

        timed = self.seek_times and (self.filter.since_ms is not None or self.filter.until_ms is not None)
        if (self.seek_from <= 1 and not timed) or not chunks or any(c.kind != "file" for c in chunks) \
                or self.fs.stat(self.path).kind != "dir":
            return chunks, 0
        files = [(c.name, c.path) for c in chunks]
        if self.seek_from > 1:
            self.seek = seek(self.path, files, self.seek_from, True, self.fs)
        else:
            from .seek import seek_time

            self.seek = seek_time(self.path, files, self.filter.since_ms, self.filter.until_ms, self.fs)
        start = self.seek.start
        return (chunks, 0) if start is None else (chunks[start.file:], start.offset)

    def _visitor(self, name: str, found: list):
        flt = self.filter
        mid = flt.memory_id
        keep_raw = self.keep_raw
        want = self.payloads

        def visit(buf, off, h, p, q, nxt, payload):
            seq, typ, ts, plen = h[SEQUENCE], h[TYPE], h[TIMESTAMP_MS], h[STORED_LEN]
            if not flt.header_matches(seq, typ, ts):
                return False
            memory_id = bytes(buf[off + RECORD_HEADER.size:p])
            if mid is not None and memory_id != mid:
                return False
            # payload: None (stored as is), the decoded bytes of a compressed payload of one inflate piece,
            # or the decoded length of a larger one, which keeps its stored bytes here until the walk
            # inflates it (b"" whenever no payloads are wanted: nothing is inflated then).
            if payload is None:
                body, decoded = bytes(buf[p:q]), plen
            elif type(payload) is int:
                body, decoded = (_Inflate(buf[p:q]) if want else b""), payload
            else:
                body, decoded = (payload if want else b""), len(payload)
            found.append(Record(name, off, nxt - off, h[VERSION], h[FLAGS], typ, seq, ts, memory_id, plen, body,
                                h[PAYLOAD_CRC], h[HEADER_CRC],
                                bytes(buf[off:nxt]) if keep_raw else None, decoded))
            return self._count()

        return visit

    def _count(self) -> bool:
        self.matched += 1
        if self.filter.limit is not None and self.matched >= self.filter.limit:
            self.truncated = True
            return True
        return False

    def _legacy(self, path: str, name: str) -> list:
        out: list = []
        with self.fs.map_read(path) as buf:
            for item in iter_v1_records(buf):
                if not isinstance(item, V1Record):
                    out.append(RawDamage(name, Damage(fscan.TAIL, item.offset, len(buf), item.reason)))
                    break
                if not self.filter.header_matches(item.sequence, item.type_ordinal, item.timestamp_ms):
                    continue
                if self.filter.memory_id is not None and item.memory_id != self.filter.memory_id:
                    continue
                out.append(Record(name, item.offset, item.size, 1, 0, item.type_ordinal, item.sequence,
                                  item.timestamp_ms, item.memory_id, len(item.payload), item.payload,
                                  decoded_len=len(item.payload),
                                  raw=bytes(buf[item.offset:item.offset + item.size]) if self.keep_raw else None))
                if self._count():
                    break
        return out


# ---- payload rendering -------------------------------------------------------------------------

PAYLOAD_MODES = ("auto", "text", "hex", "base64", "json", "msgpack")


def render_payload(payload: bytes, mode: str = "auto") -> tuple[str, str]:
    """(mode actually used, text). `auto` picks JSON, text, msgpack or hex, in that order."""
    if mode == "hex":
        return "hex", payload.hex()
    if mode == "base64":
        return "base64", base64.b64encode(payload).decode("ascii")
    if mode in ("auto", "text", "json"):
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None:
            if mode in ("auto", "json"):
                try:
                    value = loads(text, allow_nan=True)
                    if mode == "json" or isinstance(value, (dict, list)):
                        return "json", json.dumps(value, ensure_ascii=False, sort_keys=True)
                except ValueError:
                    pass
            if mode == "text" or (mode == "auto" and text.isprintable()):
                return "text", text
        if mode in ("text", "json"):
            return "hex", payload.hex()
    if mode in ("auto", "msgpack"):
        value = _msgpack_value(payload, strict=(mode == "auto"))
        if value is not None:
            return "msgpack", json.dumps(value, ensure_ascii=False, sort_keys=True, default=_json_default)
    return "hex", payload.hex()


def _msgpack_value(payload: bytes, strict: bool):
    # In auto mode only a map or array counts: almost any short byte string is *some* msgpack scalar.
    if not payload or (strict and not (0x80 <= payload[0] <= 0x9F or 0xDC <= payload[0] <= 0xDF)):
        return None
    import msgpack
    try:
        return msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception:  # msgpack raises many unrelated types for bad input; all mean "not msgpack"
        return None


def _json_default(value):
    if isinstance(value, bytes):
        return {"$bytes_hex": value.hex()}
    return repr(value)
