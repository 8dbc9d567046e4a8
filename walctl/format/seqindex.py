"""The sequence index `.walctl/index.jsonl` (docs/format.md, "The sequence index"). Pure: bytes <-> entries,
and the marks of a chunk or segment built from its bytes.

One line per sealed log file: `v` (2), `file`, what the ledger's seal of it says (`size`, `sha256`,
`records`, `first_seq`, `last_seq`), the file's `mtime_ns` when it was indexed, `min_ts`/`max_ts` (the
least and greatest record timestamp in ms: timestamps need not rise, so not the first and last; of a
segment, whose entries stamp seconds, the floor and ceiling of its entries' times in ms; null for an
empty file, and for a segment indexed before walctl recorded them or with a time it cannot hold),
`marks` ([sequence, offset] of a record every MARK_RECORDS records or MARK_BYTES bytes, the first record
always), and `crc32c` as a ledger line has it. A version-1 line
(no `min_ts`/`max_ts`) still decodes, with no times; `seal --apply` writes it again as version 2. The index is a hint
for readers: nothing in it is believed until the reader has checked it against the ledger's seal, the
file's stat data and the record at the offset (ops/wal/seek.py). A line that does not decode is reported by
number and never used.
"""
from __future__ import annotations

import json
from operator import itemgetter, lt
from typing import NamedTuple

from .ledger import crc32c, crc_holds_as_written, is_log_file_name
from .record import HEADER_SIZE, Invalid, check_header, record_size
from .v2 import FILE_HEADER

INDEX_NAME = "index.jsonl"
INDEX_VERSION = 2
MARK_RECORDS = 256  # a reader seeking a sequence reads at most this many records past a mark
MARK_BYTES = 1 << 20  # ... or this many bytes, whichever comes first
MAX_MARKS = 1 << 16  # per file: a longer list is not one walctl wrote
MAX_LINE_BYTES = 4 << 20
_KEYS_V1 = ("v", "file", "size", "sha256", "mtime_ns", "records", "first_seq", "last_seq", "marks", "crc32c")
_KEYS = {1: _KEYS_V1, 2: _KEYS_V1 + ("min_ts", "max_ts")}
_I64 = 1 << 63


class IndexEntry(NamedTuple):
    file: str
    size: int
    sha256: str
    mtime_ns: int  # the file's, when indexed (0: a file system without one, the simulated one)
    records: int
    first_seq: int | None
    last_seq: int | None
    marks: tuple  # (sequence, offset), both strictly rising
    min_ts: int | None = None  # the least and greatest record timestamp (ms) of a V2 chunk; None: unknown
    max_ts: int | None = None
    version: int = INDEX_VERSION  # of the line it was read from (a kept version-1 line is written as it was)

    def mark_at_or_before(self, sequence: int) -> tuple[int, int] | None:
        """The last mark whose sequence is <= `sequence` (the record carrying it is at or after it)."""
        best = None
        lo, hi = 0, len(self.marks)
        while lo < hi:  # bisect on the sequence
            mid = (lo + hi) // 2
            if self.marks[mid][0] <= sequence:
                best, lo = self.marks[mid], mid + 1
            else:
                hi = mid
        return best


class BadIndexLine(NamedTuple):
    number: int
    reason: str


class IndexRead(NamedTuple):
    entries: dict  # file -> IndexEntry (a later line for a file replaces an earlier one)
    bad: tuple  # BadIndexLine


def _compact(obj: dict) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode_entry(e: IndexEntry) -> bytes:
    """One index line, newline included."""
    obj = {"v": e.version, "file": e.file, "size": e.size, "sha256": e.sha256, "mtime_ns": e.mtime_ns,
           "records": e.records,
           "first_seq": e.first_seq, "last_seq": e.last_seq, "marks": [list(m) for m in e.marks]}
    if e.version >= 2:
        obj["min_ts"], obj["max_ts"] = e.min_ts, e.max_ts
    obj["crc32c"] = f"{crc32c(_compact(obj)):08x}"
    return _compact(obj) + b"\n"


def _int(v, lo: int = 0) -> bool:
    return type(v) is int and lo <= v < _I64


def _problem(obj) -> str | None:
    """Why a decoded line is not an entry walctl wrote (its shape only: what it claims is checked by readers)."""
    if not isinstance(obj, dict) or type(obj.get("v")) is not int or obj["v"] not in _KEYS:
        return f"unknown version {obj.get('v')!r}" if isinstance(obj, dict) else "not an index line"
    if sorted(obj) != sorted(_KEYS[obj["v"]]):
        return "not an index line (keys)"
    lo, hi = obj.get("min_ts"), obj.get("max_ts")
    if (lo is None) != (hi is None) or (lo is not None and not (_int(lo, -_I64) and _int(hi, -_I64) and lo <= hi)) \
            or (lo is not None and not obj["records"]):
        return "min_ts..max_ts is not a range"
    if not is_log_file_name(obj["file"]) or not isinstance(obj["sha256"], str):
        return "file or sha256 is not what walctl writes"
    if not (_int(obj["size"]) and _int(obj["records"]) and _int(obj["mtime_ns"])):
        return "size, mtime_ns or records is not an integer >= 0"
    a, b, marks = obj["first_seq"], obj["last_seq"], obj["marks"]
    if (a is None) != (b is None) or (a is not None and not (_int(a) and _int(b) and a <= b)):
        return "first_seq..last_seq is not a range"
    if not isinstance(marks, list) or len(marks) > MAX_MARKS or (a is None and marks):
        return "marks is not a list of at most 65536 marks"
    return marks_shape_problem(marks, a, b, obj["size"])


def marks_shape_problem(marks: list, first, last, size: int) -> str | None:
    """Why `marks` is not [[sequence, offset], ...] rising strictly in both, sequences in first..last and
    offsets inside the file. Whole-list passes in C (map, min, max): a reader seeking in 320 chunks decodes
    320 lines of ~100 marks, and a loop over them in Python was half of its time."""
    if not marks:
        return None
    if set(map(type, marks)) != {list} or set(map(len, marks)) != {2}:
        return "a mark is not [sequence, offset]"
    seqs, offs = list(map(itemgetter(0), marks)), list(map(itemgetter(1), marks))
    if set(map(type, seqs)) != {int} or set(map(type, offs)) != {int} or min(offs) < 0 or min(seqs) < 0 \
            or max(seqs) >= _I64 or max(offs) >= _I64:
        return "a mark is not [sequence, offset]"
    if not (all(map(lt, seqs, seqs[1:])) and all(map(lt, offs, offs[1:]))
            and first <= seqs[0] and seqs[-1] <= last and offs[-1] < size):
        return "a mark is out of order or outside the file"
    return None


class LazyMarks:
    """The marks of an index line walctl wrote, parsed when first used: a seek enters one file and skips the
    others on their other fields, and parsing every line's ~100 marks was most of a 320-chunk seek. Marks
    that do not parse into the rule's shape (only a line forged with a good CRC has them) are no marks, and
    `problem` says why (a reader about to use them reports the index stale)."""

    __slots__ = ("_raw", "_first", "_last", "_size", "_v", "_problem")

    def __init__(self, raw: bytes, first, last, size: int):
        self._raw, self._first, self._last, self._size, self._v, self._problem = raw, first, last, size, None, None

    def _get(self) -> tuple:
        if self._v is None:
            try:
                got = json.loads(self._raw)
            except (ValueError, RecursionError):
                got = None
            if not isinstance(got, list) or len(got) > MAX_MARKS or (self._first is None and got):
                self._problem = "marks is not a list of at most 65536 marks"
            else:
                self._problem = marks_shape_problem(got, self._first, self._last, self._size)
            self._v = () if self._problem else tuple(map(tuple, got))
        return self._v

    @property
    def problem(self) -> str | None:
        self._get()
        return self._problem

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __getitem__(self, i):
        return self._get()[i]

    def __eq__(self, other) -> bool:
        return self._get() == (other._get() if isinstance(other, LazyMarks) else other)

    def __hash__(self) -> int:
        return hash(self._get())

    def __repr__(self) -> str:
        return repr(self._get())


def marks_problem(e: IndexEntry) -> str | None:
    """Why the marks of an index line cannot be used (a line decoded whole has none: its marks were checked
    then)."""
    return getattr(e.marks, "problem", None)


_MARKS_KEY = b',"marks":'
_AFTER_MARKS = (b',"max_ts":', b',"mtime_ns":')  # the next key of a version-2 line, of a version-1 line


def _decode_as_written(raw: bytes, number: int) -> IndexEntry | BadIndexLine | None:
    """A line exactly as walctl writes it (compact, keys sorted, its CRC holding over its own bytes): every
    field but the marks decoded now, the marks when used. None: not such a line (the caller decodes it
    whole)."""
    if not raw.startswith(b'{"crc32c":"') or not crc_holds_as_written(raw, raw[11:19].decode("ascii", "replace")):
        return None
    i = raw.find(_MARKS_KEY)
    j = next((k for k in (raw.find(a, i) for a in _AFTER_MARKS) if k > i), -1) if i > 0 else -1
    if j < 0 or raw.count(_MARKS_KEY) != 1:
        return None
    try:
        obj = json.loads(raw[:i] + raw[j:])
    except (ValueError, RecursionError):
        return None
    obj["marks"] = []  # the shape checks of every other field; the marks' own when they are parsed
    problem = _problem(obj) if isinstance(obj, dict) else "not an index line"
    if problem:
        return BadIndexLine(number, problem)
    marks = LazyMarks(raw[i + len(_MARKS_KEY):j], obj["first_seq"], obj["last_seq"], obj["size"])
    return IndexEntry(obj["file"], obj["size"], obj["sha256"], obj["mtime_ns"], obj["records"], obj["first_seq"],
                      obj["last_seq"], marks, obj.get("min_ts"), obj.get("max_ts"), obj["v"])


def decode_line(raw: bytes, number: int) -> IndexEntry | BadIndexLine:
    if len(raw) > MAX_LINE_BYTES:
        return BadIndexLine(number, f"longer than {MAX_LINE_BYTES} bytes")
    fast = _decode_as_written(raw, number)
    if fast is not None:
        return fast
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError) as e:
        return BadIndexLine(number, f"not JSON: {str(e)[:80]}")
    if not isinstance(obj, dict) or not isinstance(obj.get("crc32c"), str):
        return BadIndexLine(number, "no crc32c")
    stored = obj.pop("crc32c")
    computed = stored if crc_holds_as_written(raw, stored) else f"{crc32c(_compact(obj)):08x}"
    if stored != computed:
        return BadIndexLine(number, f"CRC-32C mismatch (stored {stored[:8]!r}, computed {computed})")
    obj["crc32c"] = stored
    problem = _problem(obj)
    if problem:
        return BadIndexLine(number, problem)
    return IndexEntry(obj["file"], obj["size"], obj["sha256"], obj["mtime_ns"], obj["records"], obj["first_seq"],
                      obj["last_seq"], tuple(map(tuple, obj["marks"])), obj.get("min_ts"), obj.get("max_ts"),
                      obj["v"])


def decode_index(data) -> IndexRead:
    """Every line of the index; a torn last line (no newline) is a bad line like any other."""
    entries: dict = {}
    bad = []
    pos, number, size = 0, 0, len(data)
    while pos < size:
        nl = data.find(b"\n", pos)
        end = size if nl < 0 else nl
        number += 1
        got = decode_line(bytes(data[pos:end]), number) if nl >= 0 else BadIndexLine(number, "torn (no newline)")
        if type(got) is BadIndexLine:
            bad.append(got)
        else:
            entries[got.file] = got
        pos = end + 1
    return IndexRead(entries, tuple(bad))


def _mark_offsets(offsets: list, every_records: int, every_bytes: int) -> list:
    """Of the record offsets in file order: the first, then one every `every_records` or `every_bytes`."""
    out: list = []
    n = 0
    for off in offsets:
        if not out or n >= every_records or off - out[-1] >= every_bytes:
            out.append(off)
            n = 0
        n += 1
    return out


def v2_offsets(buf, times: list | None = None) -> list:
    """Where each record of a clean V2 chunk starts, hopping header to header (the caller has verified
    the chunk: only headers are read, and checked; one that does not check ends the walk). `times`, when
    given, gets [least, greatest] timestamp of those records."""
    out = []
    off, end = FILE_HEADER.size, len(buf)
    lo = hi = None
    while end - off >= HEADER_SIZE:
        h = check_header(buf, off, end)
        if type(h) is Invalid:
            break
        out.append(off)
        ts = h.timestamp_ms
        if lo is None or ts < lo:
            lo = ts
        if hi is None or ts > hi:
            hi = ts
        off += record_size(h)
    if times is not None:
        times[:] = [lo, hi]
    return out


def segment_offsets(buf, times: list | None = None) -> list:
    """Where each frame of a clean segment starts, hopping length to length (bodies are checked only at the
    marks: a sealer indexing the segment it just closed does not hash 10,000 entries again). `times`, when
    given, gets [floor, ceiling] of the entries' times in ms (each body decoded for its timestamp, not
    checked: format/segment.timestamp_range), or [None, None] when one is not a finite number or the range
    leaves 64 bits."""
    from .segment import frame_end, timestamp_range

    out = []
    off = 0
    while (nxt := frame_end(buf, off)) is not None:
        out.append(off)
        off = nxt
    if times is not None:
        times[:] = _ms_range(timestamp_range(buf, out, off))
    return out


def _ms_range(stamps: tuple | None) -> list:
    """[floor, ceiling] in ms of the (least, greatest) entry timestamp (seconds), or [None, None]."""
    import math

    from .segment import time_ms

    if stamps is None:
        return [None, None]  # a time that is not a finite number (NaN, Infinity in JSON) is no range
    lo, hi = math.floor(time_ms(stamps[0])), math.ceil(time_ms(stamps[1]))
    return [lo, hi] if -_I64 <= lo and hi < _I64 else [None, None]


def sequence_at(buf, off: int, is_v2: bool) -> int | None:
    """The sequence of the intact record (V2: header and payload CRC) or entry (its checksum) at `off`."""
    if is_v2:
        got = v2_record_at(buf, off)
        return None if got is None else got[0]
    from .segment import read_frame

    if off >= len(buf):
        return None
    fr = read_frame(buf, off)
    return None if fr.entry is None else fr.entry.sequence


def segment_entry_at(buf, off: int) -> tuple[int, object] | None:
    """(sequence, time in ms: segment.time_ms) of the intact entry (its checksum holds) at `off`."""
    from .segment import read_frame, time_ms

    if off >= len(buf):
        return None
    fr = read_frame(buf, off)
    return None if fr.entry is None else (fr.entry.sequence, time_ms(fr.entry.value["timestamp"]))


def v2_record_at(buf, off: int) -> tuple[int, int] | None:
    """(sequence, timestamp_ms) of the intact V2 record (header and payload CRC) at `off`."""
    from .record import check_record

    if off < FILE_HEADER.size or off >= len(buf):
        return None
    h = check_record(buf, off, len(buf))
    return None if type(h) is Invalid else (h.sequence, h.timestamp_ms)


def build_entry(buf, is_v2: bool, seal: dict, mtime_ns: int, every_records: int = MARK_RECORDS,
                every_bytes: int = MARK_BYTES) -> IndexEntry | None:
    """The entry of a sealed file (`seal`: its ledger seal's fields) from its bytes, or None when the bytes
    are not what the seal says (size, record count, first and last sequence, sequences rising by one:
    the record at each mark carries first_seq + its position)."""
    times: list = [None, None]
    offsets = v2_offsets(buf, times) if is_v2 else segment_offsets(buf, times)
    at = {off: i for i, off in enumerate(offsets)}
    kept = _mark_offsets(offsets, every_records, every_bytes)
    # the last record is read too (not kept as a mark unless it is one): it carries the seal's last sequence
    chosen = kept + offsets[-1:] if offsets and offsets[-1] != kept[-1] else kept
    seqs = [sequence_at(buf, off, is_v2) for off in chosen]
    first, last = (seqs[0], seqs[-1]) if offsets else (None, None)
    if (len(buf), len(offsets), first, last) != (seal.get("size"), seal.get("records"), seal.get("first_seq"),
                                                 seal.get("last_seq")):
        return None
    if any(s is None or s != first + at[off] for s, off in zip(seqs, chosen)):
        return None
    marks = tuple(zip(seqs, chosen))[:len(kept)]
    return IndexEntry(seal["file"], len(buf), seal["sha256"], mtime_ns, len(offsets), first, last, marks, *times)


def entry_from_hint(buf, seal: dict, mtime_ns: int, marks: tuple, last_off: int, min_ts: int,
                    max_ts: int) -> IndexEntry | None:
    """The entry of a sealed V2 chunk from what its writer noted as it appended (store/appender.py): the
    marks, where the last record starts, the least and greatest time. Checked, not believed: the seal's
    size, count and range; every mark's record intact with its sequence, the first mark the seal's first
    sequence; the last record intact with the seal's last sequence and ending where the file ends.
    None when anything disagrees (the caller then builds the entry from every record)."""
    first, last, records = seal.get("first_seq"), seal.get("last_seq"), seal.get("records")
    if not marks or len(buf) != seal.get("size") or first is None or records != last - first + 1 \
            or marks[0][0] != first or len(marks) > MAX_MARKS or not min_ts <= max_ts:
        return None
    if marks_shape_problem([list(m) for m in marks], first, last, len(buf)) is not None:
        return None
    if any(sequence_at(buf, off, True) != seq for seq, off in marks):
        return None
    h = check_header(buf, last_off, len(buf)) if last_off >= FILE_HEADER.size else None
    if h is None or type(h) is Invalid or last_off + record_size(h) != len(buf) \
            or sequence_at(buf, last_off, True) != last:
        return None
    return IndexEntry(seal["file"], len(buf), seal["sha256"], mtime_ns, records, first, last, tuple(marks),
                      min_ts, max_ts)
