"""Left-overs of the ledger's edges: seal reports the hash its line records; impossible values in a ledger
line make it a bad line (reported by number, never acted on)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from conftest import VECTORS, tree_digest
from walctl.format import ledger as L


def ledger_lines(d) -> list[dict]:
    with open(os.path.join(d, ".walctl", "ledger.jsonl"), "rb") as f:
        return [json.loads(x) for x in f.read().splitlines()]


def java_copy(tmp_path, case="rolled") -> str:
    d = str(tmp_path / case)
    shutil.copytree(os.path.join(VECTORS, case, "wal"), d)
    return d


def test_seal_apply_json_items_report_the_sha256_and_size_their_ledger_line_records(tmp_path, cli):
    d = java_copy(tmp_path)
    dry = cli("seal", d, "--json").json()
    assert all(i["sha256"] is None for i in dry["items"])  # a dry run hashes nothing
    r = cli("seal", d, "--apply", "--json")
    assert r.code == 0
    items = {i["file"]: i for i in r.json()["items"]}
    seals = {x["file"]: x for x in ledger_lines(d) if x["event"] == "seal"}
    assert sorted(seals) == [f"wal-00000{i}.bin" for i in range(6)]
    for name, line in seals.items():
        data = open(os.path.join(d, name), "rb").read()
        assert items[name]["action"] == "seal"
        assert (items[name]["sha256"], items[name]["size"]) == (line["sha256"], line["size"]) == \
            (hashlib.sha256(data).hexdigest(), len(data))
    last = sorted(items)[-1]
    assert items[last]["action"] == "skip" and items[last]["sha256"] is None  # the last chunk: not sealed
    again = {i["file"]: i for i in cli("seal", d, "--apply", "--json").json()["items"]}
    assert all(again[n]["action"] == "already-sealed" and again[n]["sha256"] == seals[n]["sha256"] for n in seals)
