"""Text that fits the terminal and never pads a pipe (issue #26).

- The width is COLUMNS when set, else the terminal's; a pipe without COLUMNS has none: nothing is cut
  to a width there and no line is padded (a script reads whole values; `| less -S` scrolls).
- A value too long for its column is cut as `start…(N B)`: its start, an ellipsis and its whole size in
  bytes, so the reader knows how much is missing; --jsonl/--json show every value whole.
- Columns are narrowed longest first (water-filling), never below what a cut value needs.
"""
from __future__ import annotations

import os
import sys

ELLIPSIS = "…"
MIN_CUT = 10  # "m…(4000 B)": the narrowest a cut value still says something


def term_width(stream=None) -> int | None:
    """Columns to fit: COLUMNS when set, else the terminal's; None on a pipe."""
    env = os.environ.get("COLUMNS", "")
    if env.isascii() and env.isdigit() and int(env) > 0:
        return int(env)
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        pass
    return None


class Sized(str):
    """A cell whose value has a byte size of its own (a payload shown as text, a memoryId); `whole`: the
    text it was cut from, so that a second cut starts from the whole value again."""
    nbytes: int
    whole: str

    def __new__(cls, text: str, nbytes: int, whole: str | None = None):
        s = super().__new__(cls, text)
        s.nbytes, s.whole = nbytes, text if whole is None else whole
        return s


def nbytes_of(text: str) -> int:
    n = getattr(text, "nbytes", None)
    return n if n is not None else len(text.encode("utf-8", "surrogatepass"))


def cut(text: str, room: int) -> str:
    """`text` in at most `room` columns: whole, or its start, an ellipsis and its size in bytes."""
    whole = getattr(text, "whole", text)
    if len(whole) <= room:
        return whole
    n = nbytes_of(text)
    tag = f"{ELLIPSIS}({n} B)"
    return Sized(whole[:max(room - len(tag), 1)] + tag, n, whole)


def fit_widths(natural: list[int], mins: list[int], room: int) -> list[int]:
    """Column widths whose sum is at most `room` (when the minimums allow): the widest are narrowed first,
    down to a common cap, each never below its minimum."""
    if sum(natural) <= room:
        return list(natural)
    lo, hi = 0, max(natural)
    while lo < hi:  # the largest cap that fits
        cap = (lo + hi + 1) // 2
        if sum(min(n, max(cap, m)) for n, m in zip(natural, mins)) <= room:
            lo = cap
        else:
            hi = cap - 1
    return [min(n, max(lo, m)) for n, m in zip(natural, mins)]


def fit_rows(headers: list[str], rows: list[list[str]], indent: str = "", width: int | None = None,
             fixed: tuple[int, ...] = ()) -> list[str]:
    """The table as lines, left-aligned, two spaces apart, never padded at the end. With a width: values
    longer than SHORT are cut to fit (columns in `fixed` never are); when the short values alone do not fit,
    the columns that do not are moved to a line of their own under each row, indented (a band)."""
    cells = [list(headers)] + rows
    natural = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    if width is None:
        return _lines(cells, [list(range(len(headers)))], natural, indent)
    mins = [n if i in fixed or n <= SHORT else max(len(headers[i]), MIN_CUT) for i, n in enumerate(natural)]
    bands, band, used = [], [], len(indent)
    for i, m in enumerate(mins):
        need = m + (2 if band else 0)
        if band and used + need > width:
            bands.append(band)
            band, used, need = [], len(indent) + len(BAND), m
        band.append(i)
        used += need
    bands.append(band)
    widths = list(natural)
    for k, b in enumerate(bands):
        room = width - len(indent) - (len(BAND) if k else 0) - 2 * (len(b) - 1)
        for i, w in zip(b, fit_widths([natural[i] for i in b], [mins[i] for i in b], room)):
            widths[i] = w
    return _lines(cells, bands, widths, indent)


SHORT = 24  # a value this short (a file name, a time, a number) is never cut: its column moves instead
BAND = "    "


def _lines(cells, bands, widths, indent) -> list[str]:
    out = []
    for r in cells:
        for k, b in enumerate(bands):
            vals = [(r[i] if len(r[i]) <= widths[i] and getattr(r[i], "whole", r[i]) == r[i]
                     else cut(r[i], widths[i])).ljust(widths[i]) for i in b]
            out.append((indent + (BAND if k else "") + "  ".join(vals)).rstrip())
    return out
