"""Issue 15, "Memory stays bounded": compressed payloads are checked in pieces (verify, stats) and large
ones are hexed/written in pieces (inspect --jsonl, replay), with the same bytes and accounting as before.
The peak itself is measured by benchmarks/memory_peak.py; one subprocess test guards it coarsely."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import msgpack
import pytest

from conftest import make_chunk, write_dir
from walctl.format import events as ev
from walctl.format.v2 import (
    FLAG_COMPRESSED, INFLATE_PIECE_BYTES, encode_file_header, encode_record, inflate_bounded, inflate_cap,
    inflate_check,
)

TS = 1795300000000


def bomb(inflated: int, fill: bytes = b"\0") -> tuple[bytes, bytes]:
    """(decoded payload, its zlib stream)."""
    payload = (fill * (inflated // len(fill) + 1))[:inflated]
    return payload, zlib.compress(payload, 9)


def chunk_of(*stored_payloads) -> bytes:
    out = bytearray(encode_file_header())
    for i, (stored, flags) in enumerate(stored_payloads, 1):
        out += encode_record(i, 0, b"m%d" % i, TS + i, stored, flags)
    return bytes(out)


@pytest.mark.parametrize("size", [0, 1, INFLATE_PIECE_BYTES - 1, INFLATE_PIECE_BYTES, INFLATE_PIECE_BYTES + 1,
                                  3 * INFLATE_PIECE_BYTES + 17])
def test_inflate_in_pieces_gives_the_same_bytes_and_length_at_every_piece_boundary(size):
    payload, z = bomb(size, b"abc\0")
    check = inflate_check(z)
    full = inflate_bounded(z)
    assert (check.length, check.error, check.trailing) == (size, None, 0)
    assert bytes(full.payload) == payload and full.trailing == 0
    tail = inflate_check(z + b"xyz")  # bytes after the stream: an anomaly, counted, not damage
    assert (tail.length, tail.trailing) == (size, 3) and inflate_bounded(z + b"xyz").trailing == 3


@pytest.mark.parametrize("cut", [2, 100, -5])
def test_a_truncated_large_stream_is_undecodable_in_pieces_too(cut):
    _, z = bomb(2 * INFLATE_PIECE_BYTES + 5, b"xy")
    bad = z[:cut]
    assert inflate_check(bad).length is None and inflate_bounded(bad).payload is None
    assert inflate_check(bad).error == inflate_bounded(bad).error


def test_the_ratio_cap_is_enforced_piece_by_piece(monkeypatch):
    from walctl.format import v2

    payload, z = bomb(3 * INFLATE_PIECE_BYTES)
    assert inflate_check(z).length == len(payload)
    monkeypatch.setattr(v2, "INFLATE_RATIO_CAP", 1000)  # below this stream's real ratio (~1030x)
    cap = inflate_cap(len(z))
    assert cap < len(payload)
    for res in (inflate_check(z), inflate_bounded(z)):
        assert res[0] is None and f"inflates beyond {cap} bytes" in res.error


def test_verify_and_stats_account_a_large_compressed_payload_by_its_decoded_length(cli, tmp_path):
    payload, z = bomb(9 << 20, b"0123456789")
    d = write_dir(tmp_path / "w", {1: chunk_of((z, FLAG_COMPRESSED), (b"plain", 0))})
    r = cli("verify", d, "--json")
    assert r.code == 0 and r.json()["paths"][0]["summary"]["records"] == 2
    r = cli("stats", d, "--json")
    assert r.code == 0
    doc = r.json()
    assert doc["compression"]["stored_bytes"] == len(z) and doc["compression"]["payload_bytes"] == 9 << 20
    t = doc["types"][0]
    assert (t["records"], t["compressed_records"]) == (2, 1)
    assert t["payload_bytes"] == (9 << 20) + 5 and t["stored_bytes"] == len(z) + 5


def test_undecodable_large_payload_is_still_corruption_at_its_offset(cli, tmp_path):
    _, z = bomb(9 << 20, b"ab")
    bad = z[:len(z) // 2]  # CRC-valid (written so), but the stream stops half-way
    d = write_dir(tmp_path / "w", {1: chunk_of((b"ok", 0), (bad, FLAG_COMPRESSED), (b"after", 0))})
    r = cli("verify", d, "--json")
    assert r.code == 3
    [f] = r.json()["paths"][0]["findings"]
    assert f["class"] == "undecodable-payload" and f["offset"] == 8 + 48 and "truncated" in f["reason"]


def test_inspect_jsonl_streams_a_large_payload_as_the_same_line(cli, tmp_path):
    payload, z = bomb(ev.STREAM_HEX_BYTES * 3 + 11, b"\x01\xfe")
    d = write_dir(tmp_path / "w", {1: chunk_of((b"small", 0), (z, FLAG_COMPRESSED), (b"tail", 0))})
    r = cli("inspect", d, "--jsonl")
    assert r.code == 0
    lines = r.out.splitlines()
    assert len(lines) == 3
    objs = [json.loads(x) for x in lines]
    assert [o["sequence"] for o in objs] == [1, 2, 3]
    assert bytes.fromhex(objs[1]["payload_hex"]) == payload and objs[1]["compressed"] is True
    assert objs[1]["stored_len"] == len(z) and objs[1]["memory_id"] == "m2"
    assert objs[0]["payload_hex"] == b"small".hex() and objs[2]["payload_hex"] == b"tail".hex()
    r = cli("inspect", d)  # the table renders a prefix of it, cut with the payload's whole size
    assert r.code == 0 and f"…({len(payload)} B)" in r.out


@pytest.mark.parametrize("form", ["--jsonl", "--msgpack"])
def test_replay_streams_a_large_payload_byte_for_byte_as_the_small_path_would(cli, tmp_path, form):
    payload, z = bomb(ev.STREAM_HEX_BYTES + 4097, b"\x07xyz")
    d = write_dir(tmp_path / "w", {1: chunk_of((b"a", 0), (z, FLAG_COMPRESSED), (b"c", 0))})
    out = tmp_path / "out"
    r = cli("replay", form, d, "--out", out)
    assert r.code == 0
    data = out.read_bytes()
    events = [ev.Event(1, 0, b"m1", TS + 1, b"a"), ev.Event(2, 0, b"m2", TS + 2, payload),
              ev.Event(3, 0, b"m3", TS + 3, b"c")]
    if form == "--msgpack":
        assert data == b"".join(ev.encode_msgpack(e) for e in events)
        assert list(msgpack.Unpacker(__import__("io").BytesIO(data)))[1]["payload"] == payload
    else:
        objs = [json.loads(x) for x in data.splitlines()]
        assert [bytes.fromhex(o["payload_hex"]) for o in objs] == [b"a", payload, b"c"]


def test_expand_pieces_leaves_plain_lists_alone_and_splits_around_large_ones():
    plain = [b"a", b"b"]
    assert list(ev.expand_pieces(plain)) == [plain]
    big = ev.HexLine(b"<", b"\x01\x02", b">")
    got = [[bytes(p) for p in batch] for batch in ev.expand_pieces([b"x", big, b"y", b"z"])]
    assert got == [[b"x"], [b"<"], [b"0102"], [b">"], [b"y", b"z"]]


def _peak_mib(args, cwd) -> float:
    # VmHWM, the peak of this process's own memory since its exec: ru_maxrss would also count the pages
    # of the (large) pytest process it was forked from, which Linux carries across exec.
    code = ("import resource, sys; from walctl.cli import run; sys.stdout = open('/dev/null', 'w'); "
            f"c = run({args!r}); "
            "hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')]; "
            "print(hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this tree's walctl
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=120, env=env)
    return int(p.stderr.strip().splitlines()[-1]) / 1024


def test_peak_memory_of_verify_stats_and_inspect_on_a_payload_bomb(tmp_path):
    """A 64 MiB bomb: verify and stats stay near the baseline (they held it whole, and more, before);
    inspect --jsonl holds the payload once, not its hex twice over. Coarse margins: robust, yet each
    bound fails for the old behaviour (verify +64 MiB, inspect --jsonl ~+450 MiB)."""
    _, z = bomb(64 << 20)
    small = write_dir(tmp_path / "small", {1: make_chunk([1])})
    big = write_dir(tmp_path / "big", {1: chunk_of((z, FLAG_COMPRESSED))})
    for cmd, allowance in (("verify", 40), ("stats", 40)):
        base, peak = _peak_mib([cmd, small], tmp_path), _peak_mib([cmd, big], tmp_path)
        assert peak < base + allowance, (cmd, base, peak)
    base, peak = _peak_mib(["inspect", "--jsonl", small], tmp_path), _peak_mib(["inspect", "--jsonl", big], tmp_path)
    assert peak < base + 64 + 60, (base, peak)
    assert os.path.getsize(os.path.join(big, "wal-000001.bin")) < 1 << 20
