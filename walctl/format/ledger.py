"""The directory ledger `.walctl/ledger.jsonl` (docs/format.md, "The directory ledger"). Pure: bytes <-> lines,
and the expectations a sequence of lines adds up to. Clock values are passed in.

One line = one JSON object: `v` (1), `ts` (RFC 3339 UTC), `event`, the event's fields, and `crc32c`: the
CRC-32C of the line's compact JSON without `crc32c` (sorted keys, `,`/`:` separators, UTF-8), lowercase hex.
A line that does not parse or whose CRC fails is reported by number and never used: a damaged ledger may
only lose expectations, never invent them. Every `file` field must be a plain chunk or segment name in the
writer's own shape (`wal-000001.bin`, `wal_00000001.log`) before anything uses it as a name.
"""
from __future__ import annotations

import json
from typing import NamedTuple

from .fields import is_iso_time, shown
from .jsonload import NotText, check_text, utf8_text
from .lines import line_spans, overlong_reason, tail_of
from .names import LEDGER_DIR, chunk_name, parse_chunk_name, parse_segment_name

LEDGER_NAME = "ledger.jsonl"
LEDGER_VERSION = 1

SEAL, HWM, MOVED, RESTORED, CUT, ACCEPT_LOSS = "seal", "hwm", "moved", "restored", "cut", "accept-loss"
REWIND = "rewind"  # walctl cut: sequences after last_seq_kept were set aside on purpose and are issued again
MOVED_WHY = ("quarantine", "compact", "archive")
HORIZON_WHY = ("compact", "archive")  # sequences moved for these reasons are below a horizon, not lost

_INT, _STR, _FILE, _STAT = "int", "str", "file", "stat"
# event -> its fields and their kinds: one table, used by encode and decode alike
EVENTS: dict[str, dict[str, str]] = {
    SEAL: {"file": _FILE, "size": _INT, "records": _INT, "first_seq": _INT, "last_seq": _INT,
           "sha256": _STR, "stat": _STAT},
    HWM: {"seq": _INT},
    MOVED: {"file": _FILE, "first_seq": _INT, "last_seq": _INT, "to": _STR, "why": _STR},
    RESTORED: {"file": _FILE},
    CUT: {"file": _FILE, "offset": _INT, "bytes": _INT, "last_seq_kept": _INT, "evidence": _STR},
    ACCEPT_LOSS: {"first_seq": _INT, "last_seq": _INT, "reason": _STR},
    REWIND: {"last_seq_kept": _INT, "last_seq": _INT, "reason": _STR},
}
NULLABLE = {(SEAL, "first_seq"), (SEAL, "last_seq"), (MOVED, "first_seq"), (MOVED, "last_seq"),
            (CUT, "last_seq_kept")}  # a header-only chunk has no sequences
MAX_LINE_BYTES = 64 << 10  # a longer line is not one walctl wrote


def _crc32c():
    import crcmod.predefined  # the C extension: CRC-32C is what crcmod is here for

    return crcmod.predefined.mkPredefinedCrcFun("crc-32c")


_crc_fun = None


def crc32c(data: bytes) -> int:
    global _crc_fun
    if _crc_fun is None:
        _crc_fun = _crc32c()
    return _crc_fun(data)


def _compact(obj: dict) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def is_log_file_name(name) -> bool:
    """A chunk name exactly as walctl's writers spell it, or a segment name as readers accept it (any
    padding of N >= 1): never a path, never `wal-0.bin`."""
    if not isinstance(name, str):
        return False
    n = parse_chunk_name(name)
    if n is not None:
        return chunk_name(n) == name
    return parse_segment_name(name) is not None


class Line(NamedTuple):
    number: int  # 1-based line number in the ledger
    event: str
    ts: str
    fields: dict

    def get(self, key, default=None):
        return self.fields.get(key, default)


class BadLine(NamedTuple):
    number: int
    offset: int
    reason: str


class LedgerRead(NamedTuple):
    lines: tuple  # Line, in order
    bad: tuple  # BadLine: damaged lines (corruption), never used
    torn_offset: int | None  # where a torn last line (no final newline) starts; the next writer cuts it
    size: int


def encode_line(event: str, ts: str, check=None, **fields) -> bytes:
    """One ledger line, newline included. Raises ValueError for a field the table does not allow.
    `check`: as decode_line's."""
    problem = (check or _check)(event, fields)
    if problem:
        raise ValueError(problem)
    obj = dict(fields, v=LEDGER_VERSION, ts=ts, event=event)
    obj["crc32c"] = f"{crc32c(_compact(obj)):08x}"
    return _compact(obj) + b"\n"


def _check(event, fields: dict) -> str | None:
    spec = EVENTS.get(event)
    if spec is None:
        return f"unknown event {event!r}"
    if set(fields) != set(spec):
        missing, extra = set(spec) - set(fields), set(fields) - set(spec)
        return f"{event}: " + "; ".join(p for p in (missing and f"missing {', '.join(sorted(missing))}",
                                                    extra and f"unknown {', '.join(sorted(extra))}") if p)
    for key, kind in spec.items():
        v = fields[key]
        if v is None and (event, key) in NULLABLE:
            continue
        if kind == _INT and (isinstance(v, bool) or not isinstance(v, int) or not -(1 << 63) <= v < (1 << 63)):
            return f"{event}: {key} is not an integer"
        if kind == _STR and not isinstance(v, str):
            return f"{event}: {key} is not a string"
        if kind == _STR and _not_text(v):
            return f"{event}: {key} holds a lone surrogate (not Unicode text)"
        if kind == _FILE and not is_log_file_name(v):
            return f"{event}: file {shown(v)} is not a chunk or segment name"
        if kind == _STAT and not (isinstance(v, dict) and set(v) == {"ino", "mtime_ns"}
                                  and all(isinstance(x, int) and not isinstance(x, bool) for x in v.values())):
            return f"{event}: stat is not {{ino, mtime_ns}}"
    if event == MOVED and fields["why"] not in MOVED_WHY:
        return f"moved: why {fields['why']!r} is not one of {', '.join(MOVED_WHY)}"
    if event == ACCEPT_LOSS and not 1 <= fields["first_seq"] <= fields["last_seq"]:
        return "accept-loss: the range is not 1 <= first_seq <= last_seq"
    return _impossible(event, fields)


_SHA256_HEX = frozenset("0123456789abcdef")


def _not_text(v: str) -> bool:
    try:
        check_text(v)
    except NotText:
        return True
    return False


def _impossible(event, f: dict) -> str | None:
    """Values no writer can have recorded (a negative size, a range that ends before it starts...): the
    line is damaged or forged, so it is a bad line like any other, never acted on."""
    for key in ("size", "records", "offset", "bytes", "seq"):
        if key in f and f[key] < 0:
            return f"{event}: {key} {f[key]} is negative"
    first, last = f.get("first_seq"), f.get("last_seq")
    if event in (SEAL, MOVED) and (first is None) != (last is None):
        return f"{event}: first_seq and last_seq are not both set or both null"
    if first is not None and last is not None and first > last:
        return f"{event}: first_seq {first} is above last_seq {last}"
    if event == SEAL:
        # a seal describes a clean closed chunk: sequences from 1, rising by one, one record each
        if first is None and f["records"] != 0:
            return f"seal: {f['records']} records but no sequences"
        if first is not None and first < 1:
            return f"seal: first_seq {first} is below 1"
        if first is not None and f["records"] != last - first + 1:
            return f"seal: {f['records']} records for sequences {first}..{last}"
        sha = f["sha256"]
        if len(sha) != 64 or not _SHA256_HEX.issuperset(sha):
            return "seal: sha256 is not 64 lowercase hex digits"
        if f["stat"]["ino"] < 0:
            return "seal: stat.ino is negative"
    if event == CUT and f["last_seq_kept"] is not None and f["last_seq_kept"] < 0:
        return f"cut: last_seq_kept {f['last_seq_kept']} is negative"
    if event == REWIND and not 0 <= f["last_seq_kept"] < f["last_seq"]:
        return "rewind: the range is not 0 <= last_seq_kept < last_seq"
    return None


def crc_holds_as_written(raw, stored: str) -> bool:
    """True when the CRC holds over `raw`'s own bytes without the `"crc32c":"..."` member (and one comma):
    for a line as walctl writes it, keys sorted and compact, those are exactly the compact JSON the CRC
    covers, so it is checked without encoding the decoded line again. Weaker than the rule: a line with
    escapes, spaces or a repeated key and a CRC over those bytes passes too. Used only for the sequence
    index's lines, hints checked against the ledger and the files before use (ops/wal/seek.py); ledger
    lines are always checked by the rule."""
    if type(raw) is not bytes or len(stored) != 8:
        return False
    member = b'"crc32c":"' + stored.encode("ascii", "replace") + b'"'
    i = raw.find(member)
    if i < 0:
        return False
    j = i + len(member)
    if raw[j:j + 1] == b",":
        body = raw[:i] + raw[j + 1:]
    elif raw[i - 1:i] == b",":
        body = raw[:i - 1] + raw[j:]
    else:
        body = raw[:i] + raw[j:]
    return f"{crc32c(body):08x}" == stored


def decode_line(raw: bytes, number: int = 1, offset: int = 0, check=None) -> Line | BadLine:
    """One line without its newline -> Line, or BadLine saying why it cannot be used. `check(event,
    fields)`: the problem with the event's fields, or None (default: the ledger's events; another file
    of lines CRC'd alike, `.walctl/verify.jsonl`, passes its own)."""
    if len(raw) > MAX_LINE_BYTES:
        return BadLine(number, offset, f"line of {len(raw)} bytes, longer than any ledger line")
    try:  # a line is at most 64 KiB: json's own recursion bound is the depth bound here
        obj = json.loads(utf8_text(raw))
    except NotText as e:  # not UTF-8
        return BadLine(number, offset, str(e))
    except (ValueError, RecursionError):
        return BadLine(number, offset, "not JSON")
    if not isinstance(obj, dict):
        return BadLine(number, offset, "not a JSON object")
    stored = obj.pop("crc32c", None)
    if not isinstance(stored, str):
        return BadLine(number, offset, "no crc32c")
    try:
        computed = f"{crc32c(_compact(obj)):08x}"
    except UnicodeEncodeError:  # a lone surrogate escape ("\ud800") in a key or string: no UTF-8 form
        return BadLine(number, offset, "a string holds a lone surrogate escape (not Unicode text)")
    if stored != computed:
        return BadLine(number, offset, f"crc32c mismatch: stored {stored}, computed {computed}")
    if obj.pop("v", None) != LEDGER_VERSION:
        return BadLine(number, offset, "unsupported ledger line version")
    ts, event = obj.pop("ts", None), obj.pop("event", None)
    if not isinstance(ts, str) or not isinstance(event, str):
        return BadLine(number, offset, "no ts or event")
    if not is_iso_time(ts):
        return BadLine(number, offset, f"ts {json.dumps(ts)[:40]} is not an ISO 8601 time")
    problem = (check or _check)(event, obj)
    if problem:
        return BadLine(number, offset, problem)
    return Line(number, event, ts, obj)


def decode_ledger(data, check=None) -> LedgerRead:
    """`data`: the ledger's bytes, or a buffer over them (a mapping: a large ledger is not copied).
    `check`: as decode_line's (another file of lines CRC'd alike). Its lines and tail are split by the
    line-log rule (format/lines.py)."""
    lines, bad = [], []
    number, torn = 0, None
    tail = tail_of(data, MAX_LINE_BYTES)
    for pos, end in line_spans(data, tail.offset if tail is not None else None):
        number += 1
        raw = data[pos:end]
        if raw.strip():
            got = decode_line(raw, number, pos, check)
            (lines if isinstance(got, Line) else bad).append(got)
    if tail is not None and tail.overlong:
        # Longer than any line a writer appends: not one torn append but damage (a zero-filled or
        # overwritten tail), which may have swallowed whole lines and their expectations.
        bad.append(BadLine(number + 1, tail.offset, overlong_reason(tail, MAX_LINE_BYTES, "ledger line")))
    elif tail is not None:
        torn = tail.offset  # no final newline: a crash mid-append; not corruption, cut by the next writer
    return LedgerRead(tuple(lines), tuple(bad), torn, len(data))


class Loss(NamedTuple):
    first_seq: int
    last_seq: int
    line: Line


class Expectations(NamedTuple):
    """What the ledger's lines add up to (rule 1)."""
    sealed: dict  # file -> its seal Line, for files expected present now
    moved: dict  # file -> the moved Line that took it away (and no restore since)
    cut: dict  # file -> the last cut Line
    accepted: tuple  # Loss, in order
    hwm: int  # highest sequence any line says was issued (0: none)
    horizon: int  # highest sequence moved away by compaction or archiving (0: none)
    first_seq: int | None  # lowest first_seq of any seal or moved line
    rewinds: tuple = ()  # the `rewind` Lines (walctl cut), in order

    def explain(self, a: int, b: int) -> Line | None:
        """The line that accounts for sequences a..b going missing: a moved line overlapping them."""
        for line in self.moved.values():
            f, l = line.get("first_seq"), line.get("last_seq")
            if f is not None and l is not None and f <= b and l >= a:
                return line
        return None

    def accepted_cover(self, a: int, b: int) -> Line | None:
        """The accept-loss line covering all of a..b (ranges may be accepted in pieces)."""
        need = a
        last = None
        for loss in sorted(self.accepted, key=lambda x: x.first_seq):
            if loss.first_seq <= need <= loss.last_seq:
                need, last = loss.last_seq + 1, loss.line
            if need > b:
                return last
        return None


def fold(lines) -> Expectations:
    sealed: dict = {}
    ever: dict = {}
    moved: dict = {}
    cut: dict = {}
    accepted = []
    rewinds = []
    hwm = horizon = 0
    first = None

    def seqs(*vals):
        nonlocal hwm, first
        for v in vals:
            if v is not None:
                hwm = max(hwm, v)
        if vals and vals[0] is not None:
            first = vals[0] if first is None else min(first, vals[0])

    for line in lines:
        f = line.get("file")
        if line.event == SEAL:
            sealed[f] = ever[f] = line
            moved.pop(f, None)
            seqs(line.get("first_seq"), line.get("last_seq"))
        elif line.event == HWM:
            hwm = max(hwm, line.get("seq"))
        elif line.event == MOVED:
            sealed.pop(f, None)
            moved[f] = line
            seqs(line.get("first_seq"), line.get("last_seq"))
            if line.get("why") in HORIZON_WHY and line.get("last_seq") is not None:
                horizon = max(horizon, line.get("last_seq"))
        elif line.event == RESTORED:
            moved.pop(f, None)
            if f in ever:
                sealed[f] = ever[f]
        elif line.event == CUT:
            cut[f] = line
            sealed.pop(f, None)  # the file changed on purpose: its seal no longer describes it
            ever.pop(f, None)
        elif line.event == ACCEPT_LOSS:
            accepted.append(Loss(line.get("first_seq"), line.get("last_seq"), line))
        elif line.event == REWIND:
            # What was issued after the kept sequence was set aside on purpose: from here on it is issued
            # again (an accepted, recorded reuse), and a loss accepted in that range no longer describes it.
            keep = line.get("last_seq_kept")
            hwm = min(hwm, keep)
            accepted = [x._replace(last_seq=min(x.last_seq, keep)) for x in accepted if x.first_seq <= keep]
            rewinds.append(line)
    return Expectations(sealed, moved, cut, tuple(accepted), hwm, horizon, first, tuple(rewinds))
