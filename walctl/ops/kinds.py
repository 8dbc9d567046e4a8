"""The artifact kinds walctl reads: their names (the JSON's "kind" values), defined once, and one table,
KINDS, saying for each what a command does with it (in the spirit of h11's READERS).

ops/wal/verify.py: detect_kind says which kind a path is (from names and first bytes); every command then
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


_LOADED: dict = {}  # "module:function" -> the function


class Kind(NamedTuple):
    name: str
    is_dir: bool
    units: str          # what its items are called on screen
    inspect: str        # VIEW_*: what `inspect` shows
    stats: str          # VIEW_*: what `stats` shows
    verify: str | None  # "module:function" -> verify(path, kind, strict, fs, lock_held_by_us) -> PathReport;
                        # None: V2 chunks, which ops/wal/verify.py reads itself (jobs, quick, the ledger)
    replay: str | None = None    # "module:function" -> replay(path, kind, out, opts, fs, out_fd, progress)
    events: str | None = None    # "module:function" -> (entries after a sequence, report, duplicates): recover, merge
    item: str = "chunk"          # what one of its files (a report row) is called on screen
    counted: str = "records"     # what a row counts on screen
    ledger: bool = False         # keeps a directory ledger: seal, accept-loss, verify's ledger rules
    mend: bool = False           # repair, salvage and quarantine act on it (verify's next steps)
    compact: bool = False        # compact (and archive push --delete-local) removes its closed files
    indexed: bool = False        # its files are numbered one by one: an absent number is a missing file (map)
    annotated: bool = False      # inspect --damaged annotates its bytes with V2 record headers
    whole_files: bool = False    # each file is checked whole and stands alone (checkpoints): no damage map
                                 # to draw, and the files' sequences are a set (lowest..highest), not a run
    reducer: str = "adr003"      # recover --reducer auto: the reducer for its events (ops/checkpoints/recover.py: REDUCERS)
    fold: str | None = None      # "module:function" -> Folded: merge folds it into states
    # The archive (ops/archive/): its files as archive objects; None where it is not archived.
    archive: str | None = None   # the object kind (the folder under a namespace, the manifest's "kind")
    files: str | None = None     # "module:function" -> the names of its files in order (archive push)
    describe: str | None = None  # "module:function" -> (Entry, None) | (None, Finding): one file as archived
    number: str | None = None    # "module:function" -> the number in a file's name, or None (object order)
    file_name: str | None = None  # "module:function" -> the file name of a number (the follower's next file)
    cut: str | None = None       # "module:function" -> offset right after an event in one file (restore)
    until: str | None = None     # "module:function" -> last sequence at or before a time in a directory (restore, cut)
    end_through: str | None = None  # "module:function" -> offset after the last record at or below N in a file (cut)
    follower: str | None = None  # "module:Class" -> the follower archive push --follow ships with
    file_header: str | None = None  # "module:function" -> the bytes every file starts with (a first piece)
    piece: str | None = None     # "module:function" -> a live piece's records read (sequences, rising, time)
    stage: str | None = None     # "module:function" -> (staged copy, object kind) of each file version to push
    sources: str | None = None   # "module:function" -> (path below the root, path) of each file it versions
    shipper: str | None = None   # "module:Class" -> what archive push --follow runs (None: ops/archive/follow.py's)
    restore: str | None = None   # "module:function" -> restore of its file versions (ops/archive/files_restore.py)

    def load(self, what: str):
        """The function the entry names under `what` (verify, replay, events, files...)."""
        ref = getattr(self, what)
        if ref is None:
            raise LookupError(f"{self.name} has no {what}")
        fn = _LOADED.get(ref)
        if fn is None:  # (sorting a manifest asks per object: resolved once)
            module, attr = ref.split(":")
            fn = _LOADED[ref] = getattr(import_module(f"walctl.ops.{module}"), attr)
        return fn


_V2 = dict(units="records", inspect=VIEW_RECORDS, stats=VIEW_RECORDS, verify=None,
           replay="wal.replay:replay_v2", events="checkpoints.recover:v2_events", annotated=True, reducer="spector",
           fold="wal.merge:fold_wal")
_SEG = dict(item="segment", counted="entries", units="entries", inspect=VIEW_ENTRIES, stats=VIEW_ENTRIES, verify="verify_kinds:verify_segments",
            replay="wal.replay:replay_segments", events="checkpoints.recover:segment_events")
_CKPT = dict(whole_files=True, item="checkpoint", counted="valid", units="checkpoints", inspect=VIEW_CHECKPOINTS, stats=VIEW_SUMMARY, verify="verify_kinds:verify_checkpoint_kind")
_TLOG = dict(item="task log", counted="entries", units="entries", inspect=VIEW_TASKLOGS, stats=VIEW_SUMMARY, verify="verify_kinds:verify_tasklog_kind")
_ARCHIVED_V2 = dict(archive="chunks", files="archive.push:chunk_names", describe="archive.kinds:describe_chunk",
                    number="archive.kinds:chunk_number", file_name="archive.kinds:chunk_file",
                    cut="archive.kinds:end_in_chunk", until="archive.kinds:v2_until", follower="wal.follow:ChunkFollower",
                    end_through="wal.cut:end_through_chunk",
                    file_header="archive.kinds:v2_file_header", piece="archive.kinds:chunk_piece")
_ARCHIVED_SEG = dict(archive="segments", files="archive.push:segment_names", describe="archive.kinds:describe_segment",
                     number="archive.kinds:segment_number", file_name="archive.kinds:segment_file",
                     cut="archive.kinds:end_in_segment", until="archive.kinds:segments_until",
                     end_through="wal.cut:end_through_segment",
                     follower="wal.follow_segments:SegmentFollower", piece="archive.kinds:segment_piece")

KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind(KIND_DIR, True, ledger=True, mend=True, compact=True, indexed=True, **_V2, **_ARCHIVED_V2),
    Kind(KIND_CHUNK, False, **_V2),
    Kind(KIND_SEGMENTS, True, ledger=True, **_SEG, **_ARCHIVED_SEG),
    Kind(KIND_SEGMENT, False, **_SEG),
    Kind(KIND_CHECKPOINTS, True, archive="checkpoints", describe="archive.kinds:describe_checkpoint", **_CKPT),
    Kind(KIND_CHECKPOINT, False, **_CKPT),
    Kind(KIND_TASKLOGS, True, archive="tasklogs", stage="archive.files:stage_tasklogs",
         sources="archive.files:tasklog_sources", shipper="archive.files_follow:FilesShipper",
         describe="archive.files:describe_tasklog", restore="archive.files_restore:restore_tasklogs", **_TLOG),
    Kind(KIND_TASKLOG, False, **_TLOG),
    Kind(KIND_SUBSTRAT, True, "sessions", VIEW_AGENTS, VIEW_SUMMARY, "verify_kinds:verify_substrat",
         item="session", counted="events", archive="agents", stage="archive.files:stage_agents",
         sources="archive.files:agent_sources", shipper="archive.files_follow:FilesShipper",
         describe="archive.files:describe_agent_file", restore="archive.files_restore:restore_agents"),
    Kind(KIND_WORKFLOWS, True, "documents", VIEW_WORKFLOWS, VIEW_SUMMARY, "verify_kinds:verify_workflow_kind",
         item="workflow checkpoint", counted="valid"),
)}
# The archive's object kinds (the `archive` column) -> the kind whose files they are.
ARCHIVED: dict[str, Kind] = {k.archive: k for k in KINDS.values() if k.archive is not None}


def kind_of(name: str | None) -> Kind | None:
    """The table entry for a report's kind (None: the path was not recognised)."""
    return KINDS.get(name)


def archived(object_kind: str) -> Kind:
    """The table entry whose files an archive object kind holds (KeyError: live pieces, or not a kind)."""
    return ARCHIVED[object_kind]
