"""salvage: copy every valid record of a damaged WAL into a new directory; the original is untouched.

Sources are the directory's chunks and the recorded pieces of its `.quarantine/` (ops/wal/salvage_sources.py
says which record comes from where). Records are copied verbatim (their bytes and CRCs are the originals)
and keep their sequences, so the gaps left by damage stay visible in the copy. The copy keeps the source's
chunk boundaries and names: a chunk that was intact is copied byte for byte. It gets a ledger
(`.walctl/ledger.jsonl`: a seal for every chunk but the last, and the highest sequence issued), so verify
of the copy names a lost tail too, and `repair --accept-loss` can record each loss.

The copy is built in `OUT.tmp` and renamed to OUT only when complete and synced: after a crash OUT either
does not exist or is whole. What an interrupted run left is reported through `aftermath`, from what its
cleanup really did.
"""
from __future__ import annotations

import os
from typing import Callable, NamedTuple

from ...errors import EXIT_OK, Refused
from ...format import ledger as L
from ...format.names import chunk_name
from ...format.v2 import encode_file_header
from ...store import durable
from ...store.marked import clear_marked
from ...store import ledger as SL
from ...store.fs import DEFAULT_FS
from .. import findings as F
from ..clock import utc_now
from ..findings import Finding
from ..report import PathReport
from .salvage_sources import (DIRECTORY, Plan, Scanned, choose, directory_sources, merge_ranges, minus,
                              quarantine_sources, scan_source)
from .verify import resolve_chunks, verify_path

OWNER_MARK = ".walctl-salvage"  # in OUT.tmp: proves a leftover temp directory is ours to clear
BLOCK = 1 << 20


class ChunkCopy(NamedTuple):
    file: str
    records: int
    first_sequence: int
    last_sequence: int
    size: int
    sources: tuple[str, ...]
    identical_to: str | None  # the source file it equals byte for byte

    def to_json(self) -> dict:
        return dict(self._asdict())


class SourceUse(NamedTuple):
    """One source and what was taken from it."""
    scanned: Scanned
    records: int
    ranges: tuple[tuple[int, int], ...]
    skipped: int
    out_file: str | None

    def to_json(self) -> dict:
        return dict(self.scanned.source.to_json(), records=self.records,
                    sequence_ranges=[list(r) for r in self.ranges], skipped=self.skipped, out_file=self.out_file,
                    damaged=[list(d) for d in self.scanned.damage])


class SalvageReport(NamedTuple):
    source: str
    out: str
    records: int
    first_sequence: int | None
    last_sequence: int | None
    lost_sequences: tuple[tuple[int, int], ...]
    damaged_ranges: tuple[Finding, ...]  # the source's damage, file and byte range
    skipped: tuple[dict, ...]  # valid records not copied (a sequence already copied)
    source_report: PathReport
    out_report: PathReport
    sources: tuple[SourceUse, ...] = ()
    chunks: tuple[ChunkCopy, ...] = ()
    notes: tuple[str, ...] = ()  # pieces of .quarantine/ not read, and why
    hwm: int | None = None  # the highest sequence the copy's ledger records as issued

    @property
    def exit_code(self) -> int:
        return self.out_report.exit_code

    @property
    def from_quarantine(self) -> int:
        return sum(u.records for u in self.sources if u.scanned.source.origin != DIRECTORY)

    @property
    def accept_loss(self) -> tuple[tuple[int, int], ...]:
        """Lost ranges the copy shows as missing (after its first sequence): what accept-loss can record."""
        return tuple(r for r in self.lost_sequences if self.first_sequence is not None and r[0] > self.first_sequence)

    @property
    def lost_before_first(self) -> tuple[tuple[int, int], ...]:
        return tuple(r for r in self.lost_sequences if r not in self.accept_loss)

    def accept_loss_argv(self) -> list[list[str]]:
        return [["walctl", "repair", self.out, "--accept-loss", f"{a}..{b}", "--reason",
                 f"lost before salvage from {self.source}: no copy survived", "--apply"] for a, b in self.accept_loss]

    def to_json(self) -> dict:
        return {
            "source": self.source, "out": self.out, "records": self.records,
            "records_from_quarantine": self.from_quarantine,
            "first_sequence": self.first_sequence, "last_sequence": self.last_sequence,
            "lost_sequence_ranges": [list(r) for r in self.lost_sequences],
            "lost_sequences": sum(b - a + 1 for a, b in self.lost_sequences),
            "lost_before_first": [list(r) for r in self.lost_before_first],
            "damaged_ranges": [{"file": f.file, "offset": f.offset, "end_offset": f.end_offset,
                                "length": f.end_offset - f.offset, "class": f.cls, "reason": f.reason}
                               for f in self.damaged_ranges],
            "skipped": list(self.skipped),
            "sources": [u.to_json() for u in self.sources],
            "chunks": [c.to_json() for c in self.chunks],
            "notes": list(self.notes),
            "ledger": {"file": f"{L.LEDGER_DIR}/{L.LEDGER_NAME}", "sealed": [c.file for c in sealable(self.chunks)],
                       "hwm": self.hwm},
            "source_verdict": self.source_report.verdict, "source_exit_code": self.source_report.exit_code,
            "out_verdict": self.out_report.verdict, "exit_code": self.exit_code,
            "next_steps": self.accept_loss_argv() + [["walctl", "verify", self.out]],
        }


class Aftermath(NamedTuple):
    """What an interrupted or failed salvage left, from what its cleanup did (the CLI's Ctrl-C line)."""
    stage: str  # "copying": OUT.tmp was being written | "copied": OUT is whole, still marked ours |
    #             "checking": OUT is whole and final, only its verify was cut short
    removed: bool  # "copying": OUT.tmp is gone
    left: tuple[str, ...]  # paths still there
    left_bytes: int
    problem: str | None  # why the cleanup could not finish


def salvage(source: str, out: str, *, fs=DEFAULT_FS, progress: Callable[[int], None] | None = None,
            aftermath: list | None = None) -> SalvageReport:
    fs = fs.beneath(os.path.dirname(os.path.abspath(out)))  # OUT and OUT.tmp, side by side
    out = os.path.normpath(out)
    # A crash after the final rename leaves OUT whole but still marked: ours to clear and redo (its
    # records are copies of records still in the sources), so one rerun ends as an uninterrupted run.
    _clear_own_leftover(out, fs, keep_dir=True)
    if fs.exists(out) and (fs.stat(out).kind != "dir" or fs.listdir(out)):
        raise Refused("the output exists and is not an empty directory; salvage never writes over anything",
                      out)
    tmp = out + durable.TMP_SUFFIX
    _clear_own_leftover(tmp, fs)
    src_report = verify_path(source, fs=fs)
    scanned, notes = _scan_all(source, fs, progress)
    plan = choose(scanned, fs)
    if not plan.slots:
        raise Refused("the sources hold no valid record to copy; nothing was created", source)
    chunks = _chunk_copies(plan, scanned)
    lost = _lost(src_report, plan)
    hwm = max([chunks[-1].last_sequence] + [b for _, b in lost])
    try:
        durable.make_dir(tmp, fs)
        durable.create_file(os.path.join(tmp, OWNER_MARK), b"walctl salvage in progress\n", fs)
        for (slot, segs), c in zip(plan.slots, chunks):
            _write_chunk(os.path.join(tmp, c.file), scanned, segs, fs)
        _write_ledger(tmp, chunks, hwm, fs)
    except BaseException:
        _note(aftermath, CLEANUP_CUT_SHORT._replace(left=(tmp,)))  # until the cleanup says what it did
        _note(aftermath, _cleanup(tmp, fs))
        raise
    try:
        if fs.exists(out):
            durable.remove_dir(out, fs)  # it was empty (checked above); the rename needs the name free
        durable.move(tmp, out, fs)  # the mark goes along: until it is removed, a rerun redoes the copy
        durable.remove(os.path.join(out, OWNER_MARK), fs)
    except BaseException:
        _note(aftermath, Aftermath("copied", False, (tmp, out), 0, "interrupted again while looking"))
        _note(aftermath, _after_rename(tmp, out, fs))
        raise
    try:
        out_report = verify_path(out, fs=fs)
    except BaseException:
        _note(aftermath, Aftermath("checking", False, (out,), 0, None))
        _note(aftermath, Aftermath("checking", False, (out,), _bytes_under(out, fs), None))
        raise
    damaged = tuple(f for f in src_report.findings
                    if f.exit_code != EXIT_OK and f.offset is not None and f.end_offset is not None)
    uses = _uses(scanned, plan, chunks)
    return SalvageReport(source, out, sum(c.records for c in chunks), chunks[0].first_sequence,
                         chunks[-1].last_sequence, lost, damaged, plan.skipped, src_report, out_report, uses,
                         chunks, tuple(notes), hwm)


def _scan_all(source: str, fs, progress) -> tuple[list[Scanned], list[str]]:
    chunks, _, _, _ = resolve_chunks(source, fs)
    by_slot = {c.index: c.path for c in chunks}
    sources = directory_sources(c for c in chunks if c.kind == "file")
    extra, notes = quarantine_sources(source, fs)
    scanned = []
    for src in sources + extra:
        scanned.append(scan_source(src, fs, by_slot.get(src.slot)))
        if progress is not None:
            progress(fs.stat(src.path).size)
    return scanned, notes


def _chunk_copies(plan: Plan, scanned: list[Scanned]) -> list[ChunkCopy]:
    out = []
    for slot, segs in plan.slots:
        srcs = tuple(dict.fromkeys(scanned[s.source].source.label for s in segs))
        first = scanned[segs[0].source]
        # byte for byte: one whole source, every record of it, nothing between them
        whole = (first.header is not None and len(srcs) == 1 and segs[0].offset == len(first.header)
                 and all(a.end == b.offset for a, b in zip(segs, segs[1:])) and segs[-1].end == first.size)
        out.append(ChunkCopy(chunk_name(slot), sum(s.count for s in segs), segs[0].first_seq, segs[-1].last_seq,
                             _HEADER_SIZE + sum(s.end - s.offset for s in segs), srcs,
                             first.source.label if whole else None))
    return out


_HEADER_SIZE = len(encode_file_header())


def _write_chunk(path: str, scanned: list[Scanned], segs, fs) -> None:
    """The chunk's file header (its first whole source's own, else a fresh one), then each segment's bytes."""
    header = next((scanned[s.source].header for s in segs if scanned[s.source].header is not None),
                  encode_file_header())

    def pieces():
        yield header
        for seg in segs:
            with fs.map_read(scanned[seg.source].source.path) as buf:
                for a in range(seg.offset, seg.end, BLOCK):
                    yield bytes(buf[a:min(seg.end, a + BLOCK)])

    durable.create_file(path, pieces(), fs)


def _write_ledger(tmp: str, chunks: list[ChunkCopy], hwm: int, fs) -> None:
    """A seal for every chunk but the last (it may still grow) whose sequences rise by one (a seal says so;
    `walctl seal` skips the others too), and the highest sequence issued: a lost tail then shows in the
    copy as missing sequences, which accept-loss can record."""
    now = utc_now()
    lines = [SL.seal_line(os.path.join(tmp, c.file), c.first_sequence, c.last_sequence, c.records, now, fs)
             for c in sealable(chunks)]
    lines.append(L.encode_line(L.HWM, now, seq=hwm))
    SL.append_lines(tmp, lines, fs)


def sealable(chunks) -> list:
    return [c for c in chunks[:-1] if c.records == c.last_sequence - c.first_sequence + 1]


def _copied(plan: Plan) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for _, segs in plan.slots:
        for s in segs:
            if out and s.first_seq == out[-1][1] + 1:
                out[-1][1] = s.last_seq
            else:
                out.append([s.first_seq, s.last_seq])
    return [(a, b) for a, b in out]


def _lost(report: PathReport, plan: Plan) -> tuple[tuple[int, int], ...]:
    """What the source lost (its findings' ranges, a sealed chunk's range) and the gaps the copy has,
    less every sequence copied from any source."""
    copied = _copied(plan)
    want = [rng for f in report.findings
            if (rng := f.lost_or_missing or (f.sequence_range if f.cls == F.SEALED_MISSING else None))]
    want += [(a[1] + 1, b[0] - 1) for a, b in zip(copied, copied[1:])]
    gone: set[tuple[int, int]] = set()
    for a, b in want:
        for piece in minus((a, b), copied):
            gone.add(piece)
    return tuple(merge_ranges(sorted(gone)))


def _uses(scanned: list[Scanned], plan: Plan, chunks: list[ChunkCopy]) -> tuple[SourceUse, ...]:
    taken: dict[int, list] = {}
    where: dict[int, str] = {}
    for (slot, segs), c in zip(plan.slots, chunks):
        for s in segs:
            taken.setdefault(s.source, []).append(s)
            where[s.source] = c.file
    skipped: dict[str, int] = {}
    for k in plan.skipped:
        skipped[k["file"]] = skipped.get(k["file"], 0) + k["records"]
    out = []
    for i, sc in enumerate(scanned):
        segs = taken.get(i, [])
        out.append(SourceUse(sc, sum(s.count for s in segs), tuple(merge_ranges([(s.first_seq, s.last_seq) for s in segs])),
                             skipped.get(sc.source.label, 0), where.get(i)))
    return tuple(sorted(out, key=lambda u: (u.scanned.source.slot, u.scanned.source.origin != DIRECTORY)))


# ---- what an interrupted run leaves ----------------------------------------------------------------

def _note(aftermath: list | None, what: Aftermath) -> None:
    if aftermath is not None:
        aftermath.append(what)


CLEANUP_CUT_SHORT = Aftermath("copying", False, (), 0, "its cleanup was cut short")


def _cleanup(tmp: str, fs) -> Aftermath:
    """Removes OUT.tmp (a refusal, a failure or Ctrl-C while copying), and says what it could not."""
    try:
        _clear_own_leftover(tmp, fs)
        if fs.exists(tmp):
            durable.remove_dir(tmp, fs)
        return Aftermath("copying", True, (), 0, None)
    except BaseException as e:  # a second Ctrl-C, an I/O error: say what is still there
        try:
            left = (tmp,) if fs.exists(tmp) else ()
            return Aftermath("copying", not left, left, _bytes_under(tmp, fs), _why(e))
        except BaseException:
            return CLEANUP_CUT_SHORT._replace(left=(tmp,))


def _after_rename(tmp: str, out: str, fs) -> Aftermath:
    """Interrupted at the final rename or just after: OUT (or OUT.tmp) holds the whole copy, still marked."""
    if fs.exists(tmp) and not fs.exists(out):
        return Aftermath("copying", False, (tmp,), _bytes_under(tmp, fs), "interrupted before the final rename")
    if fs.exists(os.path.join(out, OWNER_MARK)):
        return Aftermath("copied", False, (out,), _bytes_under(out, fs), None)
    return Aftermath("checking", False, (out,), _bytes_under(out, fs), None)


def _why(e: BaseException) -> str:
    return "interrupted again" if isinstance(e, KeyboardInterrupt) else (str(e) or type(e).__name__)


def _bytes_under(path: str, fs) -> int:
    try:
        if not fs.exists(path):
            return 0
        return sum(e.size for e in fs.listdir(path) if e.kind == "file")
    except BaseException:  # only for the message (a failed listing, Ctrl-C again): counts nothing
        return 0


def _clear_own_leftover(tmp: str, fs, keep_dir: bool = False) -> None:
    clear_marked(tmp, OWNER_MARK, "salvage", fs, keep_dir)  # store/marked.py: the rule for both copies


