"""Old option spellings, kept working after the shared vocabulary (issue #26).

Sequences: `--after N` exclusive; `--from N` / `--to N` inclusive; `--seq N` one. Times: `--since T` /
`--until T`, inclusive (epoch ms or ISO-8601). Durations: `500ms`, `1s`, `2m`, `1h` or seconds. `--json`
one document, `--jsonl` JSON lines.

An old spelling is rewritten to the new one before the command line is parsed, with a one-line note on
stderr, so help, errors and advice (`rerun()`) only ever show the new spelling. Each rename keeps the
meaning: `compact --before N` always covered sequences <= N, which is `--to N`.
"""
from __future__ import annotations

import sys

# command words -> {old spelling: new spelling}
RENAMED: dict[str, dict[str, str]] = {
    "inspect": {"--from-seq": "--from", "--to-seq": "--to"},
    "compact": {"--before": "--to"},
    "archive push": {"--before": "--to"},
    "archive restore": {"--to-seq": "--to", "--to-time": "--until"},
    "checkpoint create": {"--wal-seq": "--to"},
    "tasklog replay": {"--json": "--jsonl"},
    "import": {"--form": "--format", "--batch-ms": "--batch-interval"},
    "write": {"--batch-ms": "--batch-interval"},
    "fingerprint": {"--at": "--to"},  # the state through sequence N, as checkpoint create --to N
}
# an old spelling whose value changes unit on the way: milliseconds -> a duration
_VALUE = {"--batch-ms": lambda v: v.strip() + "ms" if v.strip().isdigit() else v}


def _command_span(args: list[str]) -> tuple[str | None, int]:
    """("archive restore", index after the command words), or (None, 0) when no renamed command runs."""
    words = [(i, a) for i, a in enumerate(args) if not a.startswith("-")][:2]
    for n in (2, 1):
        if len(words) >= n:
            name = " ".join(a for _, a in words[:n])
            if name in RENAMED:
                return name, words[n - 1][0] + 1
    return None, 0


def rewrite(args: list[str], note=None) -> list[str]:
    """args with every old spelling of the command's options replaced by its new one; one note each."""
    name, start = _command_span(args)
    if name is None:
        return args
    table, out, said = RENAMED[name], list(args), set()
    say = note or (lambda old, new: sys.stderr.write(f"note: {old} is now {new}\n"))
    i = start
    while i < len(out):
        a = out[i]
        if a == "--":  # what follows is arguments, never options
            break
        old, eq, value = a.partition("=")
        if old in table:
            new = table[old]
            if old not in said:
                said.add(old)
                say(old, new)
            conv = _VALUE.get(old)
            if eq:
                out[i] = f"{new}={conv(value) if conv else value}"
            else:
                out[i] = new
                if conv and i + 1 < len(out):
                    out[i + 1] = conv(out[i + 1])
                    i += 1
        i += 1
    return out
