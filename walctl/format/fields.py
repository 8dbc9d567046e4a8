"""Typed fields of the JSON documents walctl reads (issue #24). Pure.

Every untrusted document (a ledger line, an archive manifest entry, a quarantine manifest line, JSON-lines
input...) is checked against one small declarative spec before any value of it is used: a field of the
wrong type or an impossible value (null where a number is needed, a time that is not ISO 8601, a string
that is not Unicode text) makes the line or document bad, reported by number, never acted on, and never
printed as `None` further down.

    SPEC = {"size": Field(COUNT), "uploaded_at": Field(ISO), "wal_sequence": Field(COUNT, null=True)}
    problem = check(obj, SPEC)          # None, or "size: -1 is not an integer >= 0"

Kinds are a table (name -> predicate and the words for what was expected), so a reader never spells a
type test of its own.
"""
from __future__ import annotations

import datetime
import re
from typing import Callable, NamedTuple

from .jsonload import NotText, check_text

INT64 = (-(1 << 63), 1 << 63)

INT, COUNT, SEQ, STR, ISO, SHA256, BOOL, OBJECT, LIST = (
    "int", "count", "seq", "str", "iso", "sha256", "bool", "object", "list")

_ISO = re.compile(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?(Z|[+-](\d{2}):(\d{2}))\Z")
_HEX = frozenset("0123456789abcdef")


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and INT64[0] <= v < INT64[1]


def _parse_iso(v):
    m = _ISO.match(v) if isinstance(v, str) else None
    if m is None or (m.group(4) is not None and (int(m.group(4)) > 23 or int(m.group(5)) > 59)):
        return None
    try:
        t = datetime.datetime.fromisoformat(m.group(1))  # a real date and time of day (no month 13)
    except ValueError:
        return None
    zone = datetime.timezone.utc if m.group(3) == "Z" else datetime.timezone(
        (-1 if m.group(3)[0] == "-" else 1) * datetime.timedelta(hours=int(m.group(4)), minutes=int(m.group(5))))
    return t.replace(tzinfo=zone), int(((m.group(2) or "") + "000")[:3])


def is_iso_time(v) -> bool:
    """An RFC 3339 time with its offset (`2026-11-27T09:03:42.220Z`): a real date and time of day."""
    return _parse_iso(v) is not None


def iso_to_ms(v: str) -> int:
    """Milliseconds since the epoch of a time that passed is_iso_time."""
    t, ms = _parse_iso(v)
    return int(t.timestamp()) * 1000 + ms


KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    INT: (is_int, "an integer"),
    COUNT: (lambda v: is_int(v) and v >= 0, "an integer >= 0"),
    SEQ: (lambda v: is_int(v) and v >= 1, "a sequence (an integer >= 1)"),
    STR: (lambda v: isinstance(v, str), "a string"),
    ISO: (is_iso_time, "an ISO 8601 time with its offset (2026-11-27T09:03:42Z)"),
    SHA256: (lambda v: isinstance(v, str) and len(v) == 64 and _HEX.issuperset(v), "64 lowercase hex digits"),
    BOOL: (lambda v: isinstance(v, bool), "true or false"),
    OBJECT: (lambda v: isinstance(v, dict), "an object"),
    LIST: (lambda v: isinstance(v, list), "a list"),
}


class Field(NamedTuple):
    kind: str  # a key of KINDS
    required: bool = True  # absent is a problem (else absent is as null)
    null: bool = False  # null is allowed


def shown(v) -> str:
    """A value in a message: JSON's spelling (null, not None), short, and printable whatever it holds."""
    import json

    try:
        text = json.dumps(v, ensure_ascii=True)
    except (TypeError, ValueError):
        text = repr(v).encode("ascii", "backslashreplace").decode()
    return text if len(text) <= 60 else text[:57] + "..."


def field_problem(key: str, v, f: Field, present: bool = True) -> str | None:
    if not present:
        return None if not f.required else f"{key} is missing"
    if v is None:
        return None if f.null else f"{key} is null, {KINDS[f.kind][1]} is needed"
    test, words = KINDS[f.kind]
    return None if test(v) else f"{key}: {shown(v)} is not {words}"


def check(obj, spec: dict, what: str = "a JSON object") -> str | None:
    """None when `obj` is an object whose fields match `spec` (unknown keys are left to the caller) and
    holds only Unicode text; else the first problem, naming the field."""
    if not isinstance(obj, dict):
        return f"not {what}"
    for key, f in spec.items():
        why = field_problem(key, obj.get(key), f, key in obj)
        if why:
            return why
    try:
        check_text(obj)
    except NotText as e:
        return str(e)
    return None
