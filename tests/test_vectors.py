"""Files the reference Java writer produced: walctl must read them back exactly, and judge the damaged
ones as spector-v2.md says (not as Java did)."""
from __future__ import annotations

import hashlib
import os

import pytest

from conftest import DAMAGED_CASES, HEALTHY_CASES, case_dir, load_expected, tree_digest
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.verify import verify_path


@pytest.mark.parametrize("case", HEALTHY_CASES)
def test_healthy_case_reads_back_exactly(case):
    expected = load_expected(case)
    walk = RecordWalk(case_dir(case))
    records = [r for r in walk if isinstance(r, Record)]
    assert len(records) == len(expected["appended"])
    for got, want in zip(records, expected["appended"]):
        assert got.sequence == want["sequence"]
        assert got.type == want["type"]
        assert got.type_ordinal == want["type_ordinal"]
        assert got.memory_id == bytes.fromhex(want["memory_id_utf8_hex"])
        assert got.memory_id_text == want["memory_id"]
        assert got.timestamp_ms == want["timestamp_ms"]
        assert got.payload == bytes.fromhex(want["payload_hex"])
        assert hashlib.sha256(got.payload).hexdigest() == want["payload_sha256"]
        assert len(got.payload) == want["payload_len"]
        assert got.file == want["chunk"]
        assert got.offset == want["record_offset"]
        assert got.size == want["record_size"]
        assert got.compressed == want["stored_compressed"]
    # and the whole directory verifies clean, with the Java high-water mark as its last sequence
    report = walk.report
    assert report.exit_code == 0, [f.one_line() for f in report.findings]
    assert report.last_sequence == expected["high_water_mark"]
    assert [f for f in report.findings if f.exit_code != 0] == []
    sizes = {f["name"]: f["size"] for f in expected["files"]}
    assert {c.file: c.size for c in report.chunks} == sizes


def test_rolled_case_keeps_header_only_last_chunk_as_normal():
    report = verify_path(case_dir("rolled"))
    assert report.exit_code == 0
    last = report.chunks[-1]
    assert (last.file, last.size, last.records, last.verdict) == ("wal-000006.bin", 8, 0, "header-only")
    assert [c.records for c in report.chunks] == [17, 4, 12, 16, 10, 11, 0]


def test_compressed_case_threshold_is_strictly_greater(tmp_path):
    """walctl reads the Java writer's compression flag as stored, and its own writer, given the Java
    constructor's threshold, compresses exactly the same records (strictly longer than the threshold)."""
    from walctl.ops.wal.write import WalWriter

    expected = load_expected("compressed")
    threshold = expected["constructor"]["compressionThreshold"]
    java = [r for r in RecordWalk(case_dir("compressed")) if isinstance(r, Record)]
    assert [r.compressed for r in java] == [len(r.payload) > threshold for r in java]
    at = {len(r.payload): r.compressed for r in java if abs(len(r.payload) - threshold) <= 1}
    assert at == {threshold - 1: False, threshold: False, threshold + 1: True}  # the boundary, both sides
    with WalWriter(str(tmp_path / "wal"), sync="none", compress_threshold=threshold) as w:
        for r in java:
            w.append(r.type_ordinal, r.memory_id, r.payload, r.timestamp_ms)
    ours = [r for r in RecordWalk(str(tmp_path / "wal")) if isinstance(r, Record)]
    def view(rs):
        return [(r.sequence, r.type_ordinal, r.compressed, r.payload) for r in rs]

    assert view(ours) == view(java)


def test_damaged_midlog_bitflip_is_corruption_with_salvage_accounting():
    report = verify_path(case_dir("payload-bitflip-midlog"))
    assert report.exit_code == 3
    (f,) = [f for f in report.findings if f.exit_code]
    assert f.cls == "mid-log-damage"
    assert (f.file, f.offset, f.end_offset) == ("wal-000000.bin", 2368, 2616)
    assert f.field == "payload-crc"
    # The Java log printed these as signed ints: expected -1976194650, got 2058353930.
    assert f.stored == -1976194650 & 0xFFFFFFFF
    assert f.computed == 2058353930
    assert f.sequence_range == (25, 25)
    assert f.extra["salvageable_records"] == 24
    assert f.extra["salvageable_sequence_range"] == [26, 49]
    assert report.records == 48
    assert report.damaged_bytes == 248


def test_damaged_torn_tail_is_torn_with_last_valid_record():
    report = verify_path(case_dir("torn-tail-mid-payload"))
    assert report.exit_code == 1
    (f,) = report.findings
    assert (f.cls, f.offset, f.end_offset, f.tail_kind) == ("tail-damage", 3064, 3215, "incomplete")
    assert f.torn is True
    assert f.last_good_sequence == 28
    assert report.last_sequence == 28
    assert report.damaged_bytes == 3215 - 3064


def test_damaged_wrong_file_magic_is_unsupported_not_deleted():
    report = verify_path(case_dir("wrong-file-magic"))
    assert report.exit_code == 5
    (f,) = report.findings
    assert f.cls == "unsupported" and f.file == "wal-000000.bin"
    assert f.stored == int.from_bytes(b"SPEX", "big")
    assert report.records == 0


@pytest.mark.parametrize("case", HEALTHY_CASES + DAMAGED_CASES)
def test_reading_vectors_changes_nothing(case, cli):
    path = case_dir(case)
    before = tree_digest(path)
    for args in (["verify", path], ["verify", "--json", path], ["inspect", path], ["stats", path]):
        cli(*args)
    assert tree_digest(path) == before
    assert not os.path.exists(os.path.join(path, ".quarantine"))
