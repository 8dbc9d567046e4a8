"""JSON Schemas (draft 2020-12) for every --json document and --jsonl record, one file per schema:
`walctl.verify/1` is `walctl.verify-1.json`. docs/json.md indexes them; tests/test_schemas.py validates
every command's real output against them."""
from __future__ import annotations

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def file_name(name: str) -> str:
    return name.replace("/", "-") + ".json"


def names() -> list[str]:
    out = []
    for f in sorted(os.listdir(HERE)):
        if f.startswith("walctl.") and f.endswith(".json"):
            base, _, version = f[:-5].rpartition("-")
            out.append(f"{base}/{version}")
    return out


def resolve(name: str) -> str | None:
    """The full name for `name`, `walctl.name` or `name/1` (the newest version when none is given)."""
    known = names()
    cand = name if name.startswith("walctl.") else f"walctl.{name}"
    if cand in known:
        return cand
    versions = [n for n in known if n.rpartition("/")[0] == cand]
    return max(versions, key=lambda n: int(n.rpartition("/")[2])) if versions else None


def text(name: str) -> str:
    with open(os.path.join(HERE, file_name(name)), encoding="utf-8") as f:
        return f.read()


def load(name: str) -> dict:
    return json.loads(text(name))


def title(name: str) -> str:
    return load(name).get("title", "")
