"""recover: the newest checkpoint that fully verifies, plus replay of the log after its wal_sequence.

Rules (docs/format.md, "Recovery"): candidates in latest order, failures listed as fallbacks; the first
replayed entry must be W + 1 (a gap is an error unless the operator allows stopping at W); a gap or
corruption among the replayed entries is an error with no partial state; findings wholly at or below W
are warnings; a torn tail is ignored and counted. With no valid checkpoint a log contiguous from 1 is
replayed onto the empty state, no log at all is a fresh start, anything else is its own outcome.
"""
from __future__ import annotations

import time
from typing import NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_OK, EXIT_SEQUENCE, EXIT_TORN, NotClean, UsageError
from ...format.checkpoint import DEFAULT_MAX_STATE_BYTES
from ...format.v2 import type_name
from ...store.fs import DEFAULT_FS
from .checkpoint import latest
from .. import classes as K
from ..findings import Finding
from ..kinds import KINDS
from ..report import PathReport
from .reducers import AUTO, REDUCERS, Skip, empty_for, load_reducer, pick_reducer, reduce_adr003, reduce_spector  # noqa: F401
from ..wal.verify import detect_kind
from ..wal.seek import with_index
from .. import judge as J

OUTCOME_CHECKPOINT = "checkpoint+replay"
OUTCOME_FROM_EMPTY = "replayed-from-empty"
OUTCOME_FRESH = "fresh-start"
OUTCOME_HISTORY_LOST = "history-lost"  # no valid checkpoint, and the log is not contiguous from 1
OUTCOME_STOPPED_AT_CHECKPOINT = "checkpoint-only:gap-after-it-allowed"
# A complete state reached after passing over a checkpoint file that did not verify (ADR-003 Scenario 3):
# exit 0, but distinct from the outcomes above, so that automation sees it (3 under --strict).
OUTCOME_FALLBACK = "recovered-with-fallback"
OUTCOME_FAILED = "failed"  # nothing was recovered (the report of a NotClean: what was tried)


# ---- the log ------------------------------------------------------------------------------------

def read_log(log: str, after: int, fs=DEFAULT_FS, progress=None) -> tuple[list[dict], PathReport, int, str]:
    """(entries with sequence > after, in order; the log's report; duplicates skipped; kind). `progress`
    is called with each V2 chunk's size once it is read."""
    kind = detect_kind(log, fs)
    entry = KINDS[kind]
    if entry.events is None:
        raise UsageError(f"{log} is not a log (Spector V2 chunks or ADR-003 segments)")
    out, report, duplicates = entry.load("events")(log, after, fs, progress)
    return out, report, duplicates, kind


def segment_events(log: str, after: int, fs=DEFAULT_FS, progress=None) -> tuple[list[dict], PathReport, int]:
    """ADR-003 entries after a sequence, as their maps (KINDS: events); duplicates are counted."""
    from ..wal.segments import SegmentWalk

    walk = SegmentWalk(log, fs, progress=progress, seek_from=after + 1)
    out = [e.value for _, e in walk if e.sequence > after]
    return out, with_index(walk.report, walk.seek), walk.duplicates


def v2_events(log: str, after: int, fs=DEFAULT_FS, progress=None) -> tuple[list[dict], PathReport, int]:
    """Spector V2 records after a sequence, as event maps (KINDS: events)."""
    from ..wal.records import Record, RecordWalk

    out: list[dict] = []
    rwalk = RecordWalk(log, fs=fs, progress=progress, set_aside=True, seek_from=after + 1)
    for r in rwalk:
        if isinstance(r, Record) and r.sequence > after:
            out.append({"sequence": r.sequence, "type": type_name(r.type_ordinal) or r.type_ordinal,
                        "type_ordinal": r.type_ordinal, "memory_id": r.memory_id_text,
                        "timestamp_ms": r.timestamp_ms, "payload": r.payload})
    return out, with_index(rwalk.report, rwalk.seek), 0


def set_aside_warnings(report: PathReport) -> list[str]:
    """What was read from `.quarantine/` in place of chunks the log lacks (v2_events reads them)."""
    from ..wal.salvage_sources import is_set_aside

    return [f"read {c.file} (set aside in .quarantine/) in place of the chunk the log lacks: {c.records} entries, "
            f"sequences {c.first_sequence}..{c.last_sequence}" for c in report.chunks
            if is_set_aside(c.file) and c.first_sequence is not None]


def is_empty_log_dir(log: str, fs=DEFAULT_FS) -> bool:
    """An existing directory holding nothing but walctl's own bookkeeping (its lock file, .quarantine/,
    leftover *.tmp files): "no log at all" (spec step 2), not an unknown artifact."""
    from ...store.chunkdir import QUARANTINE_DIR, TMP_SUFFIX
    from ...store.lock import LOCK_NAME

    if fs.stat(log).kind != "dir":
        return False
    return all(e.name in (QUARANTINE_DIR, LOCK_NAME) or e.name.endswith(TMP_SUFFIX) for e in fs.listdir(log))


def _position(f: Finding) -> int | None:
    """The first sequence a finding affects, when it can be told."""
    if f.lost_sequence_range:
        return f.lost_sequence_range[0]
    if f.sequence_range:
        return f.sequence_range[0]
    if f.last_good_sequence is not None:
        return f.last_good_sequence + 1
    return None


# ---- recovery -----------------------------------------------------------------------------------

class RecoverReport(NamedTuple):
    state: dict
    outcome: str
    exit_code: int
    checkpoint: dict | None
    fallbacks: tuple[dict, ...]
    rejected: tuple[dict, ...]
    entries_replayed: int
    skipped: tuple[dict, ...]  # entries the reducer did not apply, with why
    duplicates: int
    torn_bytes_ignored: int
    final_sequence: int
    warnings: tuple[str, ...]
    seconds: dict
    checkpoints: str | None = None  # the checkpoint directory (where the passed-over files are)
    findings: tuple[Finding, ...] = ()  # the log's findings that stopped a failed recovery
    error: str | None = None  # why it failed (outcome "failed"); None when it recovered
    log: str | None = None  # the log replayed (for the next steps)

    def to_json(self) -> dict:
        d = self._asdict()
        d.pop("state")
        d.pop("checkpoints")
        d.pop("log")
        d["skipped_count"] = len(self.skipped)
        d["skipped"] = list(self.skipped[:100])
        d["passed_over"] = self.passed_over()
        d["findings"] = [f.to_json() for f in self.findings]
        d["next_steps"] = [s.to_json() for s in self.next_steps()]
        return d

    def next_steps(self) -> list:
        from ..advice import after_recover

        return after_recover(self)

    def passed_over(self) -> list[dict]:
        """Every checkpoint file recovery did not use although it was there (ADR-003 Scenario 3), with why."""
        import os

        where = self.checkpoints or ""
        return [{"path": os.path.join(where, f["file"]), "file": f["file"], "as": what,
                 "why": f"step {f['step']}: {f['reason']}"}
                for what, group in (("fallback", self.fallbacks), ("rejected", self.rejected)) for f in group]


def recover(checkpoints: str | None, log: str | None, *, reducer: str = AUTO, allow_gap: bool = False,
            max_state_bytes: int = DEFAULT_MAX_STATE_BYTES, fs=DEFAULT_FS, progress=None,
            strict: bool = False, until: int | None = None) -> RecoverReport:
    """The state, and how it was reached. `until`: the state at that sequence (walctl fingerprint --to):
    the newest checkpoint at or below it, the log's entries up to it; damage after it does not matter. A recovery that passed over a checkpoint file wrote a complete
    state all the same: its outcome is `recovered-with-fallback` (exit 0; 3 when `strict`, as verify
    --strict alerts on any anomaly). A failure raises NotClean carrying the report of what was tried
    (`examined`: outcome `failed`, the checkpoint used, fallbacks, rejected files, the log's findings)."""
    t0 = time.perf_counter()
    no_log = log is None or not fs.exists(log) or is_empty_log_dir(log, fs)
    reducer = pick_reducer(reducer, None if no_log else log, fs)
    fold = load_reducer(reducer)
    found = latest(checkpoints, max_state_bytes=max_state_bytes, fs=fs, at_most=until) if checkpoints else None
    t1 = time.perf_counter()
    fallbacks = _failures(found.fallbacks if found else ())
    rejected = _failures(found.rejected if found else ())
    base = found.report if found else None
    warnings: list[str] = [f"checkpoint {f['file']} passed over: step {f['step']}: {f['reason']}" for f in fallbacks]
    # A path that is not there is a fresh start (a new agent has neither yet), but a mistyped path must
    # not pass for one silently.
    warnings += [f"{what} {p} does not exist: treated as empty" for what, p in (("checkpoint directory", checkpoints),
                                                                              ("log", log)) if p and not fs.exists(p)]
    state, w, used = _start(base, reducer)
    tried = RecoverReport(state, OUTCOME_FAILED, EXIT_OK, used, fallbacks, rejected, 0, (), 0, 0, w, (), {},
                          checkpoints, log=log)
    try:
        rep = _recover(tried, base, log, no_log, fold, allow_gap, warnings, fs, progress, (t0, t1), until)
    except NotClean as e:
        e.examined = tried._replace(exit_code=e.exit_code, warnings=tuple(warnings), error=e.reason,
                                    findings=getattr(e, "findings", ()), seconds=_secs(t0, t1, time.perf_counter())
                                    ).to_json()
        raise
    if rep.outcome in (OUTCOME_CHECKPOINT, OUTCOME_FROM_EMPTY, OUTCOME_FRESH) and (fallbacks or rejected):
        rep = rep._replace(outcome=OUTCOME_FALLBACK, exit_code=EXIT_CORRUPT if strict else rep.exit_code)
    return rep


def _recover(tried: RecoverReport, base, log, no_log, fold, allow_gap, warnings, fs, progress, times, until=None):
    t0, t1 = times
    state, w, used, fallbacks, rejected = tried.state, tried.final_sequence, tried.checkpoint, tried.fallbacks, \
        tried.rejected
    if no_log:
        if base is None and (fallbacks or rejected):
            raise NotClean("no checkpoint verifies and there is no log to replay", tried.checkpoints,
                           code=EXIT_CORRUPT)
        if log is not None and fs.exists(log):
            warnings.append(f"log {log} holds no log files: treated as no log")
        return tried._replace(outcome=OUTCOME_CHECKPOINT if base else OUTCOME_FRESH, warnings=tuple(warnings),
                              seconds=_secs(t0, t1, time.perf_counter()))
    entries, report, dups, _ = read_log(log, w, fs, progress)
    if until is not None:
        entries = [e for e in entries if e["sequence"] <= until]
    t_read = time.perf_counter()
    torn, history_gap = _judge_log(report, log, w, base is not None, warnings, until)
    if dups:
        warnings.append(f"{dups} duplicate entries (a sequence repeated with the same checksum) were skipped")
    if base is None:
        if (entries and entries[0]["sequence"] != 1) or history_gap is not None:
            # Spec step 2: the empty state, as its own outcome. Exit 4 (3 when checkpoints were there but
            # none verifies: corruption comes first); the CLI writes that state only with --allow-gap.
            code = EXIT_CORRUPT if (fallbacks or rejected) else EXIT_SEQUENCE
            why = (f"the log starts at sequence {entries[0]['sequence']}, not 1" if entries and entries[0]["sequence"] != 1
                   else f"the log is not contiguous from 1: {history_gap.cls}: {history_gap.one_line()}")
            warnings.append(f"history lost: no valid checkpoint, and {why}: nothing can be replayed onto the empty "
                            "state")
            return tried._replace(outcome=OUTCOME_HISTORY_LOST, exit_code=code, duplicates=dups,
                                  torn_bytes_ignored=torn, final_sequence=0, warnings=tuple(warnings),
                                  findings=(history_gap,) if history_gap else (),
                                  seconds=_secs(t0, t1, time.perf_counter(), t_read))
        outcome = OUTCOME_FROM_EMPTY if entries else OUTCOME_FRESH
    else:
        outcome = OUTCOME_CHECKPOINT
        if entries and not J.continues(w, entries[0]["sequence"]):
            gap = (w + 1, entries[0]["sequence"] - 1)
            if not allow_gap:
                err = NotClean(f"sequence gap after the checkpoint: {gap[0]}..{gap[1]} missing (use --allow-gap to "
                               f"stop at the checkpoint's sequence {w})", log, code=EXIT_SEQUENCE)
                err.findings = tuple(f for f in report.findings if f.exit_code == EXIT_SEQUENCE)
                raise err
            warnings.append(f"sequences {gap[0]}..{gap[1]} are missing after the checkpoint: stopped at {w}")
            entries = []
            outcome = OUTCOME_STOPPED_AT_CHECKPOINT
        if not entries and report.last_sequence is not None and report.last_sequence < w:
            warnings.append(f"the log ends at sequence {report.last_sequence}, below the checkpoint's {w}")
    state, final, skipped = _fold(fold, state, entries, w)
    if skipped:
        warnings.append(f"{len(skipped)} entries were not applied by the reducer (listed as skipped)")
    t2 = time.perf_counter()
    # Spec step 5: entries replayed include those the reducer skipped (unknown operations), not duplicates.
    return tried._replace(state=state, outcome=outcome, entries_replayed=len(entries), skipped=tuple(skipped),
                          duplicates=dups, torn_bytes_ignored=torn, final_sequence=final, warnings=tuple(warnings),
                          seconds=_secs(t0, t1, t2, t_read))


def _start(base, reducer: str) -> tuple[dict, int, dict | None]:
    """(state, its sequence, the checkpoint used) to replay onto: the checkpoint's, else the empty state."""
    if base is None:
        return empty_for(reducer), 0, None
    w = base.header.wal_sequence
    return base.checked.state, w, {"file": base.file, "checkpoint_id": base.header.id_text, "wal_sequence": w,
                                   "timestamp": base.header.timestamp}


def _failures(reports) -> tuple[dict, ...]:
    """Checkpoints passed over or rejected: file, the step that failed, why."""
    return tuple({"file": r.file, "step": r.checked.failure.step, "reason": r.checked.failure.reason}
                 for r in reports)


def _judge_log(report: PathReport, log: str, w: int, has_checkpoint: bool, warnings: list[str],
               until: int | None = None):
    """(torn bytes, the first finding that breaks "contiguous from 1" when there is no checkpoint) from the
    log's findings; damage after the checkpoint's sequence `w` refuses the recovery (NotClean)."""
    warnings.extend(set_aside_warnings(report))
    torn = 0
    history_gap = None
    for f in report.findings:
        if f.exit_code == EXIT_TORN:
            torn += (f.end_offset or 0) - (f.offset or 0)
            continue
        if f.exit_code == EXIT_OK:
            if f.cls != K.FOREIGN_FILE:  # duplicates and anomalies: said, as verify says them
                warnings.append(f"{f.cls}: {f.one_line()}")
            continue
        if f.cls == K.SEQUENCE_GAP and f.sequence_range and f.sequence_range[0] <= w + 1 <= f.sequence_range[1] + 1:
            continue  # the gap right after the checkpoint: the first-entry rule decides (--allow-gap)
        pos = _position(f)
        if pos is not None and pos <= w:
            warnings.append(f"at or below the checkpoint's sequence {w}: {f.cls}: {f.one_line()}")
            continue
        if until is not None and pos is not None and pos > until:
            warnings.append(f"after sequence {until} (not folded): {f.cls}: {f.one_line()}")
            continue
        if not has_checkpoint and f.exit_code == EXIT_SEQUENCE:
            history_gap = history_gap or f  # step 2: not contiguous from 1 (a separate outcome)
            continue
        err = NotClean(f"the log is damaged after sequence {w}, nothing was recovered: {f.cls}: {f.one_line()}",
                       log, code=f.exit_code)
        err.findings = (f,)
        raise err
    return torn, history_gap


def _fold(fold, state: dict, entries: list[dict], w: int) -> tuple[dict, int, list[dict]]:
    """(the state with every entry folded in, the last sequence, the entries the reducer skipped)."""
    skipped = []
    final = w
    for e in entries:
        try:
            result = fold(state, e)
            state = state if result is None else result
        except Skip as why:
            skipped.append({"sequence": e["sequence"], "reason": str(why)})
        final = e["sequence"]
    state["wal_sequence"] = final
    return state, final, skipped


def _secs(t0, t1, t2, t_read=None) -> dict:
    """checkpoint: find, verify and decode it; read_log: read and check every entry after it; replay:
    fold them into the state (the ADR's "WAL replay"); total."""
    t_read = t1 if t_read is None else t_read
    return {"checkpoint": round(t1 - t0, 6), "read_log": round(t_read - t1, 6), "replay": round(t2 - t_read, 6),
            "total": round(t2 - t0, 6)}


def fold_log(log: str, *, reducer: str = AUTO, fs=DEFAULT_FS, progress=None) -> RecoverReport:
    """The state from replaying a whole log onto the empty state (checkpoint create --log)."""
    return recover(None, log, reducer=reducer, fs=fs, progress=progress)

