"""Substrat agent roots, the half that changes them: `recover` (ACTIVE sessions become SUSPENDED, orphans
are terminated, a pending entry is completed into its log, a partial tail is cut), `set_aside` (a bad line
or a whole session file moved to `.quarantine/`) and Substrat's own append protocol (`append_event`).

Every replaced or cut byte is kept in `<root>/.quarantine/` first, nothing is written until the whole root
was read (ops/agents.py reads it), and every mutation goes through the containment of `fs.beneath(root)`.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import NamedTuple

from .. import __version__
from ..store import durable, quarantine
from ..store.fs import DEFAULT_FS
from ..store.lock import DirectoryLock, holder_text
from .agents import _HEX32, Session, _held, live_daemon, read_session, verify_root
from .clock import utc_now
from .findings import Finding


class Action(NamedTuple):
    session_id: str
    action: str
    detail: str


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
    symlinked agents directory, session directory or session file, nor changes a hard-linked one, the lock,
    .quarantine/ or its manifest (exit 7, naming it): store/contain.py's one check, over these names."""
    from ..store.contain import refuse_links as refuse

    names = ["agents"]
    for sid in session_ids:
        names += [f"agents/{sid}"] + [f"agents/{sid}/{n}" for n in SESSION_FILES]
    refuse(root, names, fs)


def _recover(root: str, apply: bool, force: bool, fs) -> tuple[list[Action], list[Finding]]:
    findings, tree, sessions = verify_root(root, fs)
    plan = _plan(tree, sessions, force)
    if apply:
        _apply(root, plan, sessions, fs)
    return plan, findings


def _plan(tree, sessions, force: bool) -> list[Action]:
    """What recovery does, session by session, in order; nothing is changed here."""
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
    return plan


def _apply(root: str, plan: list[Action], sessions, fs) -> None:
    """Each action, its replaced or cut bytes kept in .quarantine/ first."""
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
