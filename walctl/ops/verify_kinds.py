"""verify for every artifact kind other than V2 chunks (ops/wal/verify.py does those): one table, VERIFIERS,
from kind to the function that returns its PathReport. The codecs each one needs are imported when it
runs, so `walctl verify` of a chunk directory never loads them (cold start).
"""
from __future__ import annotations

import os

from ..errors import EXIT_CORRUPT, EXIT_OK, combine_exit_codes
from ..store.fs import DEFAULT_FS
from . import classes as K
from .findings import Finding
from .kinds import KIND_CHECKPOINT, KIND_CHECKPOINTS, KIND_WORKFLOWS, kind_of
from .report import PathReport, file_row


def verify_checkpoints(path: str, *, strict: bool = False, fs=DEFAULT_FS) -> PathReport:
    """A checkpoint file, or every *.ckpt of a directory, through all eleven steps."""
    from .checkpoints.checkpoint import check_path

    if fs.stat(path).kind == "dir":
        files = sorted(e.path for e in fs.listdir(path) if e.name.endswith(".ckpt") and e.kind == "file")
        kind = KIND_CHECKPOINTS
    else:
        files, kind = [path], KIND_CHECKPOINT
    chunks, findings = [], []
    for i, p in enumerate(files):
        rep = check_path(p, strict=strict, fs=fs)
        findings.extend(rep.findings)
        h = rep.header
        size = fs.stat(p).size
        ok, seq = rep.checked.ok, h.wal_sequence if h else None
        chunks.append(file_row(rep.file, i, size, "ok" if ok else "invalid", rep.exit_code, version=2 if h else None,
                               records=1 if ok else 0, first_sequence=seq, last_sequence=seq,
                               valid_bytes=size if ok else 0, damaged_bytes=0 if ok else size))
    return PathReport(path, kind, combine_exit_codes(f.exit_code for f in findings), None, tuple(chunks),
                      tuple(findings))


def verify_tasklogs(path: str, kind: str, *, strict: bool = False, fs=DEFAULT_FS) -> PathReport:
    """Task logs as a PathReport: one "chunk" per task log, its valid entries as records."""
    from .tasklog.logs import read_all

    chunks, findings = [], []
    for i, rep in enumerate(read_all(path, strict=strict, fs=fs)):
        findings.extend(rep.findings)
        size = fs.stat(rep.path).size
        damaged = sum((f.end_offset or 0) - (f.offset or 0) for f in rep.findings if f.exit_code)
        chunks.append(file_row(os.path.basename(rep.path), i, size, rep.read.status, rep.exit_code, version=1,
                               records=rep.read.state.valid_entries, valid_bytes=size - damaged,
                               damaged_bytes=damaged))
    return PathReport(path, kind, combine_exit_codes(f.exit_code for f in findings), None, tuple(chunks),
                      tuple(findings))


def verify_workflows(root: str, fs=DEFAULT_FS) -> PathReport:
    """A workflow store: every document must load; one "chunk" per document."""
    from .workflow.store import DirectoryWorkflowStore

    store = DirectoryWorkflowStore(root, fs)
    states = store.list()
    findings = [Finding(K.WORKFLOW_DOCUMENT, EXIT_CORRUPT, p.reason, p.file) for p in store.problems]
    chunks = [file_row(f"{s.checkpoint_id}.json", i, 0, "ok", EXIT_OK, version=1, records=1)
              for i, s in enumerate(states)]
    chunks += [file_row(p.file, len(chunks) + i, 0, "invalid", EXIT_CORRUPT) for i, p in enumerate(store.problems)]
    return PathReport(root, KIND_WORKFLOWS, combine_exit_codes(f.exit_code for f in findings), None, tuple(chunks),
                      tuple(findings))


def verify_segments(path: str, kind: str, strict: bool, fs, lock_held_by_us: bool) -> PathReport:
    from .wal import ledger_check
    from .wal.segments import verify_segments as verify_segment_files

    report = verify_segment_files(path, strict=strict, fs=fs, lock_held_by_us=lock_held_by_us)
    if kind_of(report.kind).ledger:  # a directory of segments, not one segment file
        report = ledger_check.judge(report, ledger_check.load_view(path, fs), {}, strict, fs)
    return report


def verify_substrat(path: str, kind: str, strict: bool, fs, lock_held_by_us: bool) -> PathReport:
    from .agents.roots import to_path_report

    return to_path_report(path, kind, fs)


# The verify functions ops/kinds.py's KINDS names: verify(path, kind, strict, fs, lock_held_by_us) -> PathReport.

def verify_checkpoint_kind(path: str, kind: str, strict: bool, fs, lock_held_by_us: bool) -> PathReport:
    return verify_checkpoints(path, strict=strict, fs=fs)


def verify_tasklog_kind(path: str, kind: str, strict: bool, fs, lock_held_by_us: bool) -> PathReport:
    return verify_tasklogs(path, kind, strict=strict, fs=fs)


def verify_workflow_kind(path: str, kind: str, strict: bool, fs, lock_held_by_us: bool) -> PathReport:
    return verify_workflows(path, fs)
