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
    stored: int | str | None = None  # as the check holds it; JSON carries it as text (value_text)
    computed: int | str | None = None
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
    value_kind: str | None = None  # what stored/computed are (VALUE_KINDS); None: from `field`

    @property
    def lost_or_missing(self) -> tuple[int, int] | None:
        """The sequences this finding accounts for as absent: lost to damage, else missing from a gap."""
        return self.lost_sequence_range or self.missing

    @property
    def severity(self) -> str:
        return row(self.cls).severity or SEVERITY_BY_EXIT.get(self.exit_code, "error")

    @property
    def kind_of_value(self) -> str | None:
        if self.stored is None and self.computed is None:
            return None
        kind = self.value_kind or KIND_BY_FIELD.get(self.field or "")
        assert kind in VALUE_KINDS, (self.cls, self.field, kind)
        return kind

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
            "stored": value_text(self.stored, self.kind_of_value),
            "computed": value_text(self.computed, self.kind_of_value),
            "value_kind": self.kind_of_value,
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
            kind = self.kind_of_value
            prefix = "0x" if kind in HEX_INTS else ""
            parts.append(f"stored {prefix}{value_text(self.stored, kind)}, "
                         f"computed {prefix}{value_text(self.computed, kind)}")
        if self.sequence_range:
            a, b = self.sequence_range
            parts.append(f"sequences {a}..{b}" if a != b else f"sequence {a}")
        return ": ".join(parts[:2]) + ("; " + "; ".join(parts[2:]) if len(parts) > 2 else "")


# What a finding's `stored` and `computed` are (walctl.verify/2 and the other /2 documents: issue 26). In
# JSON both are text or null, whatever the check, so a script reads one type; `value_kind` says how to read
# the text: a CRC or a magic number as 8 hex digits, a SHA-256 as 64, a size, version or sequence in decimal,
# a checkpoint id as its UUID.
VALUE_KINDS = ("crc32", "magic", "sha256", "size", "version", "sequence", "checkpoint-id")
HEX_INTS = ("crc32", "magic")
KIND_BY_FIELD = {"header-crc": "crc32", "payload-crc": "crc32", "record-magic": "magic", "size": "size",
                 "sha256": "sha256"}


def value_text(value, kind: str | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, int) and kind in HEX_INTS:
        return f"{value:08x}"
    return str(value)


SHARED_KEYS = ("field", "tail_kind", "torn", "claimed_sequence", "last_good_sequence", "previous_sequence",
               "lost_sequence_range", "missing", "repeated")
