"""stats: what a V2 path holds, per event type and per chunk. Read-only."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ...store.fs import DEFAULT_FS
from .records import Record, RecordWalk
from ..report import PathReport


@dataclass
class TypeStats:
    type: str | int
    type_ordinal: int
    records: int = 0
    record_bytes: int = 0  # on disk: header, id, stored payload, padding
    stored_bytes: int = 0  # payload as stored
    payload_bytes: int = 0  # payload decoded
    compressed_records: int = 0

    def to_json(self) -> dict:
        return dict(self.__dict__)


@dataclass
class ChunkStats:
    file: str
    records: int = 0
    first_sequence: int | None = None
    last_sequence: int | None = None
    first_timestamp_ms: int | None = None
    last_timestamp_ms: int | None = None


@dataclass
class Stats:
    path: str
    types: dict = field(default_factory=dict)  # ordinal -> TypeStats
    chunks: dict = field(default_factory=dict)  # file -> ChunkStats
    records: int = 0
    record_bytes: int = 0
    stored_bytes: int = 0
    payload_bytes: int = 0
    compressed_stored_bytes: int = 0
    compressed_payload_bytes: int = 0
    min_sequence: int | None = None
    max_sequence: int | None = None
    min_timestamp_ms: int | None = None
    max_timestamp_ms: int | None = None
    report: PathReport | None = None

    def add(self, r: Record) -> None:
        t = self.types.get(r.type_ordinal)
        if t is None:
            t = self.types[r.type_ordinal] = TypeStats(r.type, r.type_ordinal)
        decoded = r.decoded_len if r.decoded_len is not None else len(r.payload)
        t.records += 1
        t.record_bytes += r.size
        t.stored_bytes += r.stored_len
        t.payload_bytes += decoded
        if r.compressed:
            t.compressed_records += 1
            self.compressed_stored_bytes += r.stored_len
            self.compressed_payload_bytes += decoded
        self.records += 1
        self.record_bytes += r.size
        self.stored_bytes += r.stored_len
        self.payload_bytes += decoded
        self.min_sequence = _min(self.min_sequence, r.sequence)
        self.max_sequence = _max(self.max_sequence, r.sequence)
        self.min_timestamp_ms = _min(self.min_timestamp_ms, r.timestamp_ms)
        self.max_timestamp_ms = _max(self.max_timestamp_ms, r.timestamp_ms)
        c = self.chunks.get(r.file)
        if c is None:
            c = self.chunks[r.file] = ChunkStats(r.file)
        c.records += 1
        c.first_sequence = r.sequence if c.first_sequence is None else c.first_sequence
        c.last_sequence = r.sequence
        c.first_timestamp_ms = _min(c.first_timestamp_ms, r.timestamp_ms)
        c.last_timestamp_ms = _max(c.last_timestamp_ms, r.timestamp_ms)

    @property
    def compression_ratio(self) -> float | None:
        """Decoded / stored bytes over compressed records only (None when none is compressed)."""
        if not self.compressed_stored_bytes:
            return None
        return self.compressed_payload_bytes / self.compressed_stored_bytes

    def to_json(self) -> dict:
        rep = self.report
        chunks = []
        for c in (rep.chunks if rep else ()):
            cs = self.chunks.get(c.file, ChunkStats(c.file))
            chunks.append({"file": c.file, "size": c.size, "verdict": c.verdict, "records": cs.records,
                           "first_sequence": cs.first_sequence, "last_sequence": cs.last_sequence,
                           "first_timestamp_ms": cs.first_timestamp_ms, "last_timestamp_ms": cs.last_timestamp_ms,
                           "damaged_bytes": c.damaged_bytes})
        return {
            "path": self.path,
            "verdict": rep.verdict if rep else None,
            "exit_code": rep.exit_code if rep else None,
            "records": self.records, "record_bytes": self.record_bytes,
            "file_bytes": sum(c.size for c in rep.chunks) if rep else None,
            "stored_payload_bytes": self.stored_bytes, "payload_bytes": self.payload_bytes,
            "compression": {"stored_bytes": self.compressed_stored_bytes,
                            "payload_bytes": self.compressed_payload_bytes, "ratio": self.compression_ratio},
            "sequence_range": [self.min_sequence, self.max_sequence] if self.records else None,
            "timestamp_range_ms": [self.min_timestamp_ms, self.max_timestamp_ms] if self.records else None,
            "types": [self.types[k].to_json() for k in sorted(self.types)],
            "chunks": chunks,
        }


def _min(a, b):
    return b if a is None or b < a else a


def _max(a, b):
    return b if a is None or b > a else a


def collect_stats(path: str, fs=DEFAULT_FS, progress: Callable[[int], None] | None = None) -> Stats:
    stats = Stats(path)
    walk = RecordWalk(path, fs=fs, payloads=False, progress=progress)
    for item in walk:
        if isinstance(item, Record):
            stats.add(item)
    stats.report = walk.report
    return stats


def segment_stats(path: str, fs=DEFAULT_FS, progress: Callable[[int], None] | None = None) -> dict:
    """Counts of an ADR-003 segment directory: per operation, per segment, sequence and time ranges."""
    from .segments import SegmentWalk

    walk = SegmentWalk(path, fs, progress=progress)
    ops: dict = {}
    seqs, times = [], []
    for _, e in walk:
        o = ops.setdefault(e.operation, {"operation": e.operation, "entries": 0, "bytes": 0, "json": 0, "msgpack": 0})
        o["entries"] += 1
        o["bytes"] += e.size
        o[e.encoding] += 1
        seqs.append(e.sequence)
        ts = e.value.get("timestamp")
        if isinstance(ts, (int, float)):
            times.append(ts)
    rep = walk.report
    return {"path": path, "kind": rep.kind, "verdict": rep.verdict, "exit_code": rep.exit_code,
            "entries": len(seqs), "bytes": sum(c.size for c in rep.chunks),
            "sequence_range": [min(seqs), max(seqs)] if seqs else None,
            "timestamp_range": [min(times), max(times)] if times else None,
            "duplicates_skipped": walk.duplicates,
            "operations": sorted(ops.values(), key=lambda o: o["operation"]),
            "segments": [{"file": c.file, "size": c.size, "entries": c.records, "first_sequence": c.first_sequence,
                          "last_sequence": c.last_sequence, "verdict": c.verdict, "damaged_bytes": c.damaged_bytes}
                         for c in rep.chunks]}
