"""The one validity definition (format/record.py) and the scanner's inlined hot loop agree; callers see
named fields; the scan's value types are frozen."""
from __future__ import annotations

import dataclasses
import json
import pickle
import zlib

import pytest
from hypothesis import given, settings, strategies as st

from walctl.format import record as R
from walctl.format import scan as S
from walctl.format.v2 import ALIGNMENT, FILE_HEADER, RecordHeader, encode_file_header, encode_record


def reference_walk(buf: bytes) -> tuple[list[int], list[tuple[int, str]]]:
    """Intact record starts and (offset, failed field) of each damage start, found with check_record
    alone: the slow, obviously right walk the scanner must agree with."""
    starts, bad = [], []
    off, end = FILE_HEADER.size, len(buf)
    while off < end:
        h = R.check_record(buf, off, end)
        if type(h) is RecordHeader:
            starts.append(off)
            off += R.record_size(h)
            continue
        bad.append((off, h.field))
        nxt = next((o for o in range(off + ALIGNMENT - off % ALIGNMENT, end, ALIGNMENT)
                    if type(R.check_record(buf, o, end)) is RecordHeader), None)
        if nxt is None:
            break
        off = nxt
    return starts, bad


def scanner_walk(buf: bytes) -> tuple[list[int], list[tuple[int, str]]]:
    starts: list[int] = []
    scan = S.scan_chunk(buf, lambda b, off, h, p, q, nxt, payload: starts.append(off))
    bad = []
    for d in scan.damage:
        if d.kind == S.UNDECODABLE:
            starts.append(d.offset)  # intact by the CRCs; only its inflation failed
        else:
            bad.append((d.offset, d.field))
    return sorted(starts), bad


def chunk(n: int, seed: int) -> bytes:
    out = [encode_file_header()]
    for i in range(n):
        payload = bytes((seed + i + j) & 0xFF for j in range((seed * 7 + i * 13) % 61))
        out.append(encode_record(i + 1, (seed + i) % 16, b"m%d" % i, 1000 + i, payload))
    return b"".join(out)


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 8), seed=st.integers(0, 255),
       flips=st.lists(st.tuples(st.integers(0, 4000), st.integers(1, 255)), max_size=4),
       cut=st.integers(0, 4000), zeros=st.integers(0, 80))
def test_hot_loop_agrees_with_the_definition(n, seed, flips, cut, zeros):
    buf = bytearray(chunk(n, seed))
    for pos, mask in flips:
        if FILE_HEADER.size <= pos < len(buf):
            buf[pos] ^= mask
    buf = bytes(buf[:max(FILE_HEADER.size, len(buf) - cut % 97)]) + bytes(zeros)
    assert scanner_walk(buf) == reference_walk(buf)


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=600))
def test_random_bytes_agree(body):
    buf = encode_file_header() + body
    assert scanner_walk(buf) == reference_walk(buf)


def test_each_failed_check_is_named():
    rec = encode_record(7, 1, b"id", 5, b"payload!")
    buf = encode_file_header() + rec
    h = R.check_record(buf, 8, len(buf))
    assert type(h) is RecordHeader and h.sequence == 7 and h.type_ordinal == 1 and h[R.SEQUENCE] == 7
    assert R.record_size(h) == len(rec) and R.payload_span(h, 8) == (8 + 40 + 2, 8 + 40 + 2 + 8)
    assert R.check_record(buf, 8, 8 + 39) == R.Invalid(R.FIELD_LENGTH)
    bad_magic = bytearray(buf)
    bad_magic[8] ^= 1
    assert R.check_record(bytes(bad_magic), 8, len(buf)) == R.Invalid(R.FIELD_RECORD_MAGIC, 0x5641, 0x5741)
    bad_hcrc = bytearray(buf)
    bad_hcrc[8 + 20] ^= 1
    got = R.check_record(bytes(bad_hcrc), 8, len(buf))
    assert got.field == R.FIELD_HEADER_CRC and got.stored == h.header_crc
    assert got.computed == zlib.crc32(bytes(bad_hcrc[8:44]))
    assert R.check_record(buf, 8, len(buf) - 8) == R.Invalid(R.FIELD_LENGTH, sequence=7, record_end=len(buf))
    bad_pcrc = bytearray(buf)
    bad_pcrc[-9] ^= 1  # last payload byte (8 payload + 2 id = 10, padded by 6)
    got = R.check_record(bytes(bad_pcrc), 8, len(buf))
    assert got == R.Invalid(R.FIELD_PAYLOAD_CRC, h.payload_crc, zlib.crc32(bytes(bad_pcrc[50:58])), 7)
    # The scanner's damage derives from the same definition.
    d = S.describe_invalid(bytes(bad_pcrc), 8, len(buf))
    assert (d.kind, d.field, d.stored, d.computed, d.sequence, d.reason) == (
        S.TAIL, "payload-crc", got.stored, got.computed, 7, "payload CRC mismatch")
    assert S.check_intact(buf, 8, len(buf)) == h and S.check_intact(bytes(bad_pcrc), 8, len(buf)) is None


def test_scan_values_are_frozen_and_pickle():
    buf = bytearray(chunk(5, 3))
    starts = reference_walk(bytes(buf))[0]
    buf[starts[1] + 20] ^= 1  # the second record's timestamp: its header CRC fails
    scan = S.scan_chunk(bytes(buf))
    assert [type(i).__name__ for i in scan.items] == ["Run", "Damage", "Run"]
    run, dmg, _ = scan.items
    assert (run.first_seq, run.last_seq, run.count, run.offset, run.end) == (1, 1, 1, 8, starts[1])
    assert (dmg.kind, dmg.field, dmg.offset, dmg.end, dmg.resync_sequence) == (
        S.MID_LOG, "header-crc", starts[1], starts[2], 3)
    assert (scan.records, scan.valid_bytes) == (4, len(buf) - 8 - (starts[2] - starts[1]))
    for value in (scan, run, dmg):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[1].name, 0)
        assert dataclasses.astuple(pickle.loads(pickle.dumps(value))) == dataclasses.astuple(value)
    assert not hasattr(dmg, "__dict__")
    # The enum keeps the string values the JSON shows.
    assert json.dumps([dmg.kind, S.ZERO_FILL]) == '["mid-log", "zero-fill"]' and f"{dmg.kind}" == "mid-log"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 300), min_size=2, max_size=12), st.data())
def test_scanning_from_a_record_boundary_finds_what_the_whole_scan_finds_there(sizes, data):
    """follow scans the pending part of a chunk with the real 8 bytes before it (scan.scan_records): from
    any record boundary it must see the same records and damage as verify's whole-chunk scan."""
    from tests.conftest import make_record

    recs = [make_record(i + 1, payload=bytes([i]) * n) for i, n in enumerate(sizes)]
    chunk = bytearray(encode_file_header() + b"".join(recs))
    if data.draw(st.booleans(), label="damage"):
        pos = data.draw(st.integers(FILE_HEADER.size, len(chunk) - 1), label="flip")
        chunk[pos] ^= 0x40
    if data.draw(st.booleans(), label="cut"):
        del chunk[data.draw(st.integers(FILE_HEADER.size + 1, len(chunk)), label="cut at"):]
    chunk = bytes(chunk)
    whole: list[int] = []
    full = S.scan_chunk(chunk, lambda b, off, h, p, q, nxt, payload: whole.append(off))
    bounds = [FILE_HEADER.size] + [o for o in whole]
    start = data.draw(st.sampled_from(bounds), label="start")
    seen: list[int] = []
    items = S.scan_records(chunk, start, lambda b, off, h, p, q, nxt, payload: seen.append(off))
    assert seen == [o for o in whole if o >= start]
    damage = [(d.kind, d.offset, d.end, d.field) for d in full.items if type(d) is S.Damage and d.offset >= start]
    assert [(d.kind, d.offset, d.end, d.field) for d in items if type(d) is S.Damage] == damage
    assert sum(r.count for r in items if type(r) is S.Run) == len(seen)


def test_scan_records_refuses_a_start_without_the_bytes_before_it():
    with pytest.raises(ValueError):
        S.scan_records(encode_file_header(), 4)
