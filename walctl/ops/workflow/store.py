"""The ADR-002 workflow checkpoint store: save, load, delete, list, cleanup_expired.

Two backends with the ADR's synchronous interface: InMemoryWorkflowStore (the library default) and
DirectoryWorkflowStore, which keeps `<root>/workflow-checkpoints/<id>.json`, each written by durable
replace (a crash leaves the old document or the new one). The library's delete and cleanup really delete
(completing a workflow deletes its checkpoint); the CLI's, being an operator's destructive commands, move
files into .quarantine/ first and need --apply.
"""
from __future__ import annotations

import os
import threading
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

from ...version import __version__
from ...errors import UnsupportedInput, UsageError
from ...format import workflow as wf
from ...format.workflow import CheckpointState, PauseMetadata
from ...store import durable, quarantine
from ...store.fs import DEFAULT_FS
from ...store.lock import DirectoryLock, holder_text
from ..clock import utc_now

SUBDIR = "workflow-checkpoints"
SUFFIX = ".json"

__all__ = ["CheckpointState", "PauseMetadata", "InMemoryWorkflowStore", "DirectoryWorkflowStore"]


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _order(states):
    return sorted(states, key=lambda s: (s.created_at, s.checkpoint_id))


def _check_id(checkpoint_id) -> None:
    if not wf.valid_id(checkpoint_id):
        raise UsageError(f"checkpoint id {checkpoint_id!r}: [A-Za-z0-9._-]{{1,200}}, not starting with a dot")


class InMemoryWorkflowStore:
    def __init__(self):
        self._states: dict[str, CheckpointState] = {}
        self._lock = threading.Lock()  # pause, resume and complete are atomic (ops/workflow/steps.py)

    def save(self, state: CheckpointState) -> None:
        _check_id(state.checkpoint_id)
        wf.encode(state)  # the same validation as on disk: a state that could not be stored is refused here too
        self._states[state.checkpoint_id] = state

    def load(self, checkpoint_id: str) -> CheckpointState | None:
        _check_id(checkpoint_id)
        return self._states.get(checkpoint_id)

    def delete(self, checkpoint_id: str) -> bool:
        _check_id(checkpoint_id)
        return self._states.pop(checkpoint_id, None) is not None

    def list(self, workflow_name: str | None = None) -> list[CheckpointState]:
        return _order(s for s in self._states.values() if workflow_name is None or s.workflow_name == workflow_name)

    def cleanup_expired(self, max_age_hours: float = 24, now: datetime | None = None) -> int:
        expired = expired_ids(self.list(), max_age_hours, now)
        for cid in expired:
            del self._states[cid]
        return len(expired)

    def step(self, checkpoint_id: str, rule, command: str, reason: str):
        """One workflow step, atomic: rule(the state or None) -> a new state (stored), the same (nothing
        written) or None (removed). Returns (before, after, None)."""
        _check_id(checkpoint_id)
        with self._lock:
            before = self._states.get(checkpoint_id)
            after = rule(before)
            if after is None:
                self._states.pop(checkpoint_id, None)
            elif after is not before:
                self.save(after)
        return before, after, None


def expired_ids(states, max_age_hours: float, now: datetime | None) -> list[str]:
    """Expired iff now - created_at > max age, strictly."""
    now = now or _now()
    limit = timedelta(hours=max_age_hours)
    return [s.checkpoint_id for s in states if now - s.created_at > limit]


class Problem(NamedTuple):
    file: str
    reason: str


class DirectoryWorkflowStore:
    def __init__(self, root: str, fs=DEFAULT_FS):
        self.root = root
        self.dir = os.path.join(root, SUBDIR)
        self.fs = fs.beneath(root)
        self.problems: list[Problem] = []  # unreadable documents met by list(), never silently skipped

    def _path(self, checkpoint_id: str) -> str:
        _check_id(checkpoint_id)
        return os.path.join(self.dir, checkpoint_id + SUFFIX)

    def save(self, state: CheckpointState) -> None:
        path = self._path(state.checkpoint_id)
        data = wf.encode(state)
        durable.make_dir(self.root, self.fs)
        durable.make_dir(self.dir, self.fs)
        durable.create_file(path, data, self.fs, replace=True)

    def load(self, checkpoint_id: str) -> CheckpointState | None:
        path = self._path(checkpoint_id)
        if not self.fs.exists(path):
            return None
        with self.fs.map_read(path) as buf:
            return wf.decode(bytes(buf), checkpoint_id)

    def delete(self, checkpoint_id: str) -> bool:
        path = self._path(checkpoint_id)
        if not self.fs.exists(path):
            return False
        durable.remove(path, self.fs)
        return True

    def list(self, workflow_name: str | None = None) -> list[CheckpointState]:
        self.problems = []
        out = []
        if not self.fs.exists(self.dir):
            return out
        for e in self.fs.listdir(self.dir):
            if not e.name.endswith(SUFFIX) or e.kind != "file":
                continue
            cid = e.name[:-len(SUFFIX)]
            try:
                if not wf.valid_id(cid):
                    raise ValueError("the file name is not a valid checkpoint id")
                state = self.load(cid)
            except ValueError as err:
                self.problems.append(Problem(e.name, str(err)))
                continue
            if state is None:  # deleted between the listing and the read: not there any more
                continue
            if workflow_name is None or state.workflow_name == workflow_name:
                out.append(state)
        return _order(out)

    def cleanup_expired(self, max_age_hours: float = 24, now: datetime | None = None) -> int:
        expired = expired_ids(self.list(), max_age_hours, now)
        for cid in expired:
            self.delete(cid)
        return len(expired)

    def step(self, checkpoint_id: str, rule, command: str, reason: str):
        """One workflow step under the store's walctl lock (taken without waiting: exit 6 when held), after
        the containment checks: rule(the state or None) -> a new state (durable replace), the same (nothing
        written) or None (set aside into .quarantine/ with a manifest line, action `command`). Returns
        (before, after, the manifest line or None). An invalid document raises ValueError, nothing changed."""
        self._path(checkpoint_id)  # an id that is not a plain name: UsageError, before anything is created
        durable.make_dir(self.root, self.fs)
        durable.make_dir(self.dir, self.fs)
        _refuse_link(self, checkpoint_id)
        with DirectoryLock(self.dir, holder_text(command), self.fs):
            before = self.load(checkpoint_id)
            after = rule(before)
            entry = None
            if after is None and before is not None:
                entry = self.set_aside(checkpoint_id, reason, action=command.replace(" ", "-"))
            elif after is not None and after is not before:
                self.save(after)
        return before, after, entry

    # ---- the CLI's destructive commands: evidence first ----

    def set_aside(self, checkpoint_id: str, reason: str, action: str = "workflow-delete") -> dict | None:
        """Moves a checkpoint into .quarantine/ with a manifest line; None when it did not exist."""
        path = self._path(checkpoint_id)
        if not self.fs.exists(path):
            return None
        return quarantine.move_in_recorded(self.dir, checkpoint_id + SUFFIX, action=action, reason=reason,
                                  now=utc_now(), version=__version__, fs=self.fs)


# ---- the CLI's destructive commands as use cases: plan, refusals checked first, the store's lock ----


class DeletePlan(NamedTuple):
    checkpoint_id: str
    existed: bool
    problem: str | None  # the document does not validate (it is set aside all the same: that is often why)
    applied: bool
    entry: dict | None  # the manifest line, when applied


class CleanupPlan(NamedTuple):
    expired: tuple[str, ...]
    problems: tuple[Problem, ...]  # unreadable documents: reported (exit 3), never judged expired nor moved
    applied: bool
    entries: tuple[dict, ...]

    @property
    def exit_code(self) -> int:
        from ...errors import EXIT_CORRUPT, EXIT_OK

        return EXIT_CORRUPT if self.problems else EXIT_OK


def _refuse_link(store: DirectoryWorkflowStore, checkpoint_id: str) -> None:
    """Containment, before anything changes (even the lock file): the store directory, the entry, the lock,
    .quarantine/ and its manifest are neither symbolic links nor hard-linked (the entry's evidence would
    point outside the store; a linked manifest would take the line elsewhere). The lock itself is then
    reached beneath the store's root, so swapping the directory for a link afterwards is refused too."""
    from ...errors import Refused
    from ...store.contain import refuse_links

    for path in (store.dir, store._path(checkpoint_id)):
        if store.fs.is_symlink(path):
            raise Refused(f"{os.path.relpath(path, store.root)} is a symbolic link: walctl does not move links; "
                          "nothing was changed", path)
    refuse_links(store.dir, [checkpoint_id + SUFFIX], store.fs, what="move")


def delete(root: str, checkpoint_id: str, *, apply: bool = False, fs=DEFAULT_FS) -> DeletePlan:
    """`workflow delete`: sets the document aside into .quarantine/ (with a manifest line), valid or not."""
    store = existing_store(root, fs)
    path = store._path(checkpoint_id)  # a UsageError for an id that is not a plain name
    if not apply:
        return DeletePlan(checkpoint_id, fs.exists(path), _problem(store, checkpoint_id), False, None)
    _refuse_link(store, checkpoint_id)
    with DirectoryLock(store.dir, holder_text("workflow delete"), store.fs):
        problem = _problem(store, checkpoint_id)
        entry = store.set_aside(checkpoint_id, "walctl workflow delete")
    return DeletePlan(checkpoint_id, entry is not None, problem, True, entry)


def _problem(store: DirectoryWorkflowStore, checkpoint_id: str) -> str | None:
    try:
        store.load(checkpoint_id)
    except ValueError as e:
        return str(e)
    return None


def existing_store(root: str, fs=DEFAULT_FS) -> DirectoryWorkflowStore:
    """The store at ROOT for a command that reads or changes it (list, cleanup): a root without
    workflow-checkpoints/ is unsupported (5, as verify says), never an empty clean listing. (save creates it.)"""
    store = DirectoryWorkflowStore(root, fs)
    if not fs.exists(store.dir) or fs.stat(store.dir).kind != "dir":
        raise UnsupportedInput(f"not a workflow store: no {SUBDIR}/ directory here", root)
    return store


def cleanup(root: str, max_age_hours: float, *, apply: bool = False, now: datetime | None = None,
            fs=DEFAULT_FS) -> CleanupPlan:
    """`workflow cleanup`: sets aside documents older than the age; unreadable ones are reported."""
    store = existing_store(root, fs)
    if not apply:
        expired = expired_ids(store.list(), max_age_hours, now)
        return CleanupPlan(tuple(expired), tuple(store.problems), False, ())
    for cid in expired_ids(store.list(), max_age_hours, now) or ["-"]:  # refused before even the lock file
        _refuse_link(store, cid)
    with DirectoryLock(store.dir, holder_text("workflow cleanup"), store.fs):
        expired = expired_ids(store.list(), max_age_hours, now)
        for cid in expired:  # every refusal before the first move
            _refuse_link(store, cid)
        entries = [store.set_aside(cid, f"expired: older than {max_age_hours:g} h") for cid in expired]
    return CleanupPlan(tuple(expired), tuple(store.problems), True, tuple(e for e in entries if e))
