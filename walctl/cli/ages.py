"""Ages given on the command line (--max-age, --older-than): seconds, or a number with s, m, h or d."""
from __future__ import annotations

from ..errors import UsageError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SECONDS = 1_000 * 365.25 * 86400  # more is no age (and date arithmetic would leave year 1..9999)


def seconds(text: str, option: str = "--max-age") -> float:
    t = text.strip().lower()
    try:
        if not t.isascii() or "_" in t:  # ASCII digits only: float() also takes '١٢' and '1_0'
            raise ValueError(t)
        value = float(t[:-1]) * _UNITS[t[-1]] if t[-1:] in _UNITS else float(t)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):  # also NaN
        raise UsageError(f"{option} {text!r}: a number of seconds, or with s, m, h or d")
    if value > MAX_SECONDS:
        raise UsageError(f"{option} {text!r}: more than 1,000 years")
    return value
