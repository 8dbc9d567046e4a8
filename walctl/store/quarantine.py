"""`.quarantine/`: where every removed byte and every moved chunk goes first, with one line per
action in MANIFEST.jsonl. Names are never reused: a second copy of the same bytes reuses the first
file, different bytes get a new suffix."""
from __future__ import annotations

import json
import os

from ..format.digest import sha256_hex
from ..format.fields import ISO, STR, Field, field_problem, shown
from ..format.jsonload import NotText, loads
from ..format.lines import line_spans, overlong_reason, tail_of
from ..format.names import QUARANTINE_DIR, name_problem
from . import durable
from .fs import DEFAULT_FS

MANIFEST = "MANIFEST.jsonl"
# walctl cut's actions: what it set aside was cut on purpose (its sequences are issued again), so no reader
# takes it for what the log lacks (recover's set-aside reading, salvage, verify's accounting).
CUT_BYTES, CUT_FILE = "cut-truncate", "cut-move"
CUT_ACTIONS = (CUT_BYTES, CUT_FILE)
BYTE_ACTIONS = ("truncate", CUT_BYTES)  # lines whose evidence is bytes cut from a file's end
# walctl writes every line; the longest is a --reason the command line can pass (128 KiB), JSON-escaped
MAX_LINE_BYTES = 1 << 20


def qdir(directory: str) -> str:
    return os.path.join(directory, QUARANTINE_DIR)


def _free_name(directory: str, base: str, fs, same_as: str | None = None) -> tuple[str, bool]:
    """(name, already_there): the first of base, base.1, base.2 ... that is free, or that already holds
    exactly the bytes whose sha256 is `same_as`."""
    q = qdir(directory)
    for n in range(10_000):
        name = base if n == 0 else f"{base}.{n}"
        path = os.path.join(q, name)
        if not fs.exists(path):
            return name, False
        if same_as is not None and sha256_file(path, fs) == same_as:
            return name, True
    raise RuntimeError(f"no free quarantine name for {base}")


def sha256_bytes(data) -> str:
    return sha256_hex(data)


def sha256_file(path: str, fs=DEFAULT_FS) -> str:
    with fs.map_read(path) as buf:
        return sha256_hex(buf)


def keep_bytes(directory: str, source: str, offset: int, data: bytes, *, action: str, reason: str,
               now: str, version: str, fs=DEFAULT_FS, extra: dict | None = None) -> dict:
    """Preserves bytes about to be cut from `source` (a name in `directory`), durably, and records it.
    Returns the manifest entry. Safe to repeat after a crash: identical bytes are not copied twice."""
    durable.make_dir(qdir(directory), fs)
    sha = sha256_hex(data)
    name, there = _free_name(directory, f"{source}.{offset}-{offset + len(data)}.{sha[:12]}", fs, sha)
    if not there:
        durable.create_file(os.path.join(qdir(directory), name), data, fs)
    else:
        # A rerun after a crash between the manifest line and the cut: the line is already there; a
        # second one would record one cut twice.
        done = holding_lines(read_manifest(directory, fs)[0]).get(name)
        if done is not None and done.get("action") == action and done.get("source") == source \
                and done.get("offset") == offset and done.get("sha256") == sha:
            return done
    line = dict(entry(now, action, source, offset, len(data), sha, f"{QUARANTINE_DIR}/{name}", reason, version),
                **(extra or {}))
    record(directory, line, fs)
    return line


def move_in_recorded(directory: str, source: str, *, action: str, reason: str, now: str, version: str,
                     manifest: list[dict] | None = None, fs=DEFAULT_FS, before_move=None,
                     extra: dict | None = None) -> dict:
    """Moves the file `source` of `directory` into the quarantine under a name never used before, so that a
    rerun after a crash finishes the same move: the line goes first, then the move. A crash between the two leaves a line for a file still
    in place; the rerun finds that line (same action, source and sha256, its move not finished) and
    finishes the move under the name it gives, so every move has exactly one line and no file is unrecorded.
    `manifest`: the manifest's lines as read before a batch of moves (a pending line can only come from an
    earlier run), so that moving N files reads the manifest once rather than N times.
    before_move(evidence): called once the name is known, before the move (the ledger's `moved` line).
    extra: keys the line carries besides the usual ones (walctl cut's `cut_after`)."""
    durable.make_dir(qdir(directory), fs)
    src = os.path.join(directory, source)
    sha = sha256_file(src, fs)
    def unfinished(name: str) -> bool:  # not moved yet, or moved but the old name came back (unsynced directory)
        path = os.path.join(qdir(directory), name)
        return not fs.exists(path) or sha256_file(path, fs) == sha

    lines = holding_lines(read_manifest(directory, fs)[0] if manifest is None else manifest)
    pending = next((e for name, e in lines.items() if e.get("action") == action and e.get("source") == source
                    and e.get("sha256") == sha and unfinished(name)), None)
    if pending is None:
        name, _ = _free_name(directory, source, fs)
        pending = dict(entry(now, action, source, 0, fs.stat(src).size, sha, f"{QUARANTINE_DIR}/{name}", reason,
                             version), **(extra or {}))
        record(directory, pending, fs)
    dst = os.path.join(directory, pending["evidence"])
    if before_move is not None:
        before_move(pending["evidence"])
    if fs.exists(dst):
        durable.remove(src, fs)  # the same bytes are already there, under this line
    else:
        durable.move(src, dst, fs)
    return pending


def entry(now, action, source, offset, length, sha, evidence, reason, version) -> dict:
    """One manifest line. `evidence`: where the bytes are now (`.quarantine/NAME` or an archive path)."""
    return {"time": now, "action": action, "source": source, "offset": offset, "length": length,
            "sha256": sha, "evidence": evidence, "reason": reason, "walctl_version": version}


LEAVING_ACTIONS = ("restore", "purge")  # lines that end a file's stay in .quarantine/


def last_lines(entries: list[dict]) -> dict[str, dict]:
    """name in .quarantine/ -> the last manifest line about it, whatever its action."""
    out: dict[str, dict] = {}
    for e in entries:
        ev = e.get("evidence")
        if isinstance(ev, str) and ev.startswith(QUARANTINE_DIR + "/"):
            out[ev[len(QUARANTINE_DIR) + 1:]] = e
    return out


def holding_lines(entries: list[dict]) -> dict[str, dict]:
    """name in .quarantine/ -> the manifest line that put it there, for names not restored or purged since
    (such a line no longer describes a file there)."""
    return {name: e for name, e in last_lines(entries).items() if e.get("action") not in LEAVING_ACTIONS}


def record(directory: str, entry: dict, fs=DEFAULT_FS) -> None:
    line = json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n"
    durable.make_dir(qdir(directory), fs)
    path = os.path.join(qdir(directory), MANIFEST)
    if fs.exists(path):
        size = fs.stat(path).size
        if size and fs.read_range(path, size - 1, 1) != b"\n":
            # A crash tore the previous line: start ours on a line of its own, or it would be glued to
            # the fragment and lost with it. The fragment stays, reported by read_manifest.
            line = "\n" + line
    durable.append(path, line.encode("utf-8"), fs)


def read_manifest(directory: str, fs=DEFAULT_FS) -> tuple[list[dict], list[str]]:
    """(entries, problems). A torn last line (a crash mid-append: no newline) is a problem, not a failure,
    and never used even when its JSON is whole: it was never acknowledged (format/lines.py)."""
    path = os.path.join(qdir(directory), MANIFEST)
    if not fs.exists(path):
        return [], []
    entries, problems = [], []
    with fs.map_read(path) as buf:
        tail = tail_of(buf, MAX_LINE_BYTES)
        number = 0
        for number, (pos, nl) in enumerate(line_spans(buf, tail.offset if tail is not None else None), 1):
            _read_line(buf[pos:nl], number, entries, problems)
    if tail is not None:
        problems.append(f"{MANIFEST} line {number + 1}: " + (
            overlong_reason(tail, MAX_LINE_BYTES, "manifest line") if tail.overlong else "torn last line"))
    return entries, problems


def _read_line(line: bytes, i: int, entries: list, problems: list) -> None:
    if not line.strip():
        return
    try:
        e = loads(line, allow_lone_surrogates=False)
    except NotText as why:  # whole, but not text: not a torn line
        problems.append(f"{MANIFEST} line {i}: {why}; ignored (never acted on)")
        return
    except ValueError:  # a fragment a crash left, which the next writer's line followed on a line of its own
        problems.append(f"{MANIFEST} line {i}: not JSON (a line torn by a crash)")
        return
    why = entry_problem(e)
    if why:
        problems.append(f"{MANIFEST} line {i}: {why}; ignored (never acted on)")
    else:
        entries.append(e)


# Actions whose evidence is outside .quarantine/ (an archive's copy): recorded, never used as a path.
EVIDENCE_ELSEWHERE = ("compact-archive", "archive-delete")


_TEXT_FIELDS = {"time": Field(ISO), "reason": Field(STR), "walctl_version": Field(STR, required=False)}


def entry_problem(e) -> str | None:
    """Why a manifest line cannot be trusted, or None. The manifest is a file anyone who can write the
    directory can edit: its names reach the file system only after these checks (a plain name for the
    source, `.quarantine/NAME` for the evidence), so no line can lead outside the directory."""
    if not isinstance(e, dict):
        return "not a JSON object"
    if not isinstance(e.get("action"), str):
        return "no action"
    why = name_problem(e.get("source"))
    if why:
        return f"source {why}"
    for k in ("offset", "length"):
        v = e.get(k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            return f"{k} {shown(v)} is not a byte count"
    sha = e.get("sha256")
    if not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
        return "sha256 is not 64 hex digits"
    for key, f in _TEXT_FIELDS.items():  # shown by list and show: typed like the rest (format/fields.py)
        why = field_problem(key, e.get(key), f, key in e)
        if why:
            return why
    ev = e.get("evidence")
    if not isinstance(ev, str):
        return "no evidence"
    if ev.startswith(QUARANTINE_DIR + "/"):
        why = name_problem(ev[len(QUARANTINE_DIR) + 1:])
        if why:
            return f"evidence {why}"
    elif e["action"] not in EVIDENCE_ELSEWHERE:
        return f"evidence {ev!r} is not in {QUARANTINE_DIR}/"
    return None
