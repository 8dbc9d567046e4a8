"""compact: move closed chunks (or ADR-003 segments, see plan_segments) that a checkpoint already covers out of the WAL: into the directory's
`.quarantine/` (the default) or into an archive directory. walctl deletes no chunk: freeing the space is the
operator's own `rm` of `.quarantine/` or of the archive, once nothing may need those records again.

A chunk goes only when walctl can account for all of it without scanning it: its file header is V2,
its first record header is intact (or it holds only the header), its index follows the previous one,
and the first record of the next chunk gives its last sequence (next first - 1). That last sequence
must be <= the high-water mark. Compaction stops at the first chunk that fails any of these: it never
removes the last chunk, a foreign, unsupported or damaged chunk, or anything past a gap. (Unlike the
reference implementation, which parses every old record and deletes chunks it cannot read.)
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...version import __version__
from ...errors import EXIT_SEQUENCE, NotClean, Refused, UnsupportedInput, UsageError
from ...format.ckptmeta import decode_checkpoint_meta
from ...format.names import parse_chunk_name
from ...format.record import Invalid, check_header
from ...format.v2 import FILE_HEADER, FILE_MAGIC, FORMAT_VERSION, RECORD_HEADER
from ...store import durable, ledger, quarantine
from ..advice import cmd
from ..report import examined
from ...store.chunkdir import list_chunks
from ...store.fs import DEFAULT_FS
from ...store.contain import refuse_links
from ...store.lock import DirectoryLock, holder_text
from ..classes import NO_COMPACT, acted_on_by
from ..clock import utc_now
from .. import judge as J

NO_COMPACT_CLASSES = acted_on_by(NO_COMPACT)  # sequences that do not rise by one


class ChunkBound(NamedTuple):
    file: str
    index: int
    size: int
    first_sequence: int | None  # None: header-only
    problem: str | None  # why compaction cannot account for this chunk


class Removal(NamedTuple):
    file: str
    size: int
    first_sequence: int | None
    last_sequence: int

    def to_json(self) -> dict:
        return dict(self._asdict())


class CompactReport(NamedTuple):
    path: str
    hwm: int
    hwm_source: str
    applied: bool
    archive_to: str | None
    removals: tuple[Removal, ...]
    stopped_at: str | None  # first chunk kept and why
    evidence: tuple[dict, ...]

    @property
    def exit_code(self) -> int:
        return 0

    def to_json(self) -> dict:
        return {"path": self.path, "hwm": self.hwm, "hwm_source": self.hwm_source, "applied": self.applied,
                "archive_to": self.archive_to, "removals": [r.to_json() for r in self.removals],
                "bytes": sum(r.size for r in self.removals), "stopped_at": self.stopped_at,
                "manifest": list(self.evidence), "exit_code": self.exit_code}


def read_hwm(before: int | None, checkpoint_meta: str | None, fs=DEFAULT_FS,
             checkpoints: str | None = None) -> tuple[int, str]:
    if sum(x is not None for x in (before, checkpoint_meta, checkpoints)) != 1:
        raise UsageError("give exactly one high-water mark: --to N, --checkpoint-meta PATH or --checkpoints DIR")
    if checkpoints is not None:
        from ..checkpoints.checkpoint import horizon

        return horizon(checkpoints, fs)
    if before is not None:
        if before < 0:
            raise UsageError("--to must be >= 0")
        return before, f"--to {before}"
    if not fs.exists(checkpoint_meta):
        return 0, f"{checkpoint_meta} (missing: HWM 0)"
    meta = decode_checkpoint_meta(fs.read_head(checkpoint_meta, 64))
    if not meta.valid:
        raise UnsupportedInput(f"{meta.problem}; an invalid HWM means replay everything, so nothing is compacted",
                               checkpoint_meta)
    return meta.hwm, f"{checkpoint_meta} (HWM {meta.hwm})"


def chunk_bounds(directory: str, fs=DEFAULT_FS) -> list[ChunkBound]:
    """The first sequence of every chunk, from its first record header only."""
    out = []
    for c in list_chunks(directory, fs).chunks:
        if c.kind != "file":
            out.append(ChunkBound(c.name, c.index, c.size, None, "not a regular file"))
            continue
        head = fs.read_head(c.path, FILE_HEADER.size + RECORD_HEADER.size)
        out.append(ChunkBound(c.name, c.index, c.size, *first_sequence(head, c.size)))
    return out


def first_sequence(head: bytes, size: int) -> tuple[int | None, str | None]:
    """(first sequence or None, why not) from a chunk's first 48 bytes and its size."""
    if len(head) < FILE_HEADER.size:
        return None, "shorter than the chunk header"
    magic, version = FILE_HEADER.unpack_from(head)
    if magic != FILE_MAGIC or version != FORMAT_VERSION:
        return None, "not a Spector V2 chunk"
    if size == FILE_HEADER.size:
        return None, None
    if len(head) < FILE_HEADER.size + RECORD_HEADER.size:
        return None, "first record header is incomplete"
    h = check_header(head, FILE_HEADER.size, len(head))
    if type(h) is Invalid:
        return None, "first record header is damaged"
    return h.sequence, None


def plan(directory: str, hwm: int, fs=DEFAULT_FS, lock_held_by_us: bool = False) -> tuple[list[Removal], str | None]:
    """Refuses (exit 4) a directory whose sequences repeat, go back or have a gap nobody accepted: the
    "next chunk's first sequence minus one" bound below holds only where sequences rise by one, and a
    regression would let a chunk holding records above the HWM leave the log."""
    from .verify import require_recognised, verify_path

    report = require_recognised(verify_path(directory, fs=fs, lock_held_by_us=lock_held_by_us))
    seq = [f for f in report.findings if f.exit_code == EXIT_SEQUENCE and f.cls in NO_COMPACT_CLASSES]
    # a repeat, a regression, a sequence below one (ops/classes.py); a gap stops the plan below
    if seq:
        err = NotClean(f"refusing to compact: {seq[0].one_line()} (see `{cmd('verify', directory)}`); compaction "
                       "cannot tell which records a chunk holds across it", directory, code=EXIT_SEQUENCE)
        err.findings = report.findings
        raise err
    actual_last = {c.file: c.last_sequence for c in report.chunks}
    bounds = chunk_bounds(directory, fs)
    removals: list[Removal] = []
    for i, b in enumerate(bounds):
        if i == len(bounds) - 1:
            return removals, f"{b.file}: the last chunk is never compacted"
        if b.problem:
            return removals, f"{b.file}: {b.problem}"
        if i and b.index != bounds[i - 1].index + 1:
            return removals, f"{b.file}: chunk index {bounds[i - 1].index + 1} is missing before it"
        nxt = next((n for n in bounds[i + 1:] if n.problem or n.first_sequence is not None), None)
        if nxt is None or nxt.problem:
            return removals, f"{b.file}: its last sequence cannot be known from the chunks after it"
        # An upper bound: a gap hidden inside this chunk only makes its real last sequence smaller, so
        # "last <= HWM" stays safe without scanning it.
        last = nxt.first_sequence - 1
        if b.first_sequence is not None and last < b.first_sequence:
            return removals, f"{b.file}: the next chunk starts at {nxt.first_sequence}, not after {b.first_sequence}"
        if actual_last.get(b.file) is not None and actual_last[b.file] > last:
            return removals, f"{b.file}: holds sequence {actual_last[b.file]}, past the next chunk's first"
        if last > hwm:
            return removals, f"{b.file}: holds sequences up to {last}, above the HWM {hwm}"
        removals.append(Removal(b.file, b.size, b.first_sequence, last))
    return removals, None


def plan_segments(directory: str, hwm: int, fs=DEFAULT_FS, lock_held_by_us: bool = False
                  ) -> tuple[list[Removal], str | None]:
    """ADR-003 segments: whole segments at or below the HWM, from the front. A segment has no header,
    so its sequences come from reading it (the same walk as verify). A segment goes only when it and the
    segment after it are clean and the next one continues it exactly (its first sequence = this one's
    last + 1): compaction never removes the last segment, a damaged one, or anything before a gap or a
    repeat (removing it would hide that finding). Segments are never rewritten (the ADR's
    compact_segment is not adopted)."""
    from .segments import verify_segments

    segs = verify_segments(directory, fs=fs, lock_held_by_us=lock_held_by_us).chunks
    removals: list[Removal] = []
    prev_last: int | None = None
    for i, s in enumerate(segs):
        if i == len(segs) - 1:
            return removals, f"{s.file}: the last segment is never compacted"
        if s.exit_code != 0:
            return removals, f"{s.file}: {s.verdict} (verify it first)"
        nxt = segs[i + 1]
        if nxt.exit_code != 0:
            return removals, f"{s.file}: the next segment {nxt.file} is {nxt.verdict}, so this one is kept"
        last = s.last_sequence if s.records else prev_last
        if last is None:  # empty, with nothing before it: it holds no sequence to cover
            last = 0
        if nxt.records and not J.continues(last, nxt.first_sequence):
            return removals, f"{s.file}: the next segment starts at {nxt.first_sequence}, not {last + 1}"
        if last > hwm:
            return removals, f"{s.file}: holds sequences up to {last}, above the HWM {hwm}"
        removals.append(Removal(s.file, s.size, s.first_sequence if s.records else None, last))
        prev_last = last
    return removals, None


def _refuse_archive_conflicts(directory: str, archive_to: str, removals, fs) -> None:
    """Before the first move: a name already taken in --archive-to by other bytes (or by a link) refuses
    the whole compaction, so that it never stops half-way with some chunks moved."""
    for r in removals:
        dst = os.path.join(archive_to, r.file)
        if fs.is_symlink(dst) or (fs.exists(dst) and quarantine.sha256_file(dst, fs)
                                  != quarantine.sha256_file(os.path.join(directory, r.file), fs)):
            raise Refused(f"{dst} exists with other content; nothing was changed", archive_to)


def compact(directory: str, *, before: int | None = None, checkpoint_meta: str | None = None,
            checkpoints: str | None = None, archive_to: str | None = None, apply: bool = False,
            fs=DEFAULT_FS) -> CompactReport:
    fs = fs.beneath(directory, *([archive_to] if archive_to else []))  # --archive-to is the operator's too
    if fs.stat(directory).kind != "dir":
        raise UsageError("compact works on a chunk or segment directory", directory)
    hwm, source = read_hwm(before, checkpoint_meta, fs, checkpoints)
    if archive_to and os.path.abspath(archive_to) == os.path.abspath(directory):
        raise UsageError("--archive-to must be another directory", archive_to)
    planner = plan_segments if _is_segment_dir(directory, fs) else plan
    try:
        removals, stop = planner(directory, hwm, fs, False)
    except NotClean as e:  # it read the directory: compact's own document says what stopped it
        nothing = CompactReport(directory, hwm, source, False, archive_to, (), None, ())
        raise examined(e, nothing.to_json(), getattr(e, "findings", ()))
    refuse_links(directory, [r.file for r in removals], fs, what="move")
    if not apply:
        return CompactReport(directory, hwm, source, False, archive_to, tuple(removals), stop, ())
    with DirectoryLock(directory, holder_text("compact"), fs):
        removals, stop = planner(directory, hwm, fs, True)  # again, under the lock: the directory may have moved on
        refuse_links(directory, [r.file for r in removals], fs, what="move")
        evidence = []
        if archive_to:
            _refuse_archive_conflicts(directory, archive_to, removals, fs)
        if archive_to and removals:
            durable.make_dir(archive_to, fs)
        now = utc_now()
        earlier = quarantine.read_manifest(directory, fs)[0]
        for r in removals:
            reason = f"sequences up to {r.last_sequence} are covered by {source}"
            if not archive_to:
                seqs = (r.first_sequence, r.last_sequence)
                evidence.append(quarantine.move_in_recorded(
                    directory, r.file, action="compact", reason=reason, now=now, version=__version__,
                    manifest=earlier, fs=fs,
                    before_move=lambda to, f=r.file, s=seqs: ledger.record_moved(directory, f, to, "compact", now,
                                                                                fs, s)))
                continue
            src = os.path.join(directory, r.file)
            sha = quarantine.sha256_file(src, fs)
            dst = os.path.join(archive_to, r.file)
            entry = quarantine.entry(now, "compact-archive", r.file, 0, r.size, sha, dst, reason, __version__)
            # The line goes first: a crash can leave a line for a chunk still there (the next run moves it
            # and says so again), never a chunk gone from the WAL that nobody recorded.
            quarantine.record(directory, entry, fs)
            ledger.record_moved(directory, r.file, dst, "archive", now, fs, (r.first_sequence, r.last_sequence))
            if fs.exists(dst):
                durable.remove(src, fs)  # archived (identical bytes) by an earlier run that crashed before removing it
            else:
                durable.move_across(src, dst, fs)
            evidence.append(entry)
    return CompactReport(directory, hwm, source, True, archive_to, tuple(removals), stop, tuple(evidence))


def _is_segment_dir(directory: str, fs) -> bool:
    """ADR-003 segments and no V2 chunks (a directory holding both is judged as the chunk directory it
    also is, as verify does)."""
    from ...format.names import parse_segment_name

    names = [e.name for e in fs.listdir(directory)]
    return (any(parse_segment_name(n) is not None for n in names)
            and not any(parse_chunk_name(n) is not None for n in names))
