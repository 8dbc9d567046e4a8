"""Property tests: round trips, and any bytes given to the readers return a value, never raise, never
hang. The default profile runs a meaningful number of cases; `-m slow` runs many more."""
from __future__ import annotations

import os
import zlib

import crcmod.predefined
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import make_chunk, write_dir
from walctl.errors import EXIT_PRECEDENCE
from walctl.format.scan import Damage, Run, scan_chunk
from walctl.format.v1 import iter_v1_records
from walctl.format.v2 import FLAG_COMPRESSED, compress_payload, encode_file_header, encode_record, inflate_bounded
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.verify import verify_path

DOCUMENTED_CODES = {0, *EXIT_PRECEDENCE}
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SLOW = settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# An independent CRC-32 (crcmod's table implementation) as the oracle for the zlib one on the hot path.
crc32_oracle = crcmod.predefined.mkCrcFun("crc-32")

events = st.lists(st.tuples(
    st.integers(0, 15),
    st.binary(max_size=40),
    st.integers(-(1 << 63), (1 << 63) - 1),
    st.binary(max_size=3000),
    st.booleans(),
), max_size=25)


def _build(evts, first_seq=1):
    data = bytearray(encode_file_header())
    for i, (typ, mid, ts, payload, compress) in enumerate(evts):
        stored, flags = compress_payload(payload, 64 if compress else None)
        data += encode_record(first_seq + i, typ, mid, ts, stored, flags)
    return bytes(data)


def _round_trip(evts, tmp_path):
    data = _build(evts)
    scan = scan_chunk(data)
    assert scan.records == len(evts) and scan.damage == []
    d = write_dir(tmp_path / "rt", {0: data})
    got = [r for r in RecordWalk(d) if isinstance(r, Record)]
    for i, (rec, (typ, mid, ts, payload, compress)) in enumerate(zip(got, evts)):
        assert (rec.sequence, rec.type_ordinal, rec.memory_id, rec.timestamp_ms, rec.payload) == \
            (i + 1, typ, mid, ts, payload)
        assert rec.compressed == (compress and len(payload) > 64)
        assert rec.payload_crc == crc32_oracle(zlib.compress(payload) if rec.compressed else payload)
    assert len(got) == len(evts)


@FAST
@given(evts=events)
def test_round_trip(evts, tmp_path):
    _round_trip(evts, tmp_path)


@pytest.mark.slow
@SLOW
@given(evts=events)
def test_round_trip_long(evts, tmp_path):
    _round_trip(evts, tmp_path)


def _scan_any(data: bytes):
    scan = scan_chunk(data)
    covered = 0
    for item in scan.items:
        assert isinstance(item, (Run, Damage))
        assert 8 <= item.offset < item.end <= len(data)
        covered += item.end - item.offset
    if scan.items:
        assert covered <= len(data) - 8
    for _ in iter_v1_records(data):
        pass
    inflate_bounded(data)


@FAST
@given(data=st.binary(max_size=4096))
def test_any_bytes_scan_without_exception(data):
    _scan_any(b"SPEC\x00\x00\x00\x02" + data)
    _scan_any(data)


@FAST
@given(base=st.just(make_chunk(range(1, 20))), edits=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)),
                                                               max_size=8))
def test_random_overwrites_of_a_real_chunk(base, edits):
    data = bytearray(base)
    for off, val in edits:
        if off < len(data):
            data[off] = val
    _scan_any(bytes(data))


@pytest.mark.slow
@SLOW
@given(data=st.binary(max_size=20000))
def test_any_bytes_scan_without_exception_long(data):
    _scan_any(b"SPEC\x00\x00\x00\x02" + data)


files = st.dictionaries(
    st.sampled_from(["wal-000000.bin", "wal-000001.bin", "wal-2.bin", "wal-000010.bin", "junk", "x.tmp"]),
    st.one_of(st.binary(max_size=600), st.builds(lambda d: b"SPEC\x00\x00\x00\x02" + d, st.binary(max_size=600)),
              st.just(b""), st.just(make_chunk(range(1, 4)))),
    max_size=5,
)


@FAST
@given(contents=files)
def test_directories_of_junk_give_a_documented_exit_code(contents, tmp_path_factory):
    d = tmp_path_factory.mktemp("junk")
    for name, data in contents.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    report = verify_path(str(d))
    assert report.exit_code in DOCUMENTED_CODES
    assert report.findings or report.exit_code == 0
    for f in report.findings:
        assert f.reason and "\n" not in f.reason


@FAST
@given(payload=st.binary(max_size=2000))
def test_inflate_bounded_round_trip_and_truncation(payload):
    z = zlib.compress(payload)
    assert inflate_bounded(z).payload == payload
    for cut in (1, len(z) // 2, len(z) - 1):
        if 0 < cut < len(z):
            assert inflate_bounded(z[:cut]).payload is None


def test_compressed_flag_set_by_threshold_strictly_greater():
    assert compress_payload(b"x" * 512, 512)[1] == 0
    assert compress_payload(b"x" * 513, 512)[1] == FLAG_COMPRESSED
    # compressed even when larger, as Java does
    rnd = os.urandom(600)
    stored, flags = compress_payload(rnd, 512)
    assert flags == FLAG_COMPRESSED and len(stored) > len(rnd)
