"""Canonical msgpack (ormsgpack on the hot path) against the definition, and the zstd frame walker."""
from __future__ import annotations

import datetime
import enum
import os
import uuid

import pytest
import zstandard
from hypothesis import given, settings, strategies as st

from walctl.format.canonical import NotCanonical, packb, reference_packb
from walctl.format.zstdframe import frame_length

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 64 - 1),
                    st.floats(allow_nan=False), st.text(max_size=20), st.binary(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=5)),
                      max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(v=values)
def test_fast_packer_gives_exactly_the_reference_bytes(v):
    assert packb(v) == reference_packb(v)


class Colour(enum.Enum):
    RED = 1


@pytest.mark.parametrize("bad", [{1: "x"}, {"s": {1, 2}}, {"d": datetime.datetime(2026, 1, 1)}, {"u": uuid.uuid4()},
                                 {"e": Colour.RED}, {"big": 2 ** 64}, object()])
def test_values_without_a_canonical_form_are_refused(bad):
    with pytest.raises(NotCanonical):
        packb(bad)


@pytest.mark.parametrize("data, kw", [
    (b"", {}), (b"a" * 100, {}), (os.urandom(300_000), {}), (bytes(1 << 20), {}),
    (b"abc" * 50_000, {"write_checksum": False}), (b"xyz" * 1000, {"write_content_size": False}),
])
def test_frame_length_matches_the_real_frame(data, kw):
    frame = zstandard.ZstdCompressor(level=3, **kw).compress(data)
    assert frame_length(frame) == len(frame)
    assert frame_length(frame + frame) == len(frame)  # what follows is the caller's business
    assert frame_length(frame + b"junk") == len(frame)
    for cut in (0, 5, len(frame) // 2, len(frame) - 1):
        assert frame_length(frame[:cut]) is None
    assert frame_length(b"not a frame at all") is None


@pytest.mark.parametrize("enabled_before", [True, False])
def test_a_large_decode_leaves_the_collector_as_it_found_it_and_its_tree_collectable(enabled_before):
    import gc
    import weakref

    from walctl.format.canonical import GC_PAUSE_BYTES, unpackb

    value = {"blocks": [{"text": "t" * 100, "embedding": [i / 7 for i in range(64)]} for i in range(3000)]}
    data = packb(value)
    assert len(data) >= GC_PAUSE_BYTES
    (gc.enable if enabled_before else gc.disable)()
    try:
        decoded = unpackb(data)
        assert gc.isenabled() is enabled_before
        with pytest.raises(ValueError, match="bytes follow"):
            unpackb(data + b"\xc0")
        assert gc.isenabled() is enabled_before
    finally:
        gc.enable()
    assert decoded == value
    # filed under the oldest generation, not frozen: a cycle made of it is still found and freed
    class Holder:
        pass

    h = Holder()
    h.tree, decoded["self"] = decoded, h
    ref = weakref.ref(h)
    del h, decoded
    gc.collect()
    assert ref() is None
