"""Names printed for people (file names, manifest fields, memoryIds): control characters escaped, so a
crafted name cannot move the cursor, clear the screen or forge a line of output.

One small function on purpose: cli/render.py is getting a shared helper for this; at merge this module
can become `from .render import <that helper> as shown`."""
from __future__ import annotations


def shown(text) -> str:
    """`text` with C0/C1 control characters and DEL written as \\xNN (backslash doubled first)."""
    s = str(text)
    if s.isprintable():
        return s
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif o < 0x20 or 0x7F <= o < 0xA0:
            out.append(f"\\x{o:02x}")
        elif not ch.isprintable() and ch != " ":
            out.append(f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")
        else:
            out.append(ch)
    return "".join(out)

