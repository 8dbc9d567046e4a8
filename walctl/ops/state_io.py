"""Writing a recovered or restored state to a file: JSON (bytes as {"$bytes_hex": ...}) or msgpack."""
from __future__ import annotations

import json
import os

from ..errors import UsageError
from ..format.canonical import packb
from ..store import durable
from ..store.fs import DEFAULT_FS


def jsonable(v):
    if isinstance(v, (bytes, bytearray)):
        return {"$bytes_hex": bytes(v).hex()}
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [jsonable(x) for x in v]
    return v


def encode_state(state: dict, fmt: str) -> bytes:
    if fmt == "json":
        return (json.dumps(jsonable(state), sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    if fmt == "msgpack":
        return packb(state)
    raise UsageError(f"--format is json or msgpack (got {fmt!r})")


def write_state(path: str, state: dict, fmt: str, fs=DEFAULT_FS) -> None:
    fs = fs.beneath(os.path.dirname(os.path.abspath(path)))
    durable.create_file(path, encode_state(state, fmt), fs)  # refuses to overwrite (exit 7)
