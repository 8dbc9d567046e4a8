"""archive of task-log directories (Tiffany ADR-0006) and Substrat roots: each file pushed as a whole-file
version, `<ns>/tasklogs/<task_id>.wal.<sha256>` or `<ns>/agents/<session_id>.<file>.<ms>.<sha256>`
(format/archive_manifest.py: version_name). Rules: docs/format.md section 13.

- A line log (a task log, events.jsonl) is pushed up to its last `\\n`: a torn last line, an append in
  flight, is never shipped (the next push ships it once it is whole). session.json and events.pending
  go as they are (Substrat replaces session.json by a rename; a pending file is one event).
- A version is named by its SHA-256, so a push of an unchanged file uploads nothing, and a grown log
  is a new object: objects are never overwritten. An agent root's file also carries the time its
  bytes stood (its mtime when read, ms): restore --until T takes, per file, the newest version at or
  before T. A task log is cut instead: restore takes its newest version and keeps the entries up to
  the first one stamped after T.
- A version is described as WAL objects are (ops/archive/objects.py: describe, through the kinds table): its
  bytes must carry the SHA-256 its name says and read clean (task log lines as `tasklog verify` reads
  them; events.jsonl and session.json as JSON objects); damage holds it back (push) or is a finding
  (archive verify).
"""
from __future__ import annotations

import hashlib
import os

from ...errors import EXIT_CORRUPT, EXIT_UNSUPPORTED, WalctlError
from ...format.archive_manifest import AGENT_FILES, AGENTS, TASKLOGS, parse_version_name, version_name
from ...store.fs import DEFAULT_FS
from .. import classes as K
from .objects import Entry
from ..findings import Finding

LINE_LOGS = (".wal", "events.jsonl")  # files pushed up to their last newline


def tasklog_sources(root: str, fs=DEFAULT_FS) -> list[tuple[tuple[str, ...], str]]:
    """(path below the root, path) of each task log `<task_id>.wal`: regular files, never links."""
    from ...format.names import is_plain_name

    out = []
    for e in sorted(fs.listdir(root), key=lambda e: e.name):
        st = fs.lstat(e.path)
        if e.name.endswith(".wal") and len(e.name) > 4 and is_plain_name(e.name) and st is not None \
                and _regular(st):
            out.append(((e.name,), e.path))
    return out


def agent_sources(root: str, fs=DEFAULT_FS) -> list[tuple[tuple[str, ...], str]]:
    """(path below the root, path) of each session's session.json, events.jsonl and events.pending."""
    import re

    agents, out = os.path.join(root, "agents"), []
    for d in sorted(fs.listdir(agents), key=lambda e: e.name):
        st = fs.lstat(d.path)
        if not re.fullmatch(r"[0-9a-f]{32}", d.name) or st is None or not _is_dir(st):
            continue
        for f in AGENT_FILES:
            p = os.path.join(d.path, f)
            fst = fs.lstat(p)
            if fst is not None and _regular(fst):
                out.append((("agents", d.name, f), p))
    return out


def _regular(st) -> bool:
    import stat

    return stat.S_ISREG(st.st_mode)


def _is_dir(st) -> bool:
    import stat

    return stat.S_ISDIR(st.st_mode)


def stage_tasklogs(root: str, scratch) -> list[tuple[str, str]]:
    """(staged path, object kind) of every task log's complete lines, named as its version (KINDS: stage)."""
    return _stage(TASKLOGS, tasklog_sources(root), scratch)


def stage_agents(root: str, scratch) -> list[tuple[str, str]]:
    return _stage(AGENTS, agent_sources(root), scratch)


def _stage(kind: str, sources, scratch, fs=DEFAULT_FS) -> list[tuple[str, str]]:
    """Each file's bytes (a line log's up to its last newline) copied beside the push, under its version's
    name: the push then uploads that copy, so a writer appending meanwhile changes nothing it sends."""
    out = []
    for rel, path in sources:
        st = fs.lstat(path)
        if st is None:
            continue  # gone since the listing (a pending file completed into its log)
        with fs.map_read(path) as buf:
            view = memoryview(buf)
            end = buf.rfind(b"\n") + 1 if rel[-1].endswith(LINE_LOGS) else len(buf)
            sha = hashlib.sha256(view[:end]).hexdigest()
            name = version_name(kind, rel, sha, st.st_mtime_ns // 1_000_000)
            with scratch.open_write(name) as f:
                f.write(view[:end])
            view.release()
        out.append((scratch.path(name), kind))
    return out


def ts_ms(ts: str) -> tuple[int, bool]:
    """A task-log `ts` (YYYY-MM-DDTHH:MM:SS[.fraction]Z) as (epoch ms, floored; whether a fraction of a
    millisecond was dropped): an entry is at or before T when ms < T, or ms == T with nothing dropped."""
    import calendar
    import time

    secs = calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S"))
    frac = ts[20:-1] if ts[19] == "." else ""
    return secs * 1000 + int((frac[:3] or "0").ljust(3, "0")), frac[3:].strip("0") != ""


def at_or_before(ts: str, until_ms: int) -> bool:
    ms, dropped = ts_ms(ts)
    return ms < until_ms or (ms == until_ms and not dropped)


def tasklog_lines(buf, task_id: str):
    """(offset, end, entry or None, problem code, problem) of each complete line."""
    from ...format import tasklog_entry as te

    off = 0
    while True:
        nl = buf.find(b"\n", off)
        if nl < 0:
            return
        entry, code, problem = te.parse_line(bytes(buf[off:nl]), task_id)
        yield off, nl + 1, entry, code, problem
        off = nl + 1


def _version(name: str, kind: str, buf, md5) -> tuple[object, str, Finding | None]:
    v = parse_version_name(kind, name)
    if v is None:
        return None, "", Finding(K.UNSUPPORTED, EXIT_UNSUPPORTED, f"not a {kind} version name", name)
    sha = hashlib.sha256(buf).hexdigest()
    if md5 is not None:
        md5.append(hashlib.md5(buf).hexdigest())
    if sha != v.sha256:
        return v, sha, Finding(K.MANIFEST_MISMATCH, EXIT_CORRUPT, "its bytes' SHA-256 is not the one its name "
                               "carries", name, stored=v.sha256, computed=sha)
    if v.path[-1].endswith(LINE_LOGS) and len(buf) and buf[-1:] != b"\n":
        return v, sha, Finding(K.ARCHIVED_DAMAGE, EXIT_CORRUPT, "ends inside a line (only complete lines are "
                               "archived)", name, len(buf))
    return v, sha, None


def describe_tasklog(path: str, name: str, size: int, now: str, md5,
                     fs=DEFAULT_FS) -> tuple[Entry | None, Finding | None]:
    """A task log version (KINDS: describe): complete lines that read as `tasklog verify` reads them."""
    try:
        with fs.map_read(path) as buf:
            v, sha, f = _version(name, TASKLOGS, buf, md5)
            if f is not None:
                return None, f
            last = None
            for off, end, entry, code, problem in tasklog_lines(buf, v.path[0][:-4]):
                if entry is None and code >= EXIT_CORRUPT:
                    return None, Finding(K.ARCHIVED_DAMAGE, code, f"line at offset {off}: {problem}", name, off, end)
                last = entry if entry is not None else last
    except WalctlError as e:
        return None, Finding(K.UNREADABLE, e.exit_code, e.reason, name)
    return Entry(name, TASKLOGS, size, sha, None, None, now,
                 last_time_ms=ts_ms(last["ts"])[0] if last else None), None


def describe_agent_file(path: str, name: str, size: int, now: str, md5,
                        fs=DEFAULT_FS) -> tuple[Entry | None, Finding | None]:
    """A Substrat file version (KINDS: describe): events.jsonl complete lines of JSON objects, session.json
    one JSON object, events.pending as it is (one event on its way into the log)."""
    from ...format.jsonload import loads

    try:
        with fs.map_read(path) as buf:
            v, sha, f = _version(name, AGENTS, buf, md5)
            if f is not None:
                return None, f
            docs = [] if v.path[-1] == "events.pending" else \
                bytes(buf).splitlines() if v.path[-1] == "events.jsonl" else [bytes(buf)]
    except WalctlError as e:
        return None, Finding(K.UNREADABLE, e.exit_code, e.reason, name)
    for i, raw in enumerate(docs, 1):
        try:
            ok = isinstance(loads(raw), dict)
        except ValueError:
            ok = False
        if not ok:
            return None, Finding(K.ARCHIVED_DAMAGE, EXIT_CORRUPT, f"{v.path[-1]} line {i}: not a JSON object", name)
    return Entry(name, AGENTS, size, sha, None, None, now, as_of_ms=v.as_of_ms), None
