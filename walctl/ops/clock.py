"""The one clock ops/ reads (manifest times), so tests can pin it."""
from __future__ import annotations

import time

_fixed: list[str] = []


def utc_now() -> str:
    if _fixed:
        return _fixed[-1]
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"
