"""The reducers recover folds a log with: adr003 (ADR-003 entries), spector (Spector's replayer), or a
user's `module:function` (imported by name, as recover has always done; it gets each entry's map and
the state, and returns the state or None)."""
from __future__ import annotations

import importlib
from typing import Callable

from ...errors import UsageError
from ...format.checkpoint import empty_state
from ...format.segment import OPERATION_ALIASES
from ...store.fs import DEFAULT_FS
from ..kinds import KINDS


class Skip(Exception):
    """A reducer raises Skip(reason) for an entry it does not apply (counted, with a warning)."""


def reduce_adr003(state: dict, entry: dict) -> dict:
    op = entry.get("operation")
    op = OPERATION_ALIASES.get(op, op)
    data = entry["data"] if "data" in entry else entry.get("params")
    if op == "memory_add":
        blocks = state.get("memory_blocks")
        if blocks is None:
            blocks = state["memory_blocks"] = []
        blocks.append({"content": data.get("content") if type(data) is dict else None,
                       "sequence": entry["sequence"], "timestamp": entry.get("timestamp")})
    elif op == "tool_register":
        tool = data.get("tool") if isinstance(data, dict) else None
        if not isinstance(tool, dict) or "name" not in tool:
            raise Skip("tool_register without tool.name")
        state.setdefault("tool_registry", {})[tool["name"]] = tool
    elif op == "state_update":
        new = data.get("new_state") if isinstance(data, dict) else None
        if not isinstance(new, dict):
            raise Skip("state_update without a new_state map")
        state.setdefault("agent_state", {}).update(new)  # a null value is stored, not deleted
    else:
        raise Skip(f"unknown operation {entry.get('operation')!r}")
    return state


def reduce_spector(state: dict, event: dict) -> dict:
    """Spector's replayer: REMEMBER puts id -> payload, FORGET removes, REINFORCE sets the valence to the
    signed payload byte."""
    mems = state.setdefault("memories", {})
    valence = state.setdefault("valence", {})
    kind, mid, payload = event["type"], event["memory_id"], event["payload"]
    if kind == "REMEMBER":
        mems[mid] = payload
    elif kind == "FORGET":
        mems.pop(mid, None)
        valence.pop(mid, None)
    elif kind == "REINFORCE":
        if not payload:
            raise Skip("REINFORCE without a valence byte")
        valence[mid] = payload[0] - 256 if payload[0] > 127 else payload[0]
    else:
        raise Skip(f"event type {kind} does not change this state")
    return state


REDUCERS = {"adr003": reduce_adr003, "spector": reduce_spector}
AUTO = "auto"
AUTO_WITHOUT_LOG = "adr003"  # no log to say: ADR-003's reducer


def pick_reducer(spec: str, log: str | None, fs=DEFAULT_FS) -> str:
    """`auto`: the reducer for the log's own events: spector for Spector V2 chunks, adr003 otherwise (segments,
    or no log). Anything else is kept as given."""
    if spec != AUTO:
        return spec
    from ..wal.verify import detect_kind

    if log is not None and fs.exists(log):
        return KINDS[detect_kind(log, fs)].reducer
    return AUTO_WITHOUT_LOG


def load_reducer(spec: str) -> Callable[[dict, dict], dict]:
    if spec in REDUCERS:
        return REDUCERS[spec]
    if ":" not in spec:
        raise UsageError(f"reducer {spec!r}: use auto, adr003, spector, or module:function")
    module, _, func = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), func)
    except (ImportError, AttributeError) as e:
        raise UsageError(f"reducer {spec!r} cannot be loaded: {e}") from None
    if not callable(fn):
        raise UsageError(f"reducer {spec!r} is not callable")
    return fn


def empty_for(reducer: str) -> dict:
    return {"memories": {}, "valence": {}, "wal_sequence": 0} if reducer == "spector" else empty_state()
