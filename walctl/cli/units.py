"""Durations and times as every command takes them (the shared vocabulary, issue #26).

- a duration: `500ms`, `1s`, `2m`, `1h`, `1d`, or a bare number of seconds (`0.5`);
- a time: epoch milliseconds (`1700000000000`) or ISO-8601 (`2026-11-27T10:00:00Z`; no zone is UTC).

Both return plain numbers and raise UsageError with a one-line message naming the option. ASCII only:
float() and int() also take '١٢', '²' and '1_0', which no operator means.
"""
from __future__ import annotations

from ..errors import UsageError

# longest suffix first: "ms" before "s"
_UNITS = (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0), ("d", 86400.0))
MAX_SECONDS = 1_000 * 365.25 * 86400  # more is no duration (and date arithmetic would leave year 1..9999)
DURATION_FORMS = "500ms, 1s, 2m, 1h, 1d or a number of seconds"


def _number(text: str) -> float:
    if not text or not text.isascii() or "_" in text or text.lstrip("+").lower() in ("inf", "infinity", "nan"):
        raise ValueError(text)
    return float(text)


def parse_duration(text: str, option: str, low: float = 0.0, high: float = MAX_SECONDS,
                   zero: bool = True) -> float:
    """Seconds from `500ms`, `1s`, `2m`, `1h`, `1d` or `0.5`; within [low, high], and > 0 unless `zero`."""
    t = text.strip().lower()
    try:
        unit = next(((t[:-len(u)], f) for u, f in _UNITS if t.endswith(u)), (t, 1.0))
        value = _number(unit[0].strip()) * unit[1]
    except ValueError:
        raise UsageError(f"{option} {text!r}: not a duration ({DURATION_FORMS})") from None
    if value < 0:
        raise UsageError(f"{option} {text!r}: a duration is not negative")
    if value == 0 and not zero:
        raise UsageError(f"{option} {text!r}: must be more than 0")
    if value < low:
        raise UsageError(f"{option} {text!r}: at least {_say(low)}")
    if value > high:
        raise UsageError(f"{option} {text!r}: at most {_say(high)}" if high < MAX_SECONDS
                         else f"{option} {text!r}: more than 1,000 years")
    return value


def _say(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"


def parse_time(text: str | None, option: str) -> int | None:
    """Epoch milliseconds from epoch milliseconds or an ISO-8601 time (no zone: UTC); None stays None."""
    if text is None:
        return None
    from datetime import datetime, timezone

    t = text.strip()
    if t.isascii() and t.lstrip("-").isdigit():  # ASCII digits only (never '١٢' nor '²')
        return int(t)
    try:
        if not t.isascii():
            raise ValueError(t)
        dt = datetime.fromisoformat(t[:-1] + "+00:00" if t.endswith(("Z", "z")) else t)
    except ValueError:
        raise UsageError(f"{option} {text!r}: neither epoch milliseconds nor an ISO-8601 time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def follow_durations(interval: str, timeout: str | None) -> tuple[float, float | None]:
    """--follow's --interval (10ms..60s) and --timeout, as inspect and replay take them."""
    return (parse_duration(interval, "--interval", low=0.01, high=60),
            None if timeout is None else parse_duration(timeout, "--timeout"))
