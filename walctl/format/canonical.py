"""Canonical msgpack: one byte string per value, so that hashes of equal values are equal. Pure.

Canonical = str keys only, sorted by their UTF-8 bytes at every level; str as str and bytes as bin
(use_bin_type); integers and every header in their shortest form (msgpack-python already packs them so);
floats as float64; no ext types. A JSON and a msgpack copy of one entry therefore hash alike.
"""
from __future__ import annotations

import gc
import hashlib


class NotCanonical(ValueError):
    pass


def _key(k: str) -> bytes:
    return k.encode("utf-8", "surrogatepass")


def canonicalize(value):
    """The value with every map's keys sorted; raises NotCanonical for what has no canonical form."""
    t = type(value)
    if t is dict:
        for k in value:
            if type(k) is not str:
                raise NotCanonical(f"map key {k!r} is not a string")
        return {k: canonicalize(value[k]) for k in sorted(value, key=_key)}
    if t is list or t is tuple:
        # Lists of scalars (text, numbers, embedding vectors) are the bulk of real state: keep them as
        # they are when no element needs rewriting (set(map(type, ...)) looks at them at C speed).
        kinds = set(map(type, value))
        if kinds & _CONTAINER_SET or not kinds <= _SCALAR_SET:
            return [canonicalize(x) for x in value]
        return value
    if t in _SCALARS:
        return value
    if isinstance(value, (bool, int, float, str, bytes)):  # subclasses (IntEnum, str subclasses ...)
        return value
    raise NotCanonical(f"{t.__name__} has no canonical msgpack form")


_CONTAINERS = (dict, list, tuple)
_SCALARS = (str, int, float, bool, bytes, type(None))
_CONTAINER_SET = frozenset(_CONTAINERS)
_SCALAR_SET = frozenset(_SCALARS)


def packb(value) -> bytes:
    """Canonical msgpack bytes. ormsgpack sorts keys and packs in one compiled pass (~6x faster than
    canonicalize + msgpack here, the same bytes: tests/test_canonical.py checks it against that slower
    reference); every type it would otherwise convert (datetime, UUID, enum, dataclass, subclasses) is
    routed to _reject instead, so nothing without a canonical form slips through."""
    if not _FAST:
        _load_fast()
    try:
        return _FAST[0](value, option=_FAST[1], default=_reject)
    except (TypeError, _FAST[2]) as e:
        raise NotCanonical(str(e)) from None


def reference_packb(value) -> bytes:
    """The same bytes by the definition: sort every map, then msgpack-python. Slow; the tests' oracle."""
    import msgpack

    return msgpack.packb(canonicalize(value), use_bin_type=True, use_single_float=False, datetime=False)


def _reject(value):
    raise TypeError(f"{type(value).__name__} has no canonical msgpack form")


_FAST: list = []  # (ormsgpack.packb, options, its error type), loaded on first use (start-up stays light)


def _load_fast() -> None:
    import ormsgpack

    options = (ormsgpack.OPT_SORT_KEYS | ormsgpack.OPT_PASSTHROUGH_DATACLASS | ormsgpack.OPT_PASSTHROUGH_DATETIME
               | ormsgpack.OPT_PASSTHROUGH_SUBCLASS | ormsgpack.OPT_PASSTHROUGH_ENUM | ormsgpack.OPT_PASSTHROUGH_UUID)
    _FAST[:] = [ormsgpack.packb, options, ormsgpack.MsgpackEncodeError]


def unpackb(data):
    """Exactly one msgpack value, nothing after it (raises ValueError otherwise). msgpack bounds every
    container and string by the input's length, so a lying header cannot make it allocate more."""
    if _MSGPACK is None:
        _load_msgpack()
    pause_gc = len(data) >= GC_PAUSE_BYTES and gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        value = _MSGPACK.unpackb(data)  # msgpack >= 1.0 defaults: str keys only, str as str, arrays as lists
    except _MSGPACK.ExtraData:
        raise ValueError("bytes follow the msgpack value") from None
    except Exception as e:  # msgpack raises several unrelated types for bad input
        raise ValueError(f"not msgpack: {type(e).__name__}: {e}") from None
    finally:
        if pause_gc:
            gc.enable()
    if pause_gc:
        # A decoded tree holds no garbage, yet the collector would walk all of it: again and again while
        # it grows (gc paused above: 0.38 -> 0.24 s for a 50 MB checkpoint here), then once more at the
        # next young collection (0.15-0.25 s). freeze + unfreeze files it, with everything else alive,
        # straight under the oldest generation.
        gc.freeze()
        gc.unfreeze()
    return value


GC_PAUSE_BYTES = 1 << 20


_MSGPACK = None


def _load_msgpack() -> None:
    global _MSGPACK
    import msgpack

    _MSGPACK = msgpack


def entry_checksum(entry: dict) -> str:
    """ADR-003: lowercase hex SHA-256 of the canonical msgpack of the entry without its checksum."""
    if "checksum" in entry:
        entry = dict(entry)
        del entry["checksum"]
    return hashlib.sha256(packb(entry)).hexdigest()
