"""What salvage copies from, and which record comes from where.

Sources are files: the chunks of the directory, and the pieces its `.quarantine/` holds (a whole chunk
`quarantine move` set aside, or tail bytes repair cut, read at the offsets they were cut from). Each keeps
the chunk index it came from (its slot): the copy is laid out as the source was, chunk by chunk, under the
same names, so an intact chunk is copied byte for byte and offsets in the evidence still match.

Only recorded pieces are read: `store.quarantine.read_manifest` drops (and reports) a line whose names
are not plain names, and a piece that is a symbolic link is never followed. Pieces below a compaction
horizon are not sources: their sequences were retired on purpose, not lost.

Choosing records is a merge: slots in index order; within a slot, the sources' runs (in file order each)
merged by first sequence, the directory's first on a tie. A record whose sequence is not above the last
one copied is skipped (a repeat, or out of order), and counted against its source.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...errors import UnsupportedInput
from ...format import ledger as L
from ...format.names import parse_chunk_name
from ...format.record import ID_LEN, STORED_LEN
from ...format.scan import HEADER_LEGACY, HEADER_OK, LOOK_BEHIND, Run, scan_records
from ...format.v2 import FILE_HEADER, FILE_MAGIC, RECORD_HEADER, record_size
from ...store import quarantine as q
from ...store.chunkread import scan_chunk_file
from .ledger_check import HORIZON_ACTIONS

DIRECTORY, QUARANTINE = "directory", "quarantine"


class Source(NamedTuple):
    label: str  # as shown: "wal-000001.bin", or ".quarantine/wal-000001.bin"
    path: str
    origin: str  # DIRECTORY | QUARANTINE
    slot: int  # the chunk index it belongs at
    base: int  # where the file's byte 0 was in its chunk (cut bytes: the offset they were cut at)
    entry: dict | None = None  # the manifest line that set it aside
    note: str | None = None  # what is odd about it (read all the same: every record is CRC-checked)

    def to_json(self) -> dict:
        e = self.entry or {}
        return {"file": self.label, "from": self.origin, "slot": self.slot, "source_offset": self.base,
                "manifest": {k: e.get(k) for k in ("action", "source", "offset", "time", "reason")} if e else None,
                "note": self.note}


class Scanned(NamedTuple):
    source: Source
    header: bytes | None  # the file's 8 header bytes (a whole chunk)
    runs: tuple  # Run, offsets in the file
    damage: tuple  # (offset, end) in the chunk the bytes belong to
    size: int = 0  # the file's size


class Segment(NamedTuple):
    """Consecutive records of one source, copied as they are (file offsets)."""
    source: int  # index into the scanned sources
    first_seq: int
    last_seq: int
    count: int
    offset: int
    end: int


def directory_sources(chunks) -> list[Source]:
    return [Source(c.name, c.path, DIRECTORY, c.index, 0) for c in chunks]


def quarantine_sources(directory: str, fs) -> tuple[list[Source], list[str]]:
    """The recorded pieces of DIR/.quarantine/ that hold V2 records, and why others are not read."""
    qd = q.qdir(directory)
    if fs.stat(directory).kind != "dir" or not fs.exists(qd):
        return [], []
    if fs.is_symlink(qd) or fs.stat(qd).kind != "dir":
        return [], [f"{q.QUARANTINE_DIR} is not a directory of its own (a link?): not read"]
    entries, problems = q.read_manifest(directory, fs)
    out, notes = [], [f"{q.QUARANTINE_DIR}/{p}" for p in problems]
    for name, e in q.holding_lines(entries).items():
        label = f"{q.QUARANTINE_DIR}/{name}"
        slot = parse_chunk_name(e["source"])
        if slot is None or not L.is_log_file_name(e["source"]):
            continue  # a segment or a checkpoint: not V2 records
        if e["action"] in HORIZON_ACTIONS:
            notes.append(f"{label}: not read: compaction retired its sequences (below the horizon, not lost)")
            continue
        if e["action"] in q.CUT_ACTIONS:
            notes.append(f"{label}: not read: walctl cut set it aside on purpose (its sequences are issued again)")
            continue
        path = os.path.join(qd, name)
        if fs.is_symlink(path):
            notes.append(f"{label}: a symbolic link: never followed")
            continue
        if not fs.exists(path) or fs.stat(path).kind != "file":
            notes.append(f"{label}: recorded ({e['action']} of {e['source']}) but not there")
            continue
        note = None
        if q.sha256_file(path, fs) != e["sha256"]:
            note = "its bytes differ from its manifest line (sha256): only records whose CRCs pass are used"
        whole = e["offset"] == 0 and fs.read_head(path, len(FILE_MAGIC)) == FILE_MAGIC
        out.append(Source(label, path, QUARANTINE, slot, 0 if whole else e["offset"], e, note))
    return out, notes


def with_set_aside(directory: str, chunks: list, fs) -> list:
    """The directory's chunk files, with each whole chunk `.quarantine/` holds for a chunk index the directory
    lacks put where it belongs (named `.quarantine/NAME`): replay --skip-damaged and recover read what was
    set aside rather than skip its sequences. Cut tail bytes are salvage's alone (they hold no whole chunk)."""
    from ...store.chunkdir import ChunkFile

    present = {c.index for c in chunks}
    extra: dict[int, ChunkFile] = {}
    for src in quarantine_sources(directory, fs)[0]:
        if src.base == 0 and src.slot not in present and src.slot not in extra:
            extra[src.slot] = ChunkFile(src.slot, src.label, src.path, "file", fs.stat(src.path).size)
    if not extra:
        return chunks
    return sorted(list(chunks) + list(extra.values()), key=lambda c: (c.index, c.name))


def is_set_aside(name: str) -> bool:
    """A chunk row that with_set_aside added (its name is `.quarantine/NAME`)."""
    return name.startswith(q.QUARANTINE_DIR + "/")


def scan_source(src: Source, fs, directory_chunk: str | None) -> Scanned:
    """Runs of valid records, and the damage between them. `directory_chunk`: the directory's file for the
    same slot, whose bytes before a cut piece are what the scanner looks behind at."""
    if src.base == 0:
        outcome = scan_chunk_file(src.path, fs)
        if outcome.error is not None:
            return Scanned(src, None, (), (), fs.stat(src.path).size)
        scan = outcome.scan
        if scan.header == HEADER_LEGACY and src.origin == DIRECTORY:
            raise UnsupportedInput(f"{src.label} holds version 1 records: salvage copies Spector V2 records "
                                   "verbatim and does not convert legacy V1 ones; nothing was created", src.path)
        if scan.header != HEADER_OK:
            return Scanned(src, None, (), ((0, scan.size),) if scan.size else (), scan.size)
        return Scanned(src, fs.read_head(src.path, FILE_HEADER.size), tuple(scan.runs),
                       tuple((d.offset, d.end) for d in scan.damage), scan.size)
    behind = bytes(LOOK_BEHIND)
    if directory_chunk is not None and fs.exists(directory_chunk) and fs.stat(directory_chunk).size >= src.base:
        behind = fs.read_range(directory_chunk, src.base - LOOK_BEHIND, LOOK_BEHIND).rjust(LOOK_BEHIND, b"\0")
    with fs.map_read(src.path) as buf:
        size = len(buf)
        items = scan_records(behind + bytes(buf), LOOK_BEHIND)
    shift = LOOK_BEHIND
    runs = tuple(Run(r.first_seq, r.last_seq, r.count, r.offset - shift, r.end - shift)
                 for r in items if type(r) is Run)
    damage = tuple((d.offset - shift + src.base, d.end - shift + src.base) for d in items if type(d) is not Run)
    return Scanned(src, None, runs, damage, size)


def skip_records(fs, path: str, offset: int, n: int) -> int:
    """The offset just after `n` records from `offset` (records of a run: their headers are intact)."""
    for _ in range(n):
        h = RECORD_HEADER.unpack(fs.read_range(path, offset, RECORD_HEADER.size))
        offset += record_size(h[ID_LEN], h[STORED_LEN])
    return offset


class Plan(NamedTuple):
    slots: tuple  # (slot, [Segment, ...]) in slot order, only slots with something to copy
    skipped: tuple  # dicts: the records not copied, by source


def choose(scanned: list[Scanned], fs) -> Plan:
    """Which records are copied, from which source (see the module's docstring)."""
    by_slot: dict[int, list[int]] = {}
    for i, s in enumerate(scanned):
        by_slot.setdefault(s.source.slot, []).append(i)
    slots, skipped, last = [], [], None
    for slot in sorted(by_slot):
        queues = [[Segment(i, r.first_seq, r.last_seq, r.count, r.offset, r.end) for r in scanned[i].runs]
                  for i in by_slot[slot]]
        chosen = []
        while any(queues):
            qi = min((k for k, qq in enumerate(queues) if qq), key=lambda k: (queues[k][0].first_seq, k))
            seg = queues[qi].pop(0)
            if last is not None and seg.first_seq <= last:
                n = min(seg.count, last - seg.first_seq + 1)
                skipped.append(_skip(scanned[seg.source].source, seg, n, last))
                if n == seg.count:
                    continue
                off = skip_records(fs, scanned[seg.source].source.path, seg.offset, n)
                seg = seg._replace(first_seq=seg.first_seq + n, count=seg.count - n, offset=off)
            chosen.append(seg)
            last = seg.last_seq
        if chosen:
            slots.append((slot, chosen))
    return Plan(tuple(slots), tuple(skipped))


def _skip(src: Source, seg: Segment, n: int, last: int) -> dict:
    b = seg.first_seq + n - 1
    what = f"sequence {seg.first_seq}" if n == 1 else f"sequences {seg.first_seq}..{b}"
    return {"sequence": seg.first_seq, "last_sequence": b, "records": n, "file": src.label,
            "offset": seg.offset + src.base,
            "reason": f"{what} not after sequence {last}, already copied (a repeat, or out of order)"}


def minus(rng: tuple[int, int], copied: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of the sequence range `rng` that no range of `copied` covers."""
    pieces = [rng]
    for ca, cb in copied:
        nxt = []
        for a, b in pieces:
            if cb < a or ca > b:
                nxt.append((a, b))
                continue
            if a < ca:
                nxt.append((a, ca - 1))
            if b > cb:
                nxt.append((cb + 1, b))
        pieces = nxt
    return pieces


def merge_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted sequence ranges, overlapping or touching ones joined."""
    out: list[list[int]] = []
    for a, b in ranges:
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]
