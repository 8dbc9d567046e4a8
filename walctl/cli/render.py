"""The one renderer: JSON documents, plain aligned tables, rich tables, one-line errors.

verify renders plain text on purpose: importing rich costs ~30 ms, a third of the cold-start budget,
and cron runs verify far more often than a person reads inspect's tables.
"""
from __future__ import annotations

import os
import re
import sys

from ..version import __version__

_COLORS = {"red": "31", "yellow": "33", "green": "32", "dim": "2", "bold": "1", "cyan": "36"}

# ---- terminal safety -----------------------------------------------------------------------------------
# Names, memoryIds, reasons and lines come from files anyone who can write a directory may have written:
# an escape sequence in one must not drive the operator's terminal (clear it, retitle it, hide a finding).
# Every text write of a command goes through SafeStream, which escapes C0 and C1 control characters (but
# newline and tab), the bidirectional overrides and lone surrogates (a name that is not UTF-8); our own colours pass because paint() marks them with
# a token no file can contain (it is drawn at random for each process). JSON is unchanged by this: it
# never holds a raw C0 character, and a C1 or bidi character becomes its \u escape, valid JSON.

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_MARK = "\ue000" + os.urandom(8).hex()


def _escape(m) -> str:
    o = ord(m.group())
    return f"\\x{o:02x}" if o < 0x80 else f"\\u{o:04x}"


def safe(text) -> str:
    """`text` with every control character escaped (for rich's tables, which write to the terminal
    itself)."""
    return _UNSAFE.sub(_escape, str(text))


class SafeStream:
    """A text stream that escapes control characters on their way to `raw` (sys.stdout, sys.stderr)."""

    def __init__(self, raw):
        self.raw = raw

    def write(self, s: str) -> int:
        if _UNSAFE.search(s):
            s = _UNSAFE.sub(_escape, s)
        if _MARK in s:
            s = s.replace(_MARK, "\033")
        return self.raw.write(s)

    def __getattr__(self, name):  # buffer, fileno, isatty, flush, encoding ...
        return getattr(self.raw, name)


def raw_stream(stream):
    return stream.raw if isinstance(stream, SafeStream) else stream


def use_color(stream=None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    return hasattr(stream, "isatty") and stream.isatty()


def paint(text: str, color: str | None, stream=None) -> str:
    if not color or not use_color(stream):
        return text
    return colour(text, color)


def colour(text: str, color: str) -> str:
    """paint() without asking the stream: for a renderer that decided once whether to use colour."""
    return f"{_MARK}[{_COLORS[color]}m{text}{_MARK}[0m"


def error_line(message: str) -> None:
    sys.stderr.write(f"walctl: error: {_one_line(message)}\n")


def warn_line(message: str) -> None:
    sys.stderr.write(f"walctl: warning: {_one_line(message)}\n")


def _one_line(message: str) -> str:
    return " ".join(str(message).split("\n"))


# Whether this run built its --json document: the CLI edge prints the error document only when the
# command did not (docs/contract.md: --json is one document, on failure and refusal too).
DOCUMENTS = {"built": 0}


def json_document(schema: str, body: dict) -> str:
    import json

    DOCUMENTS["built"] += 1
    from ..store.root import FOLLOWED

    doc = {"schema": schema, "walctl_version": __version__}
    doc.update(body)
    if FOLLOWED:  # a target reached through a symbolic link, followed once at the start (store/root.py)
        doc["targets"] = [{"path": typed, "resolved": resolved} for typed, resolved in FOLLOWED]
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    from .names_json import carry, has_escapes

    return json.dumps(carry(doc), indent=2, ensure_ascii=False) if has_escapes(text) else text


# The command line of this run, as typed: what a dry run's "to do it" line repeats, with --apply.
RUN = {"argv": []}


def rerun(*add: str) -> str:
    """This run's exact command line (shell-quoted, --json left out) with the flags in `add` appended:
    `walctl compact /srv/wal --to 40 --apply`."""
    from ..ops.advice import cmd

    words = [a for a in RUN["argv"] if a != "--json" and a not in add]
    return cmd(*words, *add)


def next_lines(steps, indent: str = "") -> list[str]:
    """`next:` lines for the steps of ops/advice.py: each pastes as printed (its note is a shell comment).
    Too wide for the terminal, the note goes on a line of its own and the command is broken between words
    with a shell continuation (` \\`), so that it still pastes whole."""
    from .fit import term_width

    width, out = term_width(), []
    for i, s in enumerate(steps):
        lead = f"{indent}{'next:' if i == 0 else '     '} "
        line = lead + safe(s.text())
        if width is None or len(line) <= width:
            out.append(line)
            continue
        command, hash_, note = safe(s.text()).partition("   # ")
        out.extend(_continued(lead, command, width))
        if hash_:
            out.extend(wrapped(" " * len(lead) + "# " + note, width, "# "))
    return out


def _continued(lead: str, command: str, width: int) -> list[str]:
    """The command over several lines joined by ` \\`, broken only at spaces outside quotes (a backslash
    inside quotes is no continuation)."""
    words, word, quote = [], "", None
    for ch in command:
        if quote is None and ch == " ":
            if word:
                words.append(word)
            word = ""
            continue
        if ch in "'\"" and quote in (None, ch):
            quote = None if quote == ch else ch
        word += ch
    words.append(word)
    lines, line, pad = [], lead, " " * (len(lead) + 4)
    for w in words:
        if line.strip() and len(line) + 1 + len(w) > width - 2:
            lines.append(line + " \\")
            line = pad + w
        else:
            line = line + w if line == lead else f"{line} {w}"
    return lines + [line]


def wrapped(text: str, width: int | None, indent: str = "") -> list[str]:
    """Prose wrapped between words to `width` (None: one line); continuation lines keep the text's own
    leading spaces, plus `indent`."""
    if width is None or len(text) <= width:
        return [text]
    import textwrap

    lead = " " * (len(text) - len(text.lstrip(" ")))
    return textwrap.wrap(text, width, subsequent_indent=lead + indent, break_long_words=False,
                         break_on_hyphens=False) or [text]


def say_command(prefix: str, command: str) -> None:
    """`prefix command` on one line when it fits the terminal, else the command under it, indented, broken
    between words with ` \\` (it still pastes whole)."""
    from .fit import term_width

    width = term_width()
    if width is None or len(prefix) + 1 + len(command) <= width:
        emit(f"{prefix} {command}")
        return
    emit(prefix)
    for line in _continued("  ", command, width):
        emit(line)


def say(text: str, indent: str = "  ") -> None:
    """Prose on stdout, wrapped between words to the terminal's width; whole on a pipe."""
    from .fit import term_width

    for line in wrapped(text, term_width(), indent):
        emit(line)


def examined_document(schema: str, error, json_out: bool) -> None:
    """--json and a failure after the command examined data (the error carries what it examined): the
    command's own document. Otherwise nothing here: the edge prints walctl.error/1 (docs/json.md)."""
    if json_out and getattr(error, "examined", None) is not None:
        emit(json_document(schema, error.examined))


ERROR_SCHEMA = "walctl.error/1"


def error_document(command: str | None, exit_code: int, reason: str, message: str, path: str | None = None,
                   offset: int | None = None) -> str:
    """The one document a --json command prints when it ends in an error or refusal before it could build its
    own (docs/json.md, walctl.error/1): the outcome, the exit code and the error with its reason word."""
    outcome = "refused" if reason == "refused" else "error"
    return json_document(ERROR_SCHEMA, {"command": command, "outcome": outcome, "exit_code": exit_code,
                                        "error": {"reason": reason, "message": message, "path": path,
                                                  "offset": offset}})


def emit(text: str) -> None:
    sys.stdout.write(text + "\n")


def plain_table(headers: list[str], rows: list[list], indent: str = "  ", fixed: tuple[int, ...] = (0,)) -> list[str]:
    """A table cut to the terminal's width (cli/fit.py: `start…(N B)`), never padded; whole on a pipe. The
    `fixed` columns (by default the first, which names the row) are never cut."""
    from .fit import fit_rows, term_width

    cells = [["" if v is None else v if isinstance(v, str) else str(v) for v in r] for r in rows]
    return fit_rows([str(h) for h in headers], cells, indent, term_width(), fixed)


def plural(n: int, noun: str) -> str:
    """`1 chunk`, `2 chunks`, `1 entry`, `3 entries`; `2 valid` (an adjective counts nothing)."""
    if n == 1 or noun in ("valid",):
        return f"{n} {noun}"
    return f"{n} {noun[:-1]}ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else f"{n} {noun}s"


def singular(nouns: str) -> str:
    """`records` -> `record`, `entries` -> `entry`; an adjective (`valid`) stays as it is."""
    return nouns[:-3] + "y" if nouns.endswith("ies") else nouns[:-1] if nouns.endswith("s") else nouns


def seq_range(a, b) -> str:
    if a is None:
        return "-"
    return f"{a}..{b}" if a != b else str(a)
