"""quarantine list | show | move | restore | purge: what was set aside, what it holds, putting it back, and
finally letting it go."""
from __future__ import annotations

import os
from typing import NamedTuple

from ...version import __version__
from ...errors import EXIT_CORRUPT, NotClean, Refused, UsageError
from ...format.ledger import fold
from ...format.names import movable_kind  # what `quarantine move` may set aside (advice asks it too)
from ...store import durable, ledger, quarantine as q
from ...store.fs import DEFAULT_FS
from ...store.contain import refuse_links
from ...store.lock import DirectoryLock, holder_text
from ..advice import cmd
from ..clock import utc_now
from ..report import PathReport
from .verify import verify_path


def said(e: dict | None, key: str, default: str = "?") -> str:
    """A manifest line's field as text. The manifest is data anyone who can write the directory can edit:
    its names are checked before use (store.quarantine.entry_problem), its free text is shown as it is,
    and a field that is missing or null reads as `default`, never as None."""
    v = (e or {}).get(key)
    return default if v is None else str(v)


class Item(NamedTuple):
    name: str  # file name inside .quarantine/
    size: int
    entry: dict | None  # the manifest line that put it there (None: unrecorded)

    def to_json(self) -> dict:
        return {"name": self.name, "size": self.size, "recorded": self.entry is not None, "entry": self.entry}


class Listing(NamedTuple):
    path: str
    items: tuple[Item, ...]
    history: tuple[dict, ...]  # every manifest line, in order
    problems: tuple[str, ...]

    def to_json(self) -> dict:
        return {"path": self.path, "items": [i.to_json() for i in self.items], "history": list(self.history),
                "problems": list(self.problems)}


def list_quarantine(directory: str, fs=DEFAULT_FS) -> Listing:
    entries, problems = q.read_manifest(directory, fs)
    by_name = q.holding_lines(entries)
    files = sorted((e for e in fs.listdir(q.qdir(directory))
                    if e.name != q.MANIFEST and not e.name.endswith(durable.TMP_SUFFIX) and e.kind == "file"),
                   key=lambda e: e.name) if fs.exists(q.qdir(directory)) else []
    present = {f.name for f in files}
    for name, e in by_name.items():
        if name not in present:
            problems.append(f"{name}: recorded ({said(e, 'action')} of {said(e, 'source')}) but not in .quarantine/ "
                            f"(a crash before the move? the next run of that command finishes it)")
    last = q.last_lines(entries)
    items = []
    for f in files:
        items.append(Item(f.name, f.size, by_name.get(f.name)))
        if f.name in by_name:
            if by_name[f.name].get("length") != f.size:
                problems.append(f"{f.name}: {f.size} bytes, but its manifest line says {by_name[f.name].get('length')} "
                                f"(changed since it was set aside? restore refuses it)")
            continue
        if last.get(f.name, {}).get("action") == "purge":
            problems.append(f"{f.name}: its purge is recorded but the file is still here (a crash mid-purge? "
                            f"`{cmd('quarantine', 'purge', directory, '--older-than', '36500d', '--apply')}` "
                            f"finishes it)")
        elif is_restore_line(last.get(f.name, {})):
            problems.append(f"{f.name}: its restore is recorded but the file is still here (a crash mid-restore? "
                            f"`{cmd('quarantine', 'restore', directory, f.name, '--apply')}` finishes it)")
        else:
            problems.append(f"{f.name}: in .quarantine/ but not in {q.MANIFEST} (a crash between the move and "
                            f"its manifest line?)")
    return Listing(directory, tuple(items), tuple(entries), tuple(problems))


class Shown(NamedTuple):
    item: Item
    kind: str  # "chunk" (a whole chunk file) or "cut" (bytes cut from a chunk's tail)
    report: PathReport | None  # a whole chunk: verified as a lone chunk
    fields: tuple  # a cut: the first record it holds, annotated (decoded as far as its bytes go)
    records: tuple = ()  # a cut: (offset in the source chunk, fields) for every record in it
    lines: tuple = ()  # a cut: the hex dump at the source's offsets
    offset: int = 0  # where the bytes were in their chunk (0 when no trustworthy manifest line says)
    problems: tuple = ()  # manifest lines that could not be trusted


def show(directory: str, name: str, fs=DEFAULT_FS) -> Shown:
    from .pieces import find_piece, line_problem, view_cut, view_unrecorded

    listing = list_quarantine(directory, fs)
    item = next((i for i in listing.items if i.name == name), None)
    if item is None:
        raise UsageError(f"no {name} in .quarantine/ (see `{cmd('quarantine', 'list', directory)}`)", directory)
    path = os.path.join(q.qdir(directory), name)
    head = fs.read_head(path, 4)
    if head == b"SPEC":
        return Shown(item, "chunk", verify_path(path, fs=fs), ())
    whole = movable_kind(str((item.entry or {}).get("source", ""))) if (item.entry or {}).get("offset") == 0 else None
    if whole == "checkpoint":
        from ..verify_kinds import verify_checkpoints

        return Shown(item, "checkpoint", verify_checkpoints(path, fs=fs), ())
    if whole == "segment":
        from .segments import verify_segments

        return Shown(item, "segment", verify_segments(path, fs=fs), ())
    piece, problems = find_piece(directory, name, fs)
    if item.entry is not None and line_problem(item.entry):
        problems = problems + (f"{name}: its manifest line is not trusted ({line_problem(item.entry)}): "
                               f"offsets are the piece's own",)
    view = view_cut(directory, piece, fs=fs) if piece is not None else view_unrecorded(directory, name, fs=fs)
    first = view.records[0][1] if view.records else ()
    return Shown(item, "cut", None, first, view.records, view.lines, piece.offset if piece else 0, problems)


class Action(NamedTuple):
    path: str
    action: str
    applied: bool
    source: str
    target: str
    entry: dict | None
    already: bool = False  # a restore that was done before (a rerun, or run twice): nothing left to do

    def to_json(self) -> dict:
        return dict(self._asdict())


def move(directory: str, chunk: str, *, reason: str, apply: bool = False, fs=DEFAULT_FS) -> Action:
    fs = fs.beneath(directory)
    src = os.path.join(directory, chunk)
    if os.path.dirname(chunk) or not fs.exists(src) or fs.stat(src).kind != "file":
        raise UsageError(f"{chunk} is not a file in {directory}", directory)
    if movable_kind(chunk) is None:
        raise UsageError(f"{chunk} is not a chunk (wal-NNNNNN.bin), an ADR-003 segment (wal_NNNNNNNN.log) or a "
                         "checkpoint (<uuid>.ckpt)", directory)
    target = f"{q.QUARANTINE_DIR}/{chunk} (or {chunk}.N when taken)"
    refuse_links(directory, [chunk], fs, what="move")
    if not apply:
        return Action(directory, "move", False, chunk, target, None)
    with DirectoryLock(directory, holder_text("quarantine move"), fs):
        now = utc_now()
        entry = q.move_in_recorded(directory, chunk, action="move", reason=reason, now=now, version=__version__, fs=fs,
                          before_move=lambda to: ledger.record_moved(directory, chunk, to, "quarantine", now, fs))
    return Action(directory, "move", True, chunk, entry["evidence"], entry)


def restore(directory: str, name: str, *, apply: bool = False, fs=DEFAULT_FS) -> Action:
    """Puts a quarantined file back: cut bytes onto the very end they were cut from, a whole file under its
    old name. The manifest's `restore` line goes first, then the act: a crash in between leaves a restore
    that is recorded but unfinished, which `quarantine list` names and a rerun of the same command
    finishes (never a second line, never a restored file that the manifest still calls quarantined)."""
    fs = fs.beneath(directory)
    listing = list_quarantine(directory, fs)
    item = next((i for i in listing.items if i.name == name), None)
    pending = _unfinished_restore(listing, name)
    if pending is not None and _restored(directory, name, pending, fs):
        return Action(directory, f"restore-{pending['restore']}", False, name, pending["source"], pending, True)
    if pending is not None:
        return _finish_restore(directory, name, pending, apply, fs)
    if item is None:
        done = _restore_line(listing, name)
        if done is not None and _restored(directory, name, done, fs):
            return Action(directory, f"restore-{done['restore']}", False, name, done["source"], done, True)
        if done is not None:
            raise Refused(f"{name} was restored to {done['source']} at {said(done, 'time')}, but {done['source']} no "
                          f"longer holds those bytes and .quarantine/{name} is gone; nothing was changed", directory)
    if item is None or item.entry is None:
        raise UsageError(f"{name} is not a recorded item of .quarantine/ (see `{cmd('quarantine', 'list', directory)}`)",
                         directory)
    e = item.entry
    refuse_links(directory, [e["source"], f"{q.QUARANTINE_DIR}/{name}"], fs, what="restore")
    _check_evidence(directory, name, e, fs)
    dest = os.path.join(directory, e["source"])
    kind = "bytes" if e["action"] in q.BYTE_ACTIONS else "file"
    if e["action"] in q.CUT_ACTIONS:
        _refuse_reuse(directory, e, fs)
    if kind == "bytes":
        # Bytes cut from a tail go back only onto the very same end of that chunk.
        size = fs.stat(dest).size if fs.exists(dest) else None
        if size != e["offset"]:
            raise Refused(f"{e['source']} is {size} bytes, not {e['offset']}: the cut bytes no longer fit its end; "
                          f"nothing was changed", directory)
    elif fs.exists(dest):
        raise Refused(f"{e['source']} exists again; restore never overwrites it (move it aside first)", directory)
    if not apply:
        return Action(directory, f"restore-{kind}", False, name, e["source"], None)
    with DirectoryLock(directory, holder_text("quarantine restore"), fs):
        what = (f"restored {item.size} bytes onto the end of {e['source']}" if kind == "bytes"
                else f"moved back to {e['source']}")
        entry = dict(e, action="restore", restore=kind, time=utc_now(), evidence=f"{q.QUARANTINE_DIR}/{name}",
                     reason=what)
        q.record(directory, entry, fs)
        _restore_act(directory, name, entry, fs)
    return Action(directory, f"restore-{kind}", True, name, e["source"], entry)


def _refuse_reuse(directory: str, line: dict, fs) -> None:
    """What walctl cut set aside goes back only while its sequences were not issued again: once a writer
    went on from the cut, putting the old ones back would repeat sequences."""
    keep = line.get("cut_after")
    read = ledger.read_ledger(directory, fs)
    if not isinstance(keep, int) or read is None:
        return
    exp = fold(read.lines)
    issued = exp.hwm
    if any(r.get("last_seq_kept") == keep for r in exp.rewinds) and issued > keep:
        raise Refused(f"{line['source']} was cut after sequence {keep}, and sequences up to {issued} were issued here "
                      f"since: putting the cut part back would repeat them; nothing was changed", directory)


def _check_evidence(directory: str, name: str, line: dict, fs) -> None:
    """Only the very bytes a manifest line describes go back: a piece changed since (by hand, by rot) is
    refused, and stays where it is."""
    qpath = os.path.join(q.qdir(directory), name)
    if fs.exists(qpath) and q.sha256_file(qpath, fs) != line["sha256"]:
        raise NotClean(f"{q.QUARANTINE_DIR}/{name} is not the evidence its manifest line describes (sha256 "
                       f"differs): it is never put back; nothing was changed", directory, code=EXIT_CORRUPT)


def is_restore_line(line: dict) -> bool:
    """A `restore` line as walctl writes it (what it put back: bytes or a file): the one rule for list's
    advice and for restore's rerun, so the command list prints is one restore accepts."""
    return line.get("action") == "restore" and line.get("restore") in ("bytes", "file")


def _restore_line(listing: Listing, name: str) -> dict | None:
    """The last manifest line about `name` when it is a restore."""
    last = q.last_lines(list(listing.history)).get(name)
    return last if last is not None and is_restore_line(last) else None


def _restored(directory: str, name: str, line: dict, fs) -> bool:
    """The restore `line` records is done, every step: the piece has left .quarantine/, the bytes are back
    (a chunk that grew since still holds them at their offset), and a whole file's ledger says it is back."""
    if fs.exists(os.path.join(q.qdir(directory), name)):
        return False
    dest = os.path.join(directory, line["source"])
    if not fs.exists(dest) or fs.stat(dest).kind != "file":
        return False
    if line["restore"] == "bytes":
        end = line["offset"] + line["length"]
        return fs.stat(dest).size >= end and \
            q.sha256_bytes(fs.read_range(dest, line["offset"], line["length"])) == line["sha256"]
    if q.sha256_file(dest, fs) != line["sha256"]:
        return False
    read = ledger.read_ledger(directory, fs)
    return read is None or line["source"] not in fold(read.lines).moved


def _unfinished_restore(listing: Listing, name: str) -> dict | None:
    """The `restore` line of a restore a crash interrupted: the last line about `name` is a restore whose
    file is still in .quarantine/ (the act, or its last step, did not happen)."""
    last = _restore_line(listing, name)
    if last is None:
        return None
    # A whole file already moved back may still lack the ledger's `restored` line (its last step).
    present = any(i.name == name for i in listing.items)
    return last if present or last["restore"] == "file" else None


def _finish_restore(directory: str, name: str, line: dict, apply: bool, fs) -> Action:
    refuse_links(directory, [line["source"], f"{q.QUARANTINE_DIR}/{name}"], fs, what="restore")
    kind = line["restore"]
    if apply:
        with DirectoryLock(directory, holder_text("quarantine restore"), fs):
            _restore_act(directory, name, line, fs)
    return Action(directory, f"restore-{kind}", apply, name, line["source"], line)


def _restore_act(directory: str, name: str, line: dict, fs) -> None:
    """The act a `restore` line records, from wherever a crash stopped it: each step is done only when it
    is not done yet, and only onto bytes that are exactly what the line says."""
    qpath = os.path.join(q.qdir(directory), name)
    dest = os.path.join(directory, line["source"])
    _check_evidence(directory, name, line, fs)
    if line["restore"] == "bytes":
        size = fs.stat(dest).size if fs.exists(dest) else None
        end = line["offset"] + line["length"]
        if size == line["offset"]:
            durable.append(dest, fs.read_range(qpath, 0, line["length"]), fs)
        elif size != end or q.sha256_bytes(fs.read_range(dest, line["offset"], line["length"])) != line["sha256"]:
            raise Refused(f"{line['source']} is {size} bytes and does not end with the restored bytes; "
                          f"{q.QUARANTINE_DIR}/{name} stays where it is", directory)
        durable.remove(qpath, fs)
        return
    if fs.exists(qpath):
        if not fs.exists(dest):
            durable.move(qpath, dest, fs)
        elif q.sha256_file(dest, fs) == line["sha256"] == q.sha256_file(qpath, fs):
            durable.remove(qpath, fs)  # moved, but a crash before its directory's sync brought the old name back
        else:
            raise Refused(f"{line['source']} exists again; restore never overwrites it (move it aside first)",
                          directory)
    elif not fs.exists(dest) or q.sha256_file(dest, fs) != line["sha256"]:
        raise Refused(f"{q.QUARANTINE_DIR}/{name} is gone and {line['source']} is not the restored file; "
                      f"nothing was changed", directory)
    ledger.record_restored(directory, line["source"], line["time"], fs)


class Purged(NamedTuple):
    path: str
    applied: bool
    older_than_s: float
    removals: tuple[Item, ...]  # recorded items old enough (and purges a crash left unfinished)
    kept: tuple[tuple[Item, str], ...]  # (item, why it stays)
    entries: tuple[dict, ...]  # the manifest lines written

    @property
    def bytes(self) -> int:
        return sum(i.size for i in self.removals)

    def to_json(self) -> dict:
        return {"path": self.path, "applied": self.applied, "older_than_s": self.older_than_s,
                "bytes": self.bytes, "removed": [i.to_json() for i in self.removals],
                "kept": [dict(i.to_json(), why=why) for i, why in self.kept], "entries": list(self.entries)}


def purge(directory: str, *, older_than_s: float, apply: bool = False, now: float | None = None,
          fs=DEFAULT_FS) -> Purged:
    """Deletes quarantined files whose manifest line is older than `older_than_s`: the one walctl command
    that destroys evidence, so only on request (dry run unless apply), only files a manifest line
    describes (an unrecorded file is a crash's leftover nobody has looked at), and each deletion is
    recorded first (action "purge", with the file's sha256), so the manifest keeps what was there."""
    import time as _time

    now = _time.time() if now is None else now
    fs = fs.beneath(directory)
    if not fs.exists(q.qdir(directory)):
        return Purged(directory, False, older_than_s, (), (), ())
    plan = _purge(directory, older_than_s, now, False, fs)  # refusals before even the lock file
    if not apply:
        return plan
    with DirectoryLock(directory, holder_text("quarantine purge"), fs):
        return _purge(directory, older_than_s, now, True, fs)


def _purge(directory: str, older_than_s: float, now: float, apply: bool, fs) -> Purged:
    entries, _ = q.read_manifest(directory, fs)
    last = q.last_lines(entries)
    listing = list_quarantine(directory, fs)
    removals, kept = [], []
    for item in listing.items:
        line = item.entry or last.get(item.name)
        if line is None:
            kept.append((item, f"unrecorded: see `{cmd('quarantine', 'list', directory)}`"))
        elif line.get("action") == "purge":
            removals.append(item)  # recorded as purged, then a crash: finish it
        else:
            age = _age_s(line.get("time"), now)
            if age is None:
                kept.append((item, f"its manifest time ({said(line, 'time', 'none')}) cannot be read"))
            elif age < older_than_s:
                kept.append((item, f"{age / 86400:.1f} days old"))
            else:
                removals.append(item)
    written: list[dict] = []
    refuse_links(directory, [f"{q.QUARANTINE_DIR}/{i.name}" for i in removals], fs, what="delete")
    if apply:
        stamp = utc_now()
        for item in removals:
            path = os.path.join(q.qdir(directory), item.name)
            if item.entry is not None:  # (an unfinished purge, recorded before a crash, has its line)
                e = item.entry
                line = q.entry(stamp, "purge", e.get("source"), e.get("offset"), item.size, q.sha256_file(path, fs),
                               f"{q.QUARANTINE_DIR}/{item.name}",
                               f"purged ({said(e, 'action')} of {said(e, 'time')}: {said(e, 'reason', '')})", __version__)
                q.record(directory, line, fs)
                written.append(line)
            durable.remove(path, fs)
    return Purged(directory, apply, older_than_s, tuple(removals), tuple(kept), tuple(written))


def _age_s(stamp, now: float) -> float | None:
    import calendar
    import time as _time

    if not isinstance(stamp, str):
        return None
    try:
        base, _, frac = stamp.rstrip("Z").partition(".")
        t = calendar.timegm(_time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + (float("0." + frac) if frac else 0.0)
    except ValueError:
        return None
    return now - t
