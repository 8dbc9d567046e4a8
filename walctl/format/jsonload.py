"""The one JSON reader for every JSON walctl reads (task logs, Substrat events and session.json, workflow
documents, write/import input, JSON segment frames, quarantine and archive manifests). Pure.

Why a wrapper: Python's json recurses once per nesting level, so 100,000 `[` raise RecursionError (not
ValueError) and every caller that catches ValueError turned it into an "internal error". Here nesting deeper
than MAX_DEPTH is an ordinary ValueError (`TooDeep`) *before* the parser runs, the same bound for every
reader.

MAX_DEPTH = 256: no format walctl reads nests beyond about ten levels (a workflow's `execution_waves` is
three, a task log's plan three); 256 stays far below Python's recursion limit of 1000 even for a walker
spending three frames per level (json.dumps when re-rendering, the canonical encoder) called from a deep
stack, so a value that passes the bound can be handled by every later step as well.

Cost: the fast path is a length test and two `str.count` calls (C speed): a text no longer than MAX_DEPTH,
or holding at most MAX_DEPTH brackets, cannot nest deeper than that. Only texts with more brackets get the exact scan (strings removed, then the running
depth), which is linear.
"""
from __future__ import annotations

import json
import re
from itertools import accumulate

MAX_DEPTH = 256

__all__ = ["MAX_DEPTH", "TooDeep", "NotText", "check_depth", "check_text", "loads", "utf8_text", "nesting_depth",
           "JSON_WHITESPACE"]

JSON_WHITESPACE = " \t\n\r"  # RFC 8259 section 2: nothing else (no U+00A0, no form feed)


class TooDeep(ValueError):
    """Nesting deeper than MAX_DEPTH."""


class NotText(ValueError):
    """A string holding a lone surrogate escape, or bytes that are not UTF-8."""


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]").search  # or a raw one (argv's
# bytes that are not UTF-8 arrive as lone surrogates under surrogateescape)
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in `text` (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    return max(0, max(accumulate(_STEP[c] for c in brackets)))


def _too_deep(text: str, bound: int) -> bool:
    if len(text) <= bound or text.count("[") + text.count("{") <= bound:  # the fast path: cannot nest
        return False                                                       # deeper than its brackets
    return nesting_depth(text) > bound


def _reject_constant(name):
    raise ValueError(f"{name} is not JSON")


_STRICT = json.JSONDecoder(parse_constant=_reject_constant)
_LENIENT = json.JSONDecoder()


def check_depth(text: str, bound: int = MAX_DEPTH) -> None:
    """Raises TooDeep when `text` nests deeper than `bound`."""
    if _too_deep(text, bound):
        raise TooDeep(f"JSON nested deeper than {bound} levels")


def loads(data, *, allow_nan: bool = False, allow_lone_surrogates: bool = True):
    """json.loads with the depth bound. `data` is str or bytes (bytes must be UTF-8: no UTF-16 guessing).

    Raises ValueError (UnicodeDecodeError, json.JSONDecodeError and TooDeep are all ValueErrors) and
    nothing else. NaN/Infinity are refused unless `allow_nan`; a string holding a lone surrogate escape
    (`"\\ud800"`, text no UTF-8 output can carry) is refused unless `allow_lone_surrogates`."""
    text = data if isinstance(data, str) else utf8_text(data)
    check_depth(text)
    try:
        value = (_LENIENT if allow_nan else _STRICT).decode(text)
    except RecursionError:  # cannot happen under the bound; never let it escape as an internal error
        raise TooDeep(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    if not allow_lone_surrogates and _SURROGATE_ESCAPE(text) is not None:
        check_text(value)
    return value


def utf8_text(data) -> str:
    """Bytes as UTF-8 text; NotText (a ValueError) naming the first byte that is not UTF-8."""
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as e:
        raise NotText(f"not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})") from None


def check_text(value) -> None:
    """Raises ValueError when a decoded value holds a lone surrogate (in a key or a string)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise NotText("a string holds a lone surrogate escape (not Unicode text)") from None
