"""Substrat agent session roots: `<root>/agents/<session_id>/{session.json, events.jsonl, events.pending}`.

Reading never changes anything and reads every byte safely (a bad line is a finding with its offset, never
a crash and never silently skipped). `recover(apply=True)` does what the real daemon's recovery does, and
the parts it gets wrong: ACTIVE sessions become SUSPENDED, orphans are terminated, a pending entry is
completed into its log (Substrat's protocol: cut a partial tail, append the pending line unless the log
already ends with it, fsync, unlink), a partial tail with no pending file is cut too; every replaced or
cut byte is kept in `<root>/.quarantine/` first, and nothing is written until the whole root was read.
"""
from __future__ import annotations

import base64
import json
import os
import re
from datetime import datetime, timezone
from typing import NamedTuple

from .. import __version__
from ..errors import EXIT_CORRUPT, EXIT_OK, EXIT_TORN, combine_exit_codes
from ..format.jsonload import loads
from ..store import durable, quarantine
from ..store.fs import DEFAULT_FS
from ..store.lock import DirectoryLock, holder_text
from .clock import utc_now
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
        info[s.session_id] = Agent(data.get("agent_id"), s.session_id, data.get("name"), data.get("parent_session_id"),
                                   meta, tuple(m for m in enqueued if m["message_id"] not in delivered))
    # parents must resolve to a live session in the tree; cycles are orphans too
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
    for sid in list(info):
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
    adir = os.path.join(root, "agents")
    if not fs.exists(adir):
        return []
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
                               "line", f"{rel}/events.jsonl", off, off + len(data), extra={"torn": True}))
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


class Action(NamedTuple):
    session_id: str
    action: str
    detail: str


def live_daemon(root: str, fs=DEFAULT_FS) -> str | None:
    """A running Substrat daemon holds an flock on ROOT/daemon.lock; its pid is in daemon.pid."""
    holder = fs.probe_writer(root, "daemon.lock")
    if holder is None:
        return None
    pid = fs.read_head(os.path.join(root, "daemon.pid"), 32).decode("ascii", "replace").strip() \
        if fs.exists(os.path.join(root, "daemon.pid")) else "?"
    return f"Substrat daemon pid {pid}"


def recover(root: str, *, apply: bool = False, force: bool = False,
            fs=DEFAULT_FS) -> tuple[list[Action], list[Finding]]:
    """The plan (and with apply, its execution). Reads everything first; writes only with apply, and never
    under a running daemon. `force` also terminates orphans that may be orphans only because a line could
    not be read (Tree.uncertain)."""
    fs = fs.beneath(root)
    from ..errors import EnvironmentProblem

    daemon = live_daemon(root, fs)
    if daemon and apply:
        raise EnvironmentProblem(f"a live daemon holds daemon.lock ({daemon}); stop it first; nothing was changed",
                                 root, kind="locked")
    plan = _recover(root, False, force, fs)
    if not apply:
        return plan
    refuse_links(root, sorted({a.session_id for a in plan[0]}), fs)  # before even the lock file
    with DirectoryLock(root, holder_text("agents recover"), fs):  # against another walctl doing the same
        return _recover(root, True, force, fs)


SESSION_FILES = ("session.json", "events.jsonl", "events.pending", "session.json.tmp", "events.jsonl.tmp")


def refuse_links(root: str, session_ids, fs=DEFAULT_FS) -> None:
    """Containment, checked when planning so that a refusal changes nothing: a mutation never goes through a
    symlinked agents directory, session directory or session file (exit 7, naming it)."""
    from ..errors import Refused

    paths = [os.path.join(root, "agents")]
    for sid in session_ids:
        d = os.path.join(root, "agents", sid)
        paths += [d] + [os.path.join(d, n) for n in SESSION_FILES]
    for path in paths:
        if fs.is_symlink(path):
            raise Refused(f"{os.path.relpath(path, root)} is a symbolic link: walctl does not modify anything "
                          "through a link; nothing was changed", path)
    from ..store import contain  # and hard links, the lock, .quarantine/ and its manifest

    contain.refuse_links(root, [os.path.relpath(p, root) for p in paths[1:]], fs)


def _recover(root: str, apply: bool, force: bool, fs) -> tuple[list[Action], list[Finding]]:
    findings, tree, sessions = verify_root(root, fs)
    orphans = dict(tree.orphans)
    plan: list[Action] = []
    for s in sessions:
        if not _HEX32.fullmatch(s.session_id):  # not a session directory name: reported, never acted on
            continue
        if s.tail is not None:
            plan.append(Action(s.session_id, "cut-tail", f"{len(s.tail[1])} bytes at offset {s.tail[0]}"))
        if s.pending is not None:
            plan.append(Action(s.session_id, "complete-pending", f"{len(s.pending)} bytes"))
        if s.meta is None:
            continue
        held = s.session_id in tree.uncertain and not force
        if s.session_id in orphans and s.state != "terminated" and not held:
            action = Action(s.session_id, "terminate", orphans[s.session_id])
        elif s.state == "active":
            action = Action(s.session_id, "suspend", "ACTIVE -> SUSPENDED" + (
                f" (an orphan only maybe: {orphans[s.session_id]}; --force terminates it)" if held else ""))
        else:
            if held and s.state != "terminated":
                plan.append(Action(s.session_id, "keep-orphan", f"not terminated: {orphans[s.session_id]} "
                                   "(--force terminates it)"))
            continue
        if s.tmp_raw is not None:  # Staged would drop it: evidence first, and said in the plan
            plan.append(Action(s.session_id, "quarantine-tmp", f"session.json.tmp ({len(s.tmp_raw)} bytes) left "
                               "by a crash, kept in .quarantine/ before session.json is replaced"))
        plan.append(action)
    if apply:
        refuse_links(root, sorted({a.session_id for a in plan}), fs)
        now = datetime.now(timezone.utc).isoformat()
        stamp = utc_now()
        by_sid = {s.session_id: s for s in sessions}
        for a in plan:
            s = by_sid[a.session_id]
            d = os.path.join(root, "agents", a.session_id)
            if a.action == "cut-tail":
                off, data = s.tail
                quarantine.keep_bytes(root, f"agents/{a.session_id}/events.jsonl".replace("/", "__"), off, data,
                                      action="truncate", reason="partial last line of an event log", now=stamp,
                                      version=__version__, fs=fs)
                durable.truncate(os.path.join(d, "events.jsonl"), off, fs)
            elif a.action == "complete-pending":
                _complete_pending(d, s, fs)
            elif a.action == "quarantine-tmp":
                source = f"agents__{a.session_id}__session.json.tmp"
                if not _recorded(root, "remove", source, s.tmp_raw, fs):  # a rerun after a crash: one line
                    quarantine.keep_bytes(root, source, 0, s.tmp_raw, action="remove",
                                          reason="session.json.tmp left by a crash, replaced by recovery",
                                          now=stamp, version=__version__, fs=fs)
            elif a.action in ("suspend", "terminate"):
                meta = dict(s.meta)
                meta["state"] = "suspended" if a.action == "suspend" else "terminated"
                if a.action == "suspend":
                    meta["suspended_at"] = now
                old = json.dumps(s.meta, indent=2).encode()
                quarantine.keep_bytes(root, f"agents__{a.session_id}__session.json", 0, old, action="replace",
                                      reason=a.detail, now=stamp, version=__version__, fs=fs)
                durable.create_file(os.path.join(d, "session.json"), json.dumps(meta, indent=2).encode(), fs,
                                    replace=True)
    return plan, findings


def _complete_pending(d: str, s: Session, fs) -> None:
    """Substrat's open-time protocol: cut any partial tail (done before, with evidence), append the pending
    line, fsync, unlink the pending file. Substrat skips the append when the log already *ends* with the
    line; walctl skips it when the line is anywhere in the log: Substrat unlinks the pending file without
    syncing the directory, so after a crash an older pending file can come back, and appending it again
    would duplicate an old event (the crash test in tests/test_agents.py found this)."""
    log = os.path.join(d, "events.jsonl")
    line = s.pending if s.pending.endswith(b"\n") else s.pending + b"\n"
    current = fs.read_range(log, 0, fs.stat(log).size) if fs.exists(log) else b""
    if not (current.startswith(line) or b"\n" + line in current):
        durable.append(log, line, fs)
    durable.remove(os.path.join(d, "events.pending"), fs)


def pending(root: str, fs=DEFAULT_FS) -> dict:
    _, tree, _ = verify_root(root, fs)
    return {a.agent_id: [m for m in a.pending] for a in tree.agents.values()}


def exit_code(findings) -> int:
    return combine_exit_codes(f.exit_code for f in findings)


def append_event(session_dir: str, event: dict, fs=DEFAULT_FS) -> None:
    fs = fs.beneath(session_dir)
    """Substrat's append protocol: the line to events.pending (fsync), then appended to events.jsonl
    (fsync), then the pending file unlinked. A crash leaves the log as it was, or with the line, plus at
    most a pending file that recovery completes."""
    line = (json.dumps(event, separators=(",", ":")) + "\n").encode("ascii")
    pending_path = os.path.join(session_dir, "events.pending")
    # Substrat writes the pending file in place and syncs only the file; a durable create (staged, renamed,
    # directory synced) means recovery never meets a half-written one.
    durable.create_file(pending_path, line, fs)
    durable.append(os.path.join(session_dir, "events.jsonl"), line, fs)
    # Substrat unlinks without syncing the directory, so the file can come back after a crash; walctl syncs
    # it (recovery copes with a resurrected one either way: see _complete_pending).
    durable.remove(pending_path, fs)


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


class SetAside(NamedTuple):
    session_id: str
    target: str  # "events.jsonl" or "session.json"
    line: int | None
    offset: int
    length: int
    held: str  # what the line or file held (shortened)
    why: str  # why it is bad
    applied: bool
    evidence: str | None  # .quarantine/NAME of the whole old file

    def to_json(self) -> dict:
        return self._asdict()


def set_aside(root: str, session_id: str, *, line: int | None = None, session: bool = False, apply: bool = False,
              force: bool = False, fs=DEFAULT_FS) -> SetAside:
    """Sets aside one unreadable events.jsonl line (the log rewritten without it by durable replace) or an
    unreadable session.json (removed: Substrat skips a session directory without one, while an unreadable
    one stops its whole root from loading). The whole old file goes to ROOT/.quarantine/ first, with a
    manifest line. Dry run unless `apply`; `apply` needs `force`, because it rewrites acknowledged history.
    Only a line or file walctl cannot read is set aside, so a rerun after success finds nothing to do."""
    from ..errors import EnvironmentProblem, UsageError

    fs = fs.beneath(root)

    if not _HEX32.fullmatch(session_id or ""):
        raise UsageError(f"{session_id!r} is not a session id (32 hex digits)")
    if (line is None) == (not session):
        raise UsageError("give one of --line N or --session")
    d = os.path.join(root, "agents", session_id)
    if not fs.exists(d) or fs.stat(d).kind != "dir":
        raise EnvironmentProblem("no such session directory", d, kind="not-found")
    if not apply:
        return _set_aside(root, session_id, line, False, force, fs)
    refuse_links(root, [session_id], fs)  # before even the lock file
    with DirectoryLock(root, holder_text("agents set-aside"), fs):
        return _set_aside(root, session_id, line, True, force, fs)


def _set_aside(root, sid, line, apply, force, fs) -> SetAside:
    from ..errors import Refused, UsageError

    d = os.path.join(root, "agents", sid)
    s = read_session(d, fs)
    if line is not None:
        target = "events.jsonl"
        if not 1 <= line <= len(s.lines):
            raise UsageError(f"line {line}: the log has {len(s.lines)} newline-terminated lines", f"{d}/{target}")
        ln = s.lines[line - 1]
        if ln.problem is None:
            raise Refused(f"line {line} is a readable event; only an unreadable line is set aside; nothing was "
                          "changed", f"{d}/{target}")
        path = os.path.join(d, target)
        with fs.map_read(path) as buf:
            data = bytes(buf)
        report = SetAside(sid, target, line, ln.offset, ln.end - ln.offset, _held(data[ln.offset:ln.end - 1]),
                          ln.problem, False, None)
        new = data[:ln.offset] + data[ln.end:]
    else:
        target = "session.json"
        path = os.path.join(d, target)
        if not fs.exists(path) or s.problem is None:
            raise Refused("session.json is missing or readable; only an unreadable one is set aside; nothing was "
                          "changed", path)
        with fs.map_read(path) as buf:
            data = bytes(buf)
        report = SetAside(sid, target, None, 0, len(data), _held(data), s.problem, False, None)
        new = None
    if not apply:
        return report
    if not force:
        raise Refused(f"setting aside {target} {'line ' + str(line) if line else ''} rewrites acknowledged "
                      "history: add --force (the whole old file is kept in .quarantine/); nothing was changed",
                      path)
    refuse_links(root, [sid], fs)
    source = f"agents__{sid}__{target}"
    kept = _recorded(root, "set-aside", source, data, fs) or quarantine.keep_bytes(
        root, source, 0, data, action="set-aside",
        reason=f"{'line ' + str(line) + ' ' if line else ''}set aside: {report.why}", now=utc_now(),
        version=__version__, fs=fs)
    if new is None:
        durable.remove(path, fs)
    else:
        durable.create_file(path, new, fs, replace=True)
    return report._replace(applied=True, evidence=kept["evidence"])


def _recorded(root: str, action: str, source: str, data: bytes, fs) -> dict | None:
    """The manifest line of an earlier run that already kept exactly these bytes (a crash came before the
    replace): the rerun finishes the job without a second line."""
    import hashlib

    sha = hashlib.sha256(data).hexdigest()
    entries, _ = quarantine.read_manifest(root, fs)
    for e in entries:
        ev = e.get("evidence")
        if (e.get("action") == action and e.get("source") == source and e.get("sha256") == sha
                and isinstance(ev, str) and ev.startswith(".quarantine/") and "/" not in ev[len(".quarantine/"):]
                and ev not in (".quarantine/.", ".quarantine/..") and fs.exists(os.path.join(root, ev))
                and quarantine.sha256_file(os.path.join(root, ev), fs) == sha):
            return e
    return None
