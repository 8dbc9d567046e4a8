"""Canonical msgpack: one byte string per value, so that hashes of equal values are equal. Pure.

Canonical = str keys only, sorted by their UTF-8 bytes at every level; str as str and bytes as bin
(use_bin_type); integers and every header in their shortest form (msgpack-python already packs them so);
floats as float64; no ext types. A JSON and a msgpack copy of one entry therefore hash alike.
"""
from __future__ import annotations

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
        # they are when no element needs rewriting.
        if any(type(x) in _CONTAINERS for x in value):
            return [canonicalize(x) for x in value]
        return value
    if t in _SCALARS:
        return value
    if isinstance(value, (bool, int, float, str, bytes)):  # subclasses (IntEnum, str subclasses ...)
        return value
    raise NotCanonical(f"{t.__name__} has no canonical msgpack form")


_CONTAINERS = (dict, list, tuple)
_SCALARS = (str, int, float, bool, bytes, type(None))


def packb(value) -> bytes:
    import msgpack

    return msgpack.packb(canonicalize(value), use_bin_type=True, use_single_float=False, strict_types=False,
                         datetime=False)


def unpackb(data):
    """Exactly one msgpack value, nothing after it (raises ValueError otherwise). msgpack bounds every
    container and string by the input's length, so a lying header cannot make it allocate more."""
    import msgpack

    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except msgpack.ExtraData:
        raise ValueError("bytes follow the msgpack value") from None
    except Exception as e:  # msgpack raises several unrelated types for bad input
        raise ValueError(f"not msgpack: {type(e).__name__}: {e}") from None


def entry_checksum(entry: dict) -> str:
    """ADR-003: lowercase hex SHA-256 of the canonical msgpack of the entry without its checksum."""
    return hashlib.sha256(packb({k: v for k, v in entry.items() if k != "checksum"})).hexdigest()
