"""Spector checkpoint.meta: round trip, and every way it can be wrong means HWM 0, never a large HWM."""
from __future__ import annotations

import pytest

from walctl.format.ckptmeta import CHECKPOINT_META, decode_checkpoint_meta, encode_checkpoint_meta


def test_round_trip():
    data = encode_checkpoint_meta(123456789)
    assert data == b"CKPT" + b"\x00\x00\x00\x01" + (123456789).to_bytes(8, "big")
    assert decode_checkpoint_meta(data) == (123456789, True, None)


@pytest.mark.parametrize("data, why", [
    (b"", "0 bytes"),
    (encode_checkpoint_meta(5)[:15], "15 bytes"),
    (encode_checkpoint_meta(5) + b"\x00", "17 bytes"),
    (b"CKPX" + encode_checkpoint_meta(5)[4:], "magic"),
    (CHECKPOINT_META.pack(0x434B5054, 2, 5), "version 2"),
    (CHECKPOINT_META.pack(0x434B5054, 1, -1), "negative"),
])
def test_invalid_means_hwm_zero(data, why):
    meta = decode_checkpoint_meta(data)
    assert meta.hwm == 0 and not meta.valid and why in meta.problem


def test_encode_refuses_negative():
    with pytest.raises(ValueError):
        encode_checkpoint_meta(-1)
