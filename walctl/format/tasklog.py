"""Tiffany ADR-0006 per-task logs: `<task_id>.wal`, one JSON object per `\\n`-terminated line. Pure.

`read_log` splits, validates and folds a whole log into a TaskState plus findings; the rules and the
state are those of docs/format.md section 9. Findings are plain tuples here; ops/ turns them into the
walctl Finding type.
"""
from __future__ import annotations

import json
import re
from typing import NamedTuple

TYPES = ("InstructionStart", "LLMPlan", "StepStart", "ToolResult", "PatchPreview", "Commit", "TaskComplete",
         "ShutdownMarker")
STEP_TYPES = ("StepStart", "ToolResult", "PatchPreview", "Commit")
_TS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z")
_SHA = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")
CORRUPT, SEQUENCE, UNSUPPORTED, ANOMALY = 3, 4, 5, 0
KEY_ORDER = ("v", "ts", "type", "task_id")


class Line(NamedTuple):
    number: int  # from 1, over \n-terminated lines
    offset: int
    end: int  # after the \n
    raw: bytes  # without the \n


class Problem(NamedTuple):
    code: int  # CORRUPT | SEQUENCE | UNSUPPORTED | ANOMALY
    kind: str  # corrupt-line | rule | sequence | unsupported-version | ts-backwards
    line: int | None
    offset: int | None
    end: int | None
    reason: str


def split_lines(buf) -> tuple[list[Line], tuple[int, int] | None]:
    """(\\n-terminated lines, torn tail as (offset, length) or None). The tail after the last \\n is never a
    line, even when it is a whole JSON object: the writer had not finished it."""
    data = bytes(buf)
    lines, pos, n = [], 0, 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        n += 1
        lines.append(Line(n, pos, nl + 1, data[pos:nl]))
        pos = nl + 1
    torn = (pos, len(data) - pos) if pos < len(data) else None
    return lines, torn


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def parse_line(raw: bytes, task_id: str) -> tuple[dict | None, int, str | None]:
    """(entry, problem code, problem). A valid entry has problem None."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    if not raw.strip():
        return None, CORRUPT, "blank line"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, CORRUPT, f"not UTF-8 ({e.reason} at byte {e.start})"
    try:
        e = json.loads(text, parse_constant=_reject_constant)
    except ValueError as err:
        return None, CORRUPT, f"not JSON: {err}"
    if not isinstance(e, dict):
        return None, CORRUPT, f"a JSON {type(e).__name__}, not an object"
    v = e.get("v")
    if type(v) is not int:
        return None, CORRUPT, "v is not the integer 1"
    if v != 1:
        return None, UNSUPPORTED, f"entry version {v} (walctl reads v 1)"
    problem = _check_fields(e, task_id)
    return (None, CORRUPT, problem) if problem else (e, 0, None)


def _present(e: dict, key: str) -> bool:
    return e.get(key) is not None  # JSON null in an optional field means absent


def _check_fields(e: dict, task_id: str) -> str | None:
    ts = e.get("ts")
    if not isinstance(ts, str) or not _TS.fullmatch(ts):
        return "ts is not YYYY-MM-DDTHH:MM:SS[.fraction]Z"
    kind = e.get("type")
    if kind not in TYPES:
        return f"unknown type {kind!r}"
    if e.get("task_id") != task_id:
        return f"task_id {e.get('task_id')!r} is not the file's {task_id!r}"
    if _present(e, "seq") and (type(e["seq"]) is not int or e["seq"] < 0):
        return "seq is not a non-negative integer"
    need = _REQUIRED[kind]
    for key, check, what in need:
        if key not in e or e[key] is None:
            return f"{kind} without {key}"
        if not check(e[key]):
            return f"{kind}.{key} is not {what}"
    if kind == "ToolResult" and e["success"] is False and not isinstance(e.get("error"), str):
        return "a failed ToolResult without error"
    if kind == "PatchPreview" and _present(e, "files") and not (
            isinstance(e["files"], dict) and all(isinstance(v, str) for v in e["files"].values())):
        return "PatchPreview.files is not an object of strings"
    return None


def _is_int(v) -> bool:
    return type(v) is int


def _steps_ok(v) -> bool:
    return isinstance(v, list) and len(v) >= 1 and all(
        isinstance(s, dict) and type(s.get("index")) is int and s["index"] == i and isinstance(s.get("description"), str)
        for i, s in enumerate(v))


_STR = (lambda v: isinstance(v, str), "a string")
_REQUIRED = {
    "InstructionStart": (("instruction", *_STR),),
    "LLMPlan": (("steps", _steps_ok, "a non-empty list of {index == position, description}"),),
    "StepStart": (("step_index", _is_int, "an integer"),),
    "ToolResult": (("step_index", _is_int, "an integer"), ("tool", *_STR),
                   ("success", lambda v: type(v) is bool, "a boolean")),
    "PatchPreview": (("step_index", _is_int, "an integer"), ("diff", *_STR)),
    "Commit": (("step_index", _is_int, "an integer"), ("sha", lambda v: isinstance(v, str) and bool(_SHA.fullmatch(v)),
                                                       "40 or 64 hex digits"), ("message", *_STR)),
    "TaskComplete": (("success", lambda v: type(v) is bool, "a boolean"),),
    "ShutdownMarker": (),
}


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

    def _rule(self, line: Line, reason: str, code: int = CORRUPT, kind: str = "rule"):
        self.problems.append(Problem(code, kind, line.number, line.offset, line.end, reason))

    def apply(self, line: Line, e: dict) -> None:
        kind = e["type"]
        self.count += 1
        # ordering rules (each reports on its own; the entry is still folded as written)
        if self.count == 1 and kind != "InstructionStart":
            self._rule(line, f"the first entry is {kind}, not InstructionStart")
        if kind == "InstructionStart":
            self.instruction_seen += 1
            if self.count > 1:
                self._rule(line, "a second InstructionStart" if self.instruction_seen > 1 else
                           "InstructionStart is not the first entry")
        if self.after_complete and kind != "ShutdownMarker":
            self._rule(line, f"{kind} after TaskComplete (only ShutdownMarker may follow)")
        if kind in STEP_TYPES and self.plan is None:
            self._rule(line, f"{kind} before any LLMPlan")
        idx = e.get("step_index")
        if kind == "StepStart" and self.plan is not None:
            if not 0 <= idx < len(self.plan):
                self._rule(line, f"StepStart {idx} is outside the plan's {len(self.plan)} steps")
            floor = (self.last_confirmed if self.last_confirmed is not None else -1) + 1
            if idx < floor:
                self._rule(line, f"StepStart {idx} goes back before the next unconfirmed step {floor}")
        if kind in ("ToolResult", "PatchPreview", "Commit") and self.plan is not None and idx != self.last_started:
            self._rule(line, f"{kind} for step {idx}, but the latest StepStart is {self.last_started}")
        if kind == "Commit" and self.commit_floor is not None and idx < self.commit_floor:
            self._rule(line, f"Commit index {idx} is below an earlier Commit's {self.commit_floor}")
        seq = e.get("seq")
        if seq is not None:
            prev = self.prev_seq_entry
            expected = 0 if prev is None else prev + 1
            if (prev is None and self.count == 1 and seq != 0) or (prev is not None and seq != expected):
                self._rule(line, f"seq {seq}, expected {expected}", SEQUENCE, "sequence")
            self.prev_seq_entry = seq
        ts = e["ts"]
        if self.prev_ts is not None and ts < self.prev_ts:  # same format: string order is time order
            self._rule(line, f"ts {ts} is before the previous entry's {self.prev_ts}", ANOMALY, "ts-backwards")
        self.prev_ts = ts
        # the fold
        if kind == "InstructionStart":
            self.instruction = e["instruction"]
            if e.get("base_sha") is not None:
                self.last_sha = e["base_sha"]
        elif kind == "LLMPlan":  # a re-plan resets progress, keeps results, sha and instruction
            self.plan = e["steps"]
            self.last_started = self.last_confirmed = self.commit_floor = self.in_flight = self.canvas = None
        elif kind == "StepStart":
            self.last_started = idx
            self.in_flight = idx
        elif kind == "ToolResult":
            self.tool_results.setdefault(idx, []).append(
                {k: e.get(k) for k in ("tool", "success", "output", "error") if e.get(k) is not None})
        elif kind == "PatchPreview":
            self.canvas = {k: e[k] for k in ("step_index", "diff", "files", "base_sha") if e.get(k) is not None}
        elif kind == "Commit":
            self.last_confirmed = idx if self.last_confirmed is None else max(self.last_confirmed, idx)
            self.commit_floor = idx if self.commit_floor is None else max(self.commit_floor, idx)
            self.last_sha = e["sha"]
            self.canvas = None
            self.in_flight = None
        elif kind == "TaskComplete":
            self.complete = e["success"]
            self.after_complete = True
            if e.get("final_sha") is not None:
                self.last_sha = e["final_sha"]
        self.last_type = kind

    def state(self) -> TaskState:
        return TaskState(self.instruction, self.plan, self.last_started, self.last_confirmed, self.last_sha,
                         self.canvas, self.tool_results, self.complete, self.last_type == "ShutdownMarker",
                         self.in_flight, self.count)


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


def read_log(buf, task_id: str, *, timeline: bool = False, until: int | None = None) -> LogRead:
    """The whole log (or its lines up to `until`) folded; `timeline` keeps the state after each entry."""
    return fold(buf, task_id, timeline=timeline, until=until)[0]


def fold(buf, task_id: str, *, timeline: bool = False, until: int | None = None) -> tuple[LogRead, Folder]:
    """read_log, and the Folder itself so that a writer can check further entries against the rules."""
    lines, torn = split_lines(buf)
    folder = Folder()
    states = [] if timeline else None
    for line in lines:
        if until is not None and line.number > until:
            break
        e, code, problem = parse_line(line.raw, task_id)
        if problem is not None:
            folder.problems.append(Problem(code, "unsupported-version" if code == UNSUPPORTED else "corrupt-line",
                                           line.number, line.offset, line.end, problem))
            continue
        folder.apply(line, e)
        if states is not None:
            states.append((line.number, e["type"], folder.state()))
    read = LogRead(folder.state(), tuple(folder.problems), torn if until is None else None, len(lines),
                   tuple(states) if states is not None else None)
    return read, folder


def encode_entry(entry: dict) -> bytes:
    """One line as the writer writes it: v, ts, type, task_id first, compact, non-ASCII kept."""
    ordered = {k: entry[k] for k in KEY_ORDER if k in entry}
    ordered.update((k, v) for k, v in entry.items() if k not in ordered)
    return (json.dumps(ordered, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
