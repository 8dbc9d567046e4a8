"""seal and accept-loss: the two ledger lines an operator writes (docs/format.md, "The directory ledger").

seal: chunks written by other software (the Java writer) get the seal lines walctl's writer would have
  written: every closed chunk that verifies clean, never the last one (it may still grow), each synced
  before it is hashed. Idempotent: a chunk already sealed with the same bytes is left as it is.
accept-loss: an operator's recorded decision that sequences A..B are gone for good (after a salvage, a lost
  tail). Only ranges that really are missing; afterwards verify reports them as warnings and writers append
  after them. Dry run unless apply; each is one durable append under the directory's lock.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...errors import EXIT_OK, NotClean, Refused, UsageError, WalctlError
from ...format import ledger as L
from ...store import durable
from ...store import ledger as SL
from ...store.contain import refuse_links
from ...store.fs import DEFAULT_FS
from ...store.lock import DirectoryLock, holder_text
from .. import classes as K
from .. import findings as F
from .ledger_check import LEDGER_FILE
from ..clock import utc_now
from ..kinds import kind_of
from ..report import PathReport, examined
from .verify import detect_kind, require_recognised, verify_path


class SealItem(NamedTuple):
    file: str
    action: str  # "seal" | "already-sealed" | "skip"
    reason: str
    first_seq: int | None
    last_seq: int | None
    records: int
    size: int
    sha256: str | None

    def to_json(self) -> dict:
        return dict(self._asdict())


class SealReport(NamedTuple):
    path: str
    applied: bool
    items: tuple[SealItem, ...]
    before: PathReport

    @property
    def exit_code(self) -> int:
        return EXIT_OK

    def to_json(self) -> dict:
        return {"path": self.path, "applied": self.applied, "exit_code": self.exit_code,
                "sealed": [i.file for i in self.items if i.action == "seal"],
                "items": [i.to_json() for i in self.items],
                "verify": {"verdict": self.before.verdict, "exit_code": self.before.exit_code}}


def _need_log_dir(path: str, fs) -> None:
    if fs.stat(path).kind != "dir":
        raise UsageError("works on a chunk or segment directory", path)


def seal(directory: str, *, apply: bool = False, fs=DEFAULT_FS) -> SealReport:
    fs = fs.beneath(directory)  # opened once: the kind check, the plan and the act read one directory
    _need_log_dir(directory, fs)
    if not apply:
        return _plan_seal(directory, fs, False)
    detect_kind(directory, fs)  # nothing recognised is unsupported (5) before even the lock file is made
    refuse_links(directory, [], fs, what="write")
    with DirectoryLock(directory, holder_text("seal"), fs):
        rep = _plan_seal(directory, fs, True)
        refuse_links(directory, [i.file for i in rep.items if i.action == "seal"], fs, what="seal")
        todo = [i for i in rep.items if i.action == "seal"]
        now = utc_now()
        lines, written = [], {}
        for i in todo:
            path = os.path.join(directory, i.file)
            durable.sync_file(path, fs)  # the seal vouches for these bytes: they must be on disk first
            lines.append(SL.seal_line(path, i.first_seq, i.last_seq, i.records, now, fs))
            written[i.file] = L.decode_line(lines[-1].rstrip(b"\n"))  # what the line says (hash, size)
        try:
            SL.append_lines(directory, lines, fs)
        except NotClean as e:  # the ledger itself is damaged: seal's own document says what it found
            raise examined(e, dict(rep.to_json(), sealed=[]), rep.before)
        from ...store.seqindex import refresh_index

        # after the seals it repeats (a crash before it leaves files unindexed), of files verify just read
        refresh_index(directory, fs, skip={f.file for f in rep.before.findings if f.exit_code})
        try:
            _point_last(directory, rep.before, {i.file for i in todo}, now, fs)
        except (WalctlError, OSError):
            pass  # points are a hint (a reader without them reads the last file from its start): seal is done
        # each item reports the hash and size its ledger line records, not the plan's unknown hash
        items = tuple(i._replace(sha256=written[i.file].get("sha256"), size=written[i.file].get("size"))
                      if i.file in written else i for i in rep.items)
        return rep._replace(applied=bool(lines), items=items)


def _point_last(directory: str, report: PathReport, sealed_now: set, now: str, fs) -> None:
    """The sequence index's points of the last file (never sealed: it may still grow), when verify read
    it clean up to at most a torn tail, so that a reader seeking in it starts near its target; the points
    of files sealed are dropped (store/seqpoints.py)."""
    from ...errors import EXIT_TORN
    from ...format.names import parse_chunk_name
    from ...store import seqpoints

    exp = SL.read_ledger(directory, fs)
    drop = set(L.fold(exp.lines).sealed) if exp is not None else set(sealed_now)
    last = report.chunks[-1] if report.chunks else None
    clean = last is not None and last.exit_code in (EXIT_OK, EXIT_TORN) and last.first_sequence is not None \
        and L.is_log_file_name(last.file) and last.file not in drop
    if last is not None and not clean:
        drop.add(last.file)  # damage verify found: a point must not let a reader step over it
    seqpoints.trim(directory, drop, fs)
    if clean:
        seqpoints.point_file(directory, last.file, last.first_sequence, parse_chunk_name(last.file) is not None,
                             now, fs)


def _plan_seal(directory: str, fs, locked: bool) -> SealReport:
    report = require_recognised(verify_path(directory, fs=fs, lock_held_by_us=locked))
    if not kind_of(report.kind).ledger:
        raise UsageError(f"seal works on a chunk or segment directory, not {report.kind}", directory)
    if not locked and report.live_writer:
        raise Refused(f"a live writer holds it ({report.live_writer}); its chunks are sealed by the writer",
                      directory)
    exp = SL.read_ledger(directory, fs)
    sealed = L.fold(exp.lines).sealed if exp is not None else {}
    bad = {f.file for f in report.findings if f.cls in (F.SEAL_MISMATCH,)}
    items = []
    for pos, c in enumerate(report.chunks):
        base = (c.first_sequence, c.last_sequence, c.records, c.size)
        if pos == len(report.chunks) - 1:
            items.append(SealItem(c.file, "skip", "the last chunk is never sealed: it may still grow", *base, None))
        elif c.file in bad:
            items.append(SealItem(c.file, "skip", "differs from its seal (see verify)", *base, None))
        elif c.file in sealed:
            items.append(SealItem(c.file, "already-sealed", f"ledger line {sealed[c.file].number}", *base,
                                  sealed[c.file].get("sha256")))
        elif not L.is_log_file_name(c.file):
            items.append(SealItem(c.file, "skip", "not a chunk name walctl writes", *base, None))
        elif c.exit_code != EXIT_OK or c.anomalies or c.damaged_bytes:
            items.append(SealItem(c.file, "skip", f"does not verify clean ({c.verdict})", *base, None))
        elif c.first_sequence is not None and c.records != c.last_sequence - c.first_sequence + 1:
            items.append(SealItem(c.file, "skip", "its sequences do not rise by one", *base, None))
        else:
            items.append(SealItem(c.file, "seal", "closed and clean", *base, None))
    return SealReport(directory, False, tuple(items), report)


# ---- accept-loss ----

MISSING_CLASSES = K.acted_on_by(K.UNHELD)


class AcceptReport(NamedTuple):
    path: str
    first_seq: int
    last_seq: int
    reason: str
    applied: bool
    already_accepted: bool
    missing: tuple  # (a, b) ranges verify found missing (accepted or not)
    before: PathReport
    after: PathReport | None

    @property
    def exit_code(self) -> int:
        return (self.after or self.before).exit_code

    def to_json(self) -> dict:
        return {"path": self.path, "range": [self.first_seq, self.last_seq], "reason": self.reason,
                "applied": self.applied, "already_accepted": self.already_accepted,
                "missing": [list(m) for m in self.missing], "exit_code": self.exit_code,
                "before": {"verdict": self.before.verdict, "exit_code": self.before.exit_code},
                "after": None if self.after is None else {"verdict": self.after.verdict,
                                                          "exit_code": self.after.exit_code}}


def parse_range(text: str) -> tuple[int, int]:
    a, sep, b = text.partition("..")
    try:
        if not all(x.isascii() and x.isdigit() for x in (a, b if sep else a)):  # never '١٢', ' 1', '+1', '1_0'
            raise ValueError(text)
        first, last = int(a), int(b if sep else a)
    except ValueError:
        raise UsageError(f"--accept-loss takes A..B (two sequences), not {text!r}") from None
    if not 1 <= first <= last or last >= 1 << 63:
        raise UsageError(f"--accept-loss {text}: need 1 <= A <= B")
    return first, last


def accept_loss(directory: str, first: int, last: int, reason: str, *, apply: bool = False,
                fs=DEFAULT_FS) -> AcceptReport:
    fs = fs.beneath(directory)  # opened once: the kind check, the plan and the act read one directory
    _need_log_dir(directory, fs)
    if not reason.strip():
        raise UsageError("--reason is required: the ledger keeps why the loss was accepted")
    if len(reason.encode("utf-8", "replace")) > 4096:
        raise UsageError("--reason is longer than 4096 bytes")
    from ...format.jsonload import NotText, check_text

    try:  # bytes that are not UTF-8 in argv arrive as lone surrogates: no ledger line can hold them
        check_text(reason)
    except NotText:
        raise UsageError("--reason is not UTF-8 text") from None
    if not apply:
        return _plan_accept(directory, first, last, reason, fs, False)
    detect_kind(directory, fs)  # nothing recognised is unsupported (5) before even the lock file is made
    refuse_links(directory, [], fs, what="write")
    with DirectoryLock(directory, holder_text("repair --accept-loss"), fs):
        rep = _plan_accept(directory, first, last, reason, fs, True)
        if rep.already_accepted:
            return rep
        try:
            SL.record(directory, L.ACCEPT_LOSS, utc_now(), fs, first_seq=first, last_seq=last, reason=reason)
        except NotClean as e:  # the ledger itself is damaged
            raise examined(e, rep.to_json(), rep.before)
        after = verify_path(directory, fs=fs, lock_held_by_us=True)
        return rep._replace(applied=True, after=after)


def _plan_accept(directory, first, last, reason, fs, locked) -> AcceptReport:
    report = require_recognised(verify_path(directory, fs=fs, lock_held_by_us=locked))
    missing = sorted({tuple(f.sequence_range) for f in report.findings
                      if f.cls in MISSING_CLASSES and f.sequence_range})
    need = first
    for a, b in missing:
        if a <= need <= b:
            need = b + 1
    if need <= last:
        shown = ", ".join(f"{a}..{b}" for a, b in missing) or "none"
        err = Refused(f"sequences {first}..{last} are not all missing here (sequence {need} is not; missing: "
                      f"{shown}); nothing was changed", directory)
        tried = AcceptReport(directory, first, last, reason, False, False, tuple(missing), report, None)
        raise examined(err, tried.to_json(), report)
    read = SL.read_ledger(directory, fs)
    exp = L.fold(read.lines if read is not None else ())
    already = exp.accepted_cover(first, last) is not None
    return AcceptReport(directory, first, last, reason, False, already, tuple(missing), report, None)
