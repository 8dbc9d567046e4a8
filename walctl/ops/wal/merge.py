"""merge: fold Spector WALs (or earlier merge results) into per-memory state and join them (CRDT).

Inputs are V2 directories (folded in sequence order; the fold stops at damage as replay does, and
the input's verdict is reported) or `state.json` files a previous merge wrote. The output directory
gets `state.json`: canonical JSON (sorted keys), created durably, never over an existing file.
"""
from __future__ import annotations

import json
import os
from typing import NamedTuple

from ...errors import UnsupportedInput, UsageError
from ...format import memstate as ms
from ...format.jsonload import loads
from ...store import durable
from ...store.fs import DEFAULT_FS

STATE_FILE = "state.json"
STATE_SCHEMA = "walctl.memory-state/1"


class Folded(NamedTuple):
    source: str
    kind: str  # "wal" | "state"
    states: dict  # memory id (bytes) -> MemoryState
    events: int
    folded: int  # events that describe a memory
    exit_code: int
    stopped: str | None  # where a damaged WAL's fold stopped
    last_sequence: int | None = None  # of the last event folded (a WAL)


def id_key(mid: bytes) -> str:
    """A memory id as a JSON object key: its text, or `hex:` and its bytes when it is not UTF-8."""
    try:
        text = mid.decode("utf-8")
    except UnicodeDecodeError:
        return "hex:" + mid.hex()
    return "hex:" + mid.hex() if text.startswith("hex:") else text


def key_id(key: str) -> bytes:
    return bytes.fromhex(key[4:]) if key.startswith("hex:") else key.encode("utf-8")


def fold_wal(path: str, fs=DEFAULT_FS, to: int | None = None) -> Folded:
    """`to`: fold the events up to that sequence only (walctl fingerprint --to)."""
    import msgpack

    from .replay import ReplayOptions, replay

    states: dict = {}
    counts = [0, 0, None]

    def take(pieces: list) -> None:
        for piece in pieces:
            e = msgpack.unpackb(piece, raw=False)
            counts[0] += 1
            counts[2] = e["sequence"]
            if e["type_ordinal"] in ms.FOLDED_TYPES:
                counts[1] += 1
                mid = e["memory_id"]
                states[mid] = ms.fold_event(states.get(mid, ms.EMPTY), e["type_ordinal"], e["timestamp_ms"],
                                            e["payload"])

    rep = replay(path, take, ReplayOptions(form="msgpack", to=to), fs)
    stopped = None
    if rep.stopped is not None:
        s = rep.stopped
        stopped = f"{s.file} offset {s.offset}: {s.cls}: {s.reason}"
    return Folded(path, "wal", states, counts[0], counts[1], rep.exit_code, stopped, counts[2])


def load_state(path: str, fs=DEFAULT_FS) -> Folded:
    try:
        doc = loads(fs.read_input(path))
    except ValueError as e:
        raise UsageError(f"not a merge state file: {e}", path) from None
    if not isinstance(doc, dict) or doc.get("schema") != STATE_SCHEMA or not isinstance(doc.get("memories"), dict):
        raise UsageError(f"not a merge state file (schema {STATE_SCHEMA} with a memories object)", path)
    states = {}
    for k, v in doc["memories"].items():
        try:
            states[key_id(k)] = ms.state_from_json(v)
        except ValueError as e:
            raise UsageError(f"memory {k!r}: {e}", path) from None
    return Folded(path, "state", states, 0, 0, 0, None)


def load_input(path: str, fs=DEFAULT_FS) -> Folded:
    from ..kinds import KINDS
    from .verify import detect_kind

    if os.path.isdir(path) and os.path.isfile(os.path.join(path, STATE_FILE)):
        return load_state(os.path.join(path, STATE_FILE), fs)
    if os.path.isdir(path) or (os.path.isfile(path) and fs.read_head(path, 4) == b"SPEC"):
        kind = detect_kind(path, fs)
        if KINDS[kind].fold is None:
            raise UnsupportedInput(f"merge folds Spector V2 WALs; this is {kind}", path)
        return KINDS[kind].load("fold")(path, fs)
    return load_state(path, fs)


def merge_states(parts: list[dict]) -> dict:
    out: dict = {}
    for states in parts:
        for mid, s in states.items():
            out[mid] = ms.join(out[mid], s) if mid in out else s
    return out


def changes(before: dict, after: dict) -> dict:
    """What the merge changed relative to the first input: added memories, changed fields."""
    added = sorted(id_key(m) for m in after if m not in before)
    changed = {}
    for mid, s in after.items():
        if mid in before and before[mid] != s:
            changed[id_key(mid)] = ms.changed_fields(before[mid], s)
    return {"added": added, "changed": dict(sorted(changed.items()))}


def state_document(states: dict, sources: list[str]) -> bytes:
    from ...version import __version__

    doc = {"schema": STATE_SCHEMA, "walctl_version": __version__, "sources": sources,
           "memories": {id_key(m): ms.state_to_json(s) for m, s in states.items()}}
    return (json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def write_state(out_dir: str, states: dict, sources: list[str], fs=DEFAULT_FS) -> str:
    fs = fs.beneath(out_dir)
    durable.make_dir(out_dir, fs)
    path = os.path.join(out_dir, STATE_FILE)
    durable.create_file(path, state_document(states, sources), fs)
    return path
