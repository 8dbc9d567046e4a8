"""Shared helpers: build chunks with walctl's own encoder, damage them by name, run the CLI in-process."""
from __future__ import annotations

import hashlib
import json
import os
import stat
import zlib

import pytest

from walctl.format.v2 import encode_file_header, encode_record, record_size

DATA = os.path.join(os.path.dirname(__file__), "data")
VECTORS = os.path.join(DATA, "spector-v2")
HEALTHY_CASES = ("basic", "compressed", "rolled", "reopened")
DAMAGED_CASES = ("payload-bitflip-midlog", "torn-tail-mid-payload", "wrong-file-magic")
TS0 = 1795300000000


def make_record(seq: int, payload: bytes = b"payload", memory_id: bytes = b"mem", type_ordinal: int = 0,
                compress: bool = False, **kw) -> bytes:
    stored, flags = (zlib.compress(payload), 1) if compress else (payload, 0)
    return encode_record(seq, type_ordinal, memory_id, TS0 + seq, stored, kw.pop("flags", flags), **kw)


def make_chunk(seqs, payload_for=None, **kw) -> bytes:
    """A chunk holding one record per sequence in `seqs`; payload_for(seq) -> bytes."""
    out = bytearray(encode_file_header())
    for s in seqs:
        out += make_record(s, payload_for(s) if payload_for else b"payload-%d" % s, **kw)
    return bytes(out)


def record_offsets(chunk: bytes) -> list[int]:
    """Offsets of the records of a healthy chunk built by make_chunk."""
    from walctl.format.v2 import RECORD_HEADER

    offs, off = [], 8
    while off < len(chunk):
        h = RECORD_HEADER.unpack_from(chunk, off)
        offs.append(off)
        off += record_size(h[4], h[8])
    return offs


def write_dir(path, chunks: dict) -> str:
    """chunks: {index or name: bytes}."""
    os.makedirs(path, exist_ok=True)
    for key, data in chunks.items():
        name = key if isinstance(key, str) else f"wal-{key:06d}.bin"
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)
    return str(path)


# ---- named damage ---------------------------------------------------------------------------------

def flip_bit(data: bytes, offset: int, bit: int = 0) -> bytes:
    b = bytearray(data)
    b[offset] ^= 1 << bit
    return bytes(b)


def truncate_to(data: bytes, size: int) -> bytes:
    return data[:size]


def zero_fill(data: bytes, n: int) -> bytes:
    return data + bytes(n)


def fix_header_crc(data: bytes, record_offset: int) -> bytes:
    """Recomputes a record's header CRC after a test changed a header field on purpose."""
    b = bytearray(data)
    b[record_offset + 36:record_offset + 40] = zlib.crc32(bytes(b[record_offset:record_offset + 36])).to_bytes(4, "big")
    return bytes(b)


def fix_payload_crc(data: bytes, record_offset: int, payload_start: int, payload_end: int) -> bytes:
    b = bytearray(data)
    b[record_offset + 28:record_offset + 32] = zlib.crc32(bytes(b[payload_start:payload_end])).to_bytes(4, "big")
    return fix_header_crc(bytes(b), record_offset)


def tree_digest(path) -> dict:
    """name -> (type and mode, size, sha256 or link target, mtime_ns) for everything below path, links not
    followed: proves read-only commands wrote nothing, and that nothing outside a target changed."""
    out = {}
    for root, dirs, files in os.walk(path):
        for n in dirs + files:
            full = os.path.join(root, n)
            st = os.lstat(full)
            digest = None
            if stat.S_ISLNK(st.st_mode):
                digest = os.readlink(full)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(full, path)] = (st.st_mode, st.st_size, digest, st.st_mtime_ns)
    return out


def load_expected(case: str) -> dict:
    base = os.path.join(VECTORS, case) if case in HEALTHY_CASES else os.path.join(VECTORS, "damaged", case)
    with open(os.path.join(base, "expected.json")) as f:
        return json.load(f)


def case_dir(case: str) -> str:
    base = os.path.join(VECTORS, case) if case in HEALTHY_CASES else os.path.join(VECTORS, "damaged", case)
    return os.path.join(base, "wal")


class CliResult:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err

    def json(self):
        return json.loads(self.out)

    def jsonl(self):
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


@pytest.fixture
def cli(capsys):
    """Runs walctl in-process and returns exit code, stdout and stderr."""
    from walctl.cli import run

    def invoke(*args) -> CliResult:
        capsys.readouterr()
        code = run([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke
