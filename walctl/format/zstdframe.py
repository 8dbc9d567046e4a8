"""Where a zstd frame ends, from its block headers alone (RFC 8878 sections 3.1.1-3.1.1.2). Pure.

The decompressor stops at the end of the first frame and says nothing about what follows; a checkpoint
body must be exactly one frame, so walctl walks the block headers to find the frame's length.
"""
from __future__ import annotations

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_DID_SIZE = (0, 1, 2, 4)
_FCS_SIZE = (0, 2, 4, 8)  # by Frame_Content_Size_Flag; 0 means 1 byte when Single_Segment is set


def frame_length(buf) -> int | None:
    """The byte length of the zstd frame at the start of buf, or None when it is not a whole frame."""
    n = len(buf)
    if n < 6 or bytes(buf[:4]) != ZSTD_MAGIC:
        return None
    fhd = buf[4]
    single_segment = (fhd >> 5) & 1
    checksum = (fhd >> 2) & 1
    fcs = _FCS_SIZE[fhd >> 6] or (1 if single_segment else 0)
    pos = 5 + (0 if single_segment else 1) + _DID_SIZE[fhd & 3] + fcs
    while True:
        if pos + 3 > n:
            return None
        header = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
        last, block_type, size = header & 1, (header >> 1) & 3, header >> 3
        if block_type == 3:  # reserved
            return None
        pos += 3 + (1 if block_type == 1 else size)  # an RLE block stores one byte
        if pos > n:
            return None
        if last:
            break
    pos += 4 if checksum else 0
    return pos if pos <= n else None
