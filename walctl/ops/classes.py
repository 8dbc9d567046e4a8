"""The finding classes: one closed vocabulary, one table (docs/format.md, 2.2-2.5 and 3).

Every class a finding can carry is a row of `CLASSES`: its exit codes, its severity (when the exit code
does not say it), what `--strict` does to it, its mark on the damage map, and which commands act on it.
Code outside this module names a class by its constant (`TAIL_DAMAGE`), never by its string, and asks the
table (`acted_on_by`, `strict_code`, `row(cls).mark`) instead of keeping a set of its own
(tests/test_classes.py fails on a class literal anywhere else in ops/ or cli/).

Columns:
- `exit_codes`: the codes a finding of the class carries, the usual one first (a tail is 1 when torn, 3
  when the next chunk does not continue it; unreadable is whatever the environment said);
- `severity`: None: from the exit code (errors.EXITS); else fixed (an append in progress is a note);
- `strict`: the exit code under `--strict` for a class that is a warning without it (None: unchanged);
- `mark`: the map's mark (None: a note when it exits 0, else the format's own damage); a tail's torn mark
  is refined by its tail kind (ops/damagemap.py);
- `absent`: the finding field holding sequences no file holds (heal fetches them; advice names them);
- `acts`: the commands that act on it (ACTS: repair cuts it when torn, salvage and quarantine set its bytes
  aside, heal puts the file back from an archive, compact refuses across it...)."""
from __future__ import annotations

from typing import NamedTuple

from ..errors import (
    EXIT_CORRUPT, EXIT_ENVIRONMENT, EXIT_OK, EXIT_SEQUENCE, EXIT_TORN, EXIT_UNSUPPORTED,
)

# The map's marks, in legend order (ops/damagemap.py draws them; cli/map_text.py colours them).
MARK_MID_LOG = "mid-log"
MARK_TORN = "torn"
MARK_ZERO_FILL = "zero-fill"
MARK_CORRUPT_TAIL = "corrupt-tail"
MARK_UNDECODABLE = "undecodable"
MARK_SHORT = "short-chunk"
MARK_UNSUPPORTED = "unsupported"
MARK_IN_PROGRESS = "in-progress"
MARK_GAP = "gap"
MARK_REPEAT = "repeat"
MARK_ANOMALY = "anomaly"
MARK_NOTE = "note"  # foreign files, duplicate indices: nothing in a chunk's bytes
MARK_DAMAGED = "damaged"  # other artifact kinds (segments, checkpoints, task logs): their own classes

# What a command does with a class (the `acts` column).
REPAIR_TRUNCATE = "repair-truncate"  # repair cuts a torn one at its offset
REPAIR_SET_ASIDE = "repair-set-aside"  # repair quarantines the (torn) chunk whole
SALVAGE = "salvage"  # bytes a copy reads past: salvage and quarantine set them aside
HEAL = "heal"  # heal puts the file back from an archive
NO_COMPACT = "no-compact"  # sequences do not rise: compact cannot bound what a chunk holds
DISCONTINUITY = "discontinuity"  # a sequence break verify's advice explains (gap, repeat, regression)
UNHELD = "unheld"  # sequences no file holds, accepted or not (the ledger's accounting)
ACTS = (REPAIR_TRUNCATE, REPAIR_SET_ASIDE, SALVAGE, HEAL, NO_COMPACT, DISCONTINUITY, UNHELD)


class FindingClass(NamedTuple):
    name: str
    exit_codes: tuple[int, ...]
    severity: str | None = None
    strict: int | None = None
    mark: str | None = None
    absent: str | None = None
    acts: frozenset = frozenset()


CLASSES: dict[str, FindingClass] = {}


def _row(name: str, *exit_codes: int, acts=(), **columns) -> str:
    assert name not in CLASSES and not set(acts) - set(ACTS), name
    CLASSES[name] = FindingClass(name, exit_codes, acts=frozenset(acts), **columns)
    return name


T, C, Q, U, E, OK = EXIT_TORN, EXIT_CORRUPT, EXIT_SEQUENCE, EXIT_UNSUPPORTED, EXIT_ENVIRONMENT, EXIT_OK
# Spector V2 chunks (ops/wal/verify.py) and, where they share a meaning, every other kind
TAIL_DAMAGE = _row("tail-damage", T, C, mark=MARK_TORN, acts=(REPAIR_TRUNCATE, SALVAGE, HEAL))
MID_LOG_DAMAGE = _row("mid-log-damage", C, mark=MARK_MID_LOG, acts=(SALVAGE, HEAL))
UNDECODABLE_PAYLOAD = _row("undecodable-payload", C, mark=MARK_UNDECODABLE, acts=(SALVAGE, HEAL))
SHORT_CHUNK = _row("short-chunk", T, C, mark=MARK_SHORT, acts=(REPAIR_SET_ASIDE, SALVAGE, HEAL))
SEQUENCE_GAP = _row("sequence-gap", Q, mark=MARK_GAP, absent="missing", acts=(DISCONTINUITY, UNHELD))
SEQUENCE_REPEAT = _row("sequence-repeat", Q, mark=MARK_REPEAT, acts=(NO_COMPACT, DISCONTINUITY))
SEQUENCE_REGRESSION = _row("sequence-regression", Q, mark=MARK_REPEAT, acts=(NO_COMPACT, DISCONTINUITY))
UNSUPPORTED = _row("unsupported", U, mark=MARK_UNSUPPORTED, acts=(HEAL,))
UNREADABLE = _row("unreadable", E, U, C, mark=MARK_UNSUPPORTED, acts=(HEAL,))
ANOMALY = _row("anomaly", OK, C, strict=C, mark=MARK_ANOMALY)
IN_PROGRESS = _row("in-progress", OK, severity="note", mark=MARK_IN_PROGRESS)
FOREIGN_FILE = _row("foreign-file", OK)
DUPLICATE_INDEX = _row("duplicate-chunk-index", OK)
LINKED_FILE = _row("linked-file", OK, U)  # a symbolic link: read through, never modified (archive: 5)
# the directory ledger (docs/format.md, "The directory ledger"; ops/wal/ledger_check.py)
LEDGER_LINE = _row("ledger-line", C, OK)
SEALED_MISSING = _row("sealed-chunk-missing", C, absent="sequence_range", acts=(UNHELD,))
SEAL_MISMATCH = _row("seal-mismatch", C, acts=(HEAL,))
SEQUENCE_MISSING = _row("sequence-missing", Q, absent="sequence_range", acts=(UNHELD,))
SEQUENCE_BELOW_ONE = _row("sequence-below-one", Q, acts=(NO_COMPACT,))
ACCEPTED_LOSS = _row("accepted-loss", OK, C, strict=C, acts=(UNHELD,))
CHECKPOINT_META = _row("checkpoint-meta", C, OK)
CUT_RECORDED = _row("cut-recorded", OK, severity="note")  # walctl cut: sequences after N set aside, issued again
# the sequence index (docs/format.md, "The sequence index"; ops/wal/seek.py): a hint found wrong, read past
INDEX_STALE = _row("index-stale", OK)
# checkpoints (ops/checkpoints/checkpoint.py: a step that fails, by the format's failure class)
CHECKPOINT_CORRUPT = _row("checkpoint-corrupt", C, acts=(HEAL,))
CHECKPOINT_UNSUPPORTED = _row("checkpoint-unsupported", U, acts=(HEAL,))
# archives (ops/archive/)
ARCHIVED_DAMAGE = _row("archived-damage", C)
ARCHIVED_SHA256_MISMATCH = _row("archived-sha256-mismatch", C)
MANIFEST_INVALID = _row("manifest-invalid", C)
MANIFEST_MISMATCH = _row("manifest-mismatch", C)
MISSING_OBJECT = _row("missing-object", Q)
SEQUENCE_OVERLAP = _row("sequence-overlap", Q)
PIECE_OVERLAP = _row("piece-overlap", Q)
PIECE_HOLE = _row("piece-hole", Q)
# Substrat agent roots (ops/agents/roots.py)
LIVE_DAEMON = _row("live-daemon", OK)
ACTIVE_SESSION = _row("active-session", OK)
SESSION_JSON_TMP = _row("session-json-tmp", OK)
INTERRUPTED_TERMINATION = _row("interrupted-termination", T)
UNSAVED_SESSION = _row("unsaved-session", T)
PENDING_ENTRY = _row("pending-entry", T)
ORPHAN = _row("orphan", C)
SESSION_JSON = _row("session-json", C)
CORRUPT_LINE = _row("corrupt-line", C)  # also a task log's line (format/tasklog.py's problem kind)
DUPLICATE_CREATED = _row("duplicate-created", C)
# task logs (format/tasklog.py names its problems; ops/tasklog/logs.py turns them into findings)
TASKLOG_RULE = _row("rule", C)
TASKLOG_SEQUENCE = _row("sequence", Q)
TASKLOG_TS_BACKWARDS = _row("ts-backwards", OK, C, strict=C)
TASKLOG_UNSUPPORTED_VERSION = _row("unsupported-version", U)
# workflow stores (ops/verify_kinds.py)
WORKFLOW_DOCUMENT = _row("workflow-document", C)
del T, C, Q, U, E, OK

# The row of a class this table does not list (none should reach it: tests/test_classes.py).
UNLISTED = FindingClass("", ())


def row(cls: str) -> FindingClass:
    return CLASSES.get(cls, UNLISTED)


def acted_on_by(act: str) -> frozenset:
    """The classes a command acts on (one of ACTS), as a set to test membership against."""
    return frozenset(c.name for c in CLASSES.values() if act in c.acts)


def with_absent() -> dict[str, str]:
    """Class -> the finding field holding the sequences no file holds (sequence-gap: `missing`)."""
    return {c.name: c.absent for c in CLASSES.values() if c.absent}


def strict_code(cls: str, strict: bool, code: int = EXIT_OK) -> int:
    """The exit code of a finding of `cls` that is `code` without --strict: the class's strict code under it."""
    s = CLASSES[cls].strict
    return s if strict and s is not None else code
