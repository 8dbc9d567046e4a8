"""repair: cut torn tails, and nothing else.

A torn tail is damage at the very end that nothing intact follows (or that the next chunk continues):
the writer died mid-append and no acknowledged record lives in those bytes (a complete record that fails
its CRC may have been acknowledged: it is kept as evidence like every other cut byte). Mid-log damage,
corruption of closed chunks, gaps and foreign chunks are left exactly as they are; the plan says what to
do about them instead.

Order of a cut, each step durable: copy the bytes to .quarantine/ (fsync, rename, fsync dir), append the
manifest line (fsync), truncate the chunk (fsync). A crash anywhere leaves the tail uncut (run repair
again: the evidence is reused, not duplicated) or cut with its evidence kept.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...version import __version__
from ...errors import EXIT_OK, EXIT_TORN, REASON_LOCKED, EnvironmentProblem, Refused
from ...format.ledger import CUT, is_log_file_name
from ...store import ledger, quarantine, seqpoints
from ...store import durable
from ...store.fs import DEFAULT_FS
from ...store.oserror import require_dir
from ...store.contain import refuse_links
from ...store.lock import DirectoryLock, holder_text
from .. import findings as F
from ..classes import REPAIR_SET_ASIDE, REPAIR_TRUNCATE, row
from ..advice import cmd as _cmd
from ..clock import utc_now
from ..report import PathReport
from .verify import verify_path

DEFAULT_MAX_DROP_BYTES = 64 << 20  # a preallocated zero tail can be large; more than this needs a look


class Cut(NamedTuple):
    file: str
    offset: int
    end: int
    action: str  # "truncate" | "quarantine-chunk"
    reason: str

    @property
    def length(self) -> int:
        return self.end - self.offset

    def to_json(self) -> dict:
        return {"file": self.file, "action": self.action, "offset": self.offset, "end_offset": self.end,
                "length": self.length, "reason": self.reason}


class RepairReport(NamedTuple):
    path: str
    applied: bool
    cuts: tuple[Cut, ...]
    left_alone: tuple[F.Finding, ...]  # damage repair will not touch
    evidence: tuple[dict, ...]  # manifest entries written
    before: PathReport
    after: PathReport | None

    @property
    def drop_bytes(self) -> int:
        return sum(c.length for c in self.cuts)

    @property
    def exit_code(self) -> int:
        return (self.after or self.before).exit_code

    def next_steps(self) -> list:
        """What to do next (ops/advice.py: after_repair): the plan's apply step, then what repair leaves alone."""
        from ..advice import after_repair

        return after_repair(self)

    def advice(self) -> list[str]:
        return [s.text() for s in self.next_steps()]

    def to_json(self) -> dict:
        return {
            "path": self.path, "applied": self.applied, "exit_code": self.exit_code,
            "drop_bytes": self.drop_bytes, "cuts": [c.to_json() for c in self.cuts],
            "left_alone": [f.to_json() for f in self.left_alone], "evidence": list(self.evidence),
            "before": {"verdict": self.before.verdict, "exit_code": self.before.exit_code},
            "after": None if self.after is None else {"verdict": self.after.verdict,
                                                      "exit_code": self.after.exit_code},
            "advice": self.advice(),
            "next_steps": [s.to_json() for s in self.next_steps()],
        }


def plan_cuts(report: PathReport) -> tuple[list[Cut], list[F.Finding]]:
    cuts, left = [], []
    for f in report.findings:
        acts = row(f.cls).acts if f.exit_code == EXIT_TORN else ()
        if REPAIR_TRUNCATE in acts:
            cuts.append(Cut(f.file, f.offset, f.end_offset, "truncate", f.reason))
        elif REPAIR_SET_ASIDE in acts:
            cuts.append(Cut(f.file, 0, f.end_offset, "quarantine-chunk", f.reason))
        elif f.exit_code != EXIT_OK:
            left.append(f)
    return cuts, left


def repair(path: str, *, apply: bool = False, max_drop_bytes: int = DEFAULT_MAX_DROP_BYTES, fs=DEFAULT_FS,
           lock: DirectoryLock | None = None) -> RepairReport:
    """Dry run unless `apply`. `lock`: the caller already holds the directory's lock (a writer opening)."""
    fs = fs.beneath(path)
    require_dir(path, fs)  # a missing or wrong path is exit 6, never "nothing to cut"
    if lock is not None:
        return _repair(path, apply, max_drop_bytes, fs)
    if not apply:  # a dry run writes nothing, not even the lock file; it still refuses a live writer
        holder = fs.probe_writer(path)
        if holder:
            raise EnvironmentProblem(f"locked by a live writer ({holder}); --apply would be refused", path,
                                     kind=REASON_LOCKED)
        return _repair(path, False, max_drop_bytes, fs)
    # The plan first, without the lock: a repair refused by a bound or a link leaves even the lock file
    # as it found it.
    plan = _repair(path, False, max_drop_bytes, fs)
    if plan.before.kind is None:  # nothing recognised (verify's exit 5): nothing to do, not even the lock file
        return plan
    with DirectoryLock(path, holder_text("repair"), fs):
        return _repair(path, True, max_drop_bytes, fs)


def _repair(path, apply, max_drop_bytes, fs) -> RepairReport:
    before = verify_path(path, fs=fs, lock_held_by_us=True)
    cuts, left = plan_cuts(before)
    total = sum(c.length for c in cuts)
    if total > max_drop_bytes:
        raise Refused(f"repair would remove {total} bytes, more than --max-drop-bytes {max_drop_bytes}; "
                      f"nothing was changed (look at the bytes first: `{_cmd('inspect', path, '--damaged')}`)", path)
    refuse_links(path, [c.file for c in cuts], fs, what="repair")
    if not apply or not cuts:
        return RepairReport(path, False, tuple(cuts), tuple(left), (), before, None)
    evidence = []
    now = utc_now()
    for cut in cuts:
        chunk_path = os.path.join(path, cut.file)
        if cut.action == "truncate":
            data = fs.read_range(chunk_path, cut.offset, cut.length)
            if len(data) != cut.length:
                raise Refused(f"{cut.file} changed while repairing; nothing more was changed", path)
            kept = quarantine.keep_bytes(path, cut.file, cut.offset, data, action="truncate",
                                         reason=cut.reason, now=now, version=__version__, fs=fs)
            evidence.append(kept)
            if is_log_file_name(cut.file):
                last_kept = next((c.last_sequence for c in before.chunks if c.file == cut.file), None)
                ledger.record(path, CUT, now, fs, file=cut.file, offset=cut.offset, bytes=cut.length,
                              last_seq_kept=last_kept, evidence=kept["evidence"])
                seqpoints.forget(path, [cut.file], fs)
            durable.truncate(chunk_path, cut.offset, fs)
        else:
            evidence.append(quarantine.move_in_recorded(
                path, cut.file, action="quarantine-chunk", reason=cut.reason, now=now, version=__version__, fs=fs,
                before_move=lambda to, f=cut.file: ledger.record_moved(path, f, to, "quarantine", now, fs)))
    after = verify_path(path, fs=fs, lock_held_by_us=True)
    return RepairReport(path, True, tuple(cuts), tuple(left), tuple(evidence), before, after)
