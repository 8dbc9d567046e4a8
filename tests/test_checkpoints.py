"""O_CKPT_V2: every header byte flipped, the body flipped, truncation, lying sizes, wrong ids, extra frames,
the latest order and its fallbacks, retention, and a crash at every step of writing one."""
from __future__ import annotations

import hashlib
import os
import shutil
import time

import pytest

from simfs import SimCrash, SimFS
from walctl.errors import NotClean
from walctl.format import checkpoint as ck
from walctl.format.canonical import NotCanonical, packb
from walctl.ops.checkpoints import checkpoint as C
from walctl.store import quarantine as q

STATE = {"agent_state": {"mood": "calm", "n": 3}, "conversation_history": [{"role": "user", "content": "hi"}],
         "memory_blocks": [{"content": "x" * 200, "sequence": 1, "timestamp": 5, "embedding": [0.5, -1.25, 3.0]}],
         "metrics": {}, "tool_registry": {"search": {"name": "search"}}}


def make(tmp_path, seq=10, **kw):
    return C.create(str(tmp_path / "ck"), STATE, seq, **kw)


def read(path) -> bytearray:
    with open(path, "rb") as f:
        return bytearray(f.read())


def write(path, data):
    with open(path, "wb") as f:
        f.write(bytes(data))


def reseal(data: bytearray, *, body_too=False) -> bytearray:
    """Recomputes the SHA-256s after a test changed a field on purpose (so a later step is reached)."""
    if body_too:
        data[72:104] = hashlib.sha256(bytes(data[256:])).digest()
    data[224:256] = hashlib.sha256(bytes(data[:224])).digest()
    return data


def step_of(path, **kw):
    rep = C.check_path(path, **kw)
    return (rep.checked.failure.step, rep.checked.failure.cls) if rep.checked.failure else None


def test_create_writes_exactly_the_specified_header_and_canonical_body(tmp_path):
    made = make(tmp_path, 42, timestamp=1795300000, checkpoint_id="12345678-1234-4234-8234-123456789abc")
    assert os.path.basename(made.path) == "12345678-1234-4234-8234-123456789abc.ckpt"
    data = read(made.path)
    h = ck.decode_header(data)
    assert h.magic == b"O_CKPT_V2\0\0\0\0\0\0\0" and (h.format_version, h.header_size) == (2, 256)
    assert (h.compression, h.compression_level, h.body_encoding, h.flags) == (1, 9, 1, 0)
    assert (h.timestamp, h.wal_sequence, h.id_text) == (1795300000, 42, "12345678-1234-4234-8234-123456789abc")
    assert len(data) == 256 + h.compressed_size and h.reserved == bytes(120)
    assert h.body_sha256 == hashlib.sha256(data[256:]).digest()
    assert h.header_sha256 == hashlib.sha256(data[:224]).digest()
    import zstandard

    raw = zstandard.ZstdDecompressor().decompress(bytes(data[256:]))
    assert raw == packb(dict(STATE, wal_sequence=42)) and len(raw) == h.uncompressed_size
    params = zstandard.get_frame_parameters(bytes(data[256:]))
    assert params.has_checksum and params.content_size == len(raw)
    rep = C.check_path(made.path)
    assert rep.exit_code == 0 and rep.checked.state == dict(STATE, wal_sequence=42) and rep.findings == ()


def test_canonical_msgpack_sorts_keys_by_utf8_bytes_and_rejects_what_has_no_form():
    assert packb({"b": 1, "a": {"z": 1, "é": 2, "y": [{"d": 1, "c": 2}]}}) == \
        packb({"a": {"y": [{"c": 2, "d": 1}], "z": 1, "é": 2}, "b": 1})
    assert packb({"k": 1}) == b"\x81\xa1k\x01" and packb(-1) == b"\xff" and packb(300) == b"\xcd\x01\x2c"
    for bad in ({1: "x"}, {"s": {1, 2}}, object()):
        with pytest.raises(NotCanonical):
            packb(bad)


@pytest.mark.parametrize("offset, step, cls", [(o, 2, "unsupported") for o in (0, 8, 15)]
                         + [(o, 3, "unsupported") for o in (16, 17, 18, 19)]
                         + [(o, 4, "corrupt") for o in (20, 21, 22, 23, 24, 31, 32, 47, 48, 55, 56, 63, 64, 71, 72,
                                                        103, 104, 150, 223, 224, 240, 255)])
def test_every_header_field_flipped_is_caught_at_its_step(tmp_path, offset, step, cls):
    made = make(tmp_path)
    data = read(made.path)
    data[offset] ^= 0x01
    write(made.path, data)
    assert step_of(made.path) == (step, cls)


def test_every_single_header_bit_flip_is_caught(tmp_path):
    made = make(tmp_path)
    good = read(made.path)
    for byte in range(256):
        for bit in range(8):
            data = bytearray(good)
            data[byte] ^= 1 << bit
            write(made.path, data)
            assert step_of(made.path) is not None, (byte, bit)


def test_body_flip_truncation_and_trailing_bytes(tmp_path):
    made = make(tmp_path)
    good = read(made.path)
    for pos in (256, 300, len(good) - 1):
        data = bytearray(good)
        data[pos] ^= 0x80
        write(made.path, data)
        assert step_of(made.path) == (8, "corrupt")
    for size in (0, 1, 100, 255):
        write(made.path, good[:size])
        assert step_of(made.path) == (1, "corrupt")
    for size in (256, 257, len(good) - 1):
        write(made.path, good[:size])
        assert step_of(made.path) == (7, "corrupt")
    write(made.path, good + b"\0")
    assert step_of(made.path) == (7, "corrupt")


def test_sizes_claiming_terabytes_are_refused_without_allocating(tmp_path):
    made = make(tmp_path)
    data = read(made.path)
    data[56:64] = (1 << 42).to_bytes(8, "big")  # uncompressed_size 4 TiB, header resealed
    write(made.path, reseal(data))
    rep = C.check_path(made.path)
    assert rep.checked.failure.step == 9 and "above the limit" in rep.checked.failure.reason
    data = read(made.path)
    data[48:56] = (1 << 40).to_bytes(8, "big")  # compressed_size 1 TiB: the file length disagrees
    write(made.path, reseal(data))
    assert step_of(made.path) == (7, "corrupt")


def test_a_lying_uncompressed_size_below_the_real_one_never_inflates_past_it(tmp_path):
    state = dict(STATE, blob="z" * 200_000)
    made = C.create(str(tmp_path / "ck"), state, 1)
    data = read(made.path)
    data[56:64] = (1000).to_bytes(8, "big")
    write(made.path, reseal(data))
    rep = C.check_path(made.path)
    assert rep.checked.failure.step == 9


def test_wrong_uuid_two_frames_extra_msgpack_non_map_and_sequence_mismatch(tmp_path):
    import zstandard

    made = make(tmp_path)
    other = os.path.join(os.path.dirname(made.path), "00000000-0000-4000-8000-000000000000.ckpt")
    shutil.copy(made.path, other)
    assert step_of(other) == (6, "corrupt")
    os.unlink(other)

    def with_body(raw: bytes, frames: int = 1, wal_sequence: int = 10):
        z = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(raw)
        body = z * frames
        head = ck.encode_header(checkpoint_id=bytes.fromhex(os.path.basename(made.path)[:-5].replace("-", "")),
                                timestamp=1, wal_sequence=wal_sequence, compressed_size=len(body),
                                uncompressed_size=len(raw), body_sha256=hashlib.sha256(body).digest())
        write(made.path, head + body)
        return step_of(made.path)

    good = packb(dict(STATE, wal_sequence=10))
    assert with_body(good) is None
    assert with_body(good, frames=2) == (9, "corrupt")
    assert with_body(good + b"\xc0") == (10, "corrupt")
    assert with_body(packb([1, 2, 3])) == (10, "corrupt")
    assert with_body(packb(dict(STATE, wal_sequence=11))) == (11, "corrupt")


def test_non_canonical_body_and_nonzero_reserved_are_anomalies(tmp_path, cli):
    import msgpack
    import zstandard

    made = make(tmp_path)
    raw = msgpack.packb({"wal_sequence": 10, "b": 1, "a": 2})  # keys not sorted
    body = zstandard.ZstdCompressor(write_checksum=True, write_content_size=True).compress(raw)
    cid = bytes.fromhex(os.path.basename(made.path)[:-5].replace("-", ""))
    head = ck.encode_header(checkpoint_id=cid, timestamp=1, wal_sequence=10, compressed_size=len(body),
                            uncompressed_size=len(raw), body_sha256=hashlib.sha256(body).digest(),
                            reserved=b"\x01" + bytes(119))
    write(made.path, head + body)
    rep = C.check_path(made.path)
    assert rep.checked.ok and rep.exit_code == 0
    assert sorted(rep.checked.anomalies) == ["body decodes but is not canonical msgpack",
                                             "reserved header bytes 104..223 are not zero"]
    assert cli("checkpoint", "verify", made.path).code == 0
    assert cli("checkpoint", "verify", "--strict", made.path).code == 3


def test_latest_orders_by_sequence_then_time_then_id_and_falls_back_with_reasons(tmp_path):
    d = str(tmp_path / "ck")
    a = C.create(d, STATE, 10, timestamp=300)
    b = C.create(d, STATE, 20, timestamp=100)  # newer by sequence though older by time
    c = C.create(d, STATE, 20, timestamp=200)
    os.utime(b.path, (1, 1))  # mtime plays no part
    assert [r.file for r in C.list_checkpoints(d).candidates] == [os.path.basename(p) for p in (c.path, b.path, a.path)]
    data = read(c.path)
    data[300] ^= 1
    write(c.path, data)
    data = read(b.path)
    data[0] ^= 1
    write(b.path, data)
    found = C.latest(d)
    assert found.report.file == os.path.basename(a.path)
    assert [(f.file, f.checked.failure.step) for f in found.fallbacks] == [(os.path.basename(c.path), 8)]
    assert [(r.file, r.checked.failure.step) for r in found.rejected] == [(os.path.basename(b.path), 2)]


def test_prune_keeps_newest_two_valid_and_never_invalid(tmp_path, cli):
    d = str(tmp_path / "ck")
    now = time.time()
    old = [C.create(d, STATE, s, timestamp=int(now) - 200_000 + s) for s in (1, 2, 3, 4)]
    broken = C.create(d, STATE, 5, timestamp=int(now) - 300_000)
    data = read(broken.path)
    data[300] ^= 1
    write(broken.path, data)
    plan = C.prune(d, now=now)
    assert [r.header.wal_sequence for r in plan.removals] == [2, 1]
    assert [r.header.wal_sequence for r in plan.kept] == [4, 3]
    assert [r.file for r in plan.left_alone] == [os.path.basename(broken.path)]
    assert len(os.listdir(d)) == 5  # a dry run
    r = cli("checkpoint", "prune", d, "--apply", "--json")
    assert r.code == 0 and len(r.json()["removed"]) == 2
    assert sorted(os.listdir(d)) == sorted([".quarantine", ".walctl.lock", os.path.basename(broken.path)]
                                           + [os.path.basename(o.path) for o in old[2:]])
    with open(os.path.join(d, ".quarantine", "MANIFEST.jsonl")) as f:
        assert f.read().count('"checkpoint-prune"') == 2
    for o in old[:2]:  # moved, not deleted: byte for byte, and still a valid checkpoint there
        kept = os.path.join(d, ".quarantine", os.path.basename(o.path))
        assert hashlib.sha256(read(kept)).hexdigest() == next(
            e["sha256"] for e in r.json()["manifest"] if e["source"] == os.path.basename(o.path))
        assert C.check_path(kept).checked.ok
    assert [c.header.wal_sequence for c in C.list_checkpoints(d, decode=True).candidates if c.checked.ok] == [4, 3]


def test_crash_at_every_step_of_prune_keeps_every_checkpoint_somewhere():
    def fresh():
        fs = SimFS()
        fs.makedirs_durable("/ck")
        for s in (1, 2, 3, 4):
            C.create("/ck", STATE, s, timestamp=1_000 + s, fs=fs,
                     checkpoint_id=f"{s:08d}-1111-4111-8111-111111111111")
        fs.settle()
        return fs

    def files(fs, d):
        return {e.name: fs.read_range(e.path, 0, e.size) for e in fs.listdir(d)
                if e.kind == "file" and e.name.endswith(".ckpt")} if fs.exists(d) else {}

    probe = fresh()
    everything = files(probe, "/ck")
    start = probe.ops
    assert len(C.prune("/ck", max_age_s=10, now=10_000, apply=True, fs=probe).removals) == 2
    steps = probe.ops - start
    for n in range(1, steps + 1):
        fs = fresh()
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            C.prune("/ck", max_age_s=10, now=10_000, apply=True, fs=fs)
        fs.crash()
        left, aside = files(fs, "/ck"), files(fs, "/ck/.quarantine")
        assert set(everything.values()) <= set(left.values()) | set(aside.values()), n
        assert {3, 4} <= {C.check_path(f"/ck/{k}", fs=fs).header.wal_sequence for k in left}, n
        C.prune("/ck", max_age_s=10, now=10_000, apply=True, fs=fs)  # the rerun finishes the job
        assert sorted(files(fs, "/ck/.quarantine").values()) == sorted(
            v for k, v in everything.items() if k.startswith(("00000001", "00000002"))), n
        lines = [e for e in q.read_manifest("/ck", fs)[0] if e["action"] == "checkpoint-prune"]
        assert sorted(e["source"] for e in lines) == sorted(k for k in everything if k.startswith(("00000001", "00000002")))


def test_crash_at_every_step_of_writing_a_checkpoint_leaves_old_or_new():
    def fresh(crash_at=None):
        fs = SimFS(crash_at=crash_at)
        fs.makedirs_durable("/ck")
        C.create("/ck", STATE, 5, fs=fs, checkpoint_id="11111111-1111-4111-8111-111111111111")
        fs.settle()
        return fs

    probe = fresh()
    start = probe.ops
    C.create("/ck", STATE, 9, fs=probe)
    steps = probe.ops - start
    for n in range(1, steps + 1):
        fs = fresh()
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            C.create("/ck", STATE, 9, fs=fs)
        fs.crash()
        listing = C.list_checkpoints("/ck", decode=True, fs=fs)
        assert listing.rejected == ()
        assert all(c.checked.ok for c in listing.candidates), n
        assert [c.header.wal_sequence for c in listing.candidates] in ([5], [9, 5]), n
        assert C.latest("/ck", fs=fs).report.header.wal_sequence in (5, 9)


def test_cli_create_from_state_file_restore_and_inspect(cli, tmp_path):
    import json

    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(STATE))
    d = str(tmp_path / "ck")
    r = cli("checkpoint", "create", d, "--state", str(state_file), "--to", "7", "--json")
    made = r.json()
    assert r.code == 0 and made["wal_sequence"] == 7 and made["ratio"] > 0
    out = tmp_path / "back.json"
    assert cli("checkpoint", "restore", d, "--out", str(out)).code == 0
    assert json.loads(out.read_text()) == dict(STATE, wal_sequence=7)
    assert cli("checkpoint", "restore", d, "--out", str(out)).code == 7  # never overwrites
    doc = cli("checkpoint", "inspect", made["path"], "--json").json()
    assert doc["header"]["wal_sequence"] == 7 and doc["top_level_keys"]["memory_blocks"] == "list of 1"
    lst = cli("checkpoint", "list", d, "--json").json()
    assert [c["header"]["wal_sequence"] for c in lst["checkpoints"]] == [7]
    assert cli("checkpoint", "create", d, "--state", str(state_file)).code == 2  # --to missing
    assert cli("verify", d).code == 0 and cli("verify", made["path"]).code == 0


def test_restore_refuses_an_invalid_checkpoint(tmp_path):
    made = make(tmp_path)
    data = read(made.path)
    data[400 if len(data) > 400 else 300] ^= 1
    write(made.path, data)
    with pytest.raises(NotClean) as err:
        C.resolve(made.path)
    assert err.value.exit_code == 3


def test_a_large_body_hashed_beside_its_inflation_is_still_judged_in_step_order(tmp_path):
    import random

    blob = random.Random(7).randbytes(ck.OVERLAP_BYTES + 200_000)  # incompressible: the body is > 1 MiB
    state = dict(STATE, blob=blob)
    made = C.create(str(tmp_path / "ck"), state, 4)
    good = read(made.path)
    assert len(good) - 256 >= ck.OVERLAP_BYTES
    rep = C.check_path(made.path)
    assert rep.checked.ok and rep.checked.state == dict(state, wal_sequence=4) and rep.checked.anomalies == ()
    for pos in (256, 256 + len(good) // 2, len(good) - 1):  # frame magic, a block, the frame checksum
        data = bytearray(good)
        data[pos] ^= 0xFF
        write(made.path, data)
        rep = C.check_path(made.path)
        assert (rep.checked.failure.step, rep.checked.failure.cls) == (8, "corrupt")
        assert rep.checked.anomalies == () and rep.checked.state is None
        # with the body hash resealed the same damage reaches the zstd step, which now names it
        write(made.path, reseal(data, body_too=True))
        assert step_of(made.path) in ((9, "corrupt"), (10, "corrupt"))
    write(made.path, good)
    assert C.check_path(made.path).checked.ok


def test_a_large_checkpoint_write_starts_writeback_as_it_goes_and_reads_back_whole(tmp_path, monkeypatch):
    from walctl.store import durable
    from walctl.store.fs import DEFAULT_FS

    calls = []
    real = DEFAULT_FS.start_writeback
    monkeypatch.setattr(durable, "WRITEBACK_BYTES", 64 << 10)
    # On the class: create() works through a copy of DEFAULT_FS confined to its directory.
    monkeypatch.setattr(type(DEFAULT_FS), "start_writeback",
                        lambda self, fd, off, n: (calls.append((off, n)), real(fd, off, n)))
    import random

    state = dict(STATE, blob=random.Random(3).randbytes(600_000))
    made = C.create(str(tmp_path / "ck"), state, 9)
    assert calls and calls[0][0] == 256 and all(n >= 64 << 10 for _, n in calls)
    assert all(a[0] + a[1] == b[0] for a, b in zip(calls, calls[1:]))  # contiguous, in order
    rep = C.check_path(made.path)
    assert rep.checked.ok and rep.checked.state == dict(state, wal_sequence=9)
