"""fingerprint: the SHA-256 of the canonical folded state at a sequence (docs/format.md, "Fingerprints").

One number for one state, whatever way it was reached: a checkpoint and the log after it, a replay of
the whole log, a restored archive, a replica an import wrote, a merge. Two replicas agree at N when
their fingerprints at N are equal (etcd's hashkv, for a folded state instead of a key space).

Two canonical forms, each named in the report:
  canonical-state/1         a reducer's state (recover's, a checkpoint's): the state map with `wal_sequence`
                         set to N, as canonical msgpack (format/canonical.py): keys sorted, shortest ints
  canonical-memory-state/1  merge's per-memory CRDT state: {"memories": {id: state}} as merge's state.json
                         holds it (memory ids as merge spells them), as canonical msgpack; it has no sequence
The state is reached by recover's own rules (the newest checkpoint at or below N that verifies, then the
log's entries up to N; damage up to N refuses, damage after N is only a warning), or by merge's fold.
"""
from __future__ import annotations

import hashlib
import os
from typing import NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_SEQUENCE, NotClean, UnsupportedInput, UsageError
from ...format.canonical import NotCanonical, packb
from ...store.fs import DEFAULT_FS

FORM_STATE = "canonical-state/1"
FORM_MEMORY = "canonical-memory-state/1"
MERGE = "merge"  # --reducer merge: merge's fold of a Spector WAL


class Fingerprint(NamedTuple):
    path: str
    sequence: int | None  # the state's sequence (None: a merge state, which has none)
    reducer: str
    form: str
    sha256: str
    source: str  # how the state was reached: checkpoint+log, log, checkpoint, merge-state, merge-fold
    checkpoint: dict | None  # the checkpoint used (file, checkpoint_id, wal_sequence)
    entries_folded: int
    warnings: tuple[str, ...]

    def to_json(self) -> dict:
        return dict(self._asdict(), warnings=list(self.warnings))


def state_sha256(state: dict, sequence: int) -> str:
    """canonical-state/1: the state with its sequence, canonical msgpack, SHA-256 (raises UsageError for a
    state that has no canonical form: a user reducer's set, object...)."""
    try:
        data = packb(dict(state, wal_sequence=sequence))
    except NotCanonical as e:
        raise UsageError(f"the folded state has no canonical form (a reducer must build maps with text keys, "
                         f"lists, text, bytes, numbers, booleans and null): {e}") from None
    return hashlib.sha256(data).hexdigest()


def memory_sha256(states: dict) -> str:
    """canonical-memory-state/1: merge's memory states (id bytes -> MemoryState)."""
    from ...format import memstate as ms
    from ..wal.merge import id_key

    doc = {"memories": {id_key(m): ms.state_to_json(ms.normalized(s)) for m, s in states.items()}}
    return hashlib.sha256(packb(doc)).hexdigest()


def fingerprint(path: str, *, at: int | None = None, checkpoints: str | None = None, reducer: str = "auto",
                fs=DEFAULT_FS) -> Fingerprint:
    """The fingerprint of PATH's state at `at` (default: its last sequence). PATH: a Spector V2 chunk
    directory or ADR-003 segment directory (with `checkpoints`: start from the newest checkpoint at or
    below `at`), a checkpoint file or directory, or merge's state.json (or the directory holding it)."""
    from ..wal.merge import STATE_FILE

    if at is not None and at < 0:
        raise UsageError(f"--to {at}: a sequence is 0 or more")
    is_state = (fs.stat(path).kind == "dir" and fs.exists(os.path.join(path, STATE_FILE))) or \
        (fs.stat(path).kind == "file" and path.endswith(".json"))
    if is_state:
        return _merge_state(path, at, checkpoints, reducer)
    if reducer == MERGE:
        return _merge_fold(path, at, checkpoints, fs)
    return _folded(path, at, checkpoints, reducer, fs)


def _merge_state(path: str, at, checkpoints, reducer) -> Fingerprint:
    from ..wal.merge import STATE_FILE, load_state

    if reducer not in ("auto", MERGE):
        raise UsageError(f"{path} is merge's state (form {FORM_MEMORY}): --reducer {reducer} does not apply")
    if at is not None or checkpoints is not None:
        raise UsageError(f"{path} is merge's state, which has no sequence: --to and --checkpoints do not apply")
    file = os.path.join(path, STATE_FILE) if os.path.isdir(path) else path
    folded = load_state(file)
    return Fingerprint(path, None, MERGE, FORM_MEMORY, memory_sha256(folded.states), "merge-state", None, 0, ())


def _merge_fold(path: str, at, checkpoints, fs) -> Fingerprint:
    from ..kinds import KINDS
    from ..wal.merge import fold_wal
    from ..wal.verify import detect_kind

    if checkpoints is not None:
        raise UsageError("--reducer merge folds the WAL itself: --checkpoints does not apply (a checkpoint holds "
                         "a reducer's state, not merge's)")
    if KINDS[detect_kind(path, fs)].fold is None:
        raise UsageError(f"--reducer merge folds Spector V2 WALs; {path} is not one")
    folded = fold_wal(path, fs, to=at)
    if folded.stopped is not None:
        raise NotClean(f"damage before the state could be folded: {folded.stopped}", path, code=folded.exit_code)
    last = folded.last_sequence or 0
    _reached(path, at, last)
    return Fingerprint(path, last, MERGE, FORM_MEMORY, memory_sha256(folded.states), "merge-fold", None,
                       folded.events, ())


def _folded(path: str, at, checkpoints, reducer: str, fs) -> Fingerprint:
    from .checkpoint import is_checkpoint_file, looks_like_checkpoint_dir
    from ..kinds import KINDS
    from .recover import OUTCOME_HISTORY_LOST, pick_reducer, recover
    from ..wal.verify import detect_kind

    if KINDS[detect_kind(path, fs)].events is None:  # not a log: a checkpoint, or nothing to fold
        is_dir = fs.stat(path).kind == "dir"
        if not (looks_like_checkpoint_dir(path, fs) if is_dir else is_checkpoint_file(path, fs)):
            raise UnsupportedInput("not a log (Spector V2 chunks, ADR-003 segments), a checkpoint or merge's "
                                   "state.json", path)
        if checkpoints is not None:
            raise UsageError(f"{path} is a checkpoint: give the log as PATH and the checkpoints with --checkpoints")
        return _checkpoint_only(path, at, reducer, fs)
    reducer = pick_reducer(reducer, path, fs)
    rep = recover(checkpoints, path, reducer=reducer, fs=fs, until=at)
    if rep.outcome == OUTCOME_HISTORY_LOST:
        raise NotClean(f"no state to fingerprint: {rep.warnings[-1]}", path, code=rep.exit_code)
    _reached(path, at, rep.final_sequence)
    source = "checkpoint+log" if rep.checkpoint else "log"
    return Fingerprint(path, rep.final_sequence, reducer, FORM_STATE, state_sha256(rep.state, rep.final_sequence),
                       source, rep.checkpoint, rep.entries_replayed,
                       tuple(w.replace(" (see skipped)", "") for w in rep.warnings))


def _checkpoint_only(path: str, at, reducer: str, fs) -> Fingerprint:
    """A checkpoint file (its state at its wal_sequence), or a directory's newest valid one at or below `at`."""
    from .checkpoint import resolve
    from .recover import recover

    if fs.stat(path).kind == "dir":
        rep = recover(path, None, fs=fs, until=at)
        if rep.checkpoint is None:
            raise NotClean(f"no valid checkpoint{'' if at is None else f' at or below sequence {at}'}", path,
                           code=EXIT_SEQUENCE if at is not None else EXIT_CORRUPT)
        state, w, used, warnings = rep.state, rep.final_sequence, rep.checkpoint, rep.warnings
    else:
        ck = resolve(path, fs)
        state, w, warnings = ck.checked.state, ck.header.wal_sequence, ()
        used = {"file": ck.file, "checkpoint_id": ck.header.id_text, "wal_sequence": w,
                "timestamp": ck.header.timestamp}
    if at is not None and at != w:
        raise UsageError(f"the checkpoint holds the state at sequence {w}, not {at}: give the log as PATH and "
                         f"this checkpoint directory as --checkpoints")
    return Fingerprint(path, w, "checkpoint" if reducer == "auto" else reducer, FORM_STATE, state_sha256(state, w),
                       "checkpoint", used, 0, tuple(warnings))


def _reached(path: str, at: int | None, last: int) -> None:
    if at is not None and last != at:
        raise NotClean(f"the log ends at sequence {last}: there is no state at sequence {at}", path,
                       code=EXIT_SEQUENCE)
