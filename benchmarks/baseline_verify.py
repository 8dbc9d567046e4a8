"""The baseline of the verify goals: the tightest plain-Python verify loop (mmap each chunk, one struct
unpack and two zlib.crc32 per record, nothing else). Same as shared/tools/baseline_verify.py.
Usage: baseline_verify.py DIR [K N]  (with K N: only chunks whose position % N == K)"""
import mmap
import os
import struct
import sys
import zlib

H = struct.Struct(">HBBBHBqqiIII")
names = sorted(f for f in os.listdir(sys.argv[1]) if f.endswith(".bin"))
if len(sys.argv) == 4:
    k, n = int(sys.argv[2]), int(sys.argv[3])
    names = names[k::n]
count = 0
for name in names:
    with open(os.path.join(sys.argv[1], name), "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    mv = memoryview(mm)
    off = 8
    end = len(mm)
    crc = zlib.crc32
    unpack = H.unpack_from
    while off + 40 <= end:
        magic, ver, flags, typ, idlen, _, seq, ts, plen, pcrc, _, hcrc = unpack(mm, off)
        if magic != 0x5741 or crc(mv[off:off + 36]) != hcrc:
            raise SystemExit(f"bad header at {name}:{off}")
        p = off + 40 + idlen
        if crc(mv[p:p + plen]) != pcrc:
            raise SystemExit(f"bad payload at {name}:{off}")
        off = p + plen + (-(idlen + plen) % 8)
        count += 1
    mv.release()
    mm.close()
print(count)
