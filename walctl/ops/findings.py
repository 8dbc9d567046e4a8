"""Findings: what verify, inspect and stats report. A finding names the file, the offset, the
sequences involved, the class of problem and the values stored vs computed (etcd's rule)."""
from __future__ import annotations

from typing import NamedTuple

from ..errors import (
    EXIT_CORRUPT, EXIT_ENVIRONMENT, EXIT_OK, EXIT_SEQUENCE, EXIT_TORN, EXIT_UNSUPPORTED,
)

# Finding classes (docs/format.md, "Damage classes"; man/walctl-verify.1)
TAIL_DAMAGE = "tail-damage"
MID_LOG_DAMAGE = "mid-log-damage"
UNDECODABLE_PAYLOAD = "undecodable-payload"
SHORT_CHUNK = "short-chunk"
SEQUENCE_GAP = "sequence-gap"
SEQUENCE_REPEAT = "sequence-repeat"
SEQUENCE_REGRESSION = "sequence-regression"
UNSUPPORTED = "unsupported"
UNREADABLE = "unreadable"
ANOMALY = "anomaly"
IN_PROGRESS = "in-progress"
FOREIGN_FILE = "foreign-file"
DUPLICATE_INDEX = "duplicate-chunk-index"
LINKED_FILE = "linked-file"  # a symbolic link: read through, never modified
NO_CHUNKS = "no-chunks"
# the directory ledger (docs/format.md, "The directory ledger")
LEDGER_LINE = "ledger-line"
SEALED_MISSING = "sealed-chunk-missing"
SEAL_MISMATCH = "seal-mismatch"
SEQUENCE_MISSING = "sequence-missing"
SEQUENCE_BELOW_ONE = "sequence-below-one"
ACCEPTED_LOSS = "accepted-loss"
CHECKPOINT_META = "checkpoint-meta"

SEVERITY_BY_EXIT = {
    EXIT_OK: "warning", EXIT_TORN: "torn", EXIT_CORRUPT: "error", EXIT_SEQUENCE: "error",
    EXIT_UNSUPPORTED: "error", EXIT_ENVIRONMENT: "error",
}


class Finding(NamedTuple):
    cls: str
    exit_code: int
    reason: str
    file: str | None = None
    offset: int | None = None
    end_offset: int | None = None
    sequence_range: tuple[int, int] | None = None
    stored: int | None = None
    computed: int | None = None
    extra: dict = {}  # class-specific keys for JSON (never mutated: _replace builds a new one)

    # The keys most findings share, read by name. They stay in `extra` because each producer's JSON key
    # order is part of the schema (tests/test_schemas.py): a lost range follows `torn` for a short chunk
    # but precedes `tail_kind` for tail damage.
    @property
    def torn(self) -> bool | None:
        """Tail damage, a short chunk, a torn line: whether it is torn (an unacknowledged append)."""
        return self.extra.get("torn")

    @property
    def tail_kind(self) -> str | None:
        """zero-fill | incomplete | checksum, for tail damage."""
        return self.extra.get("tail_kind")

    @property
    def field(self) -> str | None:
        """The header field or check that failed (record-magic, header-crc, size, sha256...)."""
        return self.extra.get("field")

    @property
    def lost_sequence_range(self) -> tuple[int, int] | None:
        """The sequences the damaged bytes held (known from the records around them)."""
        return _pair(self.extra.get("lost_sequence_range"))

    @property
    def missing(self) -> tuple[int, int] | None:
        """A sequence gap's missing sequences."""
        return _pair(self.extra.get("missing"))

    @property
    def repeated(self) -> tuple[int, int] | None:
        """The sequences a repeat or regression shows twice."""
        return _pair(self.extra.get("repeated"))

    @property
    def lost_or_missing(self) -> tuple[int, int] | None:
        """The sequences this finding accounts for as absent: lost to damage, else missing from a gap."""
        return self.lost_sequence_range or self.missing

    @property
    def claimed_sequence(self) -> int | None:
        """The sequence a damaged record claims in its (unverified) header."""
        return self.extra.get("claimed_sequence")

    @property
    def last_good_sequence(self) -> int | None:
        return self.extra.get("last_good_sequence")

    @property
    def severity(self) -> str:
        if self.cls == IN_PROGRESS:
            return "note"
        return SEVERITY_BY_EXIT.get(self.exit_code, "error")

    def to_json(self) -> dict:
        d = {
            "class": self.cls,
            "severity": self.severity,
            "exit_code": self.exit_code,
            "file": self.file,
            "offset": self.offset,
            "end_offset": self.end_offset,
            "length": None if self.offset is None or self.end_offset is None else self.end_offset - self.offset,
            "sequence_range": list(self.sequence_range) if self.sequence_range else None,
            "reason": self.reason,
            "stored": self.stored,
            "computed": self.computed,
        }
        d.update(self.extra)
        return d

    def one_line(self) -> str:
        where = self.file or ""
        if self.offset is not None:
            where += f": offset {self.offset}"
            if self.end_offset is not None and self.end_offset != self.offset:
                where += f"..{self.end_offset}"
        parts = [p for p in (where, self.reason) if p]
        if self.stored is not None and self.computed is not None:
            if isinstance(self.stored, int) and isinstance(self.computed, int):
                parts.append(f"stored 0x{self.stored:08x}, computed 0x{self.computed:08x}")
            else:
                parts.append(f"stored {self.stored}, computed {self.computed}")
        if self.sequence_range:
            a, b = self.sequence_range
            parts.append(f"sequences {a}..{b}" if a != b else f"sequence {a}")
        return ": ".join(parts[:2]) + ("; " + "; ".join(parts[2:]) if len(parts) > 2 else "")


def _pair(v) -> tuple[int, int] | None:
    return (v[0], v[1]) if v else None
