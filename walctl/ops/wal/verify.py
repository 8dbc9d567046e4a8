"""verify: is a V2 WAL intact, and if not, exactly what is damaged, where, and what is still readable.

Read-only. Chunks are scanned one by one (or by --jobs worker processes); the per-chunk results are
then stitched in directory order, which is where torn-vs-corrupt and sequence continuity are decided.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable

from ...errors import (
    EXIT_ENVIRONMENT, EXIT_OK, EXIT_TORN, EXIT_UNSUPPORTED, REASON_IO,
    EnvironmentProblem, UnsupportedInput, WalctlError, combine_exit_codes,
)
from ...format.names import LEDGER_DIR, QUARANTINE_DIR, parse_chunk_name
from ...format import scan as fscan
from ...format.scan import ChunkScan, Run
from ...format.v2 import FILE_MAGIC
from ...store.chunkdir import ChunkFile, list_chunks
from ...store.chunkread import ChunkOutcome
from ...store.fs import DEFAULT_FS
from .. import findings as F
from .. import judge as J
from ..advice import no_ledger
from .chunkscan import AUTO_JOBS_BYTES, auto_jobs, not_a_file, scan_chunks  # noqa: F401 - AUTO_JOBS_BYTES, not_a_file: re-exported
from ..classes import strict_code
from ..findings import Finding
from ..kinds import (
    KIND_CHECKPOINT, KIND_CHECKPOINTS, KIND_CHUNK, KIND_DIR, KIND_SEGMENT, KIND_SEGMENTS, KIND_SUBSTRAT, KIND_TASKLOG,
    KIND_TASKLOGS, KIND_WORKFLOWS, KINDS,
)
from ..report import VERDICTS, ChunkReport, PathReport, VerifyReport, file_row

if TYPE_CHECKING:
    from .coverage import Request

def verify_paths(paths, *, strict: bool = False, jobs: int | None = 1, fs=DEFAULT_FS,
                 progress: Callable[[int], None] | None = None, quick: bool = False,
                 cover: Request | None = None) -> VerifyReport:
    """jobs None: chosen per directory (one per core for large directories); an explicit number wins.
    `cover`: which sealed chunks to read (--subset, --resume, --max-duration: ops/wal/coverage.py)."""
    if cover is not None and cover.writes:  # refused before anything is checked, never half-way
        from .coverage import check_writable, has_state_home

        for p in paths:
            if fs.exists(p) and has_state_home(p, fs):
                check_writable(p, fs)
    return VerifyReport(tuple(verify_path(p, strict=strict, jobs=jobs, fs=fs, progress=progress, quick=quick,
                                          cover=cover) for p in paths), strict)


def detect_kind(path: str, fs=DEFAULT_FS) -> str:
    """What PATH is, from names and first bytes only; never a guess: unknown is unsupported."""
    from ...format.names import CHECKPOINT_MAGIC, CHECKPOINT_SUFFIX, parse_segment_name

    entry = fs.stat(path)
    if entry.kind == "dir":
        names = [e.name for e in fs.listdir(path)]
        if any(parse_chunk_name(n) is not None for n in names):
            return KIND_DIR
        if any(parse_segment_name(n) is not None for n in names):
            return KIND_SEGMENTS
        if any(n.endswith(CHECKPOINT_SUFFIX) for n in names):
            return KIND_CHECKPOINTS
        if any(n.endswith(".wal") for n in names):
            return KIND_TASKLOGS
        if "agents" in names and fs.stat(os.path.join(path, "agents")).kind == "dir":
            return KIND_SUBSTRAT
        if "workflow-checkpoints" in names:
            return KIND_WORKFLOWS
        from .ledger_check import remembered_kind  # (loaded only when nothing else is recognised)

        if (kind := remembered_kind(path, names, fs)) is not None:  # a log whose every file was set aside
            return kind
        raise UnsupportedInput("no known artifact here (Spector V2 chunks wal-NNNNNN.bin, ADR-003 segments "
                               "wal_NNNNNNNN.log, O_CKPT_V2 checkpoints *.ckpt)", path)
    if entry.kind != "file":
        raise UnsupportedInput("not a regular file or directory", path)
    head = fs.read_head(path, 16)
    if head[:4] == FILE_MAGIC:
        return KIND_CHUNK
    if head == CHECKPOINT_MAGIC or path.endswith(CHECKPOINT_SUFFIX):
        # By name too: a *.ckpt file shorter than its header (even empty) is a damaged checkpoint (step 1,
        # corruption), on every path, as it is inside a checkpoint directory; never "unknown format".
        return KIND_CHECKPOINT
    if parse_segment_name(os.path.basename(path)) is not None:
        return KIND_SEGMENT
    if path.endswith(".wal"):
        return KIND_TASKLOG
    if len(head) >= 4:
        raise UnsupportedInput(f"not a known format (starts {head[:8].hex()}; a Spector chunk starts "
                               f"{FILE_MAGIC.hex()} 'SPEC', a checkpoint 'O_CKPT_V2')", path)
    raise UnsupportedInput(f"{len(head)} bytes: too short to be any known format", path)


def verify_path(path: str, *, strict: bool = False, jobs: int | None = 1, fs=DEFAULT_FS,
                progress: Callable[[int], None] | None = None, lock_held_by_us: bool = False,
                quick: bool = False, cover: Request | None = None) -> PathReport:
    """`lock_held_by_us`: the caller holds the directory's lock itself (a writer opening, a repair), so
    an incomplete tail is not somebody else's append in flight. `quick`: trust sealed chunks whose size,
    inode and mtime are unchanged (ledger rule 3). `cover`: read only some sealed chunks (ops/wal/coverage.py);
    the report's `coverage` says which."""
    report = _verify_path(path, strict, jobs, fs, progress, lock_held_by_us, quick, cover)
    if cover is not None and report.coverage is None and report.kind is not None:
        from .coverage import full

        report = report._replace(coverage=full(cover, report))
    return report


def _verify_path(path, strict, jobs, fs, progress, lock_held_by_us, quick, cover) -> PathReport:
    try:
        kind = detect_kind(path, fs)
        entry = KINDS[kind]
        if entry.verify is not None:  # every other kind, by table (loaded only for them)
            return entry.load("verify")(path, kind, strict, fs, lock_held_by_us)
        chunks, foreign, kind, writer = resolve_chunks(path, fs)
        if lock_held_by_us:
            writer = None
    except WalctlError as e:
        extra = {"env_reason": e.kind} if e.exit_code == EXIT_ENVIRONMENT else {}  # not-found, locked...
        return PathReport(path, None, e.exit_code, None, (),
                          (Finding(F.UNSUPPORTED if e.exit_code == EXIT_UNSUPPORTED else F.UNREADABLE,
                                   e.exit_code, e.reason, file=e.path, extra=extra),))
    if KINDS[kind].is_dir and not any(fs.exists(os.path.join(path, n)) for n in EXPECTATION_FILES):
        # No ledger, no quarantine manifest, no checkpoint.meta: nothing expects anything of this directory
        # beyond what the scan sees, so the ledger rules have nothing to add unless a gap needs explaining
        # or a sequence is below 1 (then they run, on the same scan). Keeps cron's verify from loading them.
        outcomes = scan_chunks(chunks, jobs=auto_jobs(jobs, chunks, None), fs=fs, progress=progress)
        report = assemble(path, kind, chunks, outcomes, foreign, writer, strict)
        if not any(f.cls == F.SEQUENCE_GAP for f in report.findings) and \
                all(c.first_sequence is None or c.first_sequence >= 1 for c in report.chunks):
            return report._replace(ledger=no_ledger(path))
        from . import ledger_check

        view = ledger_check.load_view(path, fs)
    else:
        from . import ledger_check

        view = ledger_check.load_view(path, fs) if KINDS[kind].is_dir else None  # a V2 directory has a ledger
        expects = ledger_check.expects_for(chunks, view, quick) if view is not None else None
        if cover is not None and view is not None and view.ledger is not None:
            from .coverage import sample

            outcomes, sampled = sample(path, chunks, expects, cover, jobs, fs, progress)
        else:
            outcomes = scan_chunks(chunks, jobs=auto_jobs(jobs, chunks, expects), fs=fs, progress=progress,
                                   expects=expects)
        report = assemble(path, kind, chunks, outcomes, foreign, writer, strict)
    if view is None:
        return report
    seals, verified, trusted = ledger_check.seal_summary(outcomes, chunks)
    report = ledger_check.judge(report, view, seals, strict, fs)
    report = report._replace(ledger=dict(no_ledger(path) if view.ledger is None else {}, lines=len(
        view.ledger.lines) if view.ledger else 0, sealed=len(view.exp.sealed), verified_by_hash=verified,
        trusted_by_stat=trusted))
    if cover is None or view.ledger is None:
        return report
    from .coverage import finish

    return report._replace(coverage=finish(path, sampled, cover, report.exit_code, fs))



def require_recognised(report: PathReport) -> PathReport:
    """For a command that acts on what verify recognised (seal, compact, repair --accept-loss): nothing
    recognised at the path is verify's own answer, raised: unsupported (5), or the environment's reason
    (6) when it could not be read. Never an empty "clean" result or a usage error for it."""
    if report.kind is not None:
        return report
    f = report.findings[0]
    if report.exit_code == EXIT_ENVIRONMENT:
        raise EnvironmentProblem(f.reason, f.file or report.path, kind=f.extra.get("env_reason", REASON_IO))
    raise UnsupportedInput(f.reason, f.file or report.path)


EXPECTATION_FILES = (LEDGER_DIR, QUARANTINE_DIR, "checkpoint.meta")  # what can expect more than the scan sees


def resolve_chunks(path: str, fs=DEFAULT_FS):
    """(chunk files, foreign-file findings, kind, live writer) for a directory or a single chunk."""
    entry = fs.stat(path)
    if entry.kind == "dir":
        listing = list_chunks(path, fs)
        foreign = [Finding(F.FOREIGN_FILE, EXIT_OK, "not a chunk file; left alone", file=e.name)
                   for e in listing.foreign]
        if not listing.chunks:
            from .ledger_check import remembered_kind

            if remembered_kind(path, [LEDGER_DIR], fs) != KIND_DIR:
                raise _unsupported_dir(path)
        seen: dict[int, str] = {}
        for c in listing.chunks:
            if fs.is_symlink(c.path):
                foreign.append(Finding(F.LINKED_FILE, EXIT_OK, "a symbolic link: read through it; repair, compact "
                                       "and quarantine refuse to change it", file=c.name))
            if c.index in seen:
                foreign.append(Finding(F.DUPLICATE_INDEX, EXIT_OK,
                                       f"chunk index {c.index} also claimed by {seen[c.index]}", file=c.name))
            seen.setdefault(c.index, c.name)
        return listing.chunks, foreign, KIND_DIR, fs.probe_writer(path)
    if entry.kind != "file":
        raise UnsupportedInput("not a regular file or directory", path)
    head = fs.read_head(path, len(FILE_MAGIC))
    if head != FILE_MAGIC and len(head) == len(FILE_MAGIC):
        raise UnsupportedInput(f"not a Spector WAL chunk (starts {head.hex()}, expected {FILE_MAGIC.hex()} "
                               f"'SPEC')", path)
    index = parse_chunk_name(os.path.basename(path))
    chunk = ChunkFile(index if index is not None else 0, os.path.basename(path), path, entry.kind, entry.size)
    # A lone file is judged as the last chunk of its WAL; verify the directory for the rules that
    # need the chunks after it.
    return [chunk], [], KIND_CHUNK, None


def _unsupported_dir(path):
    return UnsupportedInput("no Spector V2 chunk files (wal-NNNNNN.bin) in this directory", path)


def assemble(path, kind, chunks, outcomes, foreign, writer, strict) -> PathReport:
    findings, chunk_codes = stitch(chunks, outcomes, writer, strict)
    findings = list(foreign) + findings
    reports = []
    for pos, (c, o) in enumerate(zip(chunks, outcomes)):
        reports.append(_chunk_report(c, o, combine_exit_codes(chunk_codes.get(pos, ()))))
    code = combine_exit_codes(f.exit_code for f in findings)
    return PathReport(path, kind, code, writer, tuple(reports), tuple(findings))


def _chunk_report(c: ChunkFile, o: ChunkOutcome, code: int) -> ChunkReport:
    s = o.scan
    if s is None:
        state = "unreadable" if o.error.exit_code == EXIT_ENVIRONMENT else "not-a-file"
        return file_row(c.name, c.index, c.size, state, code)
    damaged = sum(d.end - d.offset for d in s.damage)
    verdict = "header-only" if code == EXIT_OK and s.header_only else VERDICTS[code]
    if s.header == fscan.HEADER_SHORT and code == EXIT_TORN:
        damaged = s.size
    return ChunkReport(c.name, c.index, s.size, s.header, s.version, verdict, code, s.records,
                       s.first_seq, s.last_seq, s.valid_bytes, damaged, dict(s.anomaly_counts))


def stitch(chunks: list[ChunkFile], outcomes: list[ChunkOutcome], writer: str | None,
           strict: bool) -> tuple[list[Finding], dict[int, list[int]]]:
    """Renders the judge's verdicts on the per-chunk scans, fed in directory order, as findings (torn vs
    corrupt, exit codes, sequence continuity, lost sequences are all the judge's). Returns findings in
    file order and the exit codes per chunk."""
    entries = _entries(chunks, outcomes)
    out: list[Finding] = []
    codes: dict[int, list[int]] = {}
    prev_where: tuple[int, Run] | None = None
    for j in J.judge_all(entries, len(chunks) - 1, writer):
        f: Finding | None = None
        if type(j.item) is Run:
            if j.sequence_break:
                f = _sequence_finding(chunks, prev_where, j)
            prev_where = (j.pos, j.item)
        elif type(j.item) is J.Barrier:
            f = j.item.note if j.item.kind != J.SHORT else _short_chunk(chunks[j.pos], outcomes[j.pos].scan, j, writer)
            f = f if j.lost is None else _with_lost(f, j.lost)
        else:
            f = _damage_finding(chunks[j.pos], j, entries, j.pos == len(chunks) - 1, writer)
        if f is not None:
            out.append(f)
            codes.setdefault(j.pos, []).append(f.exit_code)
    for pos, (c, o) in enumerate(zip(chunks, outcomes)):
        if o.scan is not None and o.scan.anomaly_counts:
            for f in _anomaly_findings(c, o.scan, strict):
                out.append(f)
                codes.setdefault(pos, []).append(f.exit_code)
    out.sort(key=lambda f: (_file_pos(chunks, f.file), f.offset if f.offset is not None else 1 << 62))
    return out, codes


def _entries(chunks: list[ChunkFile], outcomes: list[ChunkOutcome]) -> list[tuple[int, object]]:
    """The judge's input: (chunk position, Run | Damage | Barrier) in directory order."""
    entries: list[tuple[int, object]] = []
    for pos, (c, o) in enumerate(zip(chunks, outcomes)):
        if o.scan is None:
            unreadable = o.error.exit_code == EXIT_ENVIRONMENT
            f = Finding(F.UNREADABLE if unreadable else F.UNSUPPORTED, o.error.exit_code, o.error.reason, file=c.name)
            entries.append((pos, J.Barrier(J.UNREADABLE if unreadable else J.UNSUPPORTED, note=f,
                                           code=o.error.exit_code)))
        elif o.scan.header == fscan.HEADER_OK:
            entries.extend((pos, item) for item in o.scan.items)
        elif o.scan.header == fscan.HEADER_SHORT:
            entries.append((pos, J.Barrier(J.SHORT)))  # torn or not, in progress or not: the judge's
        else:
            entries.append((pos, J.Barrier(J.UNSUPPORTED, note=_unsupported_chunk(c, o.scan))))
    return entries


def _file_pos(chunks, name):
    for i, c in enumerate(chunks):
        if c.name == name:
            return i
    return -1


def _with_lost(f: Finding, rng: tuple[int, int]) -> Finding:
    return f._replace(sequence_range=f.sequence_range or rng, lost_sequence_range=rng)


def _short_chunk(c: ChunkFile, s: ChunkScan, j: J.Judged, writer: str | None) -> Finding:
    reason = f"file is {s.size} bytes, shorter than the 8-byte chunk header"
    if j.live:
        return Finding(F.IN_PROGRESS, j.code, reason + " (a live writer is creating it)", file=c.name,
                       offset=0, end_offset=s.size, torn=True, extra={"writer": writer})
    if j.torn:
        return Finding(F.SHORT_CHUNK, j.code, reason + " (last chunk: torn while being created)",
                       file=c.name, offset=0, end_offset=s.size, torn=True)
    return Finding(F.SHORT_CHUNK, j.code, reason + " (not the last chunk: acknowledged data may be lost)",
                   file=c.name, offset=0, end_offset=s.size, torn=False)


def _unsupported_chunk(c: ChunkFile, s: ChunkScan) -> Finding:
    if s.header == fscan.HEADER_BAD_MAGIC:
        reason = f"not a Spector WAL chunk (file magic {s.magic.hex()}, expected {FILE_MAGIC.hex()} 'SPEC')"
        return Finding(F.UNSUPPORTED, EXIT_UNSUPPORTED, reason, file=c.name, offset=0, value_kind="magic",
                       stored=int.from_bytes(s.magic, "big"), computed=int.from_bytes(FILE_MAGIC, "big"))
    if s.header == fscan.HEADER_LEGACY:
        from ..advice import legacy_v1

        reason = f"legacy V1 chunk (file version 1, records without CRCs): unsupported for verify; {legacy_v1(c.path)}"
    else:
        reason = f"unsupported chunk version {s.version} (walctl reads version 2)"
    return Finding(F.UNSUPPORTED, EXIT_UNSUPPORTED, reason, file=c.name, offset=4, stored=s.version,
                   extra={"version": s.version}, value_kind="version")


def _sequence_finding(chunks, prev_where, j: J.Judged) -> Finding:
    ppos, prun = prev_where
    pos, run, prev_last = j.pos, j.item, j.last_before
    here = f"{chunks[pos].name}@{run.offset}"
    there = f"{chunks[ppos].name}@{prun.offset}"
    if j.gap is not None:
        a, b = j.gap
        reason = (f"sequence gap: {b - a + 1} missing ({a}..{b}) between seq {prev_last} (run from {there}) "
                  f"and seq {run.first_seq}")
        missing_idx = [i for i in range(chunks[ppos].index + 1, chunks[pos].index)
                       if all(c.index != i for c in chunks)]
        if missing_idx:
            reason += f"; chunk index {missing_idx[0]}..{missing_idx[-1]} absent"
        return Finding(F.SEQUENCE_GAP, j.code, reason, file=chunks[pos].name, offset=run.offset,
                       sequence_range=(a, b), missing=(a, b), previous_sequence=prev_last)
    a, b = run.first_seq, min(run.last_seq, prev_last)
    cls = F.SEQUENCE_REPEAT if run.first_seq == prev_last else F.SEQUENCE_REGRESSION
    reason = (f"sequence {'repeats' if cls == F.SEQUENCE_REPEAT else 'goes back'}: seq {run.first_seq} at {here} "
              f"after seq {prev_last}; {a}..{b} appear twice")
    return Finding(cls, j.code, reason, file=chunks[pos].name, offset=run.offset,
                   sequence_range=(a, b), repeated=(a, b), previous_sequence=prev_last)


def _damage_finding(c, j: J.Judged, entries, is_last, writer) -> Finding:
    d, k, lost_rng = j.item, j.index, j.lost
    shared = dict(field=d.field, claimed_sequence=d.sequence, last_good_sequence=j.last_before,
                  lost_sequence_range=lost_rng)
    if d.kind == fscan.UNDECODABLE:
        return Finding(F.UNDECODABLE_PAYLOAD, j.code,
                       f"CRC-valid compressed payload does not decode: {d.reason}", c.name, d.offset, d.end,
                       (d.sequence, d.sequence), **shared)
    if d.kind == fscan.MID_LOG:
        after = [item for p, item in entries[k + 1:] if p == entries[k][0] and isinstance(item, Run)]
        extra = dict(next_good_sequence=d.resync_sequence, salvageable_records=sum(r.count for r in after),
                     salvageable_sequence_range=[after[0].first_seq, after[-1].last_seq] if after else None)
        return Finding(F.MID_LOG_DAMAGE, j.code,
                       f"{d.reason}; intact records resume at offset {d.end}", c.name, d.offset, d.end,
                       lost_rng, d.stored, d.computed, extra, **shared)
    # Tail damage: the judge says whether it is torn, in progress, and its exit code (ops/judge.py).
    torn = j.torn
    shared.update(tail_kind=d.tail_kind, torn=torn)
    reason = f"{d.tail_kind} tail: {d.reason}"
    if j.live:
        return Finding(F.IN_PROGRESS, j.code, f"append in progress by a live writer ({writer}): {d.reason}",
                       c.name, d.offset, d.end, None, d.stored, d.computed, {"writer": writer}, **shared)
    if torn:
        if d.tail_kind == fscan.CHECKSUM:
            reason += " (a complete record fails its check: it may have been acknowledged; repair keeps it as evidence)"
        elif not is_last:
            reason += " (the next chunk continues the sequence: the writer restarted)"
        return Finding(F.TAIL_DAMAGE, j.code, reason, c.name, d.offset, d.end, lost_rng, d.stored,
                       d.computed, **shared)
    reason += " (in a closed chunk that the next chunk does not continue: acknowledged data is damaged)"
    return Finding(F.TAIL_DAMAGE, j.code, reason, c.name, d.offset, d.end, lost_rng, d.stored,
                   d.computed, **shared)


def _anomaly_findings(c: ChunkFile, s: ChunkScan, strict: bool) -> list[Finding]:
    code = strict_code(F.ANOMALY, strict)
    out = [Finding(F.ANOMALY, code, a.detail, c.name, a.offset, None, (a.sequence, a.sequence),
                   extra={"code": a.code}) for a in s.anomalies]
    shown = len(s.anomalies)
    total = sum(s.anomaly_counts.values())
    if total > shown:
        counts = ", ".join(f"{k} x{v}" for k, v in sorted(s.anomaly_counts.items()))
        out.append(Finding(F.ANOMALY, code, f"{total - shown} more anomalies not listed ({counts})", c.name,
                           extra={"code": "more", "counts": dict(s.anomaly_counts)}))
    return out
