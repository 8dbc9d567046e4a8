"""inspect's forensic views exit as verify judges the place they show: --seq of a sequence whose loss the
ledger accepted says so (ledger line, time, reason) and exits 0 (--strict 3), --around CHUNK:OFFSET exits
with the code of verify's finding at that byte (as --damaged gives each region), and nothing changes."""
from __future__ import annotations

import json
import os

import pytest

from conftest import flip_bit, make_chunk, record_offsets, tree_digest, write_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def _gap(tmp_path):
    """Sequences 1..5 and 7..9: sequence 6 is missing (the second chunk starts at offset 8 with 7)."""
    return write_dir(tmp_path / "wal", {0: make_chunk(range(1, 6)), 1: make_chunk(range(7, 10))})


def _ledger(d) -> list[dict]:
    with open(os.path.join(d, ".walctl", "ledger.jsonl"), encoding="utf-8") as f:
        return [json.loads(x) for x in f.read().splitlines()]


def _accepted(cli, d) -> dict:
    r = cli("repair", d, "--accept-loss", "6..6", "--reason", "disk died", "--apply")
    assert r.code == 0
    (line,) = [x for x in _ledger(d) if x["event"] == "accept-loss"]
    return line


def test_seq_of_a_gap_before_and_after_its_loss_is_accepted(cli, tmp_path):
    d = _gap(tmp_path)
    before = tree_digest(d)
    gap = cli("inspect", d, "--seq", "6")
    assert gap.code == 4 and cli("verify", d).code == 4  # a bare gap: sequence discontinuity, as verify
    assert "no valid record carries it; missing: wal-000001.bin: offset 8: sequence gap" in gap.out
    assert tree_digest(d) == before
    line = _accepted(cli, d)
    after = tree_digest(d)
    v = cli("verify", d, "--json")
    (f,) = v.json()["paths"][0]["findings"]
    assert v.code == 0 and f["class"] == "accepted-loss" and f["exit_code"] == 0
    by = f["accepted_by"]
    assert (by["time"], by["reason"]) == (line["ts"], "disk died")
    r = cli("inspect", d, "--seq", "6")
    assert r.code == 0
    assert (f"== sequence 6: no valid record carries it; accepted as lost: sequence 6 (ledger line "
            f"{by['ledger_line']}, {line['ts']}: disk died)") in r.out
    assert "-- record at offset" not in r.out  # no bytes were lost here: none are dumped as if damaged
    strict = cli("inspect", d, "--seq", "6", "--strict")
    assert strict.code == 3 and cli("verify", d, "--strict").code == 3 and "accepted as lost" in strict.out
    assert cli("inspect", d, "--seq", "7", "--strict").code == 0  # a present record is present
    assert tree_digest(d) == after  # read-only: not even a lock file


def test_accepted_loss_of_a_sealed_chunk_moved_away_is_named_too(cli, tmp_path):
    """The sealed chunk absent with its sequences accepted as lost: the acceptance, not the absence."""
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 4)), 1: make_chunk(range(4, 7)), 2: make_chunk(range(7, 9))})
    assert cli("seal", d, "--apply").code == 0
    os.remove(os.path.join(d, "wal-000001.bin"))
    assert cli("verify", d).code == 3  # a sealed chunk vanished
    assert cli("inspect", d, "--seq", "5").code == 3
    r = cli("repair", d, "--accept-loss", "4..6", "--reason", "chunk 1 lost", "--apply")
    assert r.code == 0 and cli("verify", d).code == 0
    s = cli("inspect", d, "--seq", "5")
    assert s.code == 0 and "accepted as lost: sequences 4..6" in s.out and "chunk 1 lost" in s.out


def _midlog_and_torn(tmp_path):
    c0 = make_chunk(range(1, 6))
    o0 = record_offsets(c0)
    c0 = flip_bit(c0, o0[2] + 44)  # a payload byte of seq 3: mid-log damage (3)
    c1 = make_chunk(range(6, 9))
    o1 = record_offsets(c1)
    c1 = c1[:o1[2] + 20]  # the last record torn (1)
    return write_dir(tmp_path / "wal", {0: c0, 1: c1}), o0, o1


def test_around_exits_with_the_code_of_the_damage_at_that_offset(cli, tmp_path):
    d, o0, o1 = _midlog_and_torn(tmp_path)
    before = tree_digest(d)
    cases = [
        (f"wal-000000.bin:{o0[2]}", 3, "mid-log-damage"),       # the start of the damaged record
        (f"wal-000000.bin:{o0[3] - 1}", 3, "mid-log-damage"),   # its last byte
        (f"wal-000000.bin:{o0[3]}", 0, None),                    # the intact record where reading resumes
        (f"wal-000000.bin:{o0[1]}", 0, None),                    # an intact record before it
        (f"wal-000001.bin:{o1[2]}", 1, "tail-damage"),           # the torn tail
        (f"wal-000001.bin:{o1[2] + 19}", 1, "tail-damage"),      # its last byte
    ]
    for spec, code, cls in cases:
        r = cli("inspect", d, "--around", spec, "--context", "8")
        assert r.code == code, (spec, r.out)
        if cls is None:
            assert "verify:" not in r.out
        else:
            assert f"({cls}, exit {code})" in r.out
    # the file given alone is judged alone: the same damage, the same codes
    r = cli("inspect", os.path.join(d, "wal-000001.bin"), "--around", str(o1[2]))
    assert r.code == 1 and "(tail-damage, exit 1)" in r.out
    assert tree_digest(d) == before


def test_around_agrees_with_damaged_region_by_region(cli, tmp_path):
    d, _, _ = _midlog_and_torn(tmp_path)
    damaged = cli("inspect", d, "--damaged")
    v = cli("verify", d, "--json").json()["paths"][0]["findings"]
    assert damaged.code == 3 and [(f["class"], f["exit_code"]) for f in v] == [("mid-log-damage", 3), ("tail-damage", 1)]
    for n, f in enumerate(v, 1):
        assert f"=== {n}/2 {f['file']}: {f['class']} (exit {f['exit_code']})" in damaged.out
        assert cli("inspect", d, "--around", f"{f['file']}:{f['offset']}").code == f["exit_code"]


def test_around_a_gap_and_an_accepted_loss_exits_as_verify_and_strict(cli, tmp_path):
    d = _gap(tmp_path)
    r = cli("inspect", d, "--around", "wal-000001.bin:8")
    assert r.code == 4 and "(sequence-gap, exit 4)" in r.out
    _accepted(cli, d)
    before = tree_digest(d)
    assert cli("inspect", d, "--around", "wal-000001.bin:8").code == 0
    s = cli("inspect", d, "--around", "wal-000001.bin:8", "--strict")
    assert s.code == 3 and "(accepted-loss, exit 3)" in s.out
    assert tree_digest(d) == before


@pytest.mark.parametrize("args", [[], ["--jsonl"], ["--damaged"]])
def test_strict_makes_inspect_exit_as_verify_strict(cli, tmp_path, args):
    d = _gap(tmp_path)
    _accepted(cli, d)
    before = tree_digest(d)
    plain, strict = cli("inspect", d, *args), cli("inspect", d, *args, "--strict")
    assert (plain.code, strict.code) == (cli("verify", d).code, cli("verify", d, "--strict").code) == (0, 3)
    if args == ["--jsonl"]:
        assert [json.loads(x)["sequence"] for x in strict.out.splitlines()] == [1, 2, 3, 4, 5, 7, 8, 9]
    assert tree_digest(d) == before


def test_strict_on_segments_follows_verify(cli):
    seg = os.path.join(EXAMPLES, "segments")
    if not os.path.isdir(seg):
        pytest.skip("no bundled segments example")
    assert cli("inspect", seg, "--strict").code == cli("verify", seg, "--strict").code
