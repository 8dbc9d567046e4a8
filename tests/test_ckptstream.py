"""The one-pass path of restore and recover (format/ckptstream.py: hash and inflate in a thread, decode as
the pieces arrive) judges every large body exactly as the whole-body path of verify does: same step,
same class, same state."""
from __future__ import annotations

import hashlib
import random
import uuid

import msgpack
import pytest
import zstandard

from walctl.format import checkpoint as ck
from walctl.format.canonical import packb

CID = uuid.UUID("3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77")
BLOB = random.Random(5).randbytes(ck.OVERLAP_BYTES + 300_000)  # incompressible: bodies above 1 MiB
STATE = {"agent_state": {"k": "v"}, "memory_blocks": [{"content": "x" * 50, "sequence": i} for i in range(3000)],
         "blob": BLOB, "wal_sequence": 10}


def file_of(raw: bytes, *, frame: bytes | None = None, size: int | None = None) -> bytes:
    body = frame if frame is not None else \
        zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(raw)
    head = ck.encode_header(checkpoint_id=CID.bytes, timestamp=1, wal_sequence=10, compressed_size=len(body),
                            uncompressed_size=len(raw) if size is None else size,
                            body_sha256=hashlib.sha256(body).digest())
    return head + body


def both(data: bytes):
    whole = ck.check_file(data, str(CID), check_canonical=True)
    streamed = ck.check_file(data, str(CID), check_canonical=False)
    return whole, streamed


def outcome(c):
    return None if c.failure is None else (c.failure.step, c.failure.cls)


def test_a_good_large_body_decodes_to_the_same_state():
    whole, streamed = both(file_of(packb(STATE)))
    assert whole.ok and streamed.ok and streamed.state == whole.state == STATE
    assert streamed.anomalies == whole.anomalies == ()


def _flip(data: bytes, pos: int) -> bytes:
    out = bytearray(data)
    out[pos] ^= 0x40
    return bytes(out)


def _resealed(data: bytes) -> bytes:
    """The body's SHA-256 (and so the header's own) recomputed over damaged bytes."""
    h = ck.decode_header(data)
    body = data[256:]
    return file_of(b"", frame=body, size=h.uncompressed_size)


good_raw = packb(STATE)
CASES = {
    "trailing msgpack byte": lambda: file_of(good_raw + b"\xc0"),
    "not a map": lambda: file_of(packb([BLOB])),
    "sequence differs": lambda: file_of(packb(dict(STATE, wal_sequence=11))),
    "cut msgpack value": lambda: file_of(good_raw[:-1]),
    "invalid msgpack byte": lambda: file_of(b"\xc1" + good_raw[1:]),
    "two frames": lambda: file_of(good_raw, frame=zstandard.ZstdCompressor(write_content_size=True,
                                                                            write_checksum=True).compress(good_raw) * 2,
                                  size=len(good_raw)),
    "body bit flip": lambda: _flip(file_of(good_raw), 256 + 700_000),
    "body bit flip, resealed": lambda: _resealed(_flip(file_of(good_raw), 256 + 700_000)),
    "frame checksum flipped, resealed": lambda: _resealed(_flip(file_of(good_raw), len(file_of(good_raw)) - 1)),
    "size below the frame's": lambda: file_of(good_raw, size=len(good_raw) - 1),
    "no content size": lambda: file_of(good_raw, frame=zstandard.ZstdCompressor(
        write_content_size=False, write_checksum=True).compress(good_raw)),
    "bytes key": lambda: file_of(msgpack.packb({b"k": BLOB, "wal_sequence": 10}, use_bin_type=True)),
}


EXPECTED = {"trailing msgpack byte": (10, "corrupt"), "not a map": (10, "corrupt"), "sequence differs": (11, "corrupt"),
            "cut msgpack value": (10, "corrupt"), "invalid msgpack byte": (10, "corrupt"), "two frames": (9, "corrupt"),
            "body bit flip": (8, "corrupt"), "body bit flip, resealed": (9, "corrupt"),
            "frame checksum flipped, resealed": (9, "corrupt"), "size below the frame's": (9, "corrupt"),
            "no content size": None, "bytes key": (10, "corrupt")}


@pytest.mark.parametrize("name", sorted(CASES))
def test_damage_is_judged_at_the_same_step_by_both_paths(name):
    data = CASES[name]()
    assert len(data) - 256 >= ck.OVERLAP_BYTES
    whole, streamed = both(data)
    assert outcome(streamed) == outcome(whole) == EXPECTED[name], (whole.failure, streamed.failure)
    assert (streamed.state is None) == (whole.state is None)
    if whole.state is not None:
        assert streamed.state == whole.state
    assert set(streamed.anomalies) <= set(whole.anomalies)  # (only the whole path checks canonical form)
