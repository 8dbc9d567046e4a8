"""ADR-003 segment names: writers pad N to 8 digits; readers accept `wal_1.log` (shared/spec/checkpoints.md),
sort numerically, report two spellings of one number, and a reopening writer continues the file it found
instead of creating a second file with the same number."""
from __future__ import annotations

import json
import os

from walctl.format import segment as seg
from walctl.format.names import parse_segment_name
from walctl.ops.wal.verify import verify_path


def _frames(first: int, n: int) -> bytes:
    return b"".join(seg.encode_frame(seg.seal({"sequence": q, "operation": "memory_add", "data": {"q": q},
                                                "timestamp": 1795300000 + q})) for q in range(first, first + n))


def test_unpadded_names_parse_and_odd_ones_do_not():
    assert [parse_segment_name(n) for n in ("wal_1.log", "wal_00000001.log", "wal_10.log", "wal_123456789.log")] \
        == [1, 1, 10, 123456789]
    assert [parse_segment_name(n) for n in ("wal_0.log", "wal_00000000.log", "wal_-1.log", "wal_١.log",
                                             "wal_.log", "wal_1.log.tmp", "wal-1.log")] == [None] * 7


def test_unpadded_segments_are_read_in_numeric_order(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    for k in range(1, 12):  # wal_1.log .. wal_11.log: wal_10 sorts after wal_9 by number, not by name
        (d / f"wal_{k}.log").write_bytes(_frames(3 * k - 2, 3))
    rep = verify_path(str(d))
    assert rep.exit_code == 0 and rep.kind == "adr003-segments"
    assert [c.file for c in rep.chunks] == [f"wal_{k}.log" for k in range(1, 12)]
    assert (rep.records, rep.first_sequence, rep.last_sequence) == (33, 1, 33) and rep.findings == ()


def test_two_spellings_of_one_number_are_both_read_and_reported(tmp_path, cli):
    d = tmp_path / "s"
    d.mkdir()
    (d / "wal_00000001.log").write_bytes(_frames(1, 3))
    (d / "wal_1.log").write_bytes(_frames(4, 2))
    r = cli("verify", "--json", str(d))
    p = json.loads(r.out)["paths"][0]
    assert r.code == 0 and [c["file"] for c in p["chunks"]] == ["wal_00000001.log", "wal_1.log"]
    dup = [f for f in p["findings"] if f["class"] == "duplicate-chunk-index"]
    assert [(f["file"], f["exit_code"]) for f in dup] == [("wal_1.log", 0)] and "wal_00000001.log" in dup[0]["reason"]
    assert p["summary"]["records"] == 5


def test_a_reopening_writer_continues_an_unpadded_segment(tmp_path, cli, monkeypatch):
    import io
    import sys

    d = tmp_path / "s"
    d.mkdir()
    (d / "wal_3.log").write_bytes(_frames(1, 2))
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"operation": "memory_add", "data": {"x": 1}, '
                                                  '"timestamp": 1795300009}\n'))
    r = cli("write", "--format", "segments", "--sync", "none", str(d))
    assert r.code == 0, r.err
    assert sorted(n for n in os.listdir(d) if n.startswith("wal")) == ["wal_3.log"]  # no wal_00000003.log
    rep = verify_path(str(d))
    assert rep.exit_code == 0 and (rep.records, rep.last_sequence) == (3, 3)
    assert [c.file for c in rep.chunks] == ["wal_3.log"]


def test_the_ledger_can_name_an_unpadded_segment_but_never_a_bad_one():
    from walctl.format import ledger as L

    assert L.is_log_file_name("wal_1.log") and L.is_log_file_name("wal_00000001.log")
    assert not any(L.is_log_file_name(n) for n in ("wal_0.log", "../wal_1.log", "wal_1.log/x", "wal-1.bin"))
