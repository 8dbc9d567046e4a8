"""`.walctl/verify.jsonl`: one line per `verify --resume` / `--max-duration` run of a chunk directory, saying
which slice of its sealed chunks the run checked (docs/format.md, "Verify's runs"). Pure.

Lines are CRC'd exactly as the ledger's (format/ledger.py: compact JSON, `v`, `ts`, `event`, `crc32c`); a
damaged line is never used and a torn last line is cut by the next append, as there. Every sealed chunk has
a point on a circle of 2**64 positions, the first 8 bytes of the SHA-256 of its file name: a point depends
on the chunk alone, so chunks appended later never move the others. A run checks the chunks whose points lie
in its window [from, to); `to` is where the next `--resume` starts (2**64: the circle is done, the next run
starts over at 0).
"""
from __future__ import annotations

import hashlib

from . import ledger as L

RUNS_NAME = "verify.jsonl"
RUN = "verify-run"
CIRCLE = 1 << 64  # points are 0 .. CIRCLE-1
STOPPED = ("complete", "max-duration")  # why a run ended: its window covered, or the time ran out

_FIELDS = {"subset": (str, type(None)), "from": int, "to": int, "stopped": str, "sealed_checked": int,
           "sealed_not_checked": int, "unsealed_checked": int, "bytes_checked": int, "exit_code": int}


def point(name: str) -> int:
    """Where a chunk sits on the circle: fixed by its name, uniform over the circle."""
    return int.from_bytes(hashlib.sha256(name.encode("utf-8", "surrogateescape")).digest()[:8], "big")


def check_run(event: str, fields: dict) -> str | None:
    if event != RUN:
        return f"unknown event {event!r}"
    if set(fields) != set(_FIELDS):
        return f"{RUN}: fields are not {', '.join(sorted(_FIELDS))}"
    for key, kind in _FIELDS.items():
        v = fields[key]
        if isinstance(v, bool) or not isinstance(v, kind):
            return f"{RUN}: {key} has the wrong type"
        if isinstance(v, int) and v < 0 and key != "exit_code":
            return f"{RUN}: {key} is negative"
    if not 0 <= fields["from"] <= fields["to"] <= CIRCLE:
        return f"{RUN}: window is not 0 <= from <= to <= 2**64"
    if fields["stopped"] not in STOPPED:
        return f"{RUN}: stopped is not one of {', '.join(STOPPED)}"
    return None


def encode_run(ts: str, **fields) -> bytes:
    return L.encode_line(RUN, ts, check_run, **fields)


def resume_point(read: L.LedgerRead | None) -> int:
    """Where the next --resume starts: the last good line's `to` (0 when there is none, or the circle
    was done)."""
    if read is None or not read.lines:
        return 0
    to = read.lines[-1].get("to")
    return 0 if to >= CIRCLE else to
