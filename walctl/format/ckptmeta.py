"""Spector `checkpoint.meta`: 16 bytes naming the highest WAL sequence a checkpoint materialised. Pure.

A missing file means HWM 0. A file of the wrong length, magic or version is invalid and means
"replay everything" (HWM 0), never a large HWM: trusting a damaged HWM would let compaction delete
records no checkpoint holds.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

CHECKPOINT_META = struct.Struct(">IIq")  # magic, version, hwm
assert CHECKPOINT_META.size == 16
CHECKPOINT_META_MAGIC = 0x434B5054  # "CKPT"
CHECKPOINT_META_VERSION = 1


class CheckpointMeta(NamedTuple):
    hwm: int  # 0 when invalid
    valid: bool
    problem: str | None


def encode_checkpoint_meta(hwm: int) -> bytes:
    if hwm < 0:
        raise ValueError("a high-water mark is >= 0")
    return CHECKPOINT_META.pack(CHECKPOINT_META_MAGIC, CHECKPOINT_META_VERSION, hwm)


def decode_checkpoint_meta(data: bytes) -> CheckpointMeta:
    if len(data) != CHECKPOINT_META.size:
        return CheckpointMeta(0, False, f"checkpoint.meta is {len(data)} bytes, expected 16")
    magic, version, hwm = CHECKPOINT_META.unpack(data)
    if magic != CHECKPOINT_META_MAGIC:
        return CheckpointMeta(0, False, f"checkpoint.meta magic 0x{magic:08x}, expected 0x{CHECKPOINT_META_MAGIC:08x}")
    if version != CHECKPOINT_META_VERSION:
        return CheckpointMeta(0, False, f"checkpoint.meta version {version}, expected {CHECKPOINT_META_VERSION}")
    if hwm < 0:
        return CheckpointMeta(0, False, f"checkpoint.meta HWM {hwm} is negative")
    return CheckpointMeta(hwm, True, None)
