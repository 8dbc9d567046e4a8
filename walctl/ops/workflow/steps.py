"""ADR-002's core flow over either store: pause, resume, and completion deleting the checkpoint.

A checkpoint is `running` (pause_metadata null: saved while the workflow runs, or resumed) or `paused`
(pause_metadata {block_id, prompt, response: null}: awaiting a response). One table says which step
needs which state; each step is one atomic read-modify-write under the store's lock (`store.step`), so of
two resumes of one paused workflow exactly one wins and the other finds it running: WorkflowConflict,
exit 6, nothing changed.

| step     | needs   | does                                                                      |
|----------|---------|---------------------------------------------------------------------------|
| pause    | running | pause_metadata = {block_id, prompt, response: null}; created_at = the pause time (as the ADR's pause_workflow stamps its new checkpoint) |
| resume   | paused  | the response (when given, "" included) into context.blocks[block_id].outputs.response; pause_metadata = null; continue at completed_waves + 1 |
| complete | running | the checkpoint removed (directory store: set aside into .quarantine/ with a manifest line, as delete does) |

A pause that is already recorded (same block and prompt, no response yet) is done, not a conflict, so a
rerun after a crash finishes. A resume is a claim and is never repeated: after it, the state to continue
from is the stored document (`walctl workflow show`).
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import NamedTuple

from ...errors import NotClean, UsageError, WorkflowConflict
from ...format.fields import shown
from ...format.workflow import CheckpointState, PauseMetadata, encode
from ...store.fs import DEFAULT_FS

RUNNING, PAUSED = "running", "paused"
NEEDS = {"pause": RUNNING, "resume": PAUSED, "complete": RUNNING}

__all__ = ["pause_workflow", "resume_workflow", "complete_workflow", "Paused", "Resumed", "Completed"]


class Paused(NamedTuple):
    state: CheckpointState  # as stored: paused
    changed: bool  # False: this very pause was already recorded (a rerun)


class Resumed(NamedTuple):
    state: CheckpointState  # as stored now, running: what execution continues from
    pause: PauseMetadata  # the pause it cleared, with the response given (None: none given)
    next_wave: int  # completed_waves + 1


class Completed(NamedTuple):
    checkpoint_id: str
    existed: bool
    entry: dict | None  # the manifest line (directory store), where the evidence is


def state_name(state: CheckpointState) -> str:
    return RUNNING if state.pause_metadata is None else PAUSED


def _step_text(root: str | None, checkpoint_id: str, lead: str, *flags: str) -> str:
    """`; <lead> `walctl workflow ...``: a command the operator can paste (the CLI passes the store's root)."""
    import os

    from ..advice import cmd

    if root is None:
        return ""
    root = os.path.abspath(root)  # a step runs from any directory (docs/json.md, next_steps)
    verb = "delete" if "--apply" in flags else "show"
    return f"; {lead} `{cmd('workflow', verb, root, checkpoint_id, *flags)}`"


def check_state(step: str, state: CheckpointState, root: str | None = None) -> None:
    """WorkflowConflict (exit 6) unless `state` is what `step` needs (NEEDS)."""
    found = state_name(state)
    if found == NEEDS[step]:
        return
    cid, p = state.checkpoint_id, state.pause_metadata
    if found == RUNNING:  # resume of a running workflow
        why = (f"{cid} is not paused (pause_metadata is null): another resume took it, or it was saved while "
               f"running; nothing was changed{_step_text(root, cid, 'its state:', '--json')}")
    elif step == "pause":
        why = (f"{cid} is already paused at block {shown(p.block_id)} awaiting a response to {shown(p.prompt)}; nothing "
               f"was changed{_step_text(root, cid, 'see')}")
    else:
        why = (f"{cid} is paused at block {shown(p.block_id)} awaiting a response; nothing was changed; resume it "
               f"first, or abandon it{_step_text(root, cid, 'to set it aside:', '--apply')}")
    raise WorkflowConflict(why, root, state=found)


def pause_state(state: CheckpointState, block_id: str, prompt: str, now: datetime) -> CheckpointState:
    if not isinstance(block_id, str) or not isinstance(prompt, str):
        raise UsageError("pause needs a block_id and a prompt (strings)")
    return state._replace(created_at=now, pause_metadata=PauseMetadata(block_id, prompt, None))


def resume_state(state: CheckpointState, response: str | None) -> CheckpointState:
    """The running state to continue from. Validates what the ADR's resume relies on: the wave it paused
    in exists, and the response has a place in the context (objects all the way down, created if absent)."""
    p = state.pause_metadata
    if state.completed_waves >= len(state.execution_waves):
        raise ValueError(f"paused in wave {state.completed_waves} but execution_waves has "
                         f"{len(state.execution_waves)}")
    if response is None:
        return state._replace(pause_metadata=None)
    if not isinstance(response, str):
        raise UsageError("the response is a string")
    context = dict(state.context)
    blocks = dict(_object(context, "blocks", "context.blocks"))
    block = dict(_object(blocks, p.block_id, f"context.blocks[{shown(p.block_id)}]"))
    outputs = dict(_object(block, "outputs", f"context.blocks[{shown(p.block_id)}].outputs"))
    outputs["response"] = response
    block["outputs"], blocks[p.block_id], context["blocks"] = outputs, block, blocks
    return state._replace(context=context, pause_metadata=None)


def _object(parent: dict, key: str, where: str) -> dict:
    value = parent.get(key, {})
    if not isinstance(value, dict):
        raise ValueError(f"{where} is not a JSON object: the response has nowhere to go")
    return value


def _run(store, checkpoint_id: str, rule, command: str, reason: str = "", root: str | None = None):
    """store.step with the errors a caller can act on: an invalid document is NotClean (exit 3)."""
    try:
        return store.step(checkpoint_id, rule, command, reason)
    except ValueError as e:
        raise _invalid(checkpoint_id, e, root) from None


def _invalid(checkpoint_id: str, e: ValueError, root: str | None) -> NotClean:
    return NotClean(f"{checkpoint_id}: {e}; nothing was changed"
                    f"{_step_text(root, checkpoint_id, 'to set it aside:', '--apply')}", root)


def _missing(checkpoint_id: str, store) -> UsageError:
    return UsageError(f"no checkpoint {checkpoint_id} in {getattr(store, 'root', 'the store')}")


def pause_workflow(store, checkpoint, block_id: str, prompt: str, *, now: datetime | None = None,
                   root: str | None = None) -> Paused:
    """ADR-002 pause_workflow. `checkpoint`: the id of a stored, running checkpoint, or a CheckpointState
    (the executor's state now), stored under its id as the ADR's pause creates its checkpoint."""
    now = now or datetime.now(timezone.utc)
    given = None if isinstance(checkpoint, str) else checkpoint
    cid = checkpoint if given is None else given.checkpoint_id
    if given is not None:
        from .store import _check_id

        _check_id(cid)  # UsageError for an id that is not a plain name, as every step
        encode(pause_state(given, block_id, prompt, now))  # ValueError for a state that is not JSON data, as save

    def rule(before):
        base = before if given is None else given
        if base is None:
            raise _missing(cid, store)
        if before is not None and before.pause_metadata == PauseMetadata(block_id, prompt, None):
            return before  # already recorded: done
        if before is not None:
            check_state("pause", before, root)
        return pause_state(base, block_id, prompt, now)

    before, after, _ = _run(store, cid, rule, "workflow pause", root=root)
    return Paused(after, after is not before)


def resume_workflow(store, checkpoint_id: str, response: str | None = None, *, root: str | None = None) -> Resumed:
    """ADR-002 resume_workflow: validates the paused checkpoint, records the response, clears pause_metadata
    and returns the state to continue from. Of two resumes, exactly one wins (the other: WorkflowConflict)."""
    def rule(before):
        if before is None:
            raise _missing(checkpoint_id, store)
        check_state("resume", before, root)
        return resume_state(before, response)

    before, after, _ = _run(store, checkpoint_id, rule, "workflow resume", root=root)
    return Resumed(after, before.pause_metadata._replace(response=response), after.completed_waves + 1)


def complete_workflow(store, checkpoint_id: str, *, root: str | None = None) -> Completed:
    """Completion deletes the checkpoint (ADR-002 lifecycle, step 4); the directory store keeps the document
    in .quarantine/ under a manifest line (action workflow-complete). Idempotent: says whether it existed.
    A paused checkpoint is refused (WorkflowConflict): it is awaiting a response, not finished."""
    def rule(before):
        if before is not None:
            check_state("complete", before, root)
        return None

    before, _, entry = _run(store, checkpoint_id, rule, "workflow complete", "walctl workflow complete: the "
                            "workflow finished", root)
    return Completed(checkpoint_id, before is not None, entry)


# ---- the CLI's use cases: the store at ROOT (exit 5 when there is none), and the document a failure prints ----


def _examined(root: str, checkpoint_id: str, fs, run):
    """run(the store at ROOT); a conflict or an invalid document carries the command's own document
    (docs/json.md: it examined the checkpoint): outcome failed, the exit code, the error, the state found."""
    from ..report import examined
    from .store import existing_store

    store = existing_store(root, fs)
    try:
        return run(store)
    except (WorkflowConflict, NotClean) as e:
        raise examined(e, {"root": root, "checkpoint_id": checkpoint_id, "state": getattr(e, "state", None)},
                       []) from None


def pause(root: str, checkpoint_id: str, block_id: str, prompt: str, *, now: datetime | None = None,
          fs=DEFAULT_FS) -> Paused:
    """`workflow pause ROOT ID`: pauses the stored, running checkpoint ID."""
    return _examined(root, checkpoint_id, fs,
                     lambda store: pause_workflow(store, checkpoint_id, block_id, prompt, now=now, root=root))


def resume(root: str, checkpoint_id: str, response: str | None = None, *, fs=DEFAULT_FS) -> Resumed:
    """`workflow resume ROOT ID`."""
    return _examined(root, checkpoint_id, fs, lambda store: resume_workflow(store, checkpoint_id, response, root=root))


def complete(root: str, checkpoint_id: str, *, apply: bool = False, fs=DEFAULT_FS) -> Completed:
    """`workflow complete ROOT ID`: the plan (dry run: no lock, nothing written, the same refusals), or done."""
    def run(store):
        if apply:
            return complete_workflow(store, checkpoint_id, root=root)
        try:
            state = store.load(checkpoint_id)
        except ValueError as e:
            raise _invalid(checkpoint_id, e, root) from None
        if state is not None:
            check_state("complete", state, root)
        return Completed(checkpoint_id, state is not None, None)

    return _examined(root, checkpoint_id, fs, run)
