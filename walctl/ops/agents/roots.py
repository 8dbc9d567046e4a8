"""Substrat agent session roots: `<root>/agents/<session_id>/{session.json, events.jsonl, events.pending}`.

This module reads: it never changes anything and reads every byte safely (a bad line is a finding with its
offset, never a crash and never silently skipped), has `ops/agents/tree.py` build the agent tree, and
verifies both.
`ops/agents/mend.py` changes a root (recover, set-aside, Substrat's append protocol) from what it read.
"""
from __future__ import annotations

import base64
import os
import re
from typing import NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_OK, EXIT_TORN, UnsupportedInput, combine_exit_codes
from ...format.fields import is_iso_time, shown
from ...format.jsonload import loads
from ...format.lines import line_spans, tail_of
from ...store import durable
from ...store.fs import DEFAULT_FS
from .tree import Tree, build_tree
from .. import classes as K
from ..findings import Finding

STATES = ("created", "active", "suspended", "terminated")
_HEX32 = re.compile(r"[0-9a-f]{32}")
NO_SESSION_JSON = "no session.json"
# events.jsonl: a line holds a whole message, of no bounded size, and the spec cuts any partial tail: every
# unterminated tail is torn (format/lines.py)
MAX_LINE_BYTES = None


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
    pending_line: int | None = None  # the log line holding exactly the pending file's bytes, if one does

    @property
    def unreadable_lines(self) -> int:
        return sum(1 for ln in self.lines if ln.problem)

    @property
    def events(self) -> list[dict]:
        """The log's events, and the pending one that recovery will complete into it (only a complete event
        line that is not in the log yet: see judge_pending)."""
        out = [ln.event for ln in self.lines if ln.event is not None]
        p = judge_pending(self)
        if p is not None and p.verdict == PENDING_NEW:
            out.append(p.event)
        return out

    @property
    def created_lines(self) -> list[Line]:
        """The readable agent.created lines; the runtime takes the agent from the last one."""
        return [ln for ln in self.lines if ln.event is not None and ln.event["event"] == "agent.created"]

    @property
    def state(self) -> str | None:
        return self.meta.get("state") if self.meta else None

    @property
    def terminated_at(self) -> str:
        """Where agent.terminated is: "line N", or events.pending (completed into the log by recover)."""
        ln = next((ln for ln in self.lines if ln.event is not None and ln.event["event"] == "agent.terminated"), None)
        return f"line {ln.number}" if ln else "events.pending"


# What a pending file is, judged once for verify, tree and recover (the append protocol writes the pending
# file, fsyncs it, and only then appends to the log, so a pending file that is not one whole event line was
# never appended and never acknowledged):
PENDING_TORN = "torn"  # not one complete, parseable event line: set aside, nothing appended
PENDING_IN_LOG = "in-log"  # its line is already in the log (the unlink was lost): removed
PENDING_NEW = "new"  # a whole event line not in the log yet: appended


class Pending(NamedTuple):
    verdict: str
    why: str
    event: dict | None = None
    line: int | None = None


def judge_pending(s: "Session") -> Pending | None:
    raw = s.pending
    if raw is None:
        return None
    if not raw:
        return Pending(PENDING_TORN, "0 bytes (a crash before the entry was written)")
    if not raw.endswith(b"\n"):
        return Pending(PENDING_TORN, f"{len(raw)} bytes with no newline (a write cut short); it held {_held(raw)}")
    if b"\n" in raw[:-1]:
        return Pending(PENDING_TORN, f"{len(raw)} bytes holding more than one line; it held {_held(raw)}")
    parsed = _parse_event_line(0, 0, len(raw), raw[:-1], s.session_id)
    if parsed.problem:
        return Pending(PENDING_TORN, f"{len(raw)} bytes that are not an event line: {parsed.problem}")
    if s.pending_line is not None:
        return Pending(PENDING_IN_LOG, f"already in the log (line {s.pending_line})", parsed.event, s.pending_line)
    return Pending(PENDING_NEW, f"{len(raw)} bytes, appended as line {len(s.lines) + 1}", parsed.event)


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
        problem = NO_SESSION_JSON
    else:
        meta, problem = _read_json(fs, sj)
        if problem is None:
            problem = _check_meta(meta, sid)
            if problem:
                meta = meta if isinstance(meta, dict) else None
    lines, tail, size, data = [], None, 0, b""
    log = os.path.join(directory, "events.jsonl")
    if fs.exists(log):
        with fs.map_read(log) as buf:
            data = bytes(buf)
        size = len(data)
        torn = tail_of(data, MAX_LINE_BYTES)
        for n, (pos, nl) in enumerate(line_spans(data, torn.offset if torn is not None else None), 1):
            lines.append(_parse_event_line(n, pos, nl + 1, data[pos:nl], sid))
        if torn is not None:
            tail = (torn.offset, data[torn.offset:])
    pending = None
    pf = os.path.join(directory, "events.pending")
    if fs.exists(pf):
        with fs.map_read(pf) as buf:
            pending = bytes(buf)
    # the pending line may be anywhere in the log: Substrat unlinks it without syncing the directory, so an
    # older pending file can come back after later appends
    pending_line = next((ln.number for ln in lines if pending and data[ln.offset:ln.end] == pending), None)
    tmp = tmp_raw = None
    tf = sj + durable.TMP_SUFFIX
    if fs.exists(tf):
        with fs.map_read(tf) as buf:
            tmp_raw = bytes(buf)
        tmp, _ = _read_json(fs, tf)
    return Session(sid, meta, problem, tuple(lines), tail, pending, tmp if isinstance(tmp, dict) else None, size,
                   tmp_raw, pending_line)


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


def set_aside_sessions(root: str, fs=DEFAULT_FS) -> frozenset:
    """Sessions that had a line, a file or their directory set aside (.quarantine/MANIFEST.jsonl): what they
    lost may have been an agent.created, so the tree calls what hangs on it uncertain, as before the set-aside."""
    from ...store.quarantine import read_manifest

    entries, _ = read_manifest(root, fs)
    out = set()
    for e in entries:
        m = _SET_ASIDE_SOURCE.fullmatch(str(e.get("source", "")))
        if e.get("action") == "set-aside" and m:
            out.add(m.group(1))
    return frozenset(out)


_SET_ASIDE_SOURCE = re.compile(r"agents__([0-9a-f]{32})__[^/]+")


def verify_root(root: str, fs=DEFAULT_FS) -> tuple[list[Finding], Tree, list[Session]]:
    sessions = read_root(root, fs)
    out: list[Finding] = []
    daemon = live_daemon(root, fs)
    if daemon:
        out.append(Finding(K.LIVE_DAEMON, EXIT_OK, f"{daemon} is running: ACTIVE sessions and a pending file may "
                           "be work in progress", "daemon.lock"))
    tree = build_tree(sessions, set_aside_sessions(root, fs))
    for s in sessions:
        out += _session_findings(s, daemon)
        if s.session_id in tree.terminating:
            out.append(Finding(K.INTERRUPTED_TERMINATION, EXIT_TORN, f"agent.terminated is logged ({s.terminated_at}) "
                               "but the session was not saved terminated: a crash between the two; recover finishes "
                               "the termination", f"agents/{s.session_id}/session.json"))
    for sid, why in tree.orphans:
        then = "recover terminates it only with --force" if sid in tree.uncertain else "recover terminates it"
        out.append(Finding(K.ORPHAN, EXIT_CORRUPT, f"orphan session: {why} ({then})", f"agents/{sid}",
                           extra={"uncertain": sid in tree.uncertain}))
    return out, tree, sessions


def _session_findings(s: Session, daemon) -> list[Finding]:
    rel = f"agents/{s.session_id}"
    out = []
    if not _HEX32.fullmatch(s.session_id):
        out.append(Finding(K.FOREIGN_FILE, EXIT_OK, "not a session directory name (32 hex digits)", rel))
    if s.problem == NO_SESSION_JSON and _HEX32.fullmatch(s.session_id):
        out.append(Finding(K.UNSAVED_SESSION, EXIT_TORN, "no session.json: the session was never saved (a crash "
                           "between opening its log and the first save; the runtime skips it); recover sets the "
                           "directory aside", rel))
    elif s.problem:
        out.append(Finding(K.SESSION_JSON, EXIT_CORRUPT, s.problem, f"{rel}/session.json"))
    for ln in s.lines:
        if ln.problem:
            out.append(Finding(K.CORRUPT_LINE, EXIT_CORRUPT, f"line {ln.number}: {ln.problem}",
                               f"{rel}/events.jsonl", ln.offset, ln.end, extra={"line": ln.number}))
    out += _duplicate_findings(s)
    if s.tail is not None:
        off, data = s.tail
        out.append(Finding(K.TAIL_DAMAGE, EXIT_TORN, f"{len(data)} bytes after the last newline: a partial "
                           "line", f"{rel}/events.jsonl", off, off + len(data), torn=True))
    out += _pending_findings(s)
    out += _tmp_findings(s)
    if s.state == "active" and not daemon:
        out.append(Finding(K.ACTIVE_SESSION, EXIT_OK, "ACTIVE on disk: the daemon crashed or stopped without "
                           "suspending (recover suspends it)", f"{rel}/session.json"))
    return out


def _duplicate_findings(s: Session) -> list[Finding]:
    """Substrat's recovery takes the agent from the last agent.created of a log; so does walctl's tree."""
    created = s.created_lines
    if len(created) < 2:
        return []
    used = created[-1]
    numbers = ", ".join(str(ln.number) for ln in created)
    return [Finding(K.DUPLICATE_CREATED, EXIT_CORRUPT, f"line {ln.number}: one of {len(created)} agent.created "
                    f"lines in one log (lines {numbers}); the runtime uses the last, line {used.number} (agent "
                    f"{used.event['data'].get('agent_id')!r}, name {used.event['data'].get('name')!r}), and so does "
                    "the tree; set-aside --line can set a duplicate aside", f"agents/{s.session_id}/events.jsonl",
                    ln.offset, ln.end, extra={"line": ln.number}) for ln in created[1:]]


def _pending_findings(s: Session) -> list[Finding]:
    p = judge_pending(s)
    if p is None:
        return []
    then = {PENDING_TORN: "never acknowledged (the append comes after it): recover sets it aside and appends "
                          "nothing",
            PENDING_IN_LOG: "recover removes it",
            PENDING_NEW: "an entry not yet in the log: recover completes it"}[p.verdict]
    return [Finding(K.PENDING_ENTRY, EXIT_TORN, f"events.pending holds {p.why}; {then}",
                    f"agents/{s.session_id}/events.pending", extra={"verdict": p.verdict})]


def _tmp_findings(s: Session) -> list[Finding]:
    if s.tmp_raw is None:
        return []
    where = f"agents/{s.session_id}/session.json.tmp"
    if s.tmp is None:
        what = "empty" if not s.tmp_raw else f"{len(s.tmp_raw)} bytes that are not a session record"
        return [Finding(K.SESSION_JSON_TMP, EXIT_OK, f"a session.json.tmp left by a crash: {what} (a save cut "
                        "short; session.json is what the runtime loads); recover keeps it in .quarantine/", where)]
    changed = sorted(k for k in set(s.tmp) | set(s.meta or {}) if s.tmp.get(k) != (s.meta or {}).get(k))
    return [Finding(K.SESSION_JSON_TMP, EXIT_OK, "a session.json.tmp left by a crash; it differs in "
                    f"{', '.join(changed) or 'nothing'}; recover keeps it in .quarantine/", where)]


def exit_code(findings) -> int:
    return combine_exit_codes(f.exit_code for f in findings)


def to_path_report(root: str, kind: str, fs=DEFAULT_FS):
    """verify's view: one "chunk" per session, its valid events as records."""
    from ..report import PathReport, file_row

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
