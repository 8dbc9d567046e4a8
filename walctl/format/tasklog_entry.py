"""Tiffany ADR-0006 task-log entries: one `\\n`-terminated JSON object per line. Pure.

`parse_line` decodes and checks one line (the fields each entry type requires, their types; docs/format.md
section 9); `encode_entry` writes one as the writer does. The log as a whole (order rules, the folded
TaskState) is format/tasklog.py's.
"""
from __future__ import annotations

import json
import re
from typing import NamedTuple

from .fields import shown
from .jsonload import JSON_WHITESPACE, MAX_DEPTH, NotText, TooDeep, check_depth, check_text

TYPES = ("InstructionStart", "LLMPlan", "StepStart", "ToolResult", "PatchPreview", "Commit", "TaskComplete",
         "ShutdownMarker")
# RFC 3339 UTC date-time, ASCII digits only (a `\d` would take any Unicode digit); each month's length, and
# 29 February in leap years only, are in the regex itself: no calendar call per line
_TS = re.compile(r"(?:[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|"
                 r"(?:0[13578]|1[02])-31)|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
                 r"-02-29)T(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\.[0-9]+)?Z")
_SHA = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]").search
SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]").search  # one scan of a whole log (fold)


def ts_instant(ts: str) -> str:
    """A valid `ts` as a key that orders by instant: the fixed-width seconds followed by the fraction's
    digits without trailing zeros (`00Z` == `00.000Z` < `00.5Z`; comparing the ts strings themselves would
    put `.` before `Z`). The seconds part is fixed width, so comparing keys compares (seconds, fraction)."""
    return ts[:19] if ts[19] == "Z" else ts[:19] + ts[20:-1].rstrip("0")


CORRUPT, SEQUENCE, UNSUPPORTED, ANOMALY = 3, 4, 5, 0
KEY_ORDER = ("v", "ts", "type", "task_id")


class Problem(NamedTuple):
    code: int  # CORRUPT | SEQUENCE | UNSUPPORTED | ANOMALY
    kind: str  # corrupt-line | rule | sequence | unsupported-version | ts-backwards
    line: int | None
    offset: int | None
    end: int | None
    reason: str


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


# One decoder for every line: json.loads(..., parse_constant=...) would build a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _decode(text: str, escapes: bool = True):
    """json.loads semantics (surrounding JSON whitespace allowed, nothing else after the value), without
    its two whitespace scans on the common line that has none; nesting bounded as every walctl JSON reader
    bounds it (format/jsonload.py); a lone surrogate escape is not text (spec: strict UTF-8)."""
    # check_depth's pre-check, inline: a line cannot nest deeper than its length, nor than its brackets
    if len(text) > MAX_DEPTH and text.count("[") + text.count("{") > MAX_DEPTH:
        check_depth(text)
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        value = _DECODER.decode(text)  # leading whitespace, or the error message json.loads would give
    else:
        if end != len(text) and text[end:].strip(JSON_WHITESPACE):  # not str.isspace: no U+00A0, no \f
            value = _DECODER.decode(text)
    # rare: only then walk the value for an unpaired one (`escapes` False: the caller scanned the whole log)
    if escapes and _SURROGATE_ESCAPE(text) is not None:
        check_text(value)
    return value


def parse_line(raw: bytes, task_id: str, escapes: bool = True) -> tuple[dict | None, int, str | None]:
    """(entry, problem code, problem). A valid entry has problem None. `escapes=False` when the caller knows
    the line holds no surrogate escape (fold scans the whole log once)."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, CORRUPT, f"not UTF-8 ({e.reason} at byte {e.start})"
    try:
        e = _decode(text, escapes)
    except ValueError as err:
        if isinstance(err, (TooDeep, NotText)):
            return None, CORRUPT, str(err)
        return None, CORRUPT, "blank line" if not text.strip() else f"not JSON: {err}"
    if not isinstance(e, dict):
        return None, CORRUPT, f"a JSON {type(e).__name__}, not an object"
    v = e.get("v")
    if type(v) is not int:
        return None, CORRUPT, "v is not the integer 1"
    if v != 1:
        return None, UNSUPPORTED, f"entry version {v} (walctl reads v 1)"
    problem = _check_fields(e, task_id)
    return (None, CORRUPT, problem) if problem else (e, 0, None)


def _check_fields(e: dict, task_id: str) -> str | None:
    get = e.get
    ts = get("ts")
    if ts.__class__ is not str or not _TS.fullmatch(ts):
        return "ts is not an RFC 3339 date-time YYYY-MM-DDTHH:MM:SS[.fraction]Z"
    kind = get("type")
    check = _CHECKS.get(kind) if kind.__class__ is str else None
    if check is None:
        return f"unknown type {shown(kind)}"
    if get("task_id") != task_id:
        return f"task_id {shown(get('task_id'))} is not the file's {shown(task_id)}"
    seq = get("seq")
    if seq is not None and (seq.__class__ is not int or seq < 0):
        return "seq is not a non-negative integer"
    return check(get)


def _need(get, kind, key, ok, what) -> str | None:
    value = get(key)
    if value is None:
        return f"{kind} without {key}"
    return None if ok(value) else f"{kind}.{key} is not {what}"


def _is_str(v) -> bool:
    return v.__class__ is str


def _is_int(v) -> bool:
    return v.__class__ is int


def _is_bool(v) -> bool:
    return v.__class__ is bool


def _steps_ok(v) -> bool:
    return isinstance(v, list) and len(v) >= 1 and all(
        isinstance(s, dict) and type(s.get("index")) is int and s["index"] == i and isinstance(s.get("description"), str)
        for i, s in enumerate(v))


def _sha_ok(v) -> bool:
    return v.__class__ is str and bool(_SHA.fullmatch(v))


# Required fields per type with their JSON types (docs/format.md section 9). Each type has a fast check (one
# boolean expression on the common, valid entry) and falls back to _first_problem for the message.
_REQUIRED = {
    "InstructionStart": (("instruction", _is_str, "a string"),),
    "LLMPlan": (("steps", _steps_ok, "a non-empty list of {index == position, description}"),),
    "StepStart": (("step_index", _is_int, "an integer"),),
    "ToolResult": (("step_index", _is_int, "an integer"), ("tool", _is_str, "a string"),
                   ("success", _is_bool, "a boolean")),
    "PatchPreview": (("step_index", _is_int, "an integer"), ("diff", _is_str, "a string")),
    "Commit": (("step_index", _is_int, "an integer"), ("sha", _sha_ok, "40 or 64 hex digits"),
               ("message", _is_str, "a string")),
    "TaskComplete": (("success", _is_bool, "a boolean"),),
    "ShutdownMarker": (),
}


# Optional fields the fold reads, typed when present (null is absent).
_OPTIONAL = {
    "InstructionStart": (("base_sha", _is_str, "a string"),),
}


def _first_problem(get, kind: str) -> str | None:
    for key, ok, what in _REQUIRED[kind]:
        problem = _need(get, kind, key, ok, what)
        if problem:
            return problem
    for key, ok, what in _OPTIONAL.get(kind, ()):
        if get(key) is not None and not ok(get(key)):
            return f"{kind}.{key} is not {what}"
    if kind == "ToolResult" and get("success") is False and get("error").__class__ is not str:
        return "a failed ToolResult without error"
    files = get("files")
    if kind == "PatchPreview" and files is not None and not (
            isinstance(files, dict) and all(isinstance(v, str) for v in files.values())):
        return "PatchPreview.files is not an object of strings"
    return None


def _c_instruction(get):
    base = get("base_sha")
    return None if get("instruction").__class__ is str and (base is None or base.__class__ is str) else \
        _first_problem(get, "InstructionStart")


def _c_plan(get):
    return None if _steps_ok(get("steps")) else _first_problem(get, "LLMPlan")


def _c_step_start(get):
    return None if get("step_index").__class__ is int else _first_problem(get, "StepStart")


def _c_tool_result(get):
    ok = get("success")
    if get("step_index").__class__ is int and get("tool").__class__ is str and ok.__class__ is bool and (
            ok or get("error").__class__ is str):
        return None
    return _first_problem(get, "ToolResult")


def _c_patch(get):
    if get("step_index").__class__ is int and get("diff").__class__ is str and get("files") is None:
        return None
    return _first_problem(get, "PatchPreview")


def _c_commit(get):
    sha = get("sha")
    if get("step_index").__class__ is int and get("message").__class__ is str and sha.__class__ is str and (
            _SHA.fullmatch(sha)):
        return None
    return _first_problem(get, "Commit")


def _c_complete(get):
    return None if get("success").__class__ is bool else _first_problem(get, "TaskComplete")


def _c_shutdown(get):
    return None


_CHECKS = {"InstructionStart": _c_instruction, "LLMPlan": _c_plan, "StepStart": _c_step_start,
           "ToolResult": _c_tool_result, "PatchPreview": _c_patch, "Commit": _c_commit,
           "TaskComplete": _c_complete, "ShutdownMarker": _c_shutdown}
assert tuple(_CHECKS) == TYPES


def encode_entry(entry: dict) -> bytes:
    """One line as the writer writes it: v, ts, type, task_id first, compact, non-ASCII kept."""
    ordered = {k: entry[k] for k in KEY_ORDER if k in entry}
    ordered.update((k, v) for k, v in entry.items() if k not in ordered)
    return (json.dumps(ordered, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
