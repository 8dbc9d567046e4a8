"""Sampled and resumable checks: which sealed chunks a verify run reads (--subset, --resume, --max-duration).

  slice:     every sealed chunk has a point on a circle, fixed by its name (format/verifyruns.py); `--subset
             K/N` reads the chunks in the K-th of N equal arcs, so K = 1..N read each chunk exactly once,
             and a chunk appended later lands in one arc without moving any other; `--subset P%` reads
             the arc of P% from where it starts (0, or where the last run stopped with --resume)
  always:    unsealed chunks (and sealed ones whose size no longer matches: their seal does not apply)
             are scanned on every run, first: only a seal lets a chunk's check wait for its turn
  not read:  a sealed chunk outside the run's arc is judged by its seal (what it held when sealed), as
             --quick's trusted chunks are; its absence or a changed size is still found (stat, no read)
  deadline:  --max-duration is asked before each sealed chunk is started, in point order, so a run stops
             at a chunk boundary and what it read is an arc [from, to): `to` is where --resume goes on
  state:     one line per run in `.walctl/verify.jsonl`, only with --resume or --max-duration and only in a
             directory with a ledger (nothing to sample elsewhere): the one thing verify ever writes. It is
             written after the check, so a killed run leaves nothing (its arc is read again) or a torn line
             (ignored, cut by the next append). Whether it can be written is tried before anything is
             checked (a clean refusal). Runs append without the directory's lock (a live writer may hold
             it; the writer never touches this file): two runs at once may lose one line, never more.
"""
from __future__ import annotations

import os
import time
from typing import NamedTuple

from ...errors import EnvironmentProblem, Refused, UsageError, WalctlError
from ...format import verifyruns as VR
from ...format.names import LEDGER_DIR
from ...store import ledger as SL
from ...store.chunkread import ChunkOutcome, sealed_scan
from ..clock import utc_now

SEAL_NOT_READ = "not-read"  # a sealed chunk outside this run's arc: its seal stands in, unread
STATE_FILE = f"{LEDGER_DIR}/{VR.RUNS_NAME}"


class Subset(NamedTuple):
    text: str  # as given: "2/5" or "10%"
    k: int  # slice K of N (0 for a percentage)
    n: int
    parts_per_million: int  # a percentage (0 for K/N)


def parse_subset(text: str, flag: str = "--subset") -> Subset:
    """K/N (1 <= K <= N) or P% (0 < P <= 100); anything else is a usage error."""
    t = text.strip()
    try:
        if t.endswith("%"):
            p = float(t[:-1])
            if not 0 < p <= 100:
                raise ValueError
            return Subset(t, 0, 0, max(1, round(p * 10_000)))
        k, n = (int(x) for x in t.split("/"))
        if not 1 <= k <= n <= 1_000_000:
            raise ValueError
        return Subset(t, k, n, 0)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected K/N (1 <= K <= N, e.g. 2/7) or a percentage (e.g. 10%)") from None


def arc(subset: Subset | None, start: int) -> tuple[int, int]:
    """[from, to) of the circle a run reads, starting at `start` (0, or the resume point)."""
    if subset is None:
        return start, VR.CIRCLE
    if subset.n:
        lo, hi = -(-(subset.k - 1) * VR.CIRCLE // subset.n), -(-subset.k * VR.CIRCLE // subset.n)
        return (start, hi) if lo <= start < hi else (lo, hi)
    return start, min(VR.CIRCLE, start + subset.parts_per_million * VR.CIRCLE // 1_000_000)


def in_slice(name: str, subset: Subset) -> bool:
    """For a store of objects (archive verify): whether this object's name falls in slice K/N (or in the
    first P% of the circle)."""
    lo, hi = arc(subset, 0)
    return lo <= VR.point(name) < hi


class Deadline:
    """--max-duration: passed once `seconds` have gone by on `clock` since it was made (tests pass a clock)."""

    def __init__(self, seconds: float, clock=time.monotonic):
        self.seconds, self.clock = seconds, clock
        self.t0 = clock()

    def passed(self) -> bool:
        return self.clock() - self.t0 >= self.seconds


class Request(NamedTuple):
    subset: Subset | None = None
    resume: bool = False
    deadline: Deadline | None = None

    @property
    def writes(self) -> bool:
        return self.resume or self.deadline is not None


class Plan(NamedTuple):
    lo: int
    hi: int
    resumed_at: int | None
    order: list  # positions to scan: the unsealed in directory order, then the arc's sealed by point
    sealed: list  # (point, position) of every sealed chunk, by point
    unsealed: list  # positions


def has_state_home(directory: str, fs) -> bool:
    return fs.stat(directory).kind == "dir" and SL.has_ledger(directory, fs)


def check_writable(directory: str, fs) -> None:
    """Before anything is checked: can this run's line be written? (A clean refusal, never half a run.)"""
    confined = fs.beneath(directory)  # no step through a link, no file with other hard links (store/fs.py)
    path = os.path.join(directory, STATE_FILE)
    try:
        confined.close(confined.open_append(path, create=True))
    except WalctlError as e:  # its own exit code (6: cannot, 7: walctl will not), with what to do instead
        why = (f"cannot write {STATE_FILE} ({e.reason}); --resume and --max-duration keep their place there: "
               f"run verify without them for a check that writes nothing")
        raise (EnvironmentProblem(why, directory, kind=e.kind) if isinstance(e, EnvironmentProblem)
               else Refused(why, directory)) from None


def plan(directory: str, chunks, expects, request: Request, fs) -> Plan:
    start = resumed_at = None
    if request.resume:
        start = resumed_at = VR.resume_point(SL.read_ledger(directory, fs, VR.RUNS_NAME, VR.check_run))
    lo, hi = arc(request.subset, start or 0)
    sealed = sorted((VR.point(c.name), i) for i, (c, e) in enumerate(zip(chunks, expects)) if e is not None)
    unsealed = [i for i, e in enumerate(expects) if e is None]
    return Plan(lo, hi, resumed_at, unsealed + [i for p, i in sealed if lo <= p < hi], sealed, unsealed)


def stopper(pl: Plan, request: Request):
    """stop(position) for the scan: only a sealed chunk waits for the deadline; the unsealed always run,
    and so does the arc's first sealed chunk (a deadline shorter than one chunk still moves --resume on)."""
    if request.deadline is None:
        return None
    unsealed = set(pl.unsealed)
    first = next((i for i in pl.order if i not in unsealed), None)
    return lambda pos: pos not in unsealed and pos != first and request.deadline.passed()


def fill(outcomes: list, chunks, expects) -> list:
    """Every chunk not read this run (outside the arc, or after the deadline) judged by its seal."""
    return [o if o is not None else ChunkOutcome(sealed_scan(e), None, (SEAL_NOT_READ, None))
            for o, c, e in zip(outcomes, chunks, expects)]


def sample(path: str, chunks, expects, request: Request, jobs, fs, progress):
    """The chunks this run reads, read: (an outcome for every chunk, what finish() needs)."""
    from .chunkscan import auto_jobs, scan_chunks

    pl = plan(path, chunks, expects, request, fs)
    read = scan_chunks(chunks, jobs=auto_jobs(jobs, chunks, expects, pl.order), fs=fs, progress=progress,
                       expects=expects, order=pl.order, stop=stopper(pl, request))
    return fill(read, chunks, expects), summary(pl, request, chunks, read)


def finish(path: str, sampled, request: Request, exit_code: int, fs) -> dict:
    """The report's coverage; with --resume or --max-duration, after this run's line is written."""
    cov, span = sampled
    if not request.writes:
        return cov
    try:
        return record(path, cov, span, exit_code, fs)
    except WalctlError as e:  # tried writable before the check; a full disk now loses the place, not the report
        return dict(cov, state_error=f"this run was not recorded in {STATE_FILE}: {e.reason}")


def full(request: Request, report) -> dict:
    """The coverage of a path read in full: nothing sealed to sample (no ledger, or another kind)."""
    return {"subset": request.subset.text if request.subset else None, "resumed_at": None, "window": None,
            "stopped": "complete", "complete": True, "circle_done": None, "sealed": 0, "sealed_checked": 0,
            "unsealed_checked": len(report.chunks), "not_checked": [],
            "bytes_checked": sum(c.size for c in report.chunks), "bytes_not_checked": 0, "state": None}


def summary(pl: Plan, request: Request, chunks, outcomes_read: list) -> tuple[dict, tuple[int, int]]:
    """What was and was not read, as the report says it (docs/json.md, verify's `coverage`)."""
    arc_sealed = [(p, i) for p, i in pl.sealed if pl.lo <= p < pl.hi]
    unread = [(p, i) for p, i in arc_sealed if outcomes_read[i] is None]
    to = unread[0][0] if unread else pl.hi
    read_sealed = [i for p, i in arc_sealed if outcomes_read[i] is not None]
    not_read = sorted(chunks[i].name for p, i in pl.sealed if outcomes_read[i] is None)
    checked = read_sealed + pl.unsealed
    return {"subset": request.subset.text if request.subset else None, "resumed_at": _frac(pl.resumed_at),
            "window": [_frac(pl.lo), _frac(to)], "stopped": "max-duration" if unread else "complete",
            "complete": not not_read, "circle_done": to >= VR.CIRCLE,
            "sealed": len(pl.sealed), "sealed_checked": len(read_sealed), "unsealed_checked": len(pl.unsealed),
            "not_checked": not_read, "bytes_checked": sum(chunks[i].size for i in checked),
            "bytes_not_checked": sum(chunks[i].size for p, i in pl.sealed if outcomes_read[i] is None),
            "state": None}, (pl.lo, to)


def _frac(p: int | None) -> float | None:
    return None if p is None else round(p / VR.CIRCLE, 6)


def record(directory: str, cov: dict, span: tuple[int, int], exit_code: int, fs) -> dict:
    """Appends this run's line to `.walctl/verify.jsonl`; the coverage, saying where it was written."""
    line = VR.encode_run(utc_now(), subset=cov["subset"], stopped=cov["stopped"], exit_code=exit_code,
                         sealed_checked=cov["sealed_checked"], unsealed_checked=cov["unsealed_checked"],
                         sealed_not_checked=len(cov["not_checked"]), bytes_checked=cov["bytes_checked"],
                         **{"from": span[0], "to": span[1]})
    SL.append_lines(directory, [line], fs.beneath(directory), VR.RUNS_NAME)
    return dict(cov, state=STATE_FILE)
