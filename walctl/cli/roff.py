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


def render(page: str, width: int = 80) -> str:
    out: list[str] = []
    para: list[str] = []
    indent = 7  # the body indent man(1) uses
    state = {"fill": True, "tag": None}

    def flush():
        if para:
            text = " ".join(para)
            tag = state["tag"]
            body_width = max(20, width - indent - 4)
            lines = textwrap.wrap(text, body_width) or [""]
            if tag is not None:
                if len(tag) < 4:
                    lines[0] = tag.ljust(4) + lines[0]
                    out.extend(" " * indent + ln if i == 0 else " " * (indent + 4) + ln for i, ln in enumerate(lines))
                else:
                    out.append(" " * indent + tag)
                    out.extend(" " * (indent + 4) + ln for ln in lines)
            else:
                out.extend(" " * indent + ln for ln in lines)
            para.clear()
        elif state["tag"] is not None:
            out.append(" " * indent + state["tag"])
        state["tag"] = None

    pending_tag = False
    for raw in page.splitlines():
        if raw.startswith(".\\\"") or raw.startswith("'\\\""):
            continue
        if raw.startswith("."):
            macro, _, rest = raw[1:].partition(" ")
            args = _args(rest)
            if macro == "TH":
                title = inline(args[0]) if args else ""
                out.append(f"{title}({args[1] if len(args) > 1 else '1'})".ljust(width // 2)
                           + (inline(args[4]) if len(args) > 4 else ""))
                out.append("")
                continue
            if macro in ("SH", "SS"):
                flush()
                if out and out[-1] != "":
                    out.append("")
                out.append(("" if macro == "SH" else "   ") + inline(" ".join(args)))
                continue
            if macro in ("PP", "P", "LP"):
                flush()
                if out and out[-1] != "":
                    out.append("")
                continue
            if macro == "TP":
                flush()
                if out and out[-1] != "":
                    out.append("")
                pending_tag = True
                continue
            if macro == "IP":
                flush()
                if out and out[-1] != "":
                    out.append("")
                state["tag"] = inline(args[0]) if args else ""
                continue
            if macro == "br":
                if state["fill"]:
                    flush()
                continue
            if macro == "nf":
                flush()
                state["fill"] = False
                continue
            if macro == "fi":
                state["fill"] = True
                continue
            if macro in ("B", "I", "BR", "IR", "BI", "RB", "RI", "IB", "SM", "SB"):
                if macro in ("B", "I", "SM", "SB"):
                    text = inline(" ".join(args))
                else:
                    text = inline("".join(args))
            else:
                continue  # an unknown request: dropped
        else:
            text = inline(raw)
        if pending_tag:
            state["tag"] = text
            pending_tag = False
            continue
        if state["fill"]:
            para.append(text)
        else:
            out.append(" " * indent + text)
    flush()
    while out and out[-1] == "":
        out.pop()
    return "\n".join(ln.rstrip() for ln in out) + "\n"
