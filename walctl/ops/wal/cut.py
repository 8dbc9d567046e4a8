"""cut: keep a log directory's records through sequence N and set everything after it aside (docs/format.md
4.6), as redis-check-aof --truncate-to-timestamp does for an AOF, but keeping every removed byte.

The steps, each durable, in this order; after a crash anywhere the next run plans again from what it finds
and finishes (a step already done is not planned again):
  1. each whole file after N, the last first (so that the directory holds a prefix of its sequences at every
     step): its manifest line, the ledger's `moved` line, the move into .quarantine/ (store/quarantine.py);
  2. the file holding N: its bytes after N kept in .quarantine/ (manifest line first), the ledger's `cut`
     line, the truncation (as repair cuts a torn tail);
  3. the ledger's `rewind` line: sequences after N were set aside on purpose and are issued again, so the
     next writer continues at N + 1 knowingly, verify says the cut happened, and nothing reads the pieces
     back as what the log lacks (their manifest actions are `cut-move` / `cut-truncate`).
Refused: damage or a gap at or below N (repair or salvage first), N below the horizon (compaction or
checkpoint.meta), N not a sequence the directory holds, and a live writer (the directory's lock).
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...version import __version__
from ...errors import EXIT_OK, EXIT_TORN, REASON_LOCKED, EnvironmentProblem, Refused, UnsupportedInput, UsageError
from ...format import ledger as L
from ...store import durable, ledger, quarantine as q, seqpoints
from ...store.contain import refuse_links
from ...store.fs import DEFAULT_FS
from ...store.lock import DirectoryLock, holder_text
from ...store.oserror import require_dir
from ..clock import utc_now
from ..kinds import KINDS
from .ledger_check import load_view
from .verify import detect_kind, verify_path


class Piece(NamedTuple):
    file: str
    offset: int  # 0: the whole file
    length: int
    first_seq: int | None
    last_seq: int | None

    def to_json(self) -> dict:
        return dict(self._asdict())


class CutReport(NamedTuple):
    path: str
    kind: str
    applied: bool
    after: int  # N: the last sequence kept
    until_ms: int | None  # --until T, when N came from a time
    last_sequence: int | None  # the directory's last sequence before the cut
    issued: int  # the highest sequence issued before the cut
    moves: tuple[Piece, ...]  # whole files after N, in directory order
    truncate: Piece | None  # the bytes after N in the file holding it
    rewind: bool  # the ledger's `rewind` line is (was) needed
    evidence: tuple[dict, ...] = ()  # the manifest lines written (applied)
    verify: dict | None = None  # the directory's verdict after the cut (applied)

    @property
    def nothing(self) -> bool:
        return not self.moves and self.truncate is None and not self.rewind

    @property
    def cut_bytes(self) -> int:
        return sum(p.length for p in self.moves) + (self.truncate.length if self.truncate else 0)

    def to_json(self) -> dict:
        d = self._asdict()
        d["moves"] = [p.to_json() for p in self.moves]
        d["truncate"] = self.truncate.to_json() if self.truncate else None
        d["evidence"] = list(self.evidence)
        d["cut_bytes"] = self.cut_bytes
        d["exit_code"] = EXIT_OK
        d["next_steps"] = [s.to_json() for s in self.next_steps()]
        return d

    def next_steps(self) -> list:
        from ..advice import after_cut

        return after_cut(self)


def cut(directory: str, *, after: int | None = None, until_ms: int | None = None, apply: bool = False,
        fs=DEFAULT_FS) -> CutReport:
    """Dry run unless `apply`. Exactly one of `after` (N) and `until_ms` (N: the last record before the first
    one stamped after the time, as archive restore --until reads it)."""
    if (after is None) == (until_ms is None):
        raise UsageError("give --after N or --until T")
    if after is not None and after < 0:
        raise UsageError(f"--after {after}: a sequence is 0 or more")
    fs = fs.beneath(directory)
    require_dir(directory, fs)
    kind = detect_kind(directory, fs)
    if not (KINDS[kind].is_dir and KINDS[kind].ledger):
        raise UnsupportedInput(f"cut acts on a Spector V2 chunk directory or an ADR-003 segment directory; this is "
                               f"{kind}", directory)
    if not apply:  # a dry run writes nothing, not even the lock file; it still refuses a live writer
        holder = fs.probe_writer(directory)
        if holder:
            raise EnvironmentProblem(f"locked by a live writer ({holder}); --apply would be refused", directory,
                                     kind=REASON_LOCKED)
        return _plan(directory, kind, after, until_ms, fs)
    plan = _plan(directory, kind, after, until_ms, fs)  # refusals leave even the lock file as they found it
    if plan.nothing:
        return plan
    with DirectoryLock(directory, holder_text("cut"), fs):
        plan = _plan(directory, kind, after, until_ms, fs, locked=True)
        evidence = _act(directory, plan, fs) if not plan.nothing else []
        after_rep = verify_path(directory, fs=fs, lock_held_by_us=True)
    return plan._replace(applied=True, evidence=tuple(evidence),
                         verify={"exit_code": after_rep.exit_code, "verdict": after_rep.verdict})


def _plan(directory: str, kind: str, after, until_ms, fs, locked: bool = False) -> CutReport:
    report = verify_path(directory, fs=fs, lock_held_by_us=locked)
    view = load_view(directory, fs)
    files = [c for c in report.chunks if not c.file.startswith(q.QUARANTINE_DIR + "/")]
    held = [c for c in files if c.first_sequence is not None]
    first = held[0].first_sequence if held else None
    last = report.last_sequence
    n = after if after is not None else _from_time(directory, until_ms, first, fs)
    issued = max(view.issued, last or 0)
    _refuse(directory, report, view, n, first, last)
    keep = next((i for i in range(len(files) - 1, -1, -1)
                 if files[i].first_sequence is not None and files[i].first_sequence <= n), None)
    moves = tuple(Piece(c.file, 0, c.size, c.first_sequence, c.last_sequence)
                  for c in files[(keep + 1 if keep is not None else 0):])
    truncate = None
    if keep is not None:
        c = files[keep]
        end = _end_of(directory, kind, c.file, n, fs)
        if c.size > end:
            truncate = Piece(c.file, end, c.size - end, n + 1 if c.last_sequence > n else None,
                             c.last_sequence if c.last_sequence > n else None)
    rewind = issued > n
    refuse_links(directory, [p.file for p in moves] + ([truncate.file] if truncate else []), fs, what="cut")
    return CutReport(directory, kind, False, n, until_ms, last, issued, moves, truncate, rewind)


def _from_time(directory: str, until_ms: int, first, fs) -> int:
    from ..archive.restore import last_before

    n = last_before(directory, until_ms, fs)
    return n if n is not None else max(0, (first or 1) - 1)  # nothing that early: every record goes


def _refuse(directory: str, report, view, n: int, first, last) -> None:
    """What a cut at N must not do: keep damage (it would keep its sequences too), cut below what was moved
    away or checkpointed, or keep a sequence the directory does not hold."""
    if n < view.horizon:
        raise Refused(f"sequences up to {view.horizon} are below the horizon (compacted, archived or in "
                      f"checkpoint.meta): a cut after {n} cannot bring them back; nothing was changed", directory)
    if last is not None and n > last:
        raise UsageError(f"nothing after sequence {n}: the last sequence here is {last}")
    if first is not None and n < first - 1:
        raise UsageError(f"sequence {n} is not here: the first sequence is {first} (cut after {first - 1} at the "
                         f"lowest)")
    for f in report.findings:
        if f.exit_code in (EXIT_OK, EXIT_TORN):
            continue
        pos = _position(f)
        if pos is None or pos <= n:
            from ..advice import cmd

            raise Refused(f"{f.cls} at or below sequence {n} stays whatever is cut after it: {f.one_line()}; nothing "
                          f"was changed (mend it first, as `{cmd('verify', os.path.abspath(directory))}` says)",
                          directory)


def _position(f) -> int | None:
    """The first sequence a finding concerns, when it says."""
    for rng in (f.lost_sequence_range, f.missing, f.sequence_range):
        if rng:
            return rng[0]
    return f.last_good_sequence + 1 if f.last_good_sequence is not None else None


def _end_of(directory: str, kind: str, name: str, n: int, fs) -> int:
    """The offset right after record N (or after the file's last record at or below N) in one file."""
    return KINDS[kind].load("end_through")(os.path.join(directory, name), n, fs)


def end_through_chunk(path: str, n: int, fs) -> int:
    """_end_of in a V2 chunk (KINDS: end_through)."""
    from ...format.record import SEQUENCE
    from ...format.v2 import FILE_HEADER
    from ...store.chunkread import scan_chunk_file

    found = [FILE_HEADER.size]

    def visit(buf, off, h, p, qq, nxt, payload):
        if h[SEQUENCE] <= n:
            found[0] = nxt
        return h[SEQUENCE] >= n

    scan_chunk_file(path, fs, visit=visit)
    return found[0]


def end_through_segment(path: str, n: int, fs) -> int:
    """_end_of in an ADR-003 segment (KINDS: end_through)."""
    from .segments import SegmentWalk

    end = 0
    for seg, e in SegmentWalk(path, fs, lock_held_by_us=True):
        if e.sequence <= n:
            end = e.offset + e.size
    return end


def _act(directory: str, plan: CutReport, fs) -> list[dict]:
    now = utc_now()
    n = plan.after
    why = f"walctl cut --after {n}" if plan.until_ms is None else f"walctl cut --until {plan.until_ms} (after {n})"
    extra = {"cut_after": n}
    evidence = []
    for p in reversed(plan.moves):
        evidence.append(q.move_in_recorded(
            directory, p.file, action=q.CUT_FILE, reason=why, now=now, version=__version__, fs=fs, extra=extra,
            before_move=lambda to, p=p: ledger.record_moved(directory, p.file, to, "quarantine", now, fs,
                                                            seqs=(p.first_seq, p.last_seq))))
    t = plan.truncate
    if t is not None:
        path = os.path.join(directory, t.file)
        data = fs.read_range(path, t.offset, t.length)
        if len(data) != t.length:
            raise Refused(f"{t.file} changed while cutting; nothing more was changed", directory)
        kept = q.keep_bytes(directory, t.file, t.offset, data, action=q.CUT_BYTES, reason=why, now=now,
                            version=__version__, fs=fs, extra=extra)
        evidence.append(kept)
        ledger.record(directory, L.CUT, now, fs, file=t.file, offset=t.offset, bytes=t.length, last_seq_kept=n,
                      evidence=kept["evidence"])
        seqpoints.forget(directory, [t.file], fs)
        durable.truncate(path, t.offset, fs)
    if plan.rewind:
        ledger.record(directory, L.REWIND, now, fs, last_seq_kept=n, last_seq=plan.issued, reason=why)
    return evidence
