"""Substrat agent session roots: `<root>/agents/<session_id>/{session.json, events.jsonl, events.pending}`.

This module reads: it never changes anything and reads every byte safely (a bad line is a finding with its
offset, never a crash and never silently skipped), has `ops/agents_tree.py` build the agent tree, and
verifies both.
`ops/agents_mend.py` changes a root (recover, set-aside, Substrat's append protocol) from what it read.
"""
from __future__ import annotations

import base64
import os
import re
from typing import NamedTuple

from ..errors import EXIT_CORRUPT, EXIT_OK, EXIT_TORN, UnsupportedInput, combine_exit_codes
from ..format.fields import is_iso_time, shown
from ..format.jsonload import loads
from ..store import durable
from ..store.fs import DEFAULT_FS
from .agents_tree import Tree, build_tree
from .findings import Finding

STATES = ("created", "active", "suspended", "terminated")
_HEX32 = re.compile(r"[0-9a-f]{32}")


class Line(NamedTuple):
    number: int
    offset: int
    end: int
    event: dict | None
    problem: str | None


class Session(NamedTuple):
    session_id: str
    meta: dict | None  # session.json, when it parses
    problem: str | None  # why session.json is missing or wrong
    lines: tuple[Line, ...]  # events.jsonl, \n-terminated lines
    tail: tuple[int, bytes] | None  # (offset, bytes) after the last \n
    pending: bytes | None  # events.pending
    tmp: dict | None  # a session.json.tmp left by a crash, when it parses
    log_size: int
    tmp_raw: bytes | None = None  # that file's bytes, whether it parses or not (kept as evidence by recover)

    @property
    def unreadable_lines(self) -> int:
        return sum(1 for ln in self.lines if ln.problem)

    @property
    def events(self) -> list[dict]:
        """The log's events, and the pending one that recovery will complete into it."""
        out = [ln.event for ln in self.lines if ln.event is not None]
        if self.pending is not None:
            ev = _parse_event_line(0, 0, 0, self.pending.rstrip(b"\n"), self.session_id).event
            if ev is not None and ev not in out:  # see _complete_pending: a stale pending file may resurrect
                out.append(ev)
        return out

    @property
    def state(self) -> str | None:
        return self.meta.get("state") if self.meta else None


def _read_json(fs, path):
    with fs.map_read(path) as buf:
        data = bytes(buf)
    try:
        return loads(data, allow_nan=True, allow_lone_surrogates=False), None
    except (UnicodeDecodeError, ValueError) as e:
        return None, f"not JSON: {e}"


def read_session(directory: str, fs=DEFAULT_FS) -> Session:
    sid = os.path.basename(directory)
    meta, problem = None, None
    sj = os.path.join(directory, "session.json")
    if not fs.exists(sj):
        problem = "no session.json"
    else:
        meta, problem = _read_json(fs, sj)
        if problem is None:
            problem = _check_meta(meta, sid)
            if problem:
                meta = meta if isinstance(meta, dict) else None
    lines, tail, size = [], None, 0
    log = os.path.join(directory, "events.jsonl")
    if fs.exists(log):
        with fs.map_read(log) as buf:
            data = bytes(buf)
        size = len(data)
        pos = n = 0
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            n += 1
            lines.append(_parse_event_line(n, pos, nl + 1, data[pos:nl], sid))
            pos = nl + 1
        if pos < len(data):
            tail = (pos, data[pos:])
    pending = None
    pf = os.path.join(directory, "events.pending")
    if fs.exists(pf):
        with fs.map_read(pf) as buf:
            pending = bytes(buf)
    tmp = tmp_raw = None
    tf = sj + durable.TMP_SUFFIX
    if fs.exists(tf):
        with fs.map_read(tf) as buf:
            tmp_raw = bytes(buf)
        tmp, _ = _read_json(fs, tf)
    return Session(sid, meta, problem, tuple(lines), tail, pending, tmp if isinstance(tmp, dict) else None, size,
                   tmp_raw)


def _check_meta(meta, sid) -> str | None:
    if not isinstance(meta, dict):
        return "session.json is not a JSON object"
    if meta.get("id") != sid:
        return f"session.json id {shown(meta.get('id'))} is not the directory's {shown(sid)}"
    if meta.get("state") not in STATES:
        return f"session.json state {shown(meta.get('state'))} is not one of {', '.join(STATES)}"
    ps = meta.get("provider_state", "")
    if not isinstance(ps, str):
        return "provider_state is not a base64 string"
    try:
        base64.b64decode(ps, validate=True)
    except ValueError:
        return "provider_state is not valid base64"
    return None


def _held(raw: bytes) -> str:
    return repr(bytes(raw[:80]).decode("utf-8", "replace") + ("..." if len(raw) > 80 else ""))


def _parse_event_line(n, start, end, raw: bytes, sid) -> Line:
    """One line of events.jsonl; a bad line's problem always says what it held."""
    try:
        e = loads(raw, allow_nan=True, allow_lone_surrogates=False)
    except ValueError as err:  # UnicodeDecodeError and too-deep nesting are ValueErrors too
        return Line(n, start, end, None, f"not a JSON line ({err}); it held {_held(raw)}")
    problem = _event_problem(e, sid)
    if problem:
        return Line(n, start, end, None, f"{problem}; it held {_held(raw)}")
    return Line(n, start, end, e, None)


def _json_type(v) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


# data fields the tree and the pending messages are built from: (key, check, what, required)
def _is_str(v) -> bool:
    return isinstance(v, str)


def _is_sid(v) -> bool:
    return v is None or (isinstance(v, str) and bool(_HEX32.fullmatch(v)))


def _is_opt_dict(v) -> bool:
    return v is None or isinstance(v, dict)


def _is_opt_str(v) -> bool:
    return v is None or isinstance(v, str)


_EVENT_DATA = {
    "agent.created": (("agent_id", _is_str, "a string", True), ("name", _is_opt_str, "a string", False),
                      ("parent_session_id", _is_sid, "a session id (32 hex digits)", False),
                      ("metadata", _is_opt_dict, "an object", False)),
    "agent.terminated": (("agent_id", _is_opt_str, "a string", False),),
    "message.enqueued": (("message_id", _is_str, "a string", False),),
    "message.delivered": (("message_id", _is_str, "a string", False),),
    "metadata.updated": (("key", _is_str, "a string", False),),
}


def _event_problem(e, sid) -> str | None:
    if not isinstance(e, dict):
        return f"{_json_type(e)}, not an event object"
    if not isinstance(e.get("event"), str):
        return "not an event object (no event name)"
    if e.get("session_id") != sid:
        return f"session_id {shown(e.get('session_id'))} is not this session's"
    if "ts" in e and not is_iso_time(e["ts"]):
        return f"ts {shown(e['ts'])} is not an ISO 8601 time"
    data = e.get("data")
    if data is None:
        data = {}
    elif not isinstance(data, dict):
        return f"{e['event']} data is {_json_type(data)}, not an object"
    for key, ok, what, required in _EVENT_DATA.get(e["event"], ()):
        if key not in data:
            if required:
                return f"{e['event']} without data.{key}"
            continue
        if not ok(data[key]):
            return f"{e['event']} data.{key} is {_json_type(data[key])}, not {what}"
    return None


def read_root(root: str, fs=DEFAULT_FS) -> list[Session]:
    """A Substrat root has an agents/ directory (verify recognises it by that); a directory without one is
    unsupported (5), never an empty clean tree."""
    adir = os.path.join(root, "agents")
    if not fs.exists(adir) or fs.stat(adir).kind != "dir":
        raise UnsupportedInput("not a Substrat root: no agents/ directory here", root)
    return [read_session(e.path, fs) for e in sorted(fs.listdir(adir), key=lambda e: e.name) if e.kind == "dir"]


def verify_root(root: str, fs=DEFAULT_FS) -> tuple[list[Finding], Tree, list[Session]]:
    sessions = read_root(root, fs)
    out: list[Finding] = []
    daemon = live_daemon(root, fs)
    if daemon:
        out.append(Finding("live-daemon", EXIT_OK, f"{daemon} is running: ACTIVE sessions and a pending file may "
                           "be work in progress", "daemon.lock"))
    for s in sessions:
        rel = f"agents/{s.session_id}"
        if not _HEX32.fullmatch(s.session_id):
            out.append(Finding("foreign-file", EXIT_OK, "not a session directory name (32 hex digits)", rel))
        if s.problem:
            out.append(Finding("session-json", EXIT_CORRUPT, s.problem, f"{rel}/session.json"))
        for ln in s.lines:
            if ln.problem:
                out.append(Finding("corrupt-line", EXIT_CORRUPT, f"line {ln.number}: {ln.problem}",
                                   f"{rel}/events.jsonl", ln.offset, ln.end, extra={"line": ln.number}))
        created = [ln for ln in s.lines if ln.event is not None and ln.event["event"] == "agent.created"]
        for ln in created[1:]:
            out.append(Finding("duplicate-created", EXIT_CORRUPT, f"line {ln.number}: a second agent.created in "
                               f"one log (the first, line {created[0].number}, is the one used)",
                               f"{rel}/events.jsonl", ln.offset, ln.end, extra={"line": ln.number}))
        if s.tail is not None:
            off, data = s.tail
            out.append(Finding("tail-damage", EXIT_TORN, f"{len(data)} bytes after the last newline: a partial "
                               "line", f"{rel}/events.jsonl", off, off + len(data), torn=True))
        if s.pending is not None:
            out.append(Finding("pending-entry", EXIT_TORN, "events.pending holds an entry not yet known to be in the "
                               "log (recover completes it)", f"{rel}/events.pending"))
        if s.tmp is not None:
            changed = sorted(k for k in set(s.tmp) | set(s.meta or {}) if s.tmp.get(k) != (s.meta or {}).get(k))
            out.append(Finding("session-json-tmp", EXIT_OK, "a session.json.tmp left by a crash; it differs in "
                               f"{', '.join(changed) or 'nothing'}", f"{rel}/session.json.tmp"))
        if s.state == "active" and not daemon:
            out.append(Finding("active-session", EXIT_OK, "ACTIVE on disk: the daemon crashed or stopped without "
                               "suspending (recover suspends it)", f"{rel}/session.json"))
    tree = build_tree(sessions)
    for sid, why in tree.orphans:
        then = "recover terminates it only with --force" if sid in tree.uncertain else "recover terminates it"
        out.append(Finding("orphan", EXIT_CORRUPT, f"orphan session: {why} ({then})", f"agents/{sid}",
                           extra={"uncertain": sid in tree.uncertain}))
    return out, tree, sessions


def pending(root: str, fs=DEFAULT_FS) -> dict:
    _, tree, _ = verify_root(root, fs)
    return {a.agent_id: [m for m in a.pending] for a in tree.agents.values()}


def exit_code(findings) -> int:
    return combine_exit_codes(f.exit_code for f in findings)


def to_path_report(root: str, kind: str, fs=DEFAULT_FS):
    """verify's view: one "chunk" per session, its valid events as records."""
    from .report import PathReport, file_row

    findings, _, sessions = verify_root(root, fs)
    chunks = []
    for i, s in enumerate(sessions):
        mine = [f for f in findings if (f.file or "").startswith(f"agents/{s.session_id}")]
        code = exit_code(mine)
        valid = sum(ln.end - ln.offset for ln in s.lines if ln.event is not None)  # not torn or corrupt bytes
        damaged = sum(ln.end - ln.offset for ln in s.lines if ln.problem) + (len(s.tail[1]) if s.tail else 0)
        chunks.append(file_row(s.session_id, i, s.log_size, s.state or "invalid", code,
                               records=sum(1 for ln in s.lines if ln.event is not None), valid_bytes=valid,
                               damaged_bytes=damaged))
    return PathReport(root, kind, exit_code(findings), None, tuple(chunks), tuple(findings))


def live_daemon(root: str, fs=DEFAULT_FS) -> str | None:
    """A running Substrat daemon holds an flock on ROOT/daemon.lock; its pid is in daemon.pid."""
    holder = fs.probe_writer(root, "daemon.lock")
    if holder is None:
        return None
    pid = fs.read_head(os.path.join(root, "daemon.pid"), 32).decode("ascii", "replace").strip() \
        if fs.exists(os.path.join(root, "daemon.pid")) else "?"
    return f"Substrat daemon pid {pid}"
