"""Writing a recovered or restored state to a file: JSON (bytes as {"$bytes_hex": ...}) or msgpack."""
from __future__ import annotations

import json
import os

from ...errors import UsageError
from ...format.canonical import packb
from ...store import durable
from ...store.fs import DEFAULT_FS


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


WRITE_STEP = 8 << 20


def write_state(path: str, state: dict, fmt: str, fs=DEFAULT_FS, progress=None) -> None:
    """Durable create (refuses to overwrite: exit 7). `progress(n, more_total=N)` first says how many bytes
    the write adds to the work, then counts them as they are written."""
    fs = fs.beneath(os.path.dirname(os.path.abspath(path)))
    data = encode_state(state, fmt)
    if progress is None:
        durable.create_file(path, data, fs)
        return
    progress(0, more_total=len(data))

    def pieces():
        view = memoryview(data)
        for pos in range(0, len(view), WRITE_STEP):
            yield view[pos:pos + WRITE_STEP]
            progress(min(WRITE_STEP, len(view) - pos))

    durable.create_file(path, pieces(), fs)
