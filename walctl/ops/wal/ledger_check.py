"""What a log directory is expected to hold (ledger rule 1) and the findings when it does not (rule 2).

One judge for verify, the writers and seal: the expectations come from `.walctl/ledger.jsonl` when there is
one, and always from `.quarantine/MANIFEST.jsonl` (chunks moved aside) and `checkpoint.meta` (a horizon).
Read-only: nothing here writes.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_OK, EXIT_SEQUENCE, EXIT_UNSUPPORTED, combine_exit_codes
from ...format import ledger as L
from ...format.ckptmeta import CHECKPOINT_META_VERSION, decode_checkpoint_meta
from ...format.names import parse_chunk_name, parse_segment_name
from ...store import ledger as SL
from ...store import quarantine as Q
from ...store.chunkread import SEAL_MISMATCH, Expect, usable_seal
from ...store.fs import DEFAULT_FS
from .. import findings as F
from ..classes import strict_code
from ..findings import Finding

CHECKPOINT_META = "checkpoint.meta"
LEDGER_FILE = f"{L.LEDGER_DIR}/{L.LEDGER_NAME}"
HORIZON_ACTIONS = ("compact", "compact-archive")  # manifest actions that move records below a horizon


class Moved(NamedTuple):
    """A chunk set aside in .quarantine/ as the manifest records it, with the sequences it holds."""
    file: str
    first_seq: int | None
    last_seq: int | None
    horizon: bool  # compaction: below a horizon, not a loss
    time: str
    reason: str
    to: str | None = None  # where it is now: .quarantine/<name>


class View(NamedTuple):
    directory: str
    ledger: L.LedgerRead | None
    exp: L.Expectations
    manifest_moves: tuple  # Moved
    ckpt_hwm: int  # 0: none or invalid
    ckpt_finding: Finding | None

    @property
    def issued(self) -> int:
        """The highest sequence any source says was ever issued here (besides the chunks present)."""
        seqs = [self.exp.hwm, self.ckpt_hwm] + [m.last_seq for m in self.manifest_moves if m.last_seq is not None]
        return max(seqs)

    @property
    def horizon(self) -> int:
        return max(self.moved_horizon, self.ckpt_hwm)

    @property
    def moved_horizon(self) -> int:
        """The horizon below which records were moved away on record (compaction), without checkpoint.meta:
        an HWM says what was issued and checkpointed, not that the records after the log's end were moved."""
        return max([self.exp.horizon]
                   + [m.last_seq for m in self.manifest_moves if m.horizon and m.last_seq is not None])


def load_view(directory: str, fs=DEFAULT_FS) -> View:
    read = SL.read_ledger(directory, fs)
    exp = L.fold(read.lines if read is not None else ())
    return View(directory, read, exp, tuple(_manifest_moves(directory, fs, exp)), *_checkpoint_meta(directory, fs))


def _checkpoint_meta(directory: str, fs) -> tuple[int, Finding | None]:
    path = os.path.join(directory, CHECKPOINT_META)
    if not fs.exists(path):
        return 0, None
    if fs.stat(path).kind != "file":
        return 0, Finding(F.CHECKPOINT_META, EXIT_CORRUPT, "checkpoint.meta is not a regular file",
                          file=CHECKPOINT_META)
    meta = decode_checkpoint_meta(fs.read_head(path, 64))
    if meta.valid:
        return meta.hwm, None
    code = EXIT_CORRUPT
    if "version" in (meta.problem or "") and len(fs.read_head(path, 64)) == 16:
        code = EXIT_UNSUPPORTED
    return 0, Finding(F.CHECKPOINT_META, code, f"{meta.problem} (its HWM is not trusted: treated as 0)",
                      file=CHECKPOINT_META, extra={"expected_version": CHECKPOINT_META_VERSION})


def _manifest_moves(directory: str, fs, exp: L.Expectations) -> list[Moved]:
    """Whole chunks the quarantine manifest says are in .quarantine/ now, with their sequences (read from
    the quarantined file itself: the manifest does not carry them). Skipped, so that verify does not scan
    them every time: chunks that compaction moved (below the horizon whatever they hold; a quarantined
    chunk below them is found by its own line) and chunks whose ledger `moved` line already carries them."""
    from ...store.chunkread import scan_chunk_file

    if not fs.exists(Q.qdir(directory)):
        return []
    entries, _ = Q.read_manifest(directory, fs)
    out = []
    rewound = exp.rewinds[-1] if exp.rewinds else None
    for name, e in Q.holding_lines(entries).items():
        src = e.get("source")
        if e.get("offset") != 0 or not L.is_log_file_name(src) or parse_chunk_name(src) is None:
            continue
        if "/" in name or name in ("", ".", "..") or e.get("action") in HORIZON_ACTIONS + Q.CUT_ACTIONS:
            continue
        known = exp.moved.get(src)
        if known is not None and known.get("to") == f"{Q.QUARANTINE_DIR}/{name}":
            continue
        path = os.path.join(Q.qdir(directory), name)
        if not fs.exists(path) or fs.stat(path).kind != "file" or fs.stat(path).size != e.get("length"):
            continue
        o = scan_chunk_file(path, fs)
        if o.scan is None or o.scan.first_seq is None:
            continue
        if rewound is not None and str(e.get("time")) <= rewound.ts and o.scan.first_seq > rewound.get("last_seq_kept"):
            continue  # set aside before a cut below it: its sequences are issued again (walctl cut)
        out.append(Moved(src, o.scan.first_seq, o.scan.last_seq, e.get("action") in HORIZON_ACTIONS,
                         str(e.get("time")), str(e.get("reason")), f"{Q.QUARANTINE_DIR}/{name}"))
    return out


def expects_for(chunks, view: View, quick: bool = False) -> list[Expect | None]:
    """For each chunk file: the seal a hash may stand in for the scan with (rule 3), else None."""
    out = []
    for c in chunks:
        line = view.exp.sealed.get(c.name)
        if line is None or c.kind != "file" or c.size != line.get("size") or not usable_seal(line.fields):
            out.append(None)
            continue
        out.append(Expect(line.get("size"), line.get("sha256"), line.get("first_seq"), line.get("last_seq"),
                          line.get("records"), dict(line.get("stat")), quick))
    return out


def _explain(view: View, a: int, b: int) -> dict:
    line = view.exp.explain(a, b)
    if line is not None:
        return {"explained_by": {"ledger_line": line.number, "event": line.event, "time": line.ts,
                                 "file": line.get("file"), "why": line.get("why"), "to": line.get("to")}}
    for m in view.manifest_moves:
        if m.first_seq is not None and m.first_seq <= b and m.last_seq >= a:
            return {"explained_by": {"manifest": Q.MANIFEST, "file": m.file, "time": m.time, "reason": m.reason,
                                     "to": m.to}}
    return {}


def _explain_text(extra: dict) -> str:
    ex = extra.get("explained_by")
    if not ex:
        return ""
    if "ledger_line" in ex:
        return f" ({ex['file']} was moved to {ex['to']} ({ex['why']}) at {ex['time']}, ledger line {ex['ledger_line']})"
    return f" ({ex['file']} was quarantined at {ex['time']}: {ex['reason']})"


def _sequence(view: View, a: int, b: int, reason: str, strict: bool, file=None, extra=None) -> Finding:
    """A range issued but not present: a sequence finding, or a warning when an accept-loss covers it."""
    extra = dict(extra or {}, **_explain(view, a, b))
    accepted = view.exp.accepted_cover(a, b)
    if accepted is not None:
        extra["accepted_by"] = {"ledger_line": accepted.number, "time": accepted.ts,
                                "reason": accepted.get("reason")}
        return Finding(F.ACCEPTED_LOSS, strict_code(F.ACCEPTED_LOSS, strict),
                       f"{reason}; loss accepted at {accepted.ts}: {accepted.get('reason')}", file,
                       sequence_range=(a, b), extra=extra, missing=(a, b))
    from ..advice import missing_step

    step = missing_step(view.directory, a, b, extra)
    hint = (f"to put them back: `{step.command}`" if "restore" in step.argv
            else f"if this loss is final: `{step.command}`")
    return Finding(F.SEQUENCE_MISSING, EXIT_SEQUENCE, f"{reason}{_explain_text(extra)}; {hint}", file,
                   sequence_range=(a, b), extra=extra, missing=(a, b))


def judge(report, view: View, seals: dict, strict: bool, fs=DEFAULT_FS):
    """The report with ledger findings added (rule 2). `seals`: file -> (SEAL_*, computed sha) from the scan."""
    out: list[Finding] = []
    if view.ckpt_finding is not None:
        out.append(view.ckpt_finding)
    if view.ledger is not None:
        for bad in view.ledger.bad:
            out.append(Finding(F.LEDGER_LINE, EXIT_CORRUPT, f"ledger line {bad.number}: {bad.reason} (not used)",
                               LEDGER_FILE, bad.offset, extra={"line": bad.number}))
        if view.ledger.torn_offset is not None:
            out.append(Finding(F.LEDGER_LINE, EXIT_OK, "torn last line (a crash mid-append); the next writer cuts "
                               "it", LEDGER_FILE, view.ledger.torn_offset, view.ledger.size, torn=True))
    out += _seal_findings(report, view, seals, strict, fs)
    # sequences below 1
    for c in report.chunks:
        if c.first_sequence is not None and c.first_sequence < 1:
            out.append(Finding(F.SEQUENCE_BELOW_ONE, EXIT_SEQUENCE, f"sequence {c.first_sequence} in a WAL: "
                               "sequences start at 1", c.file, sequence_range=(c.first_sequence,
                                                                               min(c.last_sequence, 0))))
    out += _unheld_findings(report, view, strict)
    out += [_cut_note(line, report) for line in view.exp.rewinds]
    findings = list(judge_gaps(report.findings, view, strict)) + out
    return _with_findings(report, findings)


def _with_findings(report, findings):
    """The report with these findings, its exit code, and each chunk's verdict judged again from the findings
    that name it (an accepted gap no longer makes its chunk discontinuous; a seal mismatch makes it corrupt)."""
    from ..report import VERDICTS

    by_file: dict = {}
    for f in findings:
        by_file.setdefault(f.file, []).append(f.exit_code)
    chunks = []
    for c in report.chunks:
        code = combine_exit_codes(by_file.get(c.file, ()))
        if code != c.exit_code and c.state not in ("unreadable", "not-a-file"):
            c = c._replace(exit_code=code, verdict=VERDICTS[code])
        chunks.append(c)
    return report._replace(findings=tuple(findings), exit_code=combine_exit_codes(f.exit_code for f in findings),
                           chunks=tuple(chunks))


def _seal_findings(report, view: View, seals: dict, strict: bool, fs) -> list[Finding]:
    """Each sealed chunk against its seal: absent with no line moving it, size or SHA-256 changed."""
    out: list[Finding] = []
    present = {c.file: c for c in report.chunks}
    hashed = _hashes(report.path, [(n, present[n].size) for n, ln in view.exp.sealed.items() if n in present
                                   and present[n].size == ln.get("size") and seals.get(n) is None], fs)
    for name, line in sorted(view.exp.sealed.items()):
        c = present.get(name)
        a, b = line.get("first_seq"), line.get("last_seq")
        rng = (a, b) if a is not None else None
        where = {"ledger_line": line.number, "sealed_at": line.ts}
        if c is None:
            f = Finding(F.SEALED_MISSING, EXIT_CORRUPT, f"sealed chunk is absent and no ledger line moved it "
                        f"(sealed at {line.ts}, ledger line {line.number}, {line.get('records')} records)",
                        name, sequence_range=rng, extra=dict(where, records=line.get("records")))
            if rng and view.exp.accepted_cover(*rng) is not None:
                f = _sequence(view, a, b, f.reason, strict, name, where)
            out.append(f)
        elif c.size != line.get("size"):
            out.append(Finding(F.SEAL_MISMATCH, EXIT_CORRUPT, f"size differs from its seal (ledger line "
                               f"{line.number})", name, sequence_range=rng, stored=line.get("size"),
                               computed=c.size, extra=where, field="size"))
        else:
            got = seals.get(name)
            if got is None:  # not hashed by the scan (segments): hashed above
                sha = hashed[name]
                got = (SEAL_MISMATCH if sha != line.get("sha256") else "verified", sha)
            if got is not None and got[0] == SEAL_MISMATCH:
                out.append(Finding(F.SEAL_MISMATCH, EXIT_CORRUPT, f"SHA-256 differs from its seal (ledger line "
                                   f"{line.number}) although the size matches: bytes changed in place",
                                   name, sequence_range=rng, stored=line.get("sha256"), computed=got[1],
                                   extra=where, field="sha256"))
    return out


def _hashes(directory: str, files: list[tuple[str, int]], fs) -> dict:
    """SHA-256 of the sealed files the scan did not hash (segments), one thread per core when there is
    enough to read (ops/wal/chunkscan.py's rule; hashlib releases the GIL on large buffers)."""
    from .chunkscan import AUTO_JOBS_BYTES

    def sha(name: str) -> str:
        return SL.sha256_file(os.path.join(directory, name), fs)[0]

    names = [n for n, _ in files]
    threads = getattr(fs, "background_threads", False)  # (not on the simulated file system)
    if sum(size for _, size in files) < AUTO_JOBS_BYTES or not threads or len(names) < 2:
        return {n: sha(n) for n in names}
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        return dict(zip(names, pool.map(sha, names)))


def _unheld_findings(report, view: View, strict: bool) -> list[Finding]:
    """Sequences the ledger says were issued that no chunk holds, before the first and after the last."""
    out: list[Finding] = []
    first, last = report.first_sequence, report.last_sequence
    horizon = view.horizon
    lows = [ln.get("first_seq") for ln in view.exp.sealed.values()] + \
           [ln.get("first_seq") for ln in view.exp.moved.values() if ln.get("why") not in L.HORIZON_WHY] + \
           [m.first_seq for m in view.manifest_moves if not m.horizon]
    lows = [x for x in lows if x is not None and x >= 1]
    if lows and first is not None:
        a, b = max(min(lows), horizon + 1), first - 1
        if a <= b:
            out.append(_sequence(view, a, b, f"sequences {a}..{b} were issued but no chunk holds them "
                                 f"(before the first present sequence {first})", strict, report.chunks[0].file))
    # after the last present record: what was issued (a ledger hwm line, checkpoint.meta's HWM, a chunk set
    # aside) and is held nowhere, unless compaction moved it away on record
    top = max([x for x in (last, horizon if last is None else view.moved_horizon) if x is not None] or [0])
    if view.issued > top:
        a, b = top + 1, view.issued
        said = f"; {CHECKPOINT_META}'s HWM is {view.ckpt_hwm}" if view.ckpt_hwm == view.issued else ""
        if last is not None or lows:
            out.append(_sequence(view, a, b, f"sequences {a}..{b} were issued but no chunk holds them (after "
                                 f"the last present sequence {last}{said})", strict,
                                 report.chunks[-1].file if report.chunks else None))
    return out


def _cut_note(line, report) -> Finding:
    """A cut the ledger records (walctl cut): said every time, so that sequences issued again after it are
    never a silent reuse."""
    keep, was = line.get("last_seq_kept"), line.get("last_seq")
    last = report.last_sequence
    now = (f"; sequences {keep + 1}..{last} are here again (written after the cut, or put back)"
           if last is not None and last > keep else f"; the next sequence issued is {keep + 1}")
    return Finding(F.CUT_RECORDED, EXIT_OK, f"cut after sequence {keep} at {line.ts} ({line.get('reason')}): sequences "
                   f"{keep + 1}..{was} were set aside in {Q.QUARANTINE_DIR}/ and are issued again{now}", LEDGER_FILE,
                   sequence_range=(keep + 1, was), extra={"ledger_line": line.number, "time": line.ts,
                                                         "last_seq_kept": keep})


def judge_gaps(findings, view: View, strict: bool, explain: bool = True) -> tuple:
    """Gaps the scan found: accepted losses become warnings (exit 0, --strict 3); others say what explains
    them. The one rule verify, replay and the record walk share."""
    out = []
    for f in findings:
        if f.cls == F.SEQUENCE_GAP and f.sequence_range:
            a, b = f.sequence_range
            g = _sequence(view, a, b, f.reason, strict, f.file, dict(f.extra))
            if g.cls == F.ACCEPTED_LOSS:
                f = f._replace(cls=g.cls, exit_code=g.exit_code, reason=g.reason, extra=g.extra)
            elif explain:
                f = f._replace(reason=f.reason + _explain_text(g.extra), extra=g.extra)
        out.append(f)
    return tuple(out)


def accepted_gaps_only(report, fs=DEFAULT_FS, strict: bool = False):
    """A report over some of a directory's chunks (replay, the record walk) with only the gap rule applied:
    absence rules need every chunk, these readers may stop early."""
    read = SL.read_ledger(report.path, fs) if fs.stat(report.path).kind == "dir" else None
    if read is None or not any(ln.event == L.ACCEPT_LOSS for ln in read.lines):
        return report
    view = View(report.path, read, L.fold(read.lines), (), 0, None)
    return _with_findings(report, judge_gaps(report.findings, view, strict, explain=False))


def seal_summary(outcomes, chunks) -> tuple[dict, list[str], list[str]]:
    """(file -> seal outcome, files verified by hash, files trusted by stat data)."""
    seals = {c.name: o.seal for c, o in zip(chunks, outcomes) if o.seal is not None}
    verified = [n for n, s in seals.items() if s[0] == "verified"]
    trusted = [n for n, s in seals.items() if s[0] == "trusted"]
    return seals, verified, trusted


def remembered_kind(directory: str, entries, fs=DEFAULT_FS) -> str | None:
    """The kind of log a directory was when none of its files is left (a 0-byte first chunk that repair set
    aside, everything compacted): its ledger or its quarantine manifest names the files it held. None when
    neither names a chunk or a segment (or `entries`, the directory's names, holds neither): an empty
    directory stays unrecognised."""
    from ..kinds import KIND_DIR, KIND_SEGMENTS

    if L.LEDGER_DIR not in entries and Q.QUARANTINE_DIR not in entries:
        return None
    names = []
    if fs.exists(os.path.join(Q.qdir(directory), Q.MANIFEST)):
        names += [e.get("source") for e in Q.read_manifest(directory, fs)[0]]
    read = SL.read_ledger(directory, fs)
    names += [ln.get("file") for ln in (read.lines if read is not None else ())]
    for name in names:
        if isinstance(name, str) and parse_chunk_name(name) is not None:
            return KIND_DIR
        if isinstance(name, str) and parse_segment_name(name) is not None:
            return KIND_SEGMENTS
    return None


def accepted_losses(path: str):
    """(a, b) -> True when the directory's ledger records that sequences a..b were accepted as lost
    (`walctl repair --accept-loss`): replay streams across such a gap as verify accepts it."""
    from ...format.ledger import fold
    from ...store.ledger import read_ledger

    read = read_ledger(path) if os.path.isdir(path) else None
    exp = fold(read.lines) if read is not None else None
    return lambda a, b: exp is not None and exp.accepted_cover(a, b) is not None
