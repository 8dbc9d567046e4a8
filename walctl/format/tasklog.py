"""Tiffany ADR-0006 per-task logs: `<task_id>.wal`, one JSON object per `\\n`-terminated line. Pure.

`read_log` splits a whole log into lines, has format/tasklog_entry.py decode and check each one, and folds
the valid entries into a TaskState plus findings; the rules and the state are those of docs/format.md
section 9. Findings are plain tuples here; ops/ turns them into the walctl Finding type.
"""
from __future__ import annotations

import io
from typing import NamedTuple

from .lines import tail_at
from .tasklog_entry import (ANOMALY, CORRUPT, SEQUENCE, SURROGATE_ESCAPE_BYTES, UNSUPPORTED, Problem, parse_line,
                            ts_instant)

# The spec (jsonl-logs.md) calls every byte after the last newline torn, NUL-filled tails included: a line
# holds whole files (PatchPreview), so no length tells a torn append from damage.
MAX_LINE_BYTES = None


class TaskState(NamedTuple):
    instruction: str | None
    plan: list | None
    last_started: int | None
    last_confirmed: int | None
    last_sha: str | None
    canvas: dict | None
    tool_results: dict
    complete: bool | None  # TaskComplete.success of the last TaskComplete, None without one
    clean_shutdown: bool
    in_flight_step_index: int | None
    valid_entries: int

    def resume_step_index(self) -> int | None:
        if not self.plan:
            return None
        nxt = (self.last_confirmed if self.last_confirmed is not None else -1) + 1
        return nxt if nxt < len(self.plan) else None

    def canvas_snapshot(self) -> dict | None:
        c = self.canvas
        if c is None:
            return None
        recoverable = c.get("files") is not None or (c.get("base_sha") is not None and c.get("base_sha") == self.last_sha)
        return dict(c, recoverable=recoverable)


class Folder:
    """Applies valid entries in order: the TaskState and the rule findings."""

    def __init__(self):
        self.problems: list[Problem] = []
        self.instruction = None
        self.instruction_seen = 0
        self.plan = None
        self.last_started = None
        self.last_confirmed = None
        self.commit_floor = None  # highest Commit index since the latest plan
        self.in_flight = None
        self.last_sha = None
        self.canvas = None
        self.tool_results: dict = {}
        self.complete = None
        self.after_complete = False
        self.last_type = None
        self.prev_seq_entry = None
        self.prev_ts = None
        self.count = 0

    def _rule(self, loc, reason: str, code: int = CORRUPT, kind: str = "rule"):
        self.problems.append(Problem(code, kind, loc[0], loc[1], loc[2], reason))

    def apply(self, loc: tuple[int, int, int], e: dict) -> None:
        """loc: (line number, offset, end offset) of the entry's line."""
        kind = e["type"]
        self.count += 1
        # ordering rules (each reports on its own; the entry is still folded as written)
        if self.count == 1 and kind != "InstructionStart":
            self._rule(loc, f"the first entry is {kind}, not InstructionStart")
        if self.after_complete and kind != "ShutdownMarker":
            self._rule(loc, f"{kind} after TaskComplete (only ShutdownMarker may follow)")
        seq = e.get("seq")
        if seq is not None:
            prev = self.prev_seq_entry
            expected = 0 if prev is None else prev + 1
            if seq != expected:  # the first entry that has a seq starts at 0, wherever it is
                self._rule(loc, f"seq {seq}, expected {expected}", SEQUENCE, "sequence")
            self.prev_seq_entry = seq
        ts = e["ts"]
        prev = self.prev_ts
        # compared as instants: two ts of one length compare as strings (both without a fraction, or both
        # with fractions of one length); otherwise by ts_instant
        if prev is not None and (ts < prev if len(ts) == len(prev) else ts_instant(ts) < ts_instant(prev)):
            self._rule(loc, f"ts {ts} is before the previous entry's {prev}", ANOMALY, "ts-backwards")
        self.prev_ts = ts
        _HANDLERS[kind](self, loc, e)
        self.last_type = kind

    def _step_entry(self, loc, e, kind) -> int:
        idx = e["step_index"]
        if self.plan is None:
            self._rule(loc, f"{kind} before any LLMPlan")
        elif kind != "StepStart" and idx != self.last_started:
            latest = "none" if self.last_started is None else self.last_started
            self._rule(loc, f"{kind} for step {idx}, but the latest StepStart is {latest}")
        return idx

    def _instruction(self, loc, e):
        self.instruction_seen += 1
        if self.count > 1:
            self._rule(loc, "a second InstructionStart" if self.instruction_seen > 1 else
                       "InstructionStart is not the first entry")
        self.instruction = e["instruction"]
        if e.get("base_sha") is not None:
            self.last_sha = e["base_sha"]

    def _plan(self, loc, e):  # a re-plan resets progress, keeps results, sha and instruction
        self.plan = e["steps"]
        self.last_started = self.last_confirmed = self.commit_floor = self.in_flight = self.canvas = None

    def _step_start(self, loc, e):
        idx = self._step_entry(loc, e, "StepStart")
        if self.plan is not None:
            if not 0 <= idx < len(self.plan):
                self._rule(loc, f"StepStart {idx} is outside the plan's {len(self.plan)} steps")
            floor = (self.last_confirmed if self.last_confirmed is not None else -1) + 1
            if idx < floor:
                self._rule(loc, f"StepStart {idx} goes back before the next unconfirmed step {floor}")
        self.last_started = self.in_flight = idx

    def _tool_result(self, loc, e):
        idx = self._step_entry(loc, e, "ToolResult")
        self.tool_results.setdefault(idx, []).append(
            {k: e[k] for k in ("tool", "success", "output", "error") if e.get(k) is not None})

    def _patch(self, loc, e):
        self._step_entry(loc, e, "PatchPreview")
        self.canvas = {k: e[k] for k in ("step_index", "diff", "files", "base_sha") if e.get(k) is not None}

    def _commit(self, loc, e):
        idx = self._step_entry(loc, e, "Commit")
        if self.commit_floor is not None and idx < self.commit_floor:
            self._rule(loc, f"Commit index {idx} is below an earlier Commit's {self.commit_floor}")
        self.last_confirmed = idx if self.last_confirmed is None else max(self.last_confirmed, idx)
        self.commit_floor = idx if self.commit_floor is None else max(self.commit_floor, idx)
        self.last_sha = e["sha"]
        self.canvas = self.in_flight = None

    def _complete(self, loc, e):
        self.complete = e["success"]
        self.after_complete = True
        if e.get("final_sha") is not None:
            self.last_sha = e["final_sha"]

    def _shutdown(self, loc, e):
        pass

    def state(self) -> TaskState:
        return TaskState(self.instruction, self.plan, self.last_started, self.last_confirmed, self.last_sha,
                         self.canvas, self.tool_results, self.complete, self.last_type == "ShutdownMarker",
                         self.in_flight, self.count)


_HANDLERS = {"InstructionStart": Folder._instruction, "LLMPlan": Folder._plan, "StepStart": Folder._step_start,
             "ToolResult": Folder._tool_result, "PatchPreview": Folder._patch, "Commit": Folder._commit,
             "TaskComplete": Folder._complete, "ShutdownMarker": Folder._shutdown}


class LogRead(NamedTuple):
    state: TaskState
    problems: tuple[Problem, ...]
    torn: tuple[int, int] | None  # (offset, length)
    lines: int
    states: tuple | None  # the state after each valid entry (replay), when asked for

    @property
    def status(self) -> str:
        if any(p.code != ANOMALY for p in self.problems):
            return "invalid"
        s = self.state
        if s.valid_entries == 0:
            return "empty"
        if s.complete is not None:
            return "completed" if s.complete else "failed"
        return "stopped_clean" if s.clean_shutdown else "interrupted"


def read_log(buf, task_id: str, *, timeline: bool = False, until: int | None = None,
             until_instant: str | None = None) -> LogRead:
    """The whole log (or its lines up to line `until`, or up to the first entry stamped after
    `until_instant`, a ts_instant key) folded; `timeline` keeps the state after each entry."""
    return fold(buf, task_id, timeline=timeline, until=until, until_instant=until_instant)[0]


def fold(buf, task_id: str, *, timeline: bool = False, until: int | None = None,
         until_instant: str | None = None) -> tuple[LogRead, Folder]:
    """read_log, and the Folder itself so that a writer can check further entries against the rules."""
    # readline (C speed) over an mmap or a BytesIO: no copy of the whole log, no list of all its lines
    reader = buf if hasattr(buf, "readline") and hasattr(buf, "seek") else io.BytesIO(bytes(buf))
    reader.seek(0)
    readline = reader.readline
    try:  # one C-speed scan of the whole log: most logs hold no surrogate escape, and no line is checked
        escapes = SURROGATE_ESCAPE_BYTES(buf) is not None
    except TypeError:  # not a buffer (a file object): each line is checked
        escapes = True
    torn = None
    folder = Folder()
    states = [] if timeline else None
    problems = folder.problems
    offset = number = 0
    while True:
        line = readline()
        if not line:
            break
        if line[-1:] != b"\n":  # what follows the last \n: the tail (format/lines.py), never folded
            tail = tail_at(offset, len(line), MAX_LINE_BYTES)
            torn = (tail.offset, tail.length)
            break
        if until is not None and number >= until:
            break
        number += 1
        raw = line[:-1]
        end = offset + len(line)
        e, code, problem = parse_line(raw, task_id, escapes)
        if until_instant is not None and problem is None and ts_instant(e["ts"]) > until_instant:
            number -= 1  # the first entry after the time ends the fold, unread
            break
        if problem is not None:
            problems.append(Problem(code, "unsupported-version" if code == UNSUPPORTED else "corrupt-line",
                                    number, offset, end, problem))
        else:
            folder.apply((number, offset, end), e)
            if states is not None:
                states.append((number, e["type"], folder.state()))
        offset = end
    read = LogRead(folder.state(), tuple(problems), torn if until is None and until_instant is None else None, number,
                   tuple(states) if states is not None else None)
    return read, folder
