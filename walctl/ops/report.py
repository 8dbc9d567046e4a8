"""The report every verifying use case returns: one PathReport per path, a ChunkReport per file in it.

Shared by ops/wal/verify.py (V2 chunks, checkpoints, task logs, workflow stores) and the walks that verify
other kinds (ops/wal/segments.py, ops/agents/roots.py), so none of them imports another to build its report.
"""
from __future__ import annotations

from typing import NamedTuple

from ..errors import EXITS, combine_exit_codes
from .findings import Finding

VERDICTS = {e.code: e.verdict for e in EXITS if e.verdict is not None}


class ChunkReport(NamedTuple):
    file: str
    index: int
    size: int
    state: str  # file-header state, or "unreadable" / "not-a-file"
    version: int | None
    verdict: str
    exit_code: int
    records: int
    first_sequence: int | None
    last_sequence: int | None
    valid_bytes: int
    damaged_bytes: int
    anomalies: dict

    def to_json(self) -> dict:
        return {
            "file": self.file, "index": self.index, "size": self.size, "state": self.state,
            "version": self.version, "verdict": self.verdict, "exit_code": self.exit_code,
            "records": self.records, "first_sequence": self.first_sequence,
            "last_sequence": self.last_sequence, "valid_bytes": self.valid_bytes,
            "damaged_bytes": self.damaged_bytes, "anomalies": dict(self.anomalies),
        }


def file_row(file: str, index: int, size: int, state: str, exit_code: int, *, version: int | None = None,
             records: int = 0, first_sequence: int | None = None, last_sequence: int | None = None,
             valid_bytes: int = 0, damaged_bytes: int = 0) -> ChunkReport:
    """A report row for any kind's file (a checkpoint, a task log, a session, a workflow document, a
    segment), by name: what does not apply keeps its neutral value. The JSON calls every row a chunk."""
    return ChunkReport(file, index, size, state, version, VERDICTS[exit_code], exit_code, records,
                       first_sequence, last_sequence, valid_bytes, damaged_bytes, {})


class PathReport(NamedTuple):
    path: str
    kind: str | None
    exit_code: int
    live_writer: str | None
    chunks: tuple[ChunkReport, ...]
    findings: tuple[Finding, ...]
    ledger: dict | None = None  # seals used: {"lines", "verified_by_hash", "trusted_by_stat"}
    coverage: dict | None = None  # verify --subset/--resume/--max-duration: what was and was not read

    @property
    def verdict(self) -> str:
        return VERDICTS[self.exit_code]

    @property
    def records(self) -> int:
        return sum(c.records for c in self.chunks)

    def _a_set(self) -> bool:
        """Files whose sequences are a set, listed by name (checkpoints): lowest..highest, never first..last
        (`seq 75000..32919` read as a range backwards)."""
        from .kinds import kind_of

        k = kind_of(self.kind)
        return k is not None and k.whole_files

    @property
    def first_sequence(self) -> int | None:
        if self._a_set():
            return min((c.first_sequence for c in self.chunks if c.first_sequence is not None), default=None)
        return next((c.first_sequence for c in self.chunks if c.first_sequence is not None), None)

    @property
    def last_sequence(self) -> int | None:
        if self._a_set():
            return max((c.last_sequence for c in self.chunks if c.last_sequence is not None), default=None)
        return next((c.last_sequence for c in reversed(self.chunks) if c.last_sequence is not None), None)

    @property
    def damaged_bytes(self) -> int:
        return sum(c.damaged_bytes for c in self.chunks)

    def to_json(self) -> dict:
        return {
            "path": self.path, "kind": self.kind, "verdict": self.verdict, "exit_code": self.exit_code,
            "live_writer": self.live_writer,
            "summary": {
                "chunks": len(self.chunks), "records": self.records,
                "first_sequence": self.first_sequence, "last_sequence": self.last_sequence,
                "bytes": sum(c.size for c in self.chunks), "damaged_bytes": self.damaged_bytes,
                "findings": len(self.findings),
            },
            "ledger": self.ledger,
            **({"coverage": self.coverage} if self.coverage is not None else {}),
            "chunks": [c.to_json() for c in self.chunks],
            "findings": [f.to_json() for f in self.findings],
        }


class VerifyReport(NamedTuple):
    paths: tuple[PathReport, ...]
    strict: bool

    @property
    def exit_code(self) -> int:
        return combine_exit_codes(p.exit_code for p in self.paths)

    @property
    def verdict(self) -> str:
        return VERDICTS[self.exit_code]


def examined(error, body: dict, findings) -> Exception:
    """`error` (a WalctlError) carrying the document of what the command examined before it failed
    (docs/json.md: a command that examined data prints its own document on failure too): nothing applied,
    the outcome (refused for exit 7, else failed), the exit code, the error, and the findings (a report's,
    or a list of them)."""
    from ..errors import EXIT_REFUSED

    findings = findings.findings if hasattr(findings, "findings") else findings
    error.examined = dict(body, applied=False, outcome="refused" if error.exit_code == EXIT_REFUSED else "failed",
                          exit_code=error.exit_code, error=error.reason, findings=[f.to_json() for f in findings])
    return error

