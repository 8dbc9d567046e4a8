"""The Prometheus text exposition format (version 0.0.4), as node_exporter's textfile collector reads it:
values in, text out, and back for the one value walctl carries from run to run. Pure: no I/O.

    # HELP walctl_exit_code The exit code of the last run (docs/contract.md).
    # TYPE walctl_exit_code gauge
    walctl_exit_code{command="verify",target="/srv/wal"} 3
"""
from __future__ import annotations

import math
import re
from typing import NamedTuple


class Family(NamedTuple):
    name: str
    help: str
    samples: tuple  # ((labels: tuple of (key, value) pairs, value: float), ...)
    type: str = "gauge"


def _label_value(v: str) -> str:
    # the format's three escapes; a name that is not UTF-8 is printed with U+FFFD (the text must be UTF-8)
    v = v.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(v: float) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def labels_text(labels) -> str:
    return "{" + ",".join(f'{k}="{_label_value(str(v))}"' for k, v in labels) + "}" if labels else ""


def encode(families) -> str:
    """The exposition text of `families`, in order; a family with no samples is left out (an empty
    family is valid but tells a reader nothing)."""
    out = []
    for f in families:
        if not f.samples:
            continue
        out.append(f"# HELP {f.name} {f.help.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}")
        out.append(f"# TYPE {f.name} {f.type}")
        out.extend(f"{f.name}{labels_text(labels)} {_number(value)}" for labels, value in f.samples)
    return "\n".join(out) + "\n"


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')


def read_values(text: str, name: str) -> dict:
    """{labels text: value} of the samples of `name` in a text walctl wrote (the label set as printed,
    so a later run matches it exactly); lines of any other shape are skipped."""
    got = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and m.group(1) == name:
            try:
                got[m.group(2) or ""] = float(m.group(3))
            except ValueError:
                continue
    return got
