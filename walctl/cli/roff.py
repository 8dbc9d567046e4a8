"""Man pages as plain text, for `walctl help COMMAND` where `man` is not installed (containers, CI).

Renders the few man(7) macros walctl's pages use (.TH .SH .SS .PP .TP .IP .B .I .BR .IR .BI .RB .RI .br
.nf .fi) and the escapes \\fB \\fI \\fR \\fP \\- \\e \\(em; anything else is dropped, never guessed at. Text is
filled to `width` columns except between .nf and .fi, whose lines (the EXAMPLES) are kept whole so they
copy and paste. Pure: text in, text out.
"""
from __future__ import annotations

import re
import textwrap

_ESCAPES = [(r"\-", "-"), (r"\e", "\\"), (r"\(em", "--"), (r"\(en", "-"), (r"\(bu", "*"), (r"\ ", " "),
            (r"\&", ""), (r"\|", "")]
_FONT = re.compile(r"\\f[BIRP]|\\f\(..|\\f\[[^\]]*\]")


def inline(text: str) -> str:
    text = _FONT.sub("", text)
    for a, b in _ESCAPES:
        text = text.replace(a, b)
    return text


def _args(rest: str) -> list[str]:
    return [a[1:-1] if len(a) >= 2 and a[0] == a[-1] == '"' else a for a in re.findall(r'"[^"]*"|\S+', rest)]


_FONT_MACROS = ("B", "I", "BR", "IR", "BI", "RB", "RI", "IB", "SM", "SB")
_SPACED_FONT_MACROS = ("B", "I", "SM", "SB")  # their arguments are words; the others alternate fonts, unspaced
_INDENT = 7  # the body indent man(1) uses


def render(page: str, width: int = 80) -> str:
    r = _Renderer(width)
    for raw in page.splitlines():
        if raw.startswith(".\\\"") or raw.startswith("'\\\""):
            continue
        if raw.startswith("."):
            macro, _, rest = raw[1:].partition(" ")
            text = r.request(macro, _args(rest))
            if text is None:
                continue
        else:
            text = inline(raw)
        r.text(text)
    return r.finish()


class _Renderer:
    """The page so far (`out`), the paragraph being filled, and the state requests change: fill mode and
    the tag of an indented paragraph (.TP takes its tag from the next line)."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.out: list[str] = []
        self.para: list[str] = []
        self.fill = True
        self.tag: str | None = None
        self.pending_tag = False

    def request(self, macro: str, args: list[str]) -> str | None:
        """Carries out one request; returns the text of a font macro (.B, .BR, ...), None for the rest
        (an unknown request is dropped)."""
        if macro == "TH":
            title = inline(args[0]) if args else ""
            self.out.append(f"{title}({args[1] if len(args) > 1 else '1'})".ljust(self.width // 2)
                            + (inline(args[4]) if len(args) > 4 else ""))
            self.out.append("")
        elif macro in ("SH", "SS"):
            self._paragraph_break()
            self.out.append(("" if macro == "SH" else "   ") + inline(" ".join(args)))
        elif macro in ("PP", "P", "LP"):
            self._paragraph_break()
        elif macro == "TP":
            self._paragraph_break()
            self.pending_tag = True
        elif macro == "IP":
            self._paragraph_break()
            self.tag = inline(args[0]) if args else ""
        elif macro == "br":
            if self.fill:
                self.flush()
        elif macro == "nf":
            self.flush()
            self.fill = False
        elif macro == "fi":
            self.fill = True
        elif macro in _FONT_MACROS:
            return inline((" " if macro in _SPACED_FONT_MACROS else "").join(args))
        return None

    def text(self, text: str) -> None:
        if self.pending_tag:
            self.tag = text
            self.pending_tag = False
        elif self.fill:
            self.para.append(text)
        else:
            self.out.append(" " * _INDENT + text)

    def _paragraph_break(self) -> None:
        self.flush()
        if self.out and self.out[-1] != "":
            self.out.append("")

    def flush(self) -> None:
        """Fills the paragraph gathered so far (under its tag, if any) into the page."""
        out, indent = self.out, _INDENT
        if self.para:
            lines = textwrap.wrap(" ".join(self.para), max(20, self.width - indent - 4)) or [""]
            if self.tag is None:
                out.extend(" " * indent + ln for ln in lines)
            elif len(self.tag) < 4:
                lines[0] = self.tag.ljust(4) + lines[0]
                out.extend(" " * indent + ln if i == 0 else " " * (indent + 4) + ln for i, ln in enumerate(lines))
            else:
                out.append(" " * indent + self.tag)
                out.extend(" " * (indent + 4) + ln for ln in lines)
            self.para.clear()
        elif self.tag is not None:
            out.append(" " * indent + self.tag)
        self.tag = None

    def finish(self) -> str:
        self.flush()
        out = self.out
        while out and out[-1] == "":
            out.pop()
        return "\n".join(ln.rstrip() for ln in out) + "\n"
