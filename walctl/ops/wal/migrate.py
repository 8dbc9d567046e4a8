"""migrate: rewrite a WAL holding legacy V1 chunks as V2 chunks in a new directory; the source is untouched.

Like `etcdutl migrate`, but never in place: the copy is built in `OUT.tmp` (marked as ours by
MIGRATE_MARK, so a leftover of a crashed run is cleared without doubt) and renamed to OUT only when
complete and synced, the recipe of ops/wal/salvage.py. After a crash OUT either does not exist or is whole.

V1 records keep their sequence, type, memoryId, timestamp and payload; their V2 CRCs are computed now,
and payloads are compressed as the writer would (`compress_threshold`). V2 records of a mixed directory
are copied verbatim (their CRCs are the originals). Chunks are read in directory order and the copy's
chunks roll at `max_chunk_bytes`, so the sequences of a V1 chunk and the V2 chunk after it follow on.

V1 has no CRC: what can be checked is the structure (each length field against the others, records
ending exactly at the end of the file, sequences rising by one, the type ordinal); a flipped bit inside
a payload, a memoryId or a timestamp that leaves the lengths consistent cannot be seen. Each chunk's
report says which checks applied, and the V2 CRCs certify the bytes as read, not as the writer meant them.
"""
from __future__ import annotations

import os
from typing import Callable, NamedTuple

from ...errors import Refused
from ...format.v2 import check_memory_id, check_writable_type, compress_payload, encode_record
from ...store import durable
from ...store.marked import clear_marked
from ...store.appender import SYNC_NONE, ChunkAppender
from ...store.fs import DEFAULT_FS
from .records import RawDamage, Record, RecordWalk
from ..report import PathReport
from .verify import verify_path

MIGRATE_MARK = ".walctl-migrate"  # in OUT.tmp: proves a leftover temp directory is ours to clear

V1_CHECKED = ("file header (magic, version 1)", "each record's length field against its idLen and payloadLen",
              "records end exactly at the end of the file", "sequences rise by one (the copy is verified)",
              "type ordinal within 0..15 and memoryId within 65535 bytes (what V2 can hold)")
V1_UNCHECKED = ("payload, memoryId and timestamp bytes: V1 has no CRC, so damage that keeps the length fields "
                "consistent cannot be detected; the V2 CRCs computed now certify the bytes as read",)
V2_CHECKED = ("record magic, header CRC and payload CRC of every record (copied verbatim)",)


class ChunkMigration(NamedTuple):
    """What became of one source chunk."""
    file: str
    state: str  # the file-header state (ok, legacy-v1, short, bad-magic, ...)
    version: int | None
    size: int
    action: str  # converted (V1), copied (V2), header-only, not-read
    records: int  # records written to OUT
    first_sequence: int | None
    last_sequence: int | None
    read_bytes: int  # source bytes of the records written
    out_chunks: tuple[str, ...]  # OUT's chunks holding them
    damaged: tuple[dict, ...]  # byte ranges not converted: offset, end_offset, length, reason
    unconvertible: tuple[dict, ...]  # records read but not writable as V2: sequence, offset, reason
    checked: tuple[str, ...]
    unchecked: tuple[str, ...]

    def to_json(self) -> dict:
        d = self._asdict()
        for k in ("out_chunks", "damaged", "unconvertible", "checked", "unchecked"):
            d[k] = list(d[k])
        return d


class MigrateReport(NamedTuple):
    source: str
    out: str
    records: int
    converted: int  # from V1
    copied: int  # verbatim from V2
    first_sequence: int | None
    last_sequence: int | None
    lost_sequences: tuple[tuple[int, int], ...]  # gaps in what was written (the copy's verify names them)
    chunks: tuple[ChunkMigration, ...]
    skipped: tuple[dict, ...]  # records not written: a sequence already written
    out_report: PathReport

    @property
    def exit_code(self) -> int:
        return self.out_report.exit_code

    @property
    def damaged_bytes(self) -> int:
        return sum(d["length"] for c in self.chunks for d in c.damaged)

    def to_json(self) -> dict:
        return {
            "source": self.source, "out": self.out, "records": self.records, "converted": self.converted,
            "copied": self.copied, "first_sequence": self.first_sequence, "last_sequence": self.last_sequence,
            "lost_sequence_ranges": [list(r) for r in self.lost_sequences],
            "lost_sequences": sum(b - a + 1 for a, b in self.lost_sequences),
            "damaged_bytes": self.damaged_bytes,
            "unconvertible_records": sum(len(c.unconvertible) for c in self.chunks),
            "chunks": [c.to_json() for c in self.chunks], "skipped": list(self.skipped),
            "out_verdict": self.out_report.verdict, "exit_code": self.exit_code,
        }


class _Tally:
    """One source chunk's running account while the walk goes through it."""

    def __init__(self):
        self.records = self.read_bytes = 0
        self.first = self.last = None
        self.out_chunks: list[str] = []
        self.damaged: list[dict] = []
        self.unconvertible: list[dict] = []

    def wrote(self, rec: Record, out_chunk: str) -> None:
        self.records += 1
        self.read_bytes += rec.size
        self.first = rec.sequence if self.first is None else self.first
        self.last = rec.sequence
        if out_chunk not in self.out_chunks:
            self.out_chunks.append(out_chunk)


def v2_record(rec: Record, compress_threshold: int | None) -> bytes:
    """A walked record as V2 bytes: a V1 one encoded (CRCs computed now), a V2 one as it is on disk.
    ValueError for a V1 record that V2 cannot hold (type ordinal above 15, memoryId over 65535 bytes)."""
    if not is_legacy(rec):
        return rec.raw
    check_writable_type(rec.type_ordinal)
    check_memory_id(rec.memory_id)
    stored, flags = compress_payload(rec.payload, compress_threshold)
    return encode_record(rec.sequence, rec.type_ordinal, rec.memory_id, rec.timestamp_ms, stored, flags)


def is_legacy(rec: Record) -> bool:
    return rec.header_crc is None  # a V1 record carries no CRC (ops/wal/records.py reads it so)


def migrate(source: str, out: str, *, fs=DEFAULT_FS, max_chunk_bytes: int = 8 << 20,
            compress_threshold: int | None = None, progress: Callable[[int], None] | None = None) -> MigrateReport:
    fs = fs.beneath(os.path.dirname(os.path.abspath(out)))  # OUT and OUT.tmp, side by side
    out = os.path.normpath(out)
    _refuse_inside(source, out)
    # A crash after the final rename leaves OUT whole but still marked: ours to clear and redo.
    clear_own_leftover(out, fs, keep_dir=True)
    if fs.exists(out) and (fs.stat(out).kind != "dir" or fs.listdir(out)):
        raise Refused("the output exists and is not an empty directory; migrate never writes over anything", out)
    tmp = out + durable.TMP_SUFFIX
    clear_own_leftover(tmp, fs)
    durable.make_dir(tmp, fs)
    durable.create_file(os.path.join(tmp, MIGRATE_MARK), b"walctl migrate in progress\n", fs)
    walk = RecordWalk(source, fs=fs, keep_raw=True, progress=progress)
    tallies: dict[str, _Tally] = {}
    try:
        written, skipped = _copy(walk, tmp, fs, tallies, max_chunk_bytes, compress_threshold)
    except BaseException:
        clear_own_leftover(tmp, fs)  # a refusal or failure leaves no OUT.tmp behind
        if fs.exists(tmp):
            durable.remove_dir(tmp, fs)
        raise
    if fs.exists(out):
        durable.remove_dir(out, fs)  # it was empty (checked above); the rename needs the name free
    durable.move(tmp, out, fs)  # the mark goes along: until it is removed, a rerun redoes the copy
    durable.remove(os.path.join(out, MIGRATE_MARK), fs)
    chunks = tuple(_chunk_row(c, tallies.get(c.file)) for c in walk.report.chunks)
    sequences = [s for s, _ in written]
    converted = sum(1 for _, legacy in written if legacy)
    return MigrateReport(source, out, len(written), converted, len(written) - converted,
                         sequences[0], sequences[-1], _gaps(sequences), chunks, tuple(skipped),
                         verify_path(out, fs=fs))


def _copy(walk, tmp, fs, tallies, max_chunk_bytes, compress_threshold):
    """Writes every readable record in order; returns ([(sequence, from V1)], skipped)."""
    written: list[tuple[int, bool]] = []
    skipped: list[dict] = []
    appender = None
    try:
        for item in walk:
            tally = tallies.setdefault(item.file, _Tally())
            if isinstance(item, RawDamage):
                d = item.damage
                tally.damaged.append({"offset": d.offset, "end_offset": d.end, "length": d.end - d.offset,
                                      "reason": d.reason})
                continue
            try:
                record = v2_record(item, compress_threshold)
            except ValueError as e:
                tally.unconvertible.append({"sequence": item.sequence, "offset": item.offset, "reason": str(e)})
                continue
            if written and item.sequence <= written[-1][0]:
                skipped.append({"sequence": item.sequence, "file": item.file, "offset": item.offset,
                                "reason": f"sequence {item.sequence} was already written (the source repeats it)"})
                continue
            if appender is None:  # the copy starts where the source starts
                appender = ChunkAppender(tmp, next_sequence=item.sequence, chunk_index=0, chunk_exists=False,
                                         fs=fs, sync=SYNC_NONE, max_chunk_bytes=max_chunk_bytes)
            into = appender.active_chunk
            appender.append_raw(record, item.sequence)
            tally.wrote(item, into)
            written.append((item.sequence, is_legacy(item)))
        if not written:
            raise Refused("the source holds no record migrate can write; nothing was created", walk.path)
    finally:
        if appender is not None:
            appender.close()  # syncs every chunk and the directory
    return written, skipped


def _chunk_row(c, t: _Tally | None) -> ChunkMigration:
    t = t or _Tally()
    legacy = c.state == "legacy-v1"
    if t.records or t.unconvertible:
        action = "converted" if legacy else "copied"
    elif c.verdict == "header-only" or (legacy and c.size == 8):
        action = "header-only"
    else:
        action = "not-read"
    damaged = list(t.damaged)
    if action == "not-read" and not damaged and c.size:
        damaged.append({"offset": 0, "end_offset": c.size, "length": c.size,
                        "reason": f"not read: {c.state} chunk ({c.verdict})"})
    checked, unchecked = (V1_CHECKED, V1_UNCHECKED) if legacy else (V2_CHECKED, ()) if c.state == "ok" else ((), ())
    return ChunkMigration(c.file, c.state, c.version, c.size, action, t.records, t.first, t.last, t.read_bytes,
                          tuple(t.out_chunks), tuple(damaged), tuple(t.unconvertible), checked, unchecked)


def _gaps(sequences: list[int]) -> tuple[tuple[int, int], ...]:
    return tuple((a + 1, b - 1) for a, b in zip(sequences, sequences[1:]) if b > a + 1)


def _refuse_inside(source: str, out: str) -> None:
    src, dst = os.path.abspath(source), os.path.abspath(out)
    if dst == src or dst.startswith(src.rstrip(os.sep) + os.sep) or src.startswith(dst + os.sep):
        raise Refused("the output must be outside the source (migrate never changes the source)", out)


def clear_own_leftover(tmp: str, fs, keep_dir: bool = False) -> None:
    clear_marked(tmp, MIGRATE_MARK, "migrate", fs, keep_dir)  # store/marked.py: the rule for both copies


