"""Walks one V2 chunk buffer and says what is in it: runs of valid records, damage, anomalies.

Pure: it takes any buffer (bytes, mmap, memoryview) and returns values. It never decides what to do
about damage; ops/ does (torn or corrupt depends on the chunks after this one).
"""
from __future__ import annotations

import struct
import zlib
from typing import Callable, NamedTuple

from .v2 import (
    ALIGNMENT, FILE_HEADER, FILE_MAGIC, FLAG_COMPRESSED, FORMAT_VERSION, HEADER_CRC_SPAN, KNOWN_FLAGS,
    LEGACY_VERSION, RECORD_HEADER, RECORD_MAGIC, RECORD_VERSION, EVENT_TYPES, inflate_bounded, inflate_check,
)

MAX_ANOMALY_DETAILS = 100  # per chunk; counts are always complete
_MAGIC_BYTES = RECORD_MAGIC.to_bytes(2, "big")
_N_TYPES = len(EVENT_TYPES)

# Damage kinds
MID_LOG = "mid-log"  # invalid bytes followed by an intact record in the same chunk
TAIL = "tail"  # invalid bytes with nothing intact after them in this chunk
UNDECODABLE = "undecodable"  # CRCs pass, the compressed payload does not inflate
# Tail kinds
ZERO_FILL = "zero-fill"
INCOMPLETE = "incomplete"
CHECKSUM = "checksum"

# Header states
HEADER_OK = "ok"
HEADER_SHORT = "short"  # fewer than 8 bytes
HEADER_BAD_MAGIC = "bad-magic"
HEADER_LEGACY = "legacy-v1"
HEADER_BAD_VERSION = "bad-version"


class Damage:
    """Bytes that do not hold a valid record. Built by the scanner, then classified in place."""
    __slots__ = ("kind", "offset", "end", "reason", "tail_kind", "field", "stored", "computed", "sequence",
                 "resync_sequence")

    def __init__(self, kind: str, offset: int, end: int, reason: str, tail_kind: str | None = None,
                 field: str | None = None, stored: int | None = None, computed: int | None = None,
                 sequence: int | None = None, resync_sequence: int | None = None):
        self.kind = kind  # MID_LOG | TAIL | UNDECODABLE
        self.offset = offset  # first damaged byte (where a record should start)
        self.end = end  # one past the last damaged byte
        self.reason = reason
        self.tail_kind = tail_kind  # for TAIL: ZERO_FILL | INCOMPLETE | CHECKSUM
        self.field = field  # the check that failed: record-magic, header-crc, payload-crc, length, zlib
        self.stored = stored  # value found in the file
        self.computed = computed  # value walctl computed
        self.sequence = sequence  # the sequence the damaged header claims, when its header CRC passes
        self.resync_sequence = resync_sequence  # MID_LOG: sequence of the intact record at `end`

    def __getstate__(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state):
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)

    def __repr__(self):
        return f"Damage({', '.join(f'{k}={getattr(self, k)!r}' for k in self.__slots__)})"


class Run:
    """Consecutive valid records whose sequences rise by exactly one."""
    __slots__ = ("first_seq", "last_seq", "count", "offset", "end")

    def __init__(self, first_seq: int, last_seq: int, count: int, offset: int, end: int):
        self.first_seq, self.last_seq, self.count, self.offset, self.end = first_seq, last_seq, count, offset, end

    def __getstate__(self):
        return (self.first_seq, self.last_seq, self.count, self.offset, self.end)

    def __setstate__(self, state):
        self.first_seq, self.last_seq, self.count, self.offset, self.end = state

    def __repr__(self):
        return f"Run(seq {self.first_seq}..{self.last_seq}, {self.count} records, bytes {self.offset}..{self.end})"


class Anomaly(NamedTuple):
    code: str
    offset: int
    sequence: int
    detail: str


class ChunkScan:
    """What one chunk holds: `items` are Run and Damage in file order."""
    __slots__ = ("size", "header", "version", "magic", "items", "records", "valid_bytes", "anomalies",
                 "anomaly_counts", "stopped_at")

    def __init__(self, size: int, header: str, version: int | None = None, magic: bytes | None = None):
        self.size = size
        self.header = header  # HEADER_* state
        self.version = version
        self.magic = magic
        self.items: list = []
        self.records = 0  # valid records
        self.valid_bytes = 0  # bytes covered by valid records
        self.anomalies: list[Anomaly] = []  # the first MAX_ANOMALY_DETAILS
        self.anomaly_counts: dict[str, int] = {}
        self.stopped_at: int | None = None  # offset where a visitor asked to stop

    def __getstate__(self):
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state):
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)

    @property
    def runs(self) -> list[Run]:
        return [i for i in self.items if isinstance(i, Run)]

    @property
    def damage(self) -> list[Damage]:
        return [i for i in self.items if isinstance(i, Damage)]

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

    def add_anomaly(self, code: str, offset: int, sequence: int, detail: str) -> None:
        self.anomaly_counts[code] = self.anomaly_counts.get(code, 0) + 1
        if len(self.anomalies) < MAX_ANOMALY_DETAILS:
            self.anomalies.append(Anomaly(code, offset, sequence, detail))


# visit(buf, offset, header_fields, payload_start, payload_end, record_end, inflated_or_None) is called
# for every valid record (inflated is the decoded payload of a compressed record, else None);
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


def scan_chunk(buf, visit: Visitor | None = None, *, materialize: bool = True) -> ChunkScan:
    """Scans a whole chunk (file header included). buf: bytes, bytearray, mmap or memoryview.

    A compressed payload is always checked by inflating it in pieces (memory stays bounded whatever it
    inflates to). Only a visitor with `materialize` receives the decoded bytes; with materialize=False
    it receives the decoded length (an int) instead, and without a visitor nothing is kept."""
    if isinstance(buf, memoryview):
        buf = buf.tobytes()
    size = len(buf)
    state, magic, version = classify_file_header(buf)
    scan = ChunkScan(size=size, header=state, version=version, magic=magic)
    if state == HEADER_OK:
        _scan_records(buf, FILE_HEADER.size, scan, visit, materialize and visit is not None)
    return scan


def check_intact(buf, off: int, end: int, budget: "ResyncBudget | None" = None) -> tuple | None:
    """The header fields when the record at off is intact (magic, header CRC, whole record inside the
    buffer, payload CRC), else None. It need not decode. `budget` is charged the bytes CRC'd."""
    if end - off < RECORD_HEADER.size:
        return None
    h = RECORD_HEADER.unpack_from(buf, off)
    if h[0] != RECORD_MAGIC:
        return None
    mv = memoryview(buf)
    if zlib.crc32(mv[off:off + HEADER_CRC_SPAN]) != h[11]:
        return None
    p = off + RECORD_HEADER.size + h[4]
    q = p + h[8]
    if q + (-(h[4] + h[8]) % ALIGNMENT) > end:
        return None
    if budget is not None:
        budget.left -= q - p
    if zlib.crc32(mv[p:q]) != h[9]:
        return None
    return h


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
    """Why the record at off is not intact, as a Damage whose `end` is still to be decided."""
    if end - off < RECORD_HEADER.size:
        return Damage(TAIL, off, end, f"{end - off} bytes left, fewer than a 40-byte record header",
                      field="length")
    h = RECORD_HEADER.unpack_from(buf, off)
    if h[0] != RECORD_MAGIC:
        return Damage(TAIL, off, end, "bad record magic", field="record-magic", stored=h[0],
                      computed=RECORD_MAGIC)
    mv = memoryview(buf)
    computed = zlib.crc32(mv[off:off + HEADER_CRC_SPAN])
    if computed != h[11]:
        return Damage(TAIL, off, end, "header CRC mismatch", field="header-crc", stored=h[11],
                      computed=computed)
    p = off + RECORD_HEADER.size + h[4]
    q = p + h[8]
    rec_end = q + (-(h[4] + h[8]) % ALIGNMENT)
    if rec_end > end:
        return Damage(TAIL, off, end, f"record of {rec_end - off} bytes runs past the end of the file "
                                      f"({end - off} bytes present)", field="length", sequence=h[6])
    computed = zlib.crc32(mv[p:q])
    return Damage(TAIL, off, end, "payload CRC mismatch", field="payload-crc", stored=h[9],
                  computed=computed, sequence=h[6])


def classify_tail(buf, dmg: Damage, end: int) -> Damage:
    dmg.kind = TAIL
    dmg.end = end
    if _is_zero(buf, dmg.offset, end):
        dmg.tail_kind = ZERO_FILL
        dmg.reason = f"{end - dmg.offset} zero bytes to the end of the file"
    elif dmg.field == "length":
        dmg.tail_kind = INCOMPLETE
    else:
        dmg.tail_kind = CHECKSUM
    return dmg


# The 8 bytes before a record header are the last 8 bytes of the previous record (or the file header):
# reading them in the same unpack checks the previous record's padding without another slice.
_PREFIXED_HEADER = struct.Struct(">Q" + RECORD_HEADER.format.lstrip(">"))
assert _PREFIXED_HEADER.size == 8 + RECORD_HEADER.size
_PAD_MASKS = tuple((1 << (8 * n)) - 1 for n in range(ALIGNMENT))


def _scan_records(buf, off: int, scan: ChunkScan, visit: Visitor | None, materialize: bool) -> None:
    # The hot loop: locals only, one unpack and two CRCs per healthy record; everything else is on the
    # rare path. Runs are tracked in locals and materialised only where they break. Keep the validity
    # predicate in step with check_intact/describe_invalid.
    end = len(buf)
    mv = memoryview(buf)
    unpack = _PREFIXED_HEADER.unpack_from
    crc = zlib.crc32
    items = scan.items
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
                _padding_anomaly(buf, scan, last_off, off, run_last)
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
                            inf = inflate_bounded(mv[p:q]) if materialize else inflate_check(mv[p:q])
                            if inf[0] is None:
                                if run_last is not None:
                                    items.append(Run(run_first, run_last, run_last - run_first + 1, run_off, off))
                                    run_first = run_last = None
                                items.append(Damage(UNDECODABLE, off, nxt, inf.error, field="zlib", sequence=seq))
                                off = nxt
                                continue
                            payload = inf[0]  # the bytes, or (not materialized) the decoded length
                            if inf.trailing:
                                scan.add_anomaly("zlib-trailing-bytes", off, seq,
                                                 f"{inf.trailing} bytes after the end of the zlib stream")
                        _record_anomalies(scan, off, seq, ver, flags, typ, r8, r32)
                    if idlen and not buf[off + hsize:p].isascii():
                        _check_id_utf8(mv, scan, off, p, seq)
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
                        scan.stopped_at = off = nxt
                        break
                    off = nxt
                    continue
        elif pmask:
            _check_padding(buf, scan, last_off, off, run_last, pmask)
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
        dmg.kind = MID_LOG
        dmg.end = nxt
        dmg.resync_sequence = RECORD_HEADER.unpack_from(buf, nxt)[6]
        items.append(dmg)
        off = nxt
    if pmask:
        _check_padding(buf, scan, last_off, off, run_last, pmask)
    if run_last is not None:
        items.append(Run(run_first, run_last, run_last - run_first + 1, run_off, off))
    runs = [i for i in items if type(i) is Run]
    scan.records = sum(r.count for r in runs)
    scan.valid_bytes = sum(r.end - r.offset for r in runs)


def _check_padding(buf, scan, rec_off, rec_end, seq, pmask) -> None:
    if int.from_bytes(buf[rec_end - 8:rec_end], "big") & pmask:
        _padding_anomaly(buf, scan, rec_off, rec_end, seq)


def _padding_anomaly(buf, scan, rec_off, rec_end, seq) -> None:
    idlen, plen = RECORD_HEADER.unpack_from(buf, rec_off)[4], RECORD_HEADER.unpack_from(buf, rec_off)[8]
    q = rec_off + RECORD_HEADER.size + idlen + plen
    scan.add_anomaly("padding-nonzero", rec_off, seq, f"padding bytes {bytes(buf[q:rec_end]).hex()} are not zero")


def _check_id_utf8(mv, scan, off, p, seq) -> None:
    try:
        bytes(mv[off + RECORD_HEADER.size:p]).decode("utf-8")
    except UnicodeDecodeError as e:
        scan.add_anomaly("memory-id-utf8", off, seq, f"memoryId is not valid UTF-8 ({e.reason} at id byte {e.start})")


def _record_anomalies(scan, off, seq, ver, flags, typ, r8, r32) -> None:
    if ver != RECORD_VERSION:
        scan.add_anomaly("record-version", off, seq, f"record version {ver}, expected {RECORD_VERSION}")
    if flags & ~KNOWN_FLAGS & 0xFF:
        scan.add_anomaly("flag-bits", off, seq, f"unknown flag bits 0x{flags & ~KNOWN_FLAGS & 0xFF:02x}")
    if typ >= _N_TYPES:
        scan.add_anomaly("unknown-type", off, seq, f"type ordinal {typ} is outside 0..{_N_TYPES - 1}")
    if r8 or r32:
        scan.add_anomaly("reserved-nonzero", off, seq,
                         f"reserved fields not zero (byte 7 = 0x{r8:02x}, bytes 32..35 = 0x{r32:08x})")
