"""Findings: what verify, inspect and stats report. A finding names the file, the offset, the
sequences involved, the class of problem and the values stored vs computed (etcd's rule)."""
from __future__ import annotations

from typing import NamedTuple

from ..errors import EXITS
from .classes import (  # noqa: F401 (the class names, re-exported: F.TAIL_DAMAGE)
    ACCEPTED_LOSS, ANOMALY, CHECKPOINT_META, CUT_RECORDED, DUPLICATE_INDEX, FOREIGN_FILE, IN_PROGRESS, LEDGER_LINE, LINKED_FILE,
    MID_LOG_DAMAGE, SEAL_MISMATCH, SEALED_MISSING, SEQUENCE_BELOW_ONE, SEQUENCE_GAP, SEQUENCE_MISSING,
    SEQUENCE_REGRESSION, SEQUENCE_REPEAT, SHORT_CHUNK, TAIL_DAMAGE, UNDECODABLE_PAYLOAD, UNREADABLE, UNSUPPORTED,
    row,
)

SEVERITY_BY_EXIT = {e.code: e.severity for e in EXITS}


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
    # The keys most findings share, typed. In JSON they follow the common keys, in this order, when set
    # (None is "does not apply" and is left out); `extra` never carries them (tests/test_structure.py).
    field: str | None = None  # the header field or check that failed (record-magic, header-crc, size...)
    tail_kind: str | None = None  # zero-fill | incomplete | checksum, for tail damage
    torn: bool | None = None  # tail damage, a short chunk, a torn line: an unacknowledged append?
    claimed_sequence: int | None = None  # what a damaged record claims in its (unverified) header
    last_good_sequence: int | None = None  # the last valid sequence before damage
    previous_sequence: int | None = None  # the sequence before a gap, repeat or regression
    lost_sequence_range: tuple[int, int] | None = None  # the sequences damaged bytes held
    missing: tuple[int, int] | None = None  # a gap's missing sequences
    repeated: tuple[int, int] | None = None  # the sequences a repeat or regression shows twice

    @property
    def lost_or_missing(self) -> tuple[int, int] | None:
        """The sequences this finding accounts for as absent: lost to damage, else missing from a gap."""
        return self.lost_sequence_range or self.missing

    @property
    def severity(self) -> str:
        return row(self.cls).severity or SEVERITY_BY_EXIT.get(self.exit_code, "error")

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
        for key in SHARED_KEYS:
            v = getattr(self, key)
            if v is not None:
                d[key] = list(v) if type(v) is tuple else v
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


SHARED_KEYS = ("field", "tail_kind", "torn", "claimed_sequence", "last_good_sequence", "previous_sequence",
               "lost_sequence_range", "missing", "repeated")
