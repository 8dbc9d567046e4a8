"""File names that are not UTF-8, in JSON (issue 26; docs/json.md, "Names that are not UTF-8").

Python reads such a name with surrogate escapes (b"wal-\\xff.bin" is "wal-\\udcff.bin"); printed as is,
that is a lone surrogate, which strict JSON parsers reject or silently replace, so a script could neither
show the name nor find the file again. One rule for every document: the text keeps its place, with each
byte that is not UTF-8 replaced by U+FFFD (readable, valid JSON), and a sibling key `<key>_hex` carries
the original bytes in hex, shaped like the value (a string: its hex; a list: one item per item, null where
that item was valid UTF-8). `bytes.fromhex(doc["file_hex"])` is the name to open."""
from __future__ import annotations

import os
import re

_ESCAPED = re.compile("[\udc80-\udcff]")


def has_escapes(text: str) -> bool:
    return _ESCAPED.search(text) is not None


def carry(value):
    """The document with every non-UTF-8 string made readable and its bytes kept beside it."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out[k] = carry(v)
            raw = _hex(v)
            if raw is not None and f"{k}_hex" not in value:
                out[f"{k}_hex"] = raw
        return out
    if isinstance(value, list):
        return [carry(v) for v in value]
    if isinstance(value, str) and has_escapes(value):
        return os.fsencode(value).decode("utf-8", "replace")
    return value


def _hex(value):
    """`value`'s bytes in hex where it held escapes, shaped like it; None when nothing in it did."""
    if isinstance(value, str):
        return os.fsencode(value).hex() if has_escapes(value) else None
    if isinstance(value, list):
        items = [_hex(v) for v in value]
        return items if any(i is not None for i in items) else None
    return None
