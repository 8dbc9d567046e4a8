"""Walks one V2 chunk buffer and says what is in it: runs of valid records, damage, anomalies.

Pure: it takes any buffer (bytes, mmap, memoryview) and returns values. It never decides what to do
about damage; ops/ does (torn or corrupt depends on the chunks after this one).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Callable, NamedTuple

from . import record as R
from .v2 import (
    ALIGNMENT, FILE_HEADER, FILE_MAGIC, FLAG_COMPRESSED, FORMAT_VERSION, KNOWN_FLAGS, LEGACY_VERSION,
    RECORD_HEADER, RECORD_MAGIC, RECORD_VERSION, EVENT_TYPES, inflate_check, inflate_scan,
)

MAX_ANOMALY_DETAILS = 100  # per chunk; counts are always complete
_MAGIC_BYTES = RECORD_MAGIC.to_bytes(2, "big")
_N_TYPES = len(EVENT_TYPES)


# (The value classes below skip dataclass's generated __eq__/__repr__: each generated method costs
# `walctl verify` start-up time, and these compare by identity, as they always have.)


class DamageKind(StrEnum):
    """What a Damage item is (the values are what the JSON shows)."""
    MID_LOG = "mid-log"  # invalid bytes followed by an intact record in the same chunk
    TAIL = "tail"  # invalid bytes with nothing intact after them in this chunk
    UNDECODABLE = "undecodable"  # CRCs pass, the compressed payload does not inflate


class TailKind(StrEnum):
    """What a TAIL damage looks like."""
    ZERO_FILL = "zero-fill"  # zeros to the end of the file (preallocated, never written)
    INCOMPLETE = "incomplete"  # a record cut short: the header says more bytes than the file has
    CHECKSUM = "checksum"  # a whole record whose magic or CRC is wrong


MID_LOG, TAIL, UNDECODABLE = DamageKind.MID_LOG, DamageKind.TAIL, DamageKind.UNDECODABLE
ZERO_FILL, INCOMPLETE, CHECKSUM = TailKind.ZERO_FILL, TailKind.INCOMPLETE, TailKind.CHECKSUM

# Header states
HEADER_OK = "ok"
HEADER_SHORT = "short"  # fewer than 8 bytes
HEADER_BAD_MAGIC = "bad-magic"
HEADER_LEGACY = "legacy-v1"
HEADER_BAD_VERSION = "bad-version"


@dataclass(frozen=True, slots=True, eq=False, repr=False)  # identity equality, as before
class Damage:
    """Bytes that do not hold a valid record."""
    kind: DamageKind
    offset: int  # first damaged byte (where a record should start)
    end: int  # one past the last damaged byte
    reason: str
    tail_kind: TailKind | None = None  # for TAIL
    field: str | None = None  # the check that failed: record.FIELD_* (record-magic, header-crc, ...)
    stored: int | None = None  # value found in the file
    computed: int | None = None  # value walctl computed
    sequence: int | None = None  # the sequence the damaged header claims, when its header CRC passes
    resync_sequence: int | None = None  # MID_LOG: sequence of the intact record at `end`

    def __repr__(self):
        return f"Damage({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"


@dataclass(frozen=True, slots=True, eq=False, repr=False)  # identity equality, as before
class Run:
    """Consecutive valid records whose sequences rise by exactly one."""
    first_seq: int
    last_seq: int
    count: int
    offset: int
    end: int

    def __repr__(self):
        return f"Run(seq {self.first_seq}..{self.last_seq}, {self.count} records, bytes {self.offset}..{self.end})"


class Anomaly(NamedTuple):
    code: str
    offset: int
    sequence: int
    detail: str


class Anomalies:
    """Collects a chunk's anomalies while it is scanned: the first MAX_ANOMALY_DETAILS, every count."""
    __slots__ = ("details", "counts")

    def __init__(self):
        self.details: list[Anomaly] = []
        self.counts: dict[str, int] = {}

    def add(self, code: str, offset: int, sequence: int, detail: str) -> None:
        self.counts[code] = self.counts.get(code, 0) + 1
        if len(self.details) < MAX_ANOMALY_DETAILS:
            self.details.append(Anomaly(code, offset, sequence, detail))


@dataclass(frozen=True, slots=True, eq=False, repr=False)  # identity equality, as before
class ChunkScan:
    """What one chunk holds: `items` are Run and Damage in file order."""
    size: int
    header: str  # HEADER_* state
    version: int | None = None
    magic: bytes | None = None
    items: tuple = ()
    records: int = 0  # valid records
    valid_bytes: int = 0  # bytes covered by valid records
    anomalies: tuple[Anomaly, ...] = ()  # the first MAX_ANOMALY_DETAILS
    anomaly_counts: dict[str, int] = field(default_factory=dict)
    stopped_at: int | None = None  # offset where a visitor asked to stop

    @property
    def runs(self) -> list[Run]:
        return [i for i in self.items if type(i) is Run]

    @property
    def damage(self) -> list[Damage]:
        return [i for i in self.items if type(i) is Damage]

    @property
    def first_seq(self) -> int | None:
        runs = self.runs
        return runs[0].first_seq if runs else None

    @property
    def last_seq(self) -> int | None:
        runs = self.runs
        return runs[-1].last_seq if runs else None

    @property
    def header_only(self) -> bool:
        return self.header == HEADER_OK and self.size == FILE_HEADER.size


def clean_scan(size: int, runs: tuple[Run, ...]) -> ChunkScan:
    """The scan of a V2 chunk holding exactly these runs and nothing else (a seal stands in for it)."""
    return ChunkScan(size, HEADER_OK, FORMAT_VERSION, FILE_MAGIC, tuple(runs), sum(r.count for r in runs),
                     sum(r.end - r.offset for r in runs))


# visit(buf, offset, header_fields, payload_start, payload_end, record_end, payload) is called for every
# valid record (payload: None when stored as is; for a compressed one its decoded bytes when they fit one
# inflate piece, else its decoded length, an int: v2.visited_payload gives the bytes when emitted);
# returning True stops the scan.
Visitor = Callable[..., bool | None]


def classify_file_header(buf) -> tuple[str, bytes | None, int | None]:
    if len(buf) < FILE_HEADER.size:
        return HEADER_SHORT, None, None
    magic, version = FILE_HEADER.unpack_from(buf, 0)
    if magic != FILE_MAGIC:
        return HEADER_BAD_MAGIC, magic, version
    if version == FORMAT_VERSION:
        return HEADER_OK, magic, version
    if version == LEGACY_VERSION:
        return HEADER_LEGACY, magic, version
    return HEADER_BAD_VERSION, magic, version


def scan_chunk(buf, visit: Visitor | None = None) -> ChunkScan:
    """Scans a whole chunk (file header included). buf: bytes, bytearray, mmap or memoryview.

    A compressed payload is always checked by inflating it in pieces (memory stays bounded whatever it
    inflates to). A visitor receives the decoded bytes of a payload that fits one piece, else its decoded
    length (an int: v2.inflate_scan); `v2.visited_payload` gives the bytes of one it emits."""
    if isinstance(buf, memoryview):
        buf = buf.tobytes()
    size = len(buf)
    state, magic, version = classify_file_header(buf)
    if state != HEADER_OK:
        return ChunkScan(size, state, version, magic)
    items: list = []
    notes = Anomalies()
    stopped_at = _scan_records(buf, FILE_HEADER.size, items, notes, visit, visit is not None)
    runs = [i for i in items if type(i) is Run]
    return ChunkScan(size, state, version, magic, tuple(items), sum(r.count for r in runs),
                     sum(r.end - r.offset for r in runs), tuple(notes.details), notes.counts, stopped_at)


LOOK_BEHIND = 8  # the hot loop reads the 8 bytes before each record header (the previous record's padding)


def scan_records(buf, start: int, visit: Visitor | None = None) -> list:
    """The items (Runs, Damage) of the records in buf from `start`, a record boundary, for a reader that
    holds part of a chunk (follow). buf[start - LOOK_BEHIND:start] must be the file's real bytes before
    it (the file header, or the end of the record before): the hot loop reads them, and they are not
    judged (what precedes `start` was scanned by whoever read it). The visitor gets payloads as
    scan_chunk's does."""
    if start < LOOK_BEHIND:
        raise ValueError(f"scan_records needs the {LOOK_BEHIND} bytes before start={start}")
    if isinstance(buf, memoryview):
        buf = buf.tobytes()
    items: list = []
    _scan_records(buf, start, items, Anomalies(), visit, visit is not None)
    return items


def check_intact(buf, off: int, end: int, budget: "ResyncBudget | None" = None) -> R.RecordHeader | None:
    """The header fields when the record at off is intact (record.check_record), else None."""
    h = R.check_record(buf, off, end, budget)
    return None if type(h) is R.Invalid else h


class ResyncBudget:
    """Bounds the CRC work spent looking for the next intact record. A crafted chunk whose every aligned
    offset carries a valid header CRC and a huge length would otherwise cost O(size^2); a real chunk
    never comes near the budget."""
    __slots__ = ("left",)

    def __init__(self, size: int):
        self.left = 16 * size + (1 << 20)


def resync(buf, start: int, end: int, budget: ResyncBudget | None = None) -> int | None:
    """The next 8-aligned offset >= start holding an intact record (None: none, or budget spent)."""
    pos = start
    find = buf.find
    while True:
        hit = find(_MAGIC_BYTES, pos, end)
        if hit < 0:
            return None
        if hit % ALIGNMENT:
            pos = hit + 1
            continue
        if budget is not None and budget.left < 0:
            return None
        if check_intact(buf, hit, end, budget) is not None:
            return hit
        pos = hit + ALIGNMENT


def _is_zero(buf, start: int, end: int) -> bool:
    step = 1 << 20
    for a in range(start, end, step):
        b = min(end, a + step)
        if bytes(buf[a:b]).count(0) != b - a:
            return False
    return True


def describe_invalid(buf, off: int, end: int) -> Damage:
    """Why the record at off is not intact (record.check_record), as a TAIL Damage running to `end`;
    the scanner then decides whether it is mid-log or tail."""
    why = R.check_record(buf, off, end)
    if type(why) is not R.Invalid:  # (the scanner asks only about records that are not intact)
        why = R.Invalid(R.FIELD_PAYLOAD_CRC, why.payload_crc, why.payload_crc, why.sequence)
    if why.field == R.FIELD_LENGTH and why.record_end is None:
        reason = f"{end - off} bytes left, fewer than a 40-byte record header"
    elif why.field == R.FIELD_LENGTH:
        reason = (f"record of {why.record_end - off} bytes runs past the end of the file "
                  f"({end - off} bytes present)")
    else:
        reason = _REASONS[why.field]
    return Damage(TAIL, off, end, reason, field=why.field, stored=why.stored, computed=why.computed,
                  sequence=why.sequence)


_REASONS = {R.FIELD_RECORD_MAGIC: "bad record magic", R.FIELD_HEADER_CRC: "header CRC mismatch",
            R.FIELD_PAYLOAD_CRC: "payload CRC mismatch"}


def classify_tail(buf, dmg: Damage, end: int) -> Damage:
    """The damage as a TAIL running to `end`: zeros, a record cut short, or a bad checksum."""
    if _is_zero(buf, dmg.offset, end):
        return replace(dmg, kind=TAIL, end=end, tail_kind=ZERO_FILL,
                       reason=f"{end - dmg.offset} zero bytes to the end of the file")
    return replace(dmg, kind=TAIL, end=end, tail_kind=INCOMPLETE if dmg.field == R.FIELD_LENGTH else CHECKSUM)


# The 8 bytes before a record header are the last 8 bytes of the previous record (or the file header):
# reading them in the same unpack checks the previous record's padding without another slice.
_PREFIXED_HEADER = struct.Struct(">Q" + RECORD_HEADER.format.lstrip(">"))
assert _PREFIXED_HEADER.size == 8 + RECORD_HEADER.size
_PAD_MASKS = tuple((1 << (8 * n)) - 1 for n in range(ALIGNMENT))


def _scan_records(buf, off: int, items: list, notes: Anomalies, visit: Visitor | None,
                  visiting: bool) -> int | None:
    # The hot loop: locals only, one unpack and two CRCs per healthy record; everything else is on the
    # rare path. Runs are tracked in locals and materialised only where they break. The validity
    # predicate is record.check_record's, inlined (tests/test_record_view.py checks they agree).
    # Returns the offset where the visitor asked to stop, else None.
    end = len(buf)
    mv = memoryview(buf)
    unpack = _PREFIXED_HEADER.unpack_from
    crc = zlib.crc32
    stopped_at = None
    pad_masks = _PAD_MASKS
    hsize = RECORD_HEADER.size
    n_types = _N_TYPES
    budget = ResyncBudget(end)
    run_first = run_last = None  # the open run of consecutive sequences
    run_off = last_off = off
    pmask = 0  # padding mask of the previous valid record, checked through the next unpack
    while off < end:
        if end - off >= hsize:
            (word, magic, ver, flags, typ, idlen, r8, seq, ts, plen, pcrc, r32, hcrc) = unpack(buf, off - 8)
            if word & pmask:
                _padding_anomaly(buf, notes, last_off, off, run_last)
            pmask = 0
            if magic == 0x5741 and crc(mv[off:off + 36]) == hcrc:
                p = off + hsize + idlen
                q = p + plen
                pad = -(idlen + plen) & 7
                nxt = q + pad
                if nxt <= end and crc(mv[p:q]) == pcrc:
                    payload = None
                    if flags or ver != 2 or typ >= n_types or r8 or r32:
                        if flags & FLAG_COMPRESSED:
                            inf = inflate_scan(mv[p:q]) if visiting else inflate_check(mv[p:q])
                            if inf[0] is None:
                                if run_last is not None:
                                    items.append(Run(run_first, run_last, run_last - run_first + 1, run_off, off))
                                    run_first = run_last = None
                                items.append(Damage(UNDECODABLE, off, nxt, inf.error, field=R.FIELD_ZLIB, sequence=seq))
                                off = nxt
                                continue
                            payload = inf[0]  # the bytes (one piece at most), or the decoded length
                            if inf.trailing:
                                notes.add("zlib-trailing-bytes", off, seq,
                                                 f"{inf.trailing} bytes after the end of the zlib stream")
                        _record_anomalies(notes, off, seq, ver, flags, typ, r8, r32)
                    if idlen and not buf[off + hsize:p].isascii():
                        _check_id_utf8(mv, notes, off, p, seq)
                    if seq - 1 != run_last:
                        if run_last is not None:
                            items.append(Run(run_first, run_last, run_last - run_first + 1, run_off, off))
                        run_first = seq
                        run_off = off
                    run_last = seq
                    pmask = pad_masks[pad]
                    last_off = off
                    if visit is not None and visit(buf, off, (magic, ver, flags, typ, idlen, r8, seq, ts, plen,
                                                              pcrc, r32, hcrc), p, q, nxt, payload):
                        stopped_at = off = nxt
                        break
                    off = nxt
                    continue
        elif pmask:
            _check_padding(buf, notes, last_off, off, run_last, pmask)
            pmask = 0
        # Not intact: find the next intact record or call the rest tail damage.
        if run_last is not None:
            items.append(Run(run_first, run_last, run_last - run_first + 1, run_off, off))
            run_first = run_last = None
        dmg = describe_invalid(buf, off, end)
        nxt = resync(buf, off + ALIGNMENT - (off % ALIGNMENT), end, budget)
        if nxt is None:
            items.append(classify_tail(buf, dmg, end))
            break
        items.append(replace(dmg, kind=MID_LOG, end=nxt,
                             resync_sequence=RECORD_HEADER.unpack_from(buf, nxt)[R.SEQUENCE]))
        off = nxt
    if pmask:
        _check_padding(buf, notes, last_off, off, run_last, pmask)
    if run_last is not None:
        items.append(Run(run_first, run_last, run_last - run_first + 1, run_off, off))
    return stopped_at


def _check_padding(buf, notes, rec_off, rec_end, seq, pmask) -> None:
    if int.from_bytes(buf[rec_end - 8:rec_end], "big") & pmask:
        _padding_anomaly(buf, notes, rec_off, rec_end, seq)


def _padding_anomaly(buf, notes, rec_off, rec_end, seq) -> None:
    q = R.payload_span(RECORD_HEADER.unpack_from(buf, rec_off), rec_off)[1]
    notes.add("padding-nonzero", rec_off, seq, f"padding bytes {bytes(buf[q:rec_end]).hex()} are not zero")


def _check_id_utf8(mv, notes, off, p, seq) -> None:
    try:
        bytes(mv[off + RECORD_HEADER.size:p]).decode("utf-8")
    except UnicodeDecodeError as e:
        notes.add("memory-id-utf8", off, seq, f"memoryId is not valid UTF-8 ({e.reason} at id byte {e.start})")


def _record_anomalies(notes, off, seq, ver, flags, typ, r8, r32) -> None:
    if ver != RECORD_VERSION:
        notes.add("record-version", off, seq, f"record version {ver}, expected {RECORD_VERSION}")
    if flags & ~KNOWN_FLAGS & 0xFF:
        notes.add("flag-bits", off, seq, f"unknown flag bits 0x{flags & ~KNOWN_FLAGS & 0xFF:02x}")
    if typ >= _N_TYPES:
        notes.add("unknown-type", off, seq, f"type ordinal {typ} is outside 0..{_N_TYPES - 1}: the reference Java "
                  "reader cannot open this directory at all (it fails on such a record; walctl reads it)")
    if r8 or r32:
        notes.add("reserved-nonzero", off, seq,
                         f"reserved fields not zero (byte 7 = 0x{r8:02x}, bytes 32..35 = 0x{r32:08x})")
