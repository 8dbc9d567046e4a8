"""checkpoint create | verify | inspect | list | prune | restore, and the library's create/latest.

A checkpoint directory holds `<uuid>.ckpt` files. "Latest" is by (wal_sequence, timestamp, id), all
descending, among files whose header verifies; never by name or mtime.
"""
from __future__ import annotations

import os
import time
import uuid
from typing import NamedTuple

from ...version import __version__
from ...errors import (
    EXIT_CORRUPT, EXIT_UNSUPPORTED, NotClean, UnsupportedInput, UsageError, combine_exit_codes,
)
from ...format import checkpoint as ck
from ...store import durable, quarantine
from ...store.fs import DEFAULT_FS
from ..clock import utc_now
from .. import classes as K
from ..findings import Finding

SUFFIX = ".ckpt"
CLASS_EXIT = {ck.CORRUPT: EXIT_CORRUPT, ck.UNSUPPORTED: EXIT_UNSUPPORTED}
# What a failing step's stored and computed values are (format/checkpoint.py's eleven steps): the magic,
# the header's and the body's SHA-256, the id against the file name, sizes, the body's wal_sequence.
FAILURE_VALUE_KIND = {2: "magic", 4: "sha256", 6: "checkpoint-id", 7: "size", 8: "sha256", 9: "size",
                      11: "sequence"}


def checkpoint_class(failure_class: str) -> str:
    """The finding class of a checkpoint that fails a step (`checkpoint-corrupt`, `checkpoint-unsupported`)."""
    return {ck.CORRUPT: K.CHECKPOINT_CORRUPT, ck.UNSUPPORTED: K.CHECKPOINT_UNSUPPORTED}[failure_class]


PROGRESS_PIECE_BYTES = 4 << 20  # restore's body hashed this much at a time, so its bar moves smoothly

class CheckpointReport(NamedTuple):
    path: str
    file: str
    checked: ck.Checked
    strict: bool
    seconds: float

    @property
    def header(self):
        return self.checked.header

    @property
    def findings(self) -> tuple[Finding, ...]:
        out = []
        f = self.checked.failure
        if f is not None:
            out.append(Finding(checkpoint_class(f.cls), CLASS_EXIT[f.cls], f"step {f.step}: {f.reason}", self.file,
                               stored=f.stored, computed=f.computed, extra={"step": f.step},
                               value_kind=FAILURE_VALUE_KIND.get(f.step)))
        for a in self.checked.anomalies:
            out.append(Finding(K.ANOMALY, K.strict_code(K.ANOMALY, self.strict), a, self.file,
                               extra={"code": "checkpoint"}))
        return tuple(out)

    @property
    def exit_code(self) -> int:
        return combine_exit_codes(f.exit_code for f in self.findings)

    def to_json(self) -> dict:
        h = self.header
        return {
            "path": self.path, "file": self.file, "valid": self.checked.ok, "exit_code": self.exit_code,
            "header": None if h is None else header_json(h),
            "findings": [f.to_json() for f in self.findings],
        }


def header_json(h: ck.CheckpointHeader) -> dict:
    return {"checkpoint_id": h.id_text, "format_version": h.format_version, "header_size": h.header_size,
            "compression": h.compression, "compression_level": h.compression_level,
            "body_encoding": h.body_encoding, "flags": h.flags, "timestamp": h.timestamp,
            "compressed_size": h.compressed_size, "uncompressed_size": h.uncompressed_size,
            "wal_sequence": h.wal_sequence, "body_sha256": h.body_sha256.hex(),
            "header_sha256": h.header_sha256.hex(),
            "ratio": round(h.uncompressed_size / h.compressed_size, 3) if h.compressed_size else None}


def file_id(path: str) -> str | None:
    name = os.path.basename(path)
    return name[:-len(SUFFIX)] if name.endswith(SUFFIX) else None


def check_path(path: str, *, strict: bool = False, decode: bool = True, check_canonical: bool = True,
               header_only: bool = False, max_state_bytes: int = ck.DEFAULT_MAX_STATE_BYTES,
               fs=DEFAULT_FS, progress=None) -> CheckpointReport:
    """All eleven steps; `header_only` runs steps 1-6 on the first 256 bytes (ordering candidates needs
    no more, and a directory of large checkpoints is then not read whole)."""
    t = time.perf_counter()
    if header_only:
        h, failure, anomalies = ck.check_header(fs.read_head(path, ck.CHECKPOINT_HEADER.size), file_id(path))
        checked = ck.Checked(h, failure, tuple(anomalies), None)
    else:
        with fs.map_read(path) as buf:
            # with progress: the body hashed in pieces first (the bar moves as it is read), then checked
            digest = None if progress is None else ck.body_digest_in_pieces(buf, PROGRESS_PIECE_BYTES, progress)
            checked = ck.check_file(buf, file_id(path), max_state_bytes=max_state_bytes, decode=decode,
                                    check_canonical=check_canonical, body_sha256=digest)
            if progress is not None and digest is None:
                progress(len(buf))
    return CheckpointReport(path, os.path.basename(path), checked, strict, time.perf_counter() - t)


def inspect_path(path: str, *, fs=DEFAULT_FS) -> tuple[list[CheckpointReport], bool]:
    """Every step on a checkpoint file, or on every *.ckpt of a directory in name order (as verify reads
    it): (reports, whether PATH is a directory)."""
    if fs.stat(path).kind == "dir":
        require_checkpoint_dir(path, fs)
        return [check_path(e.path, fs=fs) for e in sorted(fs.listdir(path), key=lambda e: e.name)
                if e.name.endswith(SUFFIX) and e.kind == "file"], True
    return [check_path(path, fs=fs)], False


def is_checkpoint_file(path: str, fs=DEFAULT_FS) -> bool:
    return fs.read_head(path, 16) == ck.CHECKPOINT_MAGIC


def looks_like_checkpoint_dir(directory: str, fs=DEFAULT_FS) -> bool:
    return any(e.name.endswith(SUFFIX) for e in fs.listdir(directory))


def require_checkpoint_dir(directory: str, fs=DEFAULT_FS) -> None:
    """inspect, list and prune of a directory without a single *.ckpt: unsupported (5, as verify says),
    never an empty clean listing. (recover and create take an empty checkpoint directory: no checkpoint yet.)"""
    if not looks_like_checkpoint_dir(directory, fs):
        raise UnsupportedInput(f"no checkpoints (*{SUFFIX}) here", directory)


def list_dir(directory: str, *, fs=DEFAULT_FS) -> Listing:
    """`checkpoint list`: every checkpoint fully checked, in latest order, of a directory that has some."""
    require_checkpoint_dir(directory, fs)
    return list_checkpoints(directory, decode=True, fs=fs)


class Listing(NamedTuple):
    directory: str
    candidates: tuple[CheckpointReport, ...]  # header verifies, in "latest" order
    rejected: tuple[CheckpointReport, ...]  # header does not verify

    @property
    def exit_code(self) -> int:
        """As verify's: the worst of the checkpoints listed (an INVALID one is corruption, 3)."""
        return combine_exit_codes(r.exit_code for r in self.candidates + self.rejected)

    def to_json(self) -> dict:
        return {"directory": self.directory,
                "checkpoints": [dict(c.to_json(), rank=i) for i, c in enumerate(self.candidates)],
                "rejected": [r.to_json() for r in self.rejected]}


def list_checkpoints(directory: str, *, decode: bool = False, fs=DEFAULT_FS) -> Listing:
    """Every *.ckpt file: header-verified ones in latest order (fully checked when `decode`, else steps 1-6
    only), the rest rejected."""
    reports = [check_path(e.path, decode=decode, check_canonical=False, header_only=not decode, fs=fs)
               for e in fs.listdir(directory) if e.name.endswith(SUFFIX) and e.kind == "file"]
    cands = sorted((r for r in reports if r.checked.header_ok), key=lambda r: ck.latest_order_key(r.header),
                   reverse=True)
    rejected = sorted((r for r in reports if not r.checked.header_ok), key=lambda r: r.file)
    return Listing(directory, tuple(cands), tuple(rejected))


class Created(NamedTuple):
    path: str
    checkpoint_id: str
    wal_sequence: int
    uncompressed_size: int
    compressed_size: int
    seconds: float

    def to_json(self) -> dict:
        return dict(self._asdict(), ratio=round(self.uncompressed_size / self.compressed_size, 3))


def snapshot_body(state: dict, wal_sequence: int, *, level: int = ck.DEFAULT_LEVEL,
                  threads: int = -1) -> ck.BodyEncoder:
    """The state's canonical bytes, taken now (a consistent snapshot: later changes to `state` are not in
    it); compressing and writing them can happen later, in another thread (Checkpointer(background=True))."""
    if not isinstance(state, dict):
        raise UsageError("a checkpoint's state is a map")
    if wal_sequence < 0:
        raise UsageError("wal_sequence is >= 0")
    try:
        return ck.BodyEncoder(dict(state, wal_sequence=wal_sequence), level=level, threads=threads)
    except ValueError as e:  # NotCanonical: a key that is not a string, a set, an object ...
        raise UsageError(f"the state cannot be checkpointed: {e}") from None


def create(directory: str, state: dict | None, wal_sequence: int, *, level: int = ck.DEFAULT_LEVEL,
           threads: int = -1, timestamp: int | None = None, checkpoint_id: str | None = None, fs=DEFAULT_FS,
           progress=None, body: ck.BodyEncoder | None = None) -> Created:
    """Writes `state` as a new checkpoint reflecting every log entry up to `wal_sequence`, durably (the
    caller must have made the log durable up to there first). `body`: a snapshot_body taken earlier, for
    the same wal_sequence (then `state` is not read)."""
    fs = fs.beneath(directory)
    t = time.perf_counter()
    if body is None:
        body = snapshot_body(state, wal_sequence, level=level, threads=threads)
    cid = uuid.UUID(checkpoint_id) if checkpoint_id else uuid.uuid4()
    stamp = int(time.time()) if timestamp is None else timestamp

    def header() -> bytes:
        return ck.encode_header(checkpoint_id=cid.bytes, timestamp=stamp, wal_sequence=wal_sequence,
                                compressed_size=body.compressed_size, uncompressed_size=body.uncompressed_size,
                                body_sha256=body.sha256, level=level)

    durable.make_dir(directory, fs)
    path = os.path.join(directory, f"{cid}{SUFFIX}")
    durable.create_file_streamed(path, ck.CHECKPOINT_HEADER.size, body, header, fs, progress)
    return Created(path, str(cid), wal_sequence, body.uncompressed_size, body.compressed_size,
                   time.perf_counter() - t)


class Latest(NamedTuple):
    report: CheckpointReport | None  # the newest that fully verifies
    fallbacks: tuple[CheckpointReport, ...]  # newer candidates that failed a later step
    rejected: tuple[CheckpointReport, ...]


def latest(directory: str, *, max_state_bytes: int = ck.DEFAULT_MAX_STATE_BYTES, fs=DEFAULT_FS,
           at_most: int | None = None) -> Latest:
    """The newest checkpoint that fully verifies (its state decoded), with the ones passed over and why.
    `at_most`: only checkpoints whose wal_sequence is at or below it are candidates (the others are not
    passed over: they hold a later state)."""
    if not fs.exists(directory):
        return Latest(None, (), ())
    listing = list_checkpoints(directory, fs=fs)
    fallbacks = []
    for cand in listing.candidates:
        if at_most is not None and cand.header.wal_sequence > at_most:
            continue
        full = check_path(cand.path, check_canonical=False, max_state_bytes=max_state_bytes, fs=fs)
        if full.checked.ok:
            return Latest(full, tuple(fallbacks), listing.rejected)
        fallbacks.append(full)
    return Latest(None, tuple(fallbacks), listing.rejected)


def resolve(path: str, fs=DEFAULT_FS, max_state_bytes: int = ck.DEFAULT_MAX_STATE_BYTES,
            progress=None) -> CheckpointReport:
    """A checkpoint file, or the latest valid one of a directory. `progress(n)`: the bytes read and
    checked, once the file is."""
    if fs.stat(path).kind == "dir":
        require_checkpoint_dir(path, fs)
        found = latest(path, max_state_bytes=max_state_bytes, fs=fs)
        if found.report is None:
            raise NotClean(f"no valid checkpoint ({len(found.fallbacks)} failed, {len(found.rejected)} rejected)",
                           path, code=EXIT_CORRUPT)
        if progress is not None:
            progress(0, total=fs.stat(found.report.path).size)  # the one it restores, read once more below
            progress(fs.stat(found.report.path).size)
        return found.report
    rep = check_path(path, check_canonical=False, max_state_bytes=max_state_bytes, fs=fs, progress=progress)
    if not rep.checked.ok:
        f = rep.checked.failure
        raise NotClean(f"step {f.step}: {f.reason}", path, code=CLASS_EXIT[f.cls])
    return rep


class Pruned(NamedTuple):
    directory: str
    applied: bool
    removals: tuple[CheckpointReport, ...]
    kept: tuple[CheckpointReport, ...]
    left_alone: tuple[CheckpointReport, ...]  # invalid files: evidence, never pruned
    manifest: tuple[dict, ...]

    def to_json(self) -> dict:
        return {"directory": self.directory, "applied": self.applied,
                "removed": [dict(header_json(r.header), file=r.file) for r in self.removals],
                "kept": [dict(header_json(r.header), file=r.file) for r in self.kept],
                "left_alone": [r.to_json() for r in self.left_alone], "manifest": list(self.manifest)}


def prune(directory: str, *, max_age_s: int = 86_400, keep: int = 2, apply: bool = False, now: float | None = None,
          fs=DEFAULT_FS) -> Pruned:
    """Moves checkpoints whose header timestamp is older than max_age into the directory's `.quarantine/`,
    always keeping the newest `keep` (>= 1) valid ones in latest order. Invalid checkpoints are left alone
    (they are evidence). Nothing is deleted: freeing the space is the operator's `rm` of `.quarantine/`."""
    from ...store.contain import refuse_links

    fs = fs.beneath(directory)
    from ...store.lock import DirectoryLock, holder_text

    keep = max(1, keep)
    now = time.time() if now is None else now
    require_checkpoint_dir(directory, fs)
    listing = list_checkpoints(directory, decode=True, fs=fs)
    valid = [c for c in listing.candidates if c.checked.ok]
    invalid = [c for c in listing.candidates if not c.checked.ok] + list(listing.rejected)
    protected, removals = valid[:keep], []
    for c in valid[keep:]:
        (removals if now - c.header.timestamp > max_age_s else protected).append(c)
    entries = []
    refuse_links(directory, [r.file for r in removals], fs, what="move")
    if apply and removals:
        with DirectoryLock(directory, holder_text("checkpoint prune"), fs):
            stamp = utc_now()
            earlier = quarantine.read_manifest(directory, fs)[0]
            for r in removals:
                entries.append(quarantine.move_in_recorded(
                    directory, r.file, action="checkpoint-prune", now=stamp, version=__version__,
                    manifest=earlier, fs=fs,
                    reason=f"older than {max_age_s} s (wal_sequence {r.header.wal_sequence}); "
                           f"{len(protected)} newer valid checkpoints kept"))
    return Pruned(directory, apply and bool(removals), tuple(removals), tuple(protected), tuple(invalid),
                  tuple(entries))


def horizon(directory: str, fs=DEFAULT_FS) -> tuple[int, str]:
    """The compaction horizon a checkpoint directory gives: the wal_sequence of the OLDEST checkpoint kept
    for fallback (compacting to the newest would make "try the previous checkpoint" impossible)."""
    require_checkpoint_dir(directory, fs)
    listing = list_checkpoints(directory, decode=True, fs=fs)
    valid = [c for c in listing.candidates if c.checked.ok]
    if not valid:
        return 0, f"{directory} (no valid checkpoint: HWM 0)"
    oldest = min(valid, key=lambda c: ck.latest_order_key(c.header))
    return oldest.header.wal_sequence, f"{directory} (oldest valid checkpoint {oldest.file}, wal_sequence " \
                                       f"{oldest.header.wal_sequence})"


def load_state_file(path: str, fs=DEFAULT_FS) -> dict:
    """A state for `checkpoint create --state`: one JSON object or one msgpack map."""
    from ...format.canonical import unpackb
    from ...format.jsonload import loads

    try:
        data = fs.read_input(path)
    except OSError as e:
        raise UsageError(f"cannot read the state file: {e.strerror}", path) from None
    try:
        state = loads(data) if data.lstrip()[:1] == b"{" else unpackb(data)
    except ValueError as e:
        raise UsageError(f"the state file is neither a JSON object nor one msgpack map: {e}", path) from None
    if not isinstance(state, dict):
        raise UsageError("the state is not a map", path)
    return state
