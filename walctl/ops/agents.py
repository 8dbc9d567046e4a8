"""Substrat agent session roots: `<root>/agents/<session_id>/{session.json, events.jsonl, events.pending}`.

This module reads: it never changes anything and reads every byte safely (a bad line is a finding with its
offset, never a crash and never silently skipped), builds the agent tree and verifies it.
`ops/agents_mend.py` changes a root (recover, set-aside, Substrat's append protocol) from what it read.
"""
from __future__ import annotations

import base64
import json
import os
import re
from typing import NamedTuple

from ..errors import EXIT_CORRUPT, EXIT_OK, EXIT_TORN, UnsupportedInput, combine_exit_codes
from ..format.jsonload import loads
from ..store import durable
from ..store.fs import DEFAULT_FS
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
        return loads(data, allow_nan=True), None
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
        return f"session.json id {meta.get('id')!r} is not the directory's {sid!r}"
    if meta.get("state") not in STATES:
        return f"session.json state {meta.get('state')!r} is not one of {', '.join(STATES)}"
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
        e = loads(raw, allow_nan=True)
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
        return f"session_id {e.get('session_id')!r} is not this session's"
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


class Agent(NamedTuple):
    agent_id: str
    session_id: str
    name: str | None
    parent_session_id: str | None
    metadata: dict
    pending: tuple[dict, ...]  # enqueued and not delivered, in order


class Tree(NamedTuple):
    agents: dict  # agent_id -> Agent (sessions not terminated, in the tree)
    roots: tuple[str, ...]
    children: dict  # agent_id -> [child agent_ids]
    orphans: tuple[tuple[str, str], ...]  # (session_id, why)
    # orphans that may be orphans only because a line could not be read (their own agent.created, or a
    # parent's, or a parent's session.json): recover terminates them only with --force
    uncertain: frozenset = frozenset()

    def to_json(self) -> dict:
        return {"roots": list(self.roots),
                "agents": [{"agent_id": a.agent_id, "session_id": a.session_id, "name": a.name,
                            "parent_session_id": a.parent_session_id, "children": self.children.get(a.agent_id, []),
                            "metadata": a.metadata, "pending_message_ids": [m["message_id"] for m in a.pending]}
                           for a in self.agents.values()],
                "orphans": [{"session_id": s, "why": w} for s, w in self.orphans]}


def _agent(s: Session, data: dict) -> Agent:
    """The agent a session's log describes: agent.created's data, metadata updates folded in, and the
    messages enqueued but not delivered."""
    meta = dict(data.get("metadata") or {})
    enqueued, delivered = [], set()
    for e in s.events:
        d = e.get("data") or {}
        if e["event"] == "metadata.updated" and "key" in d:
            if d.get("value") is None:
                meta.pop(d["key"], None)
            else:
                meta[d["key"]] = d["value"]
        elif e["event"] == "message.enqueued" and "message_id" in d:
            enqueued.append(d)
        elif e["event"] == "message.delivered" and "message_id" in d:
            delivered.add(d["message_id"])
    return Agent(data.get("agent_id"), s.session_id, data.get("name"), data.get("parent_session_id"),
                 meta, tuple(m for m in enqueued if m["message_id"] not in delivered))


def _drop_unparented(info: dict, by_sid: dict, orphans: list, uncertain: set) -> None:
    """Parents must resolve to a live session in the tree: an agent whose parent does not is an orphan (and
    so, in turn, are its children), uncertain when an unreadable file or line may be why."""
    changed = True
    while changed:
        changed = False
        for sid, a in list(info.items()):
            p = a.parent_session_id
            if p is not None and p not in info:
                parent = by_sid.get(p)
                if parent is None:
                    why = "its parent session does not exist"
                elif parent.meta is None:
                    why = f"its parent session {p} has no readable session.json"
                    uncertain.add(sid)
                elif parent.state == "terminated":
                    why = "its parent session is terminated"
                elif p in uncertain:
                    why = f"its parent session {p} is not in the tree only because of an unreadable line"
                    uncertain.add(sid)
                else:
                    why = f"its parent session {p} is itself an orphan"
                orphans.append((sid, why))
                del info[sid]
                changed = True


def build_tree(sessions: list[Session]) -> Tree:
    by_sid = {s.session_id: s for s in sessions}
    info = {}
    orphans = []
    uncertain = set()
    for s in sessions:
        if s.state == "terminated" or s.meta is None:
            continue
        created = next((e for e in s.events if e["event"] == "agent.created"), None)
        if created is None:
            if s.unreadable_lines:
                orphans.append((s.session_id, f"no readable agent.created in its log ({s.unreadable_lines} "
                                "unreadable lines: one may be it)"))
                uncertain.add(s.session_id)
            else:
                orphans.append((s.session_id, "no agent.created in its log"))
            continue
        data = created.get("data") or {}
        if any(e["event"] == "agent.terminated" for e in s.events):
            orphans.append((s.session_id, "agent.terminated is logged but the session was not saved terminated"))
            continue
        info[s.session_id] = _agent(s, data)
    _drop_unparented(info, by_sid, orphans, uncertain)
    for sid in list(info):  # parents that form a cycle: orphans too
        seen, cur = set(), sid
        while cur is not None and cur in info and cur not in seen:
            seen.add(cur)
            cur = info[cur].parent_session_id
        if cur is not None and cur in seen:
            orphans.append((sid, "its parents form a cycle"))
    for sid, _ in orphans:
        info.pop(sid, None)
    agents = {a.agent_id: a for a in info.values()}
    children: dict = {}
    roots = []
    for a in info.values():
        if a.parent_session_id is None:
            roots.append(a.agent_id)
        else:
            children.setdefault(info[a.parent_session_id].agent_id, []).append(a.agent_id)
    return Tree(agents, tuple(roots), children, tuple(orphans), frozenset(uncertain))


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
    from .report import VERDICTS, ChunkReport, PathReport

    findings, _, sessions = verify_root(root, fs)
    chunks = []
    for i, s in enumerate(sessions):
        mine = [f for f in findings if (f.file or "").startswith(f"agents/{s.session_id}")]
        code = exit_code(mine)
        valid = sum(ln.end - ln.offset for ln in s.lines if ln.event is not None)  # not torn or corrupt bytes
        chunks.append(ChunkReport(s.session_id, i, s.log_size, s.state or "invalid", None, VERDICTS[code], code,
                                  len([ln for ln in s.lines if ln.event is not None]), None, None, valid,
                                  sum(ln.end - ln.offset for ln in s.lines if ln.problem) + (len(s.tail[1]) if s.tail else 0),
                                  {}))
    return PathReport(root, kind, exit_code(findings), None, tuple(chunks), tuple(findings))


def live_daemon(root: str, fs=DEFAULT_FS) -> str | None:
    """A running Substrat daemon holds an flock on ROOT/daemon.lock; its pid is in daemon.pid."""
    holder = fs.probe_writer(root, "daemon.lock")
    if holder is None:
        return None
    pid = fs.read_head(os.path.join(root, "daemon.pid"), 32).decode("ascii", "replace").strip() \
        if fs.exists(os.path.join(root, "daemon.pid")) else "?"
    return f"Substrat daemon pid {pid}"
