"""tasklog verify | inspect | resume | replay | append over one `<task_id>.wal` or a directory of them.

Read-only except resume --apply (cuts a torn tail after keeping it in .quarantine/) and append (one write +
fsync per entry, a new file's directory synced too); both hold the directory's walctl lock.
"""
from __future__ import annotations

import os
import time
from typing import NamedTuple

from ...version import __version__
from ...errors import (
    EXIT_OK, EXIT_TORN, NotClean, Refused, UnsupportedInput, UsageError, combine_exit_codes,
)
from ...format import tasklog as tl
from ...format import tasklog_entry as te
from ...store import durable, quarantine
from ...store.fs import DEFAULT_FS
from ...store.lock import DirectoryLock, holder_text
from ..clock import utc_now
from .. import classes as K
from ..findings import Finding

SUFFIX = ".wal"


def task_id_of(path: str) -> str:
    """The task id of a log to create (append): a name that is not `<task_id>.wal` is a usage error."""
    name = os.path.basename(path)
    if not name.endswith(SUFFIX):
        raise UsageError(f"a task log is named <task_id>{SUFFIX}", path)
    return name[:-len(SUFFIX)]


def _existing_task_id(path: str, fs) -> str:
    """The task id of an existing log to read: a directory is the wrong argument (2); a file not named
    `<task_id>.wal` is not a known format (5, as verify says of it)."""
    if fs.stat(path).kind == "dir":
        raise UsageError(f"a directory: give one task log <task_id>{SUFFIX}", path)
    name = os.path.basename(path)
    if not name.endswith(SUFFIX):
        raise UnsupportedInput(f"not a task log (a task log is named <task_id>{SUFFIX})", path)
    return name[:-len(SUFFIX)]


class TaskReport(NamedTuple):
    path: str
    task_id: str
    read: tl.LogRead
    strict: bool

    @property
    def findings(self) -> tuple[Finding, ...]:
        out = []
        for p in self.read.problems:
            code = K.strict_code(p.kind, self.strict, p.code)
            out.append(Finding(p.kind, code, f"line {p.line}: {p.reason}", os.path.basename(self.path), p.offset,
                               p.end, extra={"line": p.line}))
        if self.read.torn:
            off, n = self.read.torn
            out.append(Finding(K.TAIL_DAMAGE, EXIT_TORN, f"{n} bytes after the last newline: a torn last line "
                               "(never folded)", os.path.basename(self.path), off, off + n,
                               tail_kind="incomplete", torn=True))
        return tuple(out)

    @property
    def exit_code(self) -> int:
        return combine_exit_codes(f.exit_code for f in self.findings)

    def state_json(self) -> dict:
        s = self.read.state
        return {"task_id": self.task_id, "status": self.read.status, "instruction": s.instruction,
                "plan": s.plan, "last_started_step_index": s.last_started,
                "last_confirmed_step_index": s.last_confirmed, "resume_step_index": s.resume_step_index(),
                "in_flight_step_index": s.in_flight_step_index, "last_git_sha": s.last_sha,
                "canvas_snapshot": s.canvas_snapshot(),
                "tool_results": {str(k): v for k, v in sorted(s.tool_results.items())},
                "complete": s.complete, "clean_shutdown": s.clean_shutdown, "valid_entries": s.valid_entries,
                "lines": self.read.lines, "torn_bytes": self.read.torn[1] if self.read.torn else 0}

    def to_json(self) -> dict:
        return {"path": self.path, "exit_code": self.exit_code, "state": self.state_json(),
                "findings": [f.to_json() for f in self.findings]}


def read_task(path: str, *, strict: bool = False, fs=DEFAULT_FS, timeline: bool = False,
              until: int | None = None, until_ms: int | None = None) -> TaskReport:
    """`until`: stop after this line; `until_ms`: before the first entry stamped after this time."""
    tid = _existing_task_id(path, fs)
    instant = None if until_ms is None else _instant_key(until_ms)
    with fs.map_read(path) as buf:
        read = tl.read_log(buf, tid, timeline=timeline, until=until, until_instant=instant)
    return TaskReport(path, tid, read, strict)


def task_files(path: str, fs=DEFAULT_FS) -> list[str]:
    """The logs of PATH (a log, or a directory of them); a directory holding none is unsupported (5), never
    an empty clean result."""
    if fs.stat(path).kind == "dir":
        found = sorted(e.path for e in fs.listdir(path) if e.name.endswith(SUFFIX) and e.kind == "file")
        if not found:
            raise UnsupportedInput(f"no task logs (<task_id>{SUFFIX}) here", path)
        return found
    return [path]


def read_all(path: str, *, strict: bool = False, fs=DEFAULT_FS) -> list[TaskReport]:
    return [read_task(p, strict=strict, fs=fs) for p in task_files(path, fs)]


class Resumed(NamedTuple):
    report: TaskReport
    applied: bool
    cut: dict | None  # the manifest entry of the torn tail kept as evidence
    message: str


def resume(path: str, *, apply: bool = False, force: bool = False, fs=DEFAULT_FS) -> Resumed:
    fs = fs.beneath(os.path.dirname(os.path.abspath(path)))
    if not apply:
        return _resume(path, False, force, fs)
    from ...store.contain import refuse_links

    refuse_links(os.path.dirname(os.path.abspath(path)), [os.path.basename(path)], fs, what="repair")  # before the lock
    # the plan is read under the lock too: what is cut is what was judged torn
    with DirectoryLock(os.path.dirname(path) or ".", holder_text("tasklog resume"), fs):
        return _resume(path, True, force, fs)


def _resume(path: str, apply: bool, force: bool, fs) -> Resumed:
    rep = read_task(path, fs=fs)
    errors = [f for f in rep.findings if f.exit_code not in (EXIT_OK, EXIT_TORN)]
    if errors and not force:
        raise NotClean(f"the log does not validate ({errors[0].one_line()}); fix it or pass --force", path,
                       code=combine_exit_codes(f.exit_code for f in errors))
    cut = None
    if rep.read.torn and apply:
        off, n = rep.read.torn
        directory = os.path.dirname(path) or "."
        from ...store.contain import refuse_links

        refuse_links(directory, [os.path.basename(path)], fs, what="repair")
        data = fs.read_range(path, off, n)
        cut = quarantine.keep_bytes(directory, os.path.basename(path), off, data, action="truncate",
                                    reason="torn last line of a task log", now=utc_now(), version=__version__, fs=fs)
        durable.truncate(path, off, fs)
        rep = read_task(path, fs=fs)
    status = rep.read.status
    if status in ("completed", "failed"):
        msg = f"nothing to resume: the task is {status}"
    else:
        msg = _resume_at(rep.read.state)
        if rep.read.torn and not apply:
            msg = f"dry run: would cut {rep.read.torn[1]} torn bytes (kept as evidence); {msg}"
    return Resumed(rep, apply and cut is not None, cut, msg)


def _resume_at(state: tl.TaskState) -> str:
    """What the runtime does next, in words (never "step None")."""
    step = state.resume_step_index()
    if step is not None:
        return f"resume at step {step}"
    if not state.plan:
        return "resume before planning: the log has no plan yet"
    return f"every step of the plan ({len(state.plan)}) is committed: resume by completing the task"


def append(path: str, entries: list[dict], *, force: bool = False, fs=DEFAULT_FS, now=None) -> list[dict]:
    fs = fs.beneath(os.path.dirname(os.path.abspath(path)))
    """Validates each entry (v, ts and task_id filled in when absent) as a line would be read, checks that
    the log still follows the rules with it, then writes it with one write and one fsync."""
    tid = task_id_of(path)
    directory = os.path.dirname(path) or "."
    durable.make_dir(directory, fs)
    with DirectoryLock(directory, holder_text("tasklog append"), fs):
        return _append(path, tid, entries, force, fs, now)


def _append(path: str, tid: str, entries: list[dict], force: bool, fs, now) -> list[dict]:
    if fs.exists(path):
        with fs.map_read(path) as buf:
            read, folder = tl.fold(buf, tid)
        if read.torn:
            from ..advice import cmd

            raise Refused(f"the log ends in a torn line: run `{cmd('tasklog', 'resume', path, '--apply')}` first "
                          f"(an append would be glued to it)", path)
        number, offset = read.lines, fs.stat(path).size
    else:
        folder, number, offset = tl.Folder(), 0, 0
    # all or nothing: every entry is validated (as a line would be read, then against the rules with the
    # entries before it) before any byte is written; then one write and one fsync for all of them
    lines, written = [], []
    for i, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            raise UsageError(f"entry {i} is not a JSON object; nothing was written", path)
        e = {"v": 1, "ts": now() if now else _now_ts(), "task_id": tid, **entry}
        try:
            line = te.encode_entry(e)
        except ValueError as err:  # NaN/Infinity, a lone surrogate: not JSON text
            raise UsageError(f"entry {i} is not JSON text ({err}); nothing was written", path) from None
        parsed, _, problem = te.parse_line(line[:-1], tid)
        if problem:
            raise UsageError(f"entry {i}: {problem}; nothing was written", path)
        known = len(folder.problems)
        number += 1
        folder.apply((number, offset, offset + len(line)), parsed)
        new = [p for p in folder.problems[known:] if p.code != te.ANOMALY]
        if new and not force:
            raise Refused(f"entry {i} breaks a rule: {new[0].reason} (--force writes it anyway); nothing was "
                          "written", path)
        offset += len(line)
        lines.append(line)
        written.append(e)
    if lines:
        durable.append(path, b"".join(lines), fs)
    return written


def _now_ts() -> str:
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1e6) % 1_000_000:06d}Z"


def _instant_key(ms: int) -> str:
    """Epoch milliseconds as a ts_instant key (seconds, then the fraction's digits without trailing zeros)."""
    secs, frac = divmod(ms, 1000)
    if secs < 0:
        return "0"  # before every ts
    if secs >= 253402300800:  # 10000-01-01: after every ts
        return "A"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f"{frac:03d}".rstrip("0")
