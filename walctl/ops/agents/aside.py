"""Substrat agent roots: setting things aside, and the guards every change to a root passes first.

`set_aside` moves one events.jsonl line (unreadable, or a readable duplicate agent.created) or a whole session
directory (its session.json unreadable or missing) into `<root>/.quarantine/`, each file's bytes under a
manifest line before anything is removed. `set_aside_dir` is also what recover does with a session that was
never saved. The guards (`refuse_live_daemon`, `refuse_links`) run before any byte changes: a live Substrat
daemon appends through open files that a replaced log would no longer be, so nothing changes under it.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import NamedTuple

from ...version import __version__
from ...errors import REASON_LOCKED, EnvironmentProblem, Refused, UsageError
from ...store import durable, quarantine
from ...store.fs import DEFAULT_FS
from ...store.lock import DirectoryLock, holder_text
from .roots import _HEX32, NO_SESSION_JSON, _held, live_daemon, read_root, read_session
from ..clock import utc_now

SESSION_FILES = ("session.json", "events.jsonl", "events.pending", "session.json.tmp", "events.jsonl.tmp")


def refuse_live_daemon(root: str, fs=DEFAULT_FS) -> None:
    """Exit 6 naming the holder while a live process holds ROOT/daemon.lock (as Substrat's daemon does)."""
    daemon = live_daemon(root, fs)
    if daemon:
        raise EnvironmentProblem(f"a live daemon holds daemon.lock ({daemon}): it appends through files this "
                                 "would replace; stop it first; nothing was changed", root, kind=REASON_LOCKED)


@contextmanager
def daemon_held_off(root: str, fs=DEFAULT_FS):
    """While a root is changed: no live daemon (refuse_live_daemon, checked again here, under walctl's lock,
    right before writing), and a shared flock on daemon.lock (when the file is there), so that a daemon
    starting meanwhile cannot take it exclusively and append to files being replaced. Neither creates nor
    writes daemon.lock."""
    refuse_live_daemon(root, fs)
    hold = fs.hold_shared(os.path.join(root, "daemon.lock"))
    if hold is False:  # taken between the check and the hold
        refuse_live_daemon(root, fs)
        raise EnvironmentProblem("daemon.lock is held by another process; nothing was changed", root,
                                 kind=REASON_LOCKED)
    try:
        yield
    finally:
        if hold:
            fs.release_shared(hold)


def refuse_links(root: str, session_ids, fs=DEFAULT_FS, extra=()) -> None:
    """Containment, checked when planning so that a refusal changes nothing: a mutation never goes through a
    symlinked agents directory, session directory or session file, nor changes a hard-linked one, the lock,
    .quarantine/ or its manifest (exit 7, naming it): store/contain.py's one check, over these names."""
    from ...store.contain import refuse_links as refuse

    names = ["agents", *extra]
    for sid in session_ids:
        names += [f"agents/{sid}"] + [f"agents/{sid}/{n}" for n in SESSION_FILES]
    refuse(root, names, fs)


class SetAside(NamedTuple):
    session_id: str
    target: str  # "events.jsonl" or "session.json"
    line: int | None
    offset: int
    length: int
    held: str  # what the line or file held (shortened)
    why: str  # why it is set aside
    applied: bool
    evidence: str | None  # .quarantine/NAME of the whole old file (of session.json for --session)
    files: tuple = ()  # --session: every file of the directory, each kept in .quarantine/
    warnings: tuple = ()  # what the set-aside leaves for recover to decide (orphans)

    def to_json(self) -> dict:
        d = self._asdict()
        d["files"], d["warnings"] = list(self.files), list(self.warnings)
        return d


def set_aside(root: str, session_id: str, *, line: int | None = None, session: bool = False, apply: bool = False,
              force: bool = False, fs=DEFAULT_FS) -> SetAside:
    """Sets aside one events.jsonl line, unreadable or a readable duplicate agent.created (the log rewritten
    without it by durable replace; the whole old file kept first), or a whole session directory whose
    session.json is unreadable or missing (Substrat skips a directory without one, while an unreadable one
    stops its whole root from loading; a directory without one was never saved). Every file goes to
    ROOT/.quarantine/ with a manifest line first. Dry run unless `apply`; `apply` needs `force`, because it
    rewrites acknowledged history. Only what walctl finds wrong is set aside, so a rerun after success finds
    nothing to do."""
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
    refuse_live_daemon(root, fs)
    refuse_links(root, [session_id], fs)  # before even the lock file
    with DirectoryLock(root, holder_text("agents set-aside"), fs), daemon_held_off(root, fs):
        return _set_aside(root, session_id, line, True, force, fs)


def _set_aside(root, sid, line, apply, force, fs) -> SetAside:
    d = os.path.join(root, "agents", sid)
    s = read_session(d, fs)
    report, new = _line_plan(d, s, line, fs) if line is not None else _session_plan(d, s, fs)
    report = report._replace(warnings=_orphan_warnings(root, s, line, new, fs))
    if not apply:
        return report
    target = report.target
    if not force:
        what = f"line {line} of {target}" if line else "the session directory"
        raise Refused(f"setting aside {what} rewrites acknowledged history: add --force (every old file is kept in "
                      ".quarantine/); nothing was changed", os.path.join(d, target))
    if line is None:
        kept = set_aside_dir(root, sid, f"set aside: {report.why}", fs)
        first = next((k for k in kept if k["source"].endswith("__session.json")), kept[0] if kept else None)
        return report._replace(applied=True, evidence=first and first["evidence"])
    refuse_links(root, [sid], fs)
    path = os.path.join(d, target)
    data = fs.read_range(path, 0, fs.stat(path).size)
    kept = quarantine.keep_bytes(root, f"agents__{sid}__{target}", 0, data, action="set-aside",
                                 reason=f"line {line} set aside: {report.why}", now=utc_now(), version=__version__,
                                 fs=fs)
    durable.create_file(path, new, fs, replace=True)
    return report._replace(applied=True, evidence=kept["evidence"])


def _line_plan(d: str, s, line: int, fs) -> tuple[SetAside, bytes]:
    target = "events.jsonl"
    if not 1 <= line <= len(s.lines):
        raise UsageError(f"line {line}: the log has {len(s.lines)} newline-terminated lines", f"{d}/{target}")
    ln = s.lines[line - 1]
    why = ln.problem
    created = s.created_lines
    if why is None and ln in created and len(created) > 1:
        why = (f"one of {len(created)} agent.created lines (lines {', '.join(str(c.number) for c in created)}); "
               f"the runtime uses the last, line {created[-1].number}")
    if why is None:
        raise Refused(f"line {line} is a readable event; only an unreadable line or a duplicate agent.created is "
                      "set aside; nothing was changed", f"{d}/{target}")
    path = os.path.join(d, target)
    data = fs.read_range(path, 0, fs.stat(path).size)
    report = SetAside(s.session_id, target, line, ln.offset, ln.end - ln.offset, _held(data[ln.offset:ln.end - 1]),
                      why, False, None)
    return report, data[:ln.offset] + data[ln.end:]


def _session_plan(d: str, s, fs) -> tuple[SetAside, None]:
    path = os.path.join(d, "session.json")
    if s.problem is None:
        raise Refused("session.json is readable; only a session whose session.json is unreadable or missing is set "
                      "aside; nothing was changed", path)
    files = _dir_files(d, fs)
    data = fs.read_range(path, 0, fs.stat(path).size) if fs.exists(path) else b""
    why = s.problem if s.problem != NO_SESSION_JSON else "no session.json: the session was never saved"
    return SetAside(s.session_id, "session.json", None, 0, len(data), _held(data), why, False, None,
                    tuple(e.name for e in files)), None


def _orphan_warnings(root: str, s, line, new, fs) -> tuple:
    """What becomes an orphan once this is set aside: the session itself when it is left without an
    agent.created, and the sessions that name it as their parent. recover keeps them suspended (they may be
    orphans only because of what was set aside) and terminates them only with --force."""
    if s.state == "terminated":
        return ()
    if line is not None:
        left = [ln for ln in s.created_lines if ln.number != line]
        if left or (s.lines[line - 1].event is not None and s.lines[line - 1] not in s.created_lines):
            return ()
    children = sorted(o.session_id for o in read_root(root, fs) if o.session_id != s.session_id and any(
        (e.get("data") or {}).get("parent_session_id") == s.session_id
        for e in o.events if e["event"] == "agent.created") and o.state != "terminated")
    who = ([f"session {s.session_id} (no agent.created left)"] if line is not None and s.meta is not None else []) + \
        [f"session {c}" for c in children]
    if not who:
        return ()
    return (f"{', '.join(who)} become{'s' if len(who) == 1 else ''} orphans: recover keeps them suspended; "
            "recover --apply --force terminates them",)


def _dir_files(d: str, fs) -> list:
    return sorted(fs.listdir(d), key=lambda e: (e.name != "session.json", e.name))


def set_aside_dir(root: str, sid: str, reason: str, fs) -> list[dict]:
    """A whole session directory into .quarantine/: session.json first (from then on the runtime skips the
    directory), then every other file, each under a manifest line before it is removed, then the empty
    directory. A rerun after a crash finds the lines already written and finishes (one line per file)."""
    d = os.path.join(root, "agents", sid)
    files = _dir_files(d, fs)
    refuse_links(root, [sid], fs, extra=[f"agents/{sid}/{e.name}" for e in files])
    odd = [e.name for e in files if e.kind != "file"]
    if odd:
        raise Refused(f"agents/{sid} holds {', '.join(odd)}, not a regular file: not set aside; nothing was "
                      "changed", d)
    kept = []
    for e in files:
        data = fs.read_range(e.path, 0, fs.stat(e.path).size)
        kept.append(quarantine.keep_bytes(root, f"agents__{sid}__{e.name}", 0, data, action="set-aside",
                                          reason=reason, now=utc_now(), version=__version__, fs=fs))
        durable.remove(e.path, fs)
    durable.remove_dir(d, fs)
    return kept
