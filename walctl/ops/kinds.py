"""The artifact kinds walctl reads: their names (the JSON's "kind" values), defined once, and one table,
KINDS, saying for each what a command does with it (in the spirit of h11's READERS).

ops/verify.py: detect_kind says which kind a path is (from names and first bytes); every command then
dispatches through the kind's entry instead of an `if kind == ...` chain. The functions are named as
"module:attribute" under walctl.ops and imported only when used, so `walctl verify` of a chunk directory
never loads the codecs of the other kinds (cold start), and this module imports nothing of its own.
"""
from __future__ import annotations

from importlib import import_module
from typing import NamedTuple

KIND_DIR = "spector-v2-dir"
KIND_CHUNK = "spector-v2-chunk"
KIND_SEGMENTS, KIND_SEGMENT = "adr003-segments", "adr003-segment"
KIND_CHECKPOINTS, KIND_CHECKPOINT = "checkpoint-dir", "checkpoint"
KIND_TASKLOGS, KIND_TASKLOG = "tasklog-dir", "tasklog"
KIND_SUBSTRAT, KIND_WORKFLOWS = "substrat-root", "workflow-store"

# What `inspect` and `stats` show for a kind (the CLI maps each view to its renderer).
VIEW_RECORDS, VIEW_ENTRIES, VIEW_SUMMARY = "records", "entries", "summary"
VIEW_CHECKPOINTS, VIEW_TASKLOGS, VIEW_AGENTS, VIEW_WORKFLOWS = "checkpoints", "tasklogs", "agents", "workflows"


class Kind(NamedTuple):
    name: str
    is_dir: bool
    units: str          # what its items are called on screen
    inspect: str        # VIEW_*: what `inspect` shows
    stats: str          # VIEW_*: what `stats` shows
    verify: str | None  # "module:function" -> verify(path, kind, strict, fs, lock_held_by_us) -> PathReport;
                        # None: V2 chunks, which ops/verify.py reads itself (jobs, quick, the ledger)
    replay: str | None = None    # "module:function" -> replay(path, kind, out, opts, fs, out_fd, progress)
    events: str | None = None    # "module:function" -> (entries after a sequence, report, duplicates): recover, merge
    archive: str | None = None   # the archive's object kind for its files (ops/archive.py), when it is pushed
    files: str | None = None     # "module:function" -> the names of its files in order (archive push)
    item: str = "chunk"          # what one of its files (a report row) is called on screen
    counted: str = "records"     # what a row counts on screen
    ledger: bool = False         # keeps a directory ledger: seal, accept-loss, verify's ledger rules
    mend: bool = False           # repair, salvage and quarantine act on it (verify's next steps)

    def load(self, what: str):
        """The function the entry names under `what` (verify, replay, events, files)."""
        ref = getattr(self, what)
        if ref is None:
            raise LookupError(f"{self.name} has no {what}")
        module, attr = ref.split(":")
        return getattr(import_module(f"walctl.ops.{module}"), attr)

    @property
    def is_v2(self) -> bool:
        return self.name in (KIND_DIR, KIND_CHUNK)


_V2 = dict(units="records", inspect=VIEW_RECORDS, stats=VIEW_RECORDS, verify=None,
           replay="replay:replay_v2", events="recover:v2_events")
_SEG = dict(item="segment", counted="entries", units="entries", inspect=VIEW_ENTRIES, stats=VIEW_ENTRIES, verify="verify_kinds:verify_segments",
            replay="replay:replay_segments", events="recover:segment_events")
_CKPT = dict(item="checkpoint", counted="valid", units="checkpoints", inspect=VIEW_CHECKPOINTS, stats=VIEW_SUMMARY, verify="verify_kinds:verify_checkpoint_kind")
_TLOG = dict(item="task log", counted="entries", units="entries", inspect=VIEW_TASKLOGS, stats=VIEW_SUMMARY, verify="verify_kinds:verify_tasklog_kind")

KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind(KIND_DIR, True, archive="chunks", files="archive_push:chunk_names", ledger=True, mend=True, **_V2),
    Kind(KIND_CHUNK, False, **_V2),
    Kind(KIND_SEGMENTS, True, archive="segments", files="archive_push:segment_names", ledger=True, **_SEG),
    Kind(KIND_SEGMENT, False, **_SEG),
    Kind(KIND_CHECKPOINTS, True, **_CKPT),
    Kind(KIND_CHECKPOINT, False, **_CKPT),
    Kind(KIND_TASKLOGS, True, **_TLOG),
    Kind(KIND_TASKLOG, False, **_TLOG),
    Kind(KIND_SUBSTRAT, True, "sessions", VIEW_AGENTS, VIEW_SUMMARY, "verify_kinds:verify_substrat",
         item="session", counted="events"),
    Kind(KIND_WORKFLOWS, True, "documents", VIEW_WORKFLOWS, VIEW_SUMMARY, "verify_kinds:verify_workflow_kind",
         item="workflow checkpoint", counted="valid"),
)}


def kind_of(name: str | None) -> Kind | None:
    """The table entry for a report's kind (None: the path was not recognised)."""
    return KINDS.get(name)
