"""ADR-002 workflow checkpoints as JSON documents. Pure: no I/O, no clock (times are passed in).

Document: {"schema_version": 1, "checkpoint_id", "workflow_name", "workflow_inputs": {...},
"execution_waves": [[...]], "completed_waves": int, "context": {...}, "created_at":
"YYYY-MM-DDTHH:MM:SS.ffffffZ", "pause_metadata": {"block_id", "prompt", "response": str | null} | null},
sorted keys, never pickle (a pickle load runs code; a checkpoint file is data).
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import NamedTuple

from .fields import shown
from .jsonload import loads

SCHEMA_VERSION = 1
_ID_RE = re.compile(r"[A-Za-z0-9._-]{1,200}")
_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z")


class PauseMetadata(NamedTuple):
    block_id: str
    prompt: str
    response: str | None = None


class CheckpointState(NamedTuple):
    checkpoint_id: str
    workflow_name: str
    workflow_inputs: dict
    execution_waves: list
    completed_waves: int  # the wave in which execution paused; resume continues at the next one
    context: dict
    created_at: datetime  # aware, UTC
    pause_metadata: PauseMetadata | None = None


def valid_id(checkpoint_id) -> bool:
    """[A-Za-z0-9._-]{1,200}, not starting with a dot: never a path, never a hidden or parent name."""
    return isinstance(checkpoint_id, str) and bool(_ID_RE.fullmatch(checkpoint_id)) and \
        not checkpoint_id.startswith(".")


def format_time(t: datetime) -> str:
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: str) -> datetime:
    if not isinstance(text, str) or not _TIME_RE.fullmatch(text):
        raise ValueError(f"created_at {shown(text)} is not YYYY-MM-DDTHH:MM:SS.ffffffZ")
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def encode(state: CheckpointState) -> bytes:
    if not valid_id(state.checkpoint_id):
        raise ValueError(f"checkpoint id {state.checkpoint_id!r} is not [A-Za-z0-9._-]{{1,200}} without a leading dot")
    p = state.pause_metadata
    doc = {"schema_version": SCHEMA_VERSION, "checkpoint_id": state.checkpoint_id,
           "workflow_name": state.workflow_name, "workflow_inputs": state.workflow_inputs,
           "execution_waves": state.execution_waves, "completed_waves": state.completed_waves,
           "context": state.context, "created_at": format_time(state.created_at),
           "pause_metadata": None if p is None else {"block_id": p.block_id, "prompt": p.prompt,
                                                     "response": p.response}}
    try:
        return (json.dumps(doc, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")
    except (TypeError, ValueError) as e:
        raise ValueError(f"the workflow state is not JSON data: {e}") from None


def decode(data: bytes, expected_id: str | None = None) -> CheckpointState:
    """Raises ValueError naming the first problem."""
    try:
        doc = loads(data, allow_lone_surrogates=False)
    except ValueError as e:
        raise ValueError(f"not a JSON document: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"schema_version {shown(doc.get('schema_version'))}, walctl reads {SCHEMA_VERSION}")
    cid = doc.get("checkpoint_id")
    if not valid_id(cid):
        raise ValueError(f"checkpoint_id {shown(cid)} is not a valid id")
    if expected_id is not None and cid != expected_id:
        raise ValueError(f"checkpoint_id {shown(cid)} differs from the file name {shown(expected_id)}")
    checks = (("workflow_name", str), ("workflow_inputs", dict), ("execution_waves", list), ("context", dict))
    for key, kind in checks:
        if not isinstance(doc.get(key), kind):
            raise ValueError(f"{key} is not a JSON {kind.__name__.replace('dict', 'object').replace('list', 'array')}")
    if not all(isinstance(w, list) for w in doc["execution_waves"]):
        raise ValueError("execution_waves is not an array of arrays")
    waves = doc.get("completed_waves")
    if type(waves) is not int or waves < 0:
        raise ValueError("completed_waves is not an integer >= 0")
    pause = doc.get("pause_metadata")
    if pause is not None:
        if not isinstance(pause, dict) or not isinstance(pause.get("block_id"), str) \
                or not isinstance(pause.get("prompt"), str) or not isinstance(pause.get("response"), (str, type(None))):
            raise ValueError("pause_metadata is not {block_id: str, prompt: str, response: str | null}")
        pause = PauseMetadata(pause["block_id"], pause["prompt"], pause.get("response"))
    return CheckpointState(cid, doc["workflow_name"], doc["workflow_inputs"], doc["execution_waves"], waves,
                           doc["context"], parse_time(doc.get("created_at")), pause)


def to_json(state: CheckpointState) -> dict:
    return loads(encode(state))
