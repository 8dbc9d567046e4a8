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


# ---- impossible values -----------------------------------------------------------------------------

def _line_with_crc(obj: dict) -> bytes:
    obj = dict(obj)
    obj["crc32c"] = f"{L.crc32c(json.dumps(obj, sort_keys=True, separators=(',', ':')).encode()):08x}"
    return json.dumps(obj).encode() + b"\n"


def _written(tmp_path) -> str:
    from walctl.ops.wal.write import WalWriter

    d = str(tmp_path / "w")
    with WalWriter(d, max_chunk_bytes=4096) as w:
        for i in range(300):
            w.append(1, "m-%d" % (i % 7), b"x" * 50)
    return d


# (event, fields changed from a real line of that event, words of the reason)
IMPOSSIBLE = [
    ("seal", {"size": -1}, "size -1 is negative"),
    ("seal", {"records": -3}, "records -3 is negative"),
    ("seal", {"first_seq": 50, "last_seq": 40}, "first_seq 50 is above last_seq 40"),
    ("seal", {"first_seq": 0, "last_seq": 10, "records": 11}, "first_seq 0 is below 1"),
    ("seal", {"first_seq": -9, "last_seq": -1, "records": 9}, "first_seq -9 is below 1"),
    ("seal", {"records": 1000}, "1000 records for sequences"),
    ("seal", {"first_seq": None}, "not both set or both null"),
    ("seal", {"first_seq": None, "last_seq": None}, "records but no sequences"),
    ("seal", {"sha256": "xyz"}, "sha256 is not 64 lowercase hex"),
    ("seal", {"stat": {"ino": -1, "mtime_ns": 5}}, "stat.ino is negative"),
    ("hwm", {"seq": -1}, "seq -1 is negative"),
    ("moved", {"first_seq": 9, "last_seq": 3}, "first_seq 9 is above last_seq 3"),
    ("moved", {"last_seq": None}, "not both set or both null"),
    ("cut", {"offset": -10}, "offset -10 is negative"),
    ("cut", {"bytes": -1}, "bytes -1 is negative"),
    ("cut", {"last_seq_kept": -2}, "last_seq_kept -2 is negative"),
]

BASE = {
    "moved": {"file": "wal-000002.bin", "first_seq": 1, "last_seq": 2, "to": ".quarantine/x", "why": "quarantine"},
    "cut": {"file": "wal-000002.bin", "offset": 10, "bytes": 5, "last_seq_kept": 1, "evidence": ".quarantine/y"},
}


@pytest.mark.parametrize("event,change,words", IMPOSSIBLE, ids=[f"{e}-{'-'.join(c)}" for e, c, _ in IMPOSSIBLE])
def test_a_ledger_line_with_an_impossible_value_is_a_bad_line_never_acted_on(tmp_path, cli, event, change, words):
    d = _written(tmp_path)
    path = os.path.join(d, ".walctl", "ledger.jsonl")
    before = cli("verify", d, "--json").json()["paths"][0]
    assert before["exit_code"] == 0
    lines = ledger_lines(d)
    if event in BASE:
        fields = dict(BASE[event])
    else:
        fields = next({k: v for k, v in x.items() if k not in ("v", "ts", "event", "crc32c")}
                      for x in lines if x["event"] == event)
    fields.update(change)
    raw = _line_with_crc(dict(fields, v=1, ts="2026-01-01T00:00:00.000Z", event=event))
    got = L.decode_line(raw[:-1])  # the codec's own answer
    assert isinstance(got, L.BadLine) and words in got.reason, got
    with pytest.raises(ValueError):  # and no writer can write it
        L.encode_line(event, "2026-01-01T00:00:00.000Z", **fields)
    with open(path, "ab") as f:
        f.write(raw)
    digest = tree_digest(d)
    r = cli("verify", d, "--json")
    after = r.json()["paths"][0]
    assert r.code == 3 and after["exit_code"] == 3
    bad = [f for f in after["findings"] if f["class"] == "ledger-line"]
    assert len(bad) == 1 and bad[0]["line"] == len(lines) + 1 and bad[0]["file"] == ".walctl/ledger.jsonl"
    assert words in bad[0]["reason"] and bad[0]["exit_code"] == 3
    # never acted on: every other finding, chunk verdict and the ledger's use are exactly as before
    assert [f for f in after["findings"] if f["class"] != "ledger-line"] == before["findings"]
    assert after["chunks"] == before["chunks"] and after["ledger"] == before["ledger"]
    assert tree_digest(d) == digest  # verify changed nothing
