"""Substrat agent roots, the half that changes them: `recover` (ACTIVE sessions become SUSPENDED, orphans
are terminated, an interrupted termination is finished, a pending entry is completed into its log or, when it
is not one whole event line, set aside, a partial tail is cut, a session never saved is set aside) and
Substrat's own append protocol (`append_event`). Setting aside lines and sessions: ops/agents/aside.py.

Every replaced or cut byte is kept in `<root>/.quarantine/` first, nothing is written until the whole root
was read (ops/agents/roots.py reads it), nothing is written while a live daemon holds daemon.lock, and every
mutation goes through the containment of `fs.beneath(root)`.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import NamedTuple

from ...version import __version__
from ...errors import WalctlError
from ...store import durable, quarantine
from ...store.fs import DEFAULT_FS
from ...store.lock import DirectoryLock, holder_text
from .roots import (_HEX32, NO_SESSION_JSON, PENDING_IN_LOG, PENDING_NEW, PENDING_TORN, Session, judge_pending,
                     verify_root)
from .aside import daemon_held_off, refuse_links, refuse_live_daemon, set_aside_dir
from ..clock import utc_now


class Action(NamedTuple):
    session_id: str
    action: str
    detail: str


class Recovery(NamedTuple):
    plan: list  # Action, in order
    findings: list  # Finding: the root as it was read
    done: int = 0  # how many of the plan's actions were carried out
    error: WalctlError | None = None  # what stopped --apply part-way (the first `done` actions were done)


def recover(root: str, *, apply: bool = False, force: bool = False, fs=DEFAULT_FS) -> Recovery:
    """The plan (and with apply, its execution). Reads everything first; writes only with apply, and never
    under a running daemon (EnvironmentProblem, locked) nor through a link (Refused): those are raised before
    anything changes. A failure once writing has begun is returned in Recovery.error with what was done.
    `force` also terminates orphans that may be orphans only because a line could not be read or was set
    aside (Tree.uncertain)."""
    fs = fs.beneath(root)
    if apply:
        refuse_live_daemon(root, fs)
    plan, findings = _read_plan(root, force, fs)
    if not apply:
        return Recovery(plan, findings)
    refuse_links(root, sorted({a.session_id for a in plan}), fs)  # before even the lock file
    # against another walctl doing the same, and a daemon starting meanwhile
    with DirectoryLock(root, holder_text("agents recover"), fs), daemon_held_off(root, fs):
        findings, tree, sessions = verify_root(root, fs)
        plan = _plan(tree, sessions, force)
        refuse_links(root, sorted({a.session_id for a in plan}), fs)
        by_sid = {s.session_id: s for s in sessions}
        stamps = (datetime.now(timezone.utc).isoformat(), utc_now())
        done = 0
        try:
            for a in plan:
                _do(root, a, by_sid[a.session_id], stamps, fs)
                done += 1
        except WalctlError as e:
            return Recovery(plan, findings, done, e)
        return Recovery(plan, findings, done)


def _read_plan(root: str, force: bool, fs) -> tuple[list, list]:
    findings, tree, sessions = verify_root(root, fs)
    return _plan(tree, sessions, force), findings


_PENDING_ACTIONS = {PENDING_TORN: ("set-aside-pending", "never acknowledged; kept in .quarantine/, nothing appended"),
                    PENDING_IN_LOG: ("remove-pending", "removed"),
                    PENDING_NEW: ("complete-pending", None)}


def _plan(tree, sessions, force: bool) -> list[Action]:
    """What recovery does, session by session, in order; nothing is changed here."""
    plan: list[Action] = []
    for s in sessions:
        if not _HEX32.fullmatch(s.session_id):  # not a session directory name: reported, never acted on
            continue
        if s.problem == NO_SESSION_JSON:
            plan.append(Action(s.session_id, "set-aside-session", "no session.json: never saved (a crash between "
                               "opening its log and the first save; the runtime skips it); its files are kept in "
                               ".quarantine/ and the directory removed"))
            continue
        if s.tail is not None:
            plan.append(Action(s.session_id, "cut-tail", f"{len(s.tail[1])} bytes at offset {s.tail[0]}"))
        p = judge_pending(s)
        if p is not None:
            name, then = _PENDING_ACTIONS[p.verdict]
            plan.append(Action(s.session_id, name, f"events.pending: {p.why}" + (f": {then}" if then else "")))
        if s.meta is None:
            continue
        state = _state_action(tree, s, force)
        if s.tmp_raw is not None:  # evidence first, and said in the plan
            then = "before session.json is replaced" if state and state.action != "keep-orphan" else "and removed"
            plan.append(Action(s.session_id, "quarantine-tmp", f"session.json.tmp ({len(s.tmp_raw)} bytes) left "
                               f"by a crash, kept in .quarantine/ {then}"))
        if state is not None:
            plan.append(state)
    return plan


def _state_action(tree, s: Session, force: bool) -> Action | None:
    orphans = dict(tree.orphans)
    held = s.session_id in tree.uncertain and not force
    sid = s.session_id
    if s.state == "terminated":
        return None
    if sid in tree.terminating:
        return Action(sid, "finish-termination", f"agent.terminated is logged ({s.terminated_at}) but "
                      f"the session was saved {s.state.upper()}: saved TERMINATED")
    if sid in orphans and not held:
        return Action(sid, "terminate", orphans[sid])
    if s.state == "active":
        return Action(sid, "suspend", "ACTIVE -> SUSPENDED" + (
            f" (an orphan only maybe: {orphans[sid]}; --force terminates it)" if held else ""))
    if held:
        return Action(sid, "keep-orphan", f"not terminated: {orphans[sid]} (--force terminates it)")
    return None


def _do(root: str, a: Action, s: Session, stamps, fs) -> None:
    """One action, its replaced or cut bytes kept in .quarantine/ first."""
    now, stamp = stamps
    d = os.path.join(root, "agents", a.session_id)
    keep = dict(now=stamp, version=__version__, fs=fs)
    if a.action == "cut-tail":
        off, data = s.tail
        quarantine.keep_bytes(root, f"agents__{a.session_id}__events.jsonl", off, data, action="truncate",
                              reason="partial last line of an event log", **keep)
        durable.truncate(os.path.join(d, "events.jsonl"), off, fs)
    elif a.action == "set-aside-session":
        set_aside_dir(root, a.session_id, "a session never saved (no session.json), set aside by recover", fs)
    elif a.action == "set-aside-pending":
        quarantine.keep_bytes(root, f"agents__{a.session_id}__events.pending", 0, s.pending, action="remove",
                              reason="events.pending that is not one complete event line: never acknowledged",
                              **keep)
        durable.remove(os.path.join(d, "events.pending"), fs)
    elif a.action in ("complete-pending", "remove-pending"):
        _complete_pending(d, s, fs)
    elif a.action == "quarantine-tmp":
        quarantine.keep_bytes(root, f"agents__{a.session_id}__session.json.tmp", 0, s.tmp_raw, action="remove",
                              reason="session.json.tmp left by a crash, removed by recovery", **keep)
        tmp = os.path.join(d, "session.json" + durable.TMP_SUFFIX)
        if fs.exists(tmp):
            durable.remove(tmp, fs)
    elif a.action in ("suspend", "terminate", "finish-termination"):
        meta = dict(s.meta)
        meta["state"] = "suspended" if a.action == "suspend" else "terminated"
        if a.action == "suspend":
            meta["suspended_at"] = now
        old = json.dumps(s.meta, indent=2).encode()
        quarantine.keep_bytes(root, f"agents__{a.session_id}__session.json", 0, old, action="replace",
                              reason=a.detail, **keep)
        durable.create_file(os.path.join(d, "session.json"), json.dumps(meta, indent=2).encode(), fs,
                            replace=True)


def _complete_pending(d: str, s: Session, fs) -> None:
    """Substrat's open-time protocol for a pending file that is one whole event line: cut any partial tail
    (done before, with evidence), append the pending line, fsync, unlink the pending file. Substrat skips the
    append when the log already *ends* with the line; walctl skips it when the line is anywhere in the log:
    Substrat unlinks the pending file without syncing the directory, so after a crash an older pending file
    can come back, and appending it again would duplicate an old event (the crash test in
    tests/test_agents.py found this). The log is read again here: an earlier action may have cut its tail."""
    log = os.path.join(d, "events.jsonl")
    line = s.pending
    current = fs.read_range(log, 0, fs.stat(log).size) if fs.exists(log) else b""
    if not (current.startswith(line) or b"\n" + line in current):
        durable.append(log, line, fs)
    durable.remove(os.path.join(d, "events.pending"), fs)


def append_event(session_dir: str, event: dict, fs=DEFAULT_FS) -> None:
    """Substrat's append protocol: the line to events.pending (fsync), then appended to events.jsonl
    (fsync), then the pending file unlinked. A crash leaves the log as it was, or with the line, plus at
    most a pending file that recovery completes."""
    fs = fs.beneath(session_dir)
    line = (json.dumps(event, separators=(",", ":")) + "\n").encode("ascii")
    pending_path = os.path.join(session_dir, "events.pending")
    # Substrat writes the pending file in place and syncs only the file; a durable create (staged, renamed,
    # directory synced) means recovery never meets a half-written one.
    durable.create_file(pending_path, line, fs)
    durable.append(os.path.join(session_dir, "events.jsonl"), line, fs)
    # Substrat unlinks without syncing the directory, so the file can come back after a crash; walctl syncs
    # it (recovery copes with a resurrected one either way: see _complete_pending).
    durable.remove(pending_path, fs)
