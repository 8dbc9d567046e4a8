"""salvage: copy every valid record of a damaged WAL into a new directory; the original is untouched.

Records are copied verbatim (their bytes and CRCs are the originals) and keep their sequences, so the
gaps left by damage stay visible in the copy (verify says exactly which sequences are missing). The
copy is built in `OUT.tmp` and renamed to OUT only when complete and synced: after a crash OUT either
does not exist or is whole.
"""
from __future__ import annotations

import os
from typing import Callable, NamedTuple

from ..errors import EXIT_OK, Refused, UnsupportedInput
from ..format.v2 import RECORD_VERSION
from ..store import durable
from ..store.appender import SYNC_NONE, ChunkAppender
from ..store.fs import DEFAULT_FS
from .findings import Finding
from .records import Record, RecordWalk
from .report import PathReport
from .verify import verify_path

OWNER_MARK = ".walctl-salvage"  # in OUT.tmp: proves a leftover temp directory is ours to clear


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

    @property
    def exit_code(self) -> int:
        return self.out_report.exit_code

    def to_json(self) -> dict:
        return {
            "source": self.source, "out": self.out, "records": self.records,
            "first_sequence": self.first_sequence, "last_sequence": self.last_sequence,
            "lost_sequence_ranges": [list(r) for r in self.lost_sequences],
            "lost_sequences": sum(b - a + 1 for a, b in self.lost_sequences),
            "damaged_ranges": [{"file": f.file, "offset": f.offset, "end_offset": f.end_offset,
                                "length": None if f.end_offset is None or f.offset is None else f.end_offset - f.offset,
                                "class": f.cls, "reason": f.reason} for f in self.damaged_ranges],
            "skipped": list(self.skipped),
            "source_verdict": self.source_report.verdict, "source_exit_code": self.source_report.exit_code,
            "out_verdict": self.out_report.verdict, "exit_code": self.exit_code,
        }


def salvage(source: str, out: str, *, fs=DEFAULT_FS, max_chunk_bytes: int = 8 << 20,
            progress: Callable[[int], None] | None = None) -> SalvageReport:
    fs = fs.beneath(os.path.dirname(os.path.abspath(out)))  # OUT and OUT.tmp, side by side
    out = os.path.normpath(out)
    # A crash after the final rename leaves OUT whole but still marked: ours to clear and redo (its
    # records are copies of records still in the source), so one rerun ends as an uninterrupted run.
    _clear_own_leftover(out, fs, keep_dir=True)
    if fs.exists(out) and (fs.stat(out).kind != "dir" or fs.listdir(out)):
        raise Refused("the output exists and is not an empty directory; salvage never writes over anything",
                      out)
    tmp = out + durable.TMP_SUFFIX
    _clear_own_leftover(tmp, fs)
    durable.make_dir(tmp, fs)
    durable.create_file(os.path.join(tmp, OWNER_MARK), b"walctl salvage in progress\n", fs)
    walk = RecordWalk(source, fs=fs, keep_raw=True, payloads=False, progress=progress)  # copied raw: nothing inflated
    copied, first, last, skipped = 0, None, None, []
    appender = None
    try:
        for item in walk:
            if not isinstance(item, Record):
                continue
            if item.raw is None or item.version != RECORD_VERSION:
                raise UnsupportedInput(f"{item.file} holds version {item.version} records: salvage copies Spector "
                                       "V2 records verbatim and does not convert legacy V1 ones; nothing was "
                                       "created", source)
            if last is not None and item.sequence <= last:
                skipped.append({"sequence": item.sequence, "file": item.file, "offset": item.offset,
                                "reason": f"sequence {item.sequence} was already copied (the source repeats it)"})
                continue
            if appender is None:  # the copy starts where the source starts (0 and negative sequences too)
                appender = ChunkAppender(tmp, next_sequence=item.sequence, chunk_index=0, chunk_exists=False, fs=fs,
                                         sync=SYNC_NONE, max_chunk_bytes=max_chunk_bytes)
            appender.append_raw(item.raw, item.sequence)
            copied += 1
            first = item.sequence if first is None else first
            last = item.sequence
        if appender is not None:
            appender.close()  # syncs every chunk and the directory
            appender = None
        if copied == 0:
            raise Refused("the source holds no valid record to copy; nothing was created", source)
    except BaseException:
        if appender is not None:
            appender.close()
        _clear_own_leftover(tmp, fs)  # a refusal or failure leaves no OUT.tmp behind
        if fs.exists(tmp):
            durable.remove_dir(tmp, fs)
        raise
    if fs.exists(out):
        durable.remove_dir(out, fs)  # it was empty (checked above); the rename needs the name free
    durable.move(tmp, out, fs)  # the mark goes along: until it is removed, a rerun redoes the copy
    durable.remove(os.path.join(out, OWNER_MARK), fs)
    src_report = walk.report
    out_report = verify_path(out, fs=fs)
    lost = _lost_ranges(src_report)
    damaged = tuple(f for f in src_report.findings if f.exit_code != EXIT_OK and f.offset is not None)
    return SalvageReport(source, out, copied, first, last, lost, damaged, tuple(skipped), src_report, out_report)


def _lost_ranges(report: PathReport) -> tuple[tuple[int, int], ...]:
    out = []
    for f in report.findings:
        rng = f.lost_or_missing
        if rng:
            out.append(rng)
    return tuple(sorted(set(out)))


def _clear_own_leftover(tmp: str, fs, keep_dir: bool = False) -> None:
    """Clears a directory an interrupted salvage left (it holds OWNER_MARK). An empty OUT.tmp is a crash
    before the mark was durable: nothing in it to lose. `keep_dir`: OUT itself, whose absence of the
    mark means it is the operator's (or a finished copy), never ours to touch."""
    if not fs.exists(tmp) or fs.stat(tmp).kind != "dir":
        return
    names = {e.name for e in fs.listdir(tmp)}
    if OWNER_MARK not in names:
        if keep_dir:
            return
        if not names:
            durable.remove_dir(tmp, fs)
            return
        raise Refused("exists and was not left by walctl salvage; nothing was changed", tmp)
    for e in fs.listdir(tmp):  # copies of records that are still in the source: safe to clear
        if e.name != OWNER_MARK:
            durable.remove(e.path, fs)
    durable.remove(os.path.join(tmp, OWNER_MARK), fs)
    if keep_dir:
        durable.remove_dir(tmp, fs)  # OUT: the rerun's copy takes the name again
