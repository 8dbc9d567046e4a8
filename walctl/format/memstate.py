"""Spector per-memory state and its CRDT merge. Pure.

Folding a V2 WAL gives one MemoryState per memoryId (rules in docs/format.md, "Memory state"):
REMEMBER makes the memory present; FORGET sets the tombstone; REINFORCE sets the valence (payload
byte 0, signed); TAG_MERGE ORs its payload (a big-endian bitfield of any width) into the tags;
RECALL_HIT adds one to the recall count; REFLECT marks the memory consolidated. Every one of them
raises the timestamp to the event's. Other event types do not describe a memory and are not folded.

`join` merges two states field by field, as the Spector design says (max timestamp, OR of tags, max
importance, max recall count, OR of the three flags), with one repair: valence is a last-writer-wins
register ordered by (the time the valence was set, the valence), a total order. Spector orders it by
the memory's latest timestamp and lets the *remote* side win a tie, so merge(a, b) != merge(b, a)
whenever two replicas set different valences in the same millisecond; and a later unrelated event
(a recall) on one side would make that side's older valence win. With a total order the join is
commutative, associative and idempotent (the tests check this by property).
"""
from __future__ import annotations

import math
from typing import NamedTuple

from .v2 import TYPE_ORDINALS

REMEMBER, FORGET, REINFORCE = TYPE_ORDINALS["REMEMBER"], TYPE_ORDINALS["FORGET"], TYPE_ORDINALS["REINFORCE"]
REFLECT, TAG_MERGE, RECALL_HIT = TYPE_ORDINALS["REFLECT"], TYPE_ORDINALS["TAG_MERGE"], TYPE_ORDINALS["RECALL_HIT"]
FOLDED_TYPES = frozenset((REMEMBER, FORGET, REINFORCE, REFLECT, TAG_MERGE, RECALL_HIT))
NO_TIME = -(1 << 63)


class MemoryState(NamedTuple):
    timestamp_ms: int = NO_TIME
    tags: int = 0
    importance: float = 0.0
    recall_count: int = 0
    valence_ts: int = NO_TIME  # when the valence was last set (NO_TIME: never)
    valence: int = 0
    present: bool = False  # a REMEMBER was seen
    tombstone: bool = False
    consolidated: bool = False
    pinned: bool = False


EMPTY = MemoryState()


def normalized(s: MemoryState) -> MemoryState:
    """The one spelling of a state: importance -0.0 becomes 0.0 (they compare equal but print apart)."""
    return s._replace(importance=s.importance + 0.0)


def join(a: MemoryState, b: MemoryState) -> MemoryState:
    """The CRDT merge: the least upper bound of two states."""
    return MemoryState(
        max(a.timestamp_ms, b.timestamp_ms),
        a.tags | b.tags,
        max(a.importance, b.importance) + 0.0,  # + 0.0: -0.0 and 0.0 tie; keep one spelling
        max(a.recall_count, b.recall_count),
        *max((a.valence_ts, a.valence), (b.valence_ts, b.valence)),
        a.present or b.present,
        a.tombstone or b.tombstone,
        a.consolidated or b.consolidated,
        a.pinned or b.pinned,
    )


def fold_event(s: MemoryState, type_ordinal: int, timestamp_ms: int, payload: bytes) -> MemoryState:
    """The state after one more event of this memory (events in sequence order)."""
    s = s._replace(timestamp_ms=max(s.timestamp_ms, timestamp_ms))
    if type_ordinal == REMEMBER:
        return s._replace(present=True)
    if type_ordinal == FORGET:
        return s._replace(tombstone=True)
    if type_ordinal == REINFORCE:
        if not payload:
            return s
        v = payload[0] - 256 if payload[0] > 127 else payload[0]
        vts, val = max((s.valence_ts, s.valence), (timestamp_ms, v))
        return s._replace(valence_ts=vts, valence=val)
    if type_ordinal == TAG_MERGE:
        return s._replace(tags=s.tags | int.from_bytes(payload, "big"))
    if type_ordinal == RECALL_HIT:
        return s._replace(recall_count=s.recall_count + 1)
    if type_ordinal == REFLECT:
        return s._replace(consolidated=True)
    return s


def changed_fields(before: MemoryState, after: MemoryState) -> dict:
    return {k: [state_field_json(k, getattr(before, k)), state_field_json(k, getattr(after, k))]
            for k in MemoryState._fields if getattr(before, k) != getattr(after, k)}


def state_field_json(name: str, v):
    if name == "tags":
        return hex(v)
    if name in ("timestamp_ms", "valence_ts") and v == NO_TIME:
        return None
    return v


def state_to_json(s: MemoryState) -> dict:
    return {k: state_field_json(k, getattr(s, k)) for k in MemoryState._fields}


def state_from_json(obj) -> MemoryState:
    """The inverse of state_to_json; ValueError says what is wrong."""
    if not isinstance(obj, dict):
        raise ValueError("a memory state is an object")
    unknown = set(obj) - set(MemoryState._fields)
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(sorted(unknown))}")
    vals = {}
    for k in MemoryState._fields:
        v = obj.get(k, getattr(EMPTY, k))
        if k == "tags":
            if not isinstance(v, str) or not v.startswith("0x") or len(v) > 2 + 2 * (64 << 20):
                raise ValueError("tags is a hex string starting 0x")
            v = int(v, 16)
        elif k in ("timestamp_ms", "valence_ts"):
            v = NO_TIME if v is None else v
            if isinstance(v, bool) or not isinstance(v, int) or not NO_TIME <= v < (1 << 63):
                raise ValueError(f"{k} is an i64 (or null)")
        elif k == "importance":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError("importance is a finite number")
            v = float(v) + 0.0
        elif k in ("recall_count", "valence"):
            if isinstance(v, bool) or not isinstance(v, int) or v < (-128 if k == "valence" else 0):
                raise ValueError(f"{k} is an integer")
        elif not isinstance(v, bool):
            raise ValueError(f"{k} is true or false")
        vals[k] = v
    return MemoryState(**vals)
