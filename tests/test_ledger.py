"""The directory ledger (.walctl/ledger.jsonl, docs/format.md "The directory ledger"): the codec, every
scenario of issue 14's "Why" end to end through the CLI, seal on Java-written directories, accept-loss, and
crashes at every operation of a sealing writer, of seal, of quarantine move and of accept-loss."""
from __future__ import annotations

import json
import os
import shutil
import shlex

import pytest
from hypothesis import given, settings, strategies as st

from conftest import VECTORS, flip_bit, make_chunk, record_offsets, write_dir
from simfs import SimCrash, SimFS
from walctl.format import ledger as L
from walctl.format.ckptmeta import encode_checkpoint_meta
from walctl.errors import NotClean
from walctl.ops.wal.ledger_ops import accept_loss, seal
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.quarantine import move as q_move
from walctl.ops.wal.verify import verify_path
from walctl.ops.wal.write import WalWriter
from walctl.store import ledger as SL

TS = "2026-11-24T08:00:00.000Z"


def ledger_lines(d) -> list[dict]:
    with open(os.path.join(d, ".walctl", "ledger.jsonl"), "rb") as f:
        return [json.loads(x) for x in f.read().splitlines()]


def written(tmp_path, n=300, name="w", **kw) -> str:
    d = str(tmp_path / name)
    with WalWriter(d, max_chunk_bytes=4096, **kw) as w:
        for i in range(n):
            w.append(1, "m-%d" % (i % 7), b"x" * 50)
    return d


def classes(report) -> list[tuple[str, int, tuple | None]]:
    return [(f.cls, f.exit_code, tuple(f.sequence_range) if f.sequence_range else None) for f in report.findings]


# ---- codec ----------------------------------------------------------------------------------------

def test_line_round_trip_and_crc32c_of_the_compact_sorted_json():
    raw = L.encode_line(L.SEAL, TS, file="wal-000001.bin", size=4136, records=43, first_seq=44, last_seq=86,
                        sha256="ab" * 32, stat={"ino": 5, "mtime_ns": 7})
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    obj = json.loads(raw)
    crc = obj.pop("crc32c")
    body = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    import crcmod.predefined

    assert crc == f"{crcmod.predefined.mkPredefinedCrcFun('crc-32c')(body):08x}"
    assert L.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    line = L.decode_line(raw[:-1], 3, 100)
    assert line == L.Line(3, "seal", TS, {"file": "wal-000001.bin", "size": 4136, "records": 43, "first_seq": 44,
                                          "last_seq": 86, "sha256": "ab" * 32, "stat": {"ino": 5, "mtime_ns": 7}})


@pytest.mark.parametrize("mutate, reason", [
    (lambda raw: raw.replace(b'"seq":7', b'"seq":8'), "crc32c mismatch"),
    (lambda raw: raw[:-3], "not JSON"),
    (lambda raw: b"[1,2]", "not a JSON object"),
    (lambda raw: raw.replace(b'"crc32c"', b'"crc32x"'), "no crc32c"),
])
def test_damaged_lines_are_reported_by_number_and_never_used(mutate, reason):
    good = L.encode_line(L.HWM, TS, seq=5)
    bad = mutate(L.encode_line(L.HWM, TS, seq=7)[:-1]) + b"\n"
    read = L.decode_ledger(good + bad + good)
    assert [ln.number for ln in read.lines] == [1, 3]
    assert [(b.number, b.offset) for b in read.bad] == [(2, len(good))] and reason in read.bad[0].reason
    assert L.fold(read.lines).hwm == 5  # the damaged line's 7 is not used


def _line_with_crc(obj: dict) -> bytes:
    obj = dict(obj)
    obj["crc32c"] = f"{L.crc32c(json.dumps(obj, sort_keys=True, separators=(',', ':')).encode()):08x}"
    return json.dumps(obj).encode()


@pytest.mark.parametrize("name", ["../etc/passwd", "/abs/wal-000001.bin", "wal-0.bin", "wal-0000001.bin",
                                  "sub/wal-000001.bin", "wal_0.log", "wal_00000000.log", 7, None])
def test_file_fields_that_are_not_plain_writer_names_make_the_line_unusable(name):
    raw = _line_with_crc({"v": 1, "ts": TS, "event": "moved", "file": name, "first_seq": 1, "last_seq": 2,
                          "to": ".quarantine/x", "why": "quarantine"})
    got = L.decode_line(raw)
    assert isinstance(got, L.BadLine) and "file" in got.reason
    with pytest.raises(ValueError):
        L.encode_line(L.MOVED, TS, file=name, first_seq=1, last_seq=2, to="x", why="quarantine")


def test_torn_last_line_is_a_note_and_the_next_writer_cuts_it(tmp_path):
    d = written(tmp_path, 100)
    path = os.path.join(d, ".walctl", "ledger.jsonl")
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(b'{"crc32c":"0000","ev')
    rep = verify_path(d)
    assert rep.exit_code == 0
    assert [(f.cls, f.exit_code, f.offset, f.end_offset) for f in rep.findings] == [
        ("ledger-line", 0, size, size + 20)]
    with WalWriter(d, max_chunk_bytes=4096) as w:
        for _ in range(50):
            w.append(1, "m", b"y" * 50)
    data = open(path, "rb").read()
    assert data.startswith(open(path, "rb").read()[:size]) and b'"ev\n' not in data and b'{"crc32c":"0000"' not in data
    assert L.decode_ledger(data).bad == () and L.decode_ledger(data).torn_offset is None
    assert verify_path(d).exit_code == 0


def test_a_corrupt_ledger_line_is_corruption_naming_its_line(tmp_path, cli):
    d = written(tmp_path, 100)
    path = os.path.join(d, ".walctl", "ledger.jsonl")
    lines = open(path, "rb").read().split(b"\n")
    lines[1] = lines[1].replace(b'"hwm"', b'"hwn"')
    open(path, "wb").write(b"\n".join(lines))
    r = cli("verify", d, "--json")
    doc = r.json()
    assert r.code == 3
    f = [f for f in doc["paths"][0]["findings"] if f["class"] == "ledger-line"]
    assert len(f) == 1 and f[0]["line"] == 2 and f[0]["file"] == ".walctl/ledger.jsonl" and "crc32c" in f[0]["reason"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_decode_to_lines_or_findings_never_an_exception(data):
    read = L.decode_ledger(data)
    assert all(isinstance(x, L.Line) for x in read.lines) and all(isinstance(x, L.BadLine) for x in read.bad)
    L.fold(read.lines)


# ---- writers --------------------------------------------------------------------------------------

def test_writer_seals_every_rolled_chunk_after_its_sync_and_records_the_hwm(tmp_path):
    d = written(tmp_path, 300)
    chunks = sorted(n for n in os.listdir(d) if n.startswith("wal-"))
    lines = ledger_lines(d)
    seals = {x["file"]: x for x in lines if x["event"] == "seal"}
    assert sorted(seals) == chunks[:-1]  # the last chunk will be appended to again: never sealed
    import hashlib

    first = 1
    for name in chunks[:-1]:
        data = open(os.path.join(d, name), "rb").read()
        s = seals[name]
        assert (s["size"], s["sha256"]) == (len(data), hashlib.sha256(data).hexdigest())
        assert s["records"] == len(record_offsets(data)) and s["first_seq"] == first
        assert s["last_seq"] == first + s["records"] - 1 and s["stat"]["ino"] == os.stat(os.path.join(d, name)).st_ino
        first = s["last_seq"] + 1
    assert max(x["seq"] for x in lines if x["event"] == "hwm") == 300
    rep = verify_path(d)
    assert rep.exit_code == 0 and rep.ledger["verified_by_hash"] == chunks[:-1]
    assert not [f for f in rep.findings if f.cls == "foreign-file"]  # .walctl/ is ours


def test_segment_writer_seals_full_segments(tmp_path):
    d = str(tmp_path / "s")
    with WalWriter(d, format="segments", sync="none") as w:
        for i in range(10_003):
            w.append_entry("memory_add", {"i": i}, 1)
    seals = [x for x in ledger_lines(d) if x["event"] == "seal"]
    assert [(s["file"], s["first_seq"], s["last_seq"], s["records"]) for s in seals] == [
        ("wal_00000001.log", 1, 10_000, 10_000)]
    assert verify_path(d).exit_code == 0
    with open(os.path.join(d, "wal_00000001.log"), "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0x20]))
    rep = verify_path(d)
    assert rep.exit_code == 3 and "seal-mismatch" in [f.cls for f in rep.findings]


# ---- "Why" scenarios of issue 14, through the CLI ---------------------------------------------------

def test_quarantined_last_chunk_is_a_sequence_finding_and_write_never_reuses_its_sequences(tmp_path, cli):
    d = written(tmp_path, 300)
    last = sorted(n for n in os.listdir(d) if n.startswith("wal-"))[-1]
    held = verify_path(d).chunks[-1]
    assert cli("quarantine", "move", d, last, "--reason", "suspect", "--apply").code == 0
    moved = [x for x in ledger_lines(d) if x["event"] == "moved"]
    assert [(m["file"], m["first_seq"], m["last_seq"], m["why"], m["to"]) for m in moved] == [
        (last, held.first_sequence, 300, "quarantine", f".quarantine/{last}")]
    r = cli("verify", d, "--json")
    f = [f for f in r.json()["paths"][0]["findings"] if f["class"] == "sequence-missing"]
    assert r.code == 4 and f[0]["sequence_range"] == [held.first_sequence, 300]
    assert f[0]["explained_by"]["why"] == "quarantine" and f[0]["explained_by"]["file"] == last
    w = cli("write", d, "--type", "REMEMBER", "--id", "m", "--payload", "p")
    # the chunk is in .quarantine/: the advice is to put it back, not to accept its loss (issue 22)
    assert w.code == 4 and f"`walctl quarantine restore {d} {last} --apply`" in w.err
    assert f"{held.first_sequence}..300" in w.err and "--accept-loss" not in w.err
    r = cli("repair", d, "--accept-loss", f"{held.first_sequence}..300", "--reason", "tail rotted", "--apply")
    assert r.code == 0
    assert cli("verify", d).code == 0 and cli("verify", d, "--strict").code == 3
    with WalWriter(d) as w:
        assert w.append(1, "m", b"z") == 301  # never the quarantined sequences again


def test_quarantined_first_chunk_is_a_head_finding(tmp_path, cli):
    d = written(tmp_path, 300)
    assert cli("quarantine", "move", d, "wal-000000.bin", "--reason", "x", "--apply").code == 0
    rep = verify_path(d)
    assert rep.exit_code == 4
    f = [f for f in rep.findings if f.cls == "sequence-missing"]
    assert [tuple(x.sequence_range) for x in f] == [(1, 43)] and f[0].extra["explained_by"]["why"] == "quarantine"


def test_deleted_first_and_last_sealed_chunks_are_corruption(tmp_path, cli):
    d = written(tmp_path, 300)
    chunks = sorted(n for n in os.listdir(d) if n.startswith("wal-"))
    os.remove(os.path.join(d, chunks[0]))
    os.remove(os.path.join(d, chunks[-1]))
    os.remove(os.path.join(d, chunks[-2]))  # sealed: the writer rolled it
    r = cli("verify", d, "--json")
    doc = r.json()["paths"][0]
    missing = {f["file"]: f for f in doc["findings"] if f["class"] == "sealed-chunk-missing"}
    assert r.code == 3 and sorted(missing) == [chunks[0], chunks[-2]]
    assert missing[chunks[0]]["sequence_range"] == [1, 43]
    seqs = {tuple(f["sequence_range"]) for f in doc["findings"] if f["class"] == "sequence-missing"}
    assert seqs == {(1, 43), (doc["summary"]["last_sequence"] + 1, 300)}


def test_deleted_unsealed_last_chunk_is_a_sequence_finding_from_the_hwm(tmp_path):
    d = written(tmp_path, 300)
    last = sorted(n for n in os.listdir(d) if n.startswith("wal-"))[-1]
    os.remove(os.path.join(d, last))
    rep = verify_path(d)
    assert rep.exit_code == 4
    assert [tuple(f.sequence_range) for f in rep.findings if f.cls == "sequence-missing"] == [(259, 300)]


def test_bit_flip_in_a_memory_id_of_a_sealed_chunk_is_corruption(tmp_path, cli):
    d = written(tmp_path, 300)
    path = os.path.join(d, "wal-000001.bin")
    data = open(path, "rb").read()
    off = record_offsets(data)[3] + 40  # the memoryId: no CRC covers it
    open(path, "r+b").write(flip_bit(data, off, 1))
    assert cli("verify", d, "--no-ledger-such-option").code == 2
    r = cli("verify", d, "--json")
    f = [f for f in r.json()["paths"][0]["findings"] if f["class"] == "seal-mismatch"]
    assert r.code == 3 and len(f) == 1 and f[0]["file"] == "wal-000001.bin" and f[0]["field"] == "sha256"
    assert f[0]["sequence_range"] == [44, 86] and f[0]["stored"] != f[0]["computed"]
    shutil.rmtree(os.path.join(d, ".walctl"))  # without the ledger: the bit flip is invisible again
    assert cli("verify", d).code == 0


def test_size_change_of_a_sealed_chunk_is_corruption(tmp_path):
    d = written(tmp_path, 300)
    path = os.path.join(d, "wal-000002.bin")
    with open(path, "ab") as f:
        f.write(make_chunk([87])[8:])  # a valid record appended: every CRC passes
    rep = verify_path(d)
    f = [f for f in rep.findings if f.cls == "seal-mismatch"]
    assert rep.exit_code == 3 and f[0].field == "size" and (f[0].stored, f[0].computed) == (
        4136, 4136 + len(make_chunk([87])) - 8)


def test_sequence_zero_and_negative_are_sequence_findings(tmp_path, cli):
    d = write_dir(tmp_path / "z", {0: make_chunk([0, 1, 2])})
    r = cli("verify", d, "--json")
    f = [f for f in r.json()["paths"][0]["findings"] if f["class"] == "sequence-below-one"]
    assert r.code == 4 and f[0]["sequence_range"] == [0, 0]
    d = write_dir(tmp_path / "n", {0: make_chunk([-3, -2])})
    rep = verify_path(d)
    assert rep.exit_code == 4 and [tuple(x.sequence_range) for x in rep.findings
                                   if x.cls == "sequence-below-one"] == [(-3, -2)]


def test_unpadded_chunk_names_are_foreign_and_write_starts_its_own(tmp_path, cli):
    d = write_dir(tmp_path / "p", {"wal-0.bin": make_chunk([1, 2]), 0: make_chunk([1, 2])})
    rep = verify_path(d)
    assert rep.exit_code == 0 and [c.file for c in rep.chunks] == ["wal-000000.bin"]
    assert [(f.cls, f.file) for f in rep.findings] == [("foreign-file", "wal-0.bin")]
    d2 = write_dir(tmp_path / "q", {"wal-0.bin": make_chunk([1, 2])})
    assert cli("verify", d2).code == 5  # no chunk of ours here
    with WalWriter(d2) as w:
        assert w.append(1, "m", b"") == 1
    assert sorted(os.listdir(d2)) == [".walctl", ".walctl.lock", "wal-0.bin", "wal-000000.bin"]
    assert open(os.path.join(d2, "wal-0.bin"), "rb").read() == make_chunk([1, 2])  # left alone


def test_checkpoint_meta_is_recognised_and_validated(tmp_path, cli):
    d = write_dir(tmp_path / "c", {0: make_chunk(range(1, 11))})
    open(os.path.join(d, "checkpoint.meta"), "wb").write(encode_checkpoint_meta(5))
    rep = verify_path(d)
    assert rep.exit_code == 0 and rep.findings == ()
    open(os.path.join(d, "checkpoint.meta"), "wb").write(b"CKPX" + encode_checkpoint_meta(5)[4:])
    r = cli("verify", d, "--json")
    f = r.json()["paths"][0]["findings"]
    assert r.code == 3 and [(x["class"], x["file"]) for x in f] == [("checkpoint-meta", "checkpoint.meta")]
    assert "magic" in f[0]["reason"]
    open(os.path.join(d, "checkpoint.meta"), "wb").write(encode_checkpoint_meta(5)[:12])
    assert verify_path(d).exit_code == 3
    open(os.path.join(d, "checkpoint.meta"), "wb").write(encode_checkpoint_meta(5)[:4] + b"\0\0\0\x02" + bytes(8))
    assert verify_path(d).exit_code == 5  # an unknown version


def test_checkpoint_meta_above_the_chunks_is_a_missing_range_and_writers_continue_once_it_is_accepted(tmp_path, cli):
    """issue #22: an HWM beyond the log says sequences were issued that no chunk holds (the ledger's hwm
    rule); a writer that jumped to HWM+1 would make the directory discontinuous."""
    d = write_dir(tmp_path / "c", {3: make_chunk(range(31, 41))})
    open(os.path.join(d, "checkpoint.meta"), "wb").write(encode_checkpoint_meta(60))
    rep = verify_path(d)
    (f,) = rep.findings
    assert (rep.exit_code, f.cls, f.file, f.sequence_range) == (4, "sequence-missing", "wal-000003.bin", (41, 60))
    assert "after the last present sequence 40; checkpoint.meta's HWM is 60" in f.reason
    with pytest.raises(NotClean):
        WalWriter(d)
    hint = f.reason.split("`")[1]
    assert hint == f"walctl repair {d} --accept-loss 41..60 --reason 'seq 41..60 held by no file' --apply"
    assert cli(*shlex.split(hint)[1:]).code == 0  # as printed
    assert verify_path(d).exit_code == 0
    with WalWriter(d) as w:
        assert w.append(1, "m", b"") == 61
    assert [r.sequence for r in RecordWalk(d) if isinstance(r, Record)] == list(range(31, 41)) + [61]


def test_without_a_ledger_a_quarantined_tail_chunk_is_still_a_sequence_finding(tmp_path, cli):
    d = write_dir(tmp_path / "j", {i: make_chunk(range(1 + 10 * i, 11 + 10 * i)) for i in range(3)})
    assert cli("quarantine", "move", d, "wal-000002.bin", "--reason", "x", "--apply").code == 0
    shutil.rmtree(os.path.join(d, ".walctl"))  # as if an older walctl had moved it
    rep = verify_path(d)
    f = [f for f in rep.findings if f.cls == "sequence-missing"]
    assert rep.exit_code == 4 and tuple(f[0].sequence_range) == (21, 30)
    assert f[0].extra["explained_by"]["manifest"] == "MANIFEST.jsonl"
    with pytest.raises(Exception) as e:
        WalWriter(d)
    assert e.value.exit_code == 4


def test_compaction_moves_are_below_the_horizon_not_findings(tmp_path, cli):
    d = written(tmp_path, 300)
    r = cli("compact", d, "--to", "150", "--apply")
    assert r.code == 0
    moved = [x for x in ledger_lines(d) if x["event"] == "moved"]
    assert [m["why"] for m in moved] == ["compact"] * 3 and moved[-1]["last_seq"] == 129
    rep = verify_path(d)
    assert rep.exit_code == 0 and rep.first_sequence == 130 and rep.findings == ()


def test_salvage_verify_accept_resume(tmp_path, cli):
    chunks = {i: make_chunk(range(1 + 10 * i, 11 + 10 * i)) for i in range(4)}
    offs = record_offsets(chunks[1])
    chunks[1] = flip_bit(chunks[1], offs[2] + 45)  # payload of seq 13: mid-log damage
    src = write_dir(tmp_path / "bad", chunks)
    out = str(tmp_path / "good")
    assert cli("salvage", src, "--out", out).code == 4  # salvage exits with the new directory's state: a gap
    r = cli("verify", out, "--json")
    gaps = [f["sequence_range"] for f in r.json()["paths"][0]["findings"] if f["exit_code"] == 4]
    assert r.code == 4 and gaps == [[13, 13]]
    assert cli("write", out, "--type", "REMEMBER", "--id", "m").code == 4
    stopped = cli("replay", out, "--after", "0")
    assert stopped.code == 4 and len(stopped.out.splitlines()) == 12  # stops at the gap
    assert cli("repair", out, "--accept-loss", "12..13", "--reason", "x").code == 7  # 12 is present
    salvaged = [(x["event"], x.get("file"), x.get("seq")) for x in ledger_lines(out)]  # salvage's own ledger
    assert salvaged == [("seal", "wal-000000.bin", None), ("seal", "wal-000002.bin", None), ("hwm", None, 40)]
    dry = cli("repair", out, "--accept-loss", "13..13", "--reason", "bit rot in chunk 1")
    assert dry.code == 4 and "dry run" in dry.out and len(ledger_lines(out)) == 3
    r = cli("repair", out, "--accept-loss", "13..13", "--reason", "bit rot in chunk 1", "--apply", "--json")
    assert r.code == 0 and r.json()["applied"] is True and r.json()["after"]["exit_code"] == 0
    again = cli("repair", out, "--accept-loss", "13..13", "--reason", "again", "--apply")
    assert again.code == 0 and "already accepted" in again.out
    assert [x["event"] for x in ledger_lines(out)] == ["seal", "seal", "hwm", "accept-loss"]
    streamed = cli("replay", out, "--after", "0")
    assert streamed.code == 0 and [json.loads(x)["sequence"] for x in streamed.out.splitlines()] == \
        [s for s in range(1, 41) if s != 13]
    with WalWriter(out) as w:
        assert w.append(1, "m", b"") == 41
    rep = verify_path(out)
    assert rep.exit_code == 0 and [f.cls for f in rep.findings] == ["accepted-loss"]
    assert [c.verdict for c in rep.chunks] == ["clean"] * len(rep.chunks)  # the accepted gap is no chunk's fault


# ---- seal: directories written by the Java writer -------------------------------------------------

def java_copy(tmp_path, case="rolled") -> str:
    d = str(tmp_path / case)
    shutil.copytree(os.path.join(VECTORS, case, "wal"), d)
    return d


def test_seal_java_directory_then_damage(tmp_path, cli):
    d = java_copy(tmp_path)
    dry = cli("seal", d)
    assert dry.code == 0 and "would seal" in dry.out and not os.path.exists(os.path.join(d, ".walctl"))
    r = cli("seal", d, "--apply", "--json")
    doc = r.json()
    assert r.code == 0 and doc["sealed"] == [f"wal-00000{i}.bin" for i in range(6)]  # never the last chunk
    expected = json.load(open(os.path.join(VECTORS, "rolled", "expected.json")))
    seals = {x["file"]: x for x in ledger_lines(d) if x["event"] == "seal"}
    for f in expected["files"][:6]:
        assert (seals[f["name"]]["size"], seals[f["name"]]["sha256"]) == (f["size"], f["sha256"])
    again = cli("seal", d, "--apply", "--json")
    assert again.json()["sealed"] == [] and len(ledger_lines(d)) == 6  # idempotent
    assert verify_path(d).exit_code == 0 and verify_path(d).ledger["verified_by_hash"] == sorted(seals)
    # damage the Java chunks in ways no CRC sees
    p2 = os.path.join(d, "wal-000002.bin")
    data = open(p2, "rb").read()
    open(p2, "wb").write(flip_bit(data, record_offsets(data)[1] + 41))  # a memoryId byte
    os.remove(os.path.join(d, "wal-000004.bin"))
    rep = verify_path(d)
    got = classes(rep)
    assert rep.exit_code == 3
    assert ("seal-mismatch", 3, (seals["wal-000002.bin"]["first_seq"], seals["wal-000002.bin"]["last_seq"])) in got
    assert ("sealed-chunk-missing", 3, (seals["wal-000004.bin"]["first_seq"], seals["wal-000004.bin"]["last_seq"])) in got


def test_seal_skips_damaged_chunks_and_the_last(tmp_path):
    chunks = {i: make_chunk(range(1 + 10 * i, 11 + 10 * i)) for i in range(4)}
    chunks[1] = flip_bit(chunks[1], record_offsets(chunks[1])[2] + 45)
    d = write_dir(tmp_path / "d", chunks)
    rep = seal(d, apply=True)
    assert [(i.file, i.action) for i in rep.items] == [
        ("wal-000000.bin", "seal"), ("wal-000001.bin", "skip"), ("wal-000002.bin", "seal"),
        ("wal-000003.bin", "skip")]
    assert sorted(x["file"] for x in ledger_lines(d)) == ["wal-000000.bin", "wal-000002.bin"]


def test_java_reads_past_the_ledger_directory(tmp_path):
    """The ledger is a directory: the Java reader lists wal-*.bin files only (spector-v2.md). walctl's own
    readers (verify, replay, inspect) ignore it too."""
    d = written(tmp_path, 120)
    assert os.path.isdir(os.path.join(d, ".walctl"))
    from walctl.ops.wal.records import Record, RecordWalk

    assert [r.sequence for r in RecordWalk(d) if isinstance(r, Record)] == list(range(1, 121))


def test_verify_quick_trusts_unchanged_stat_data_and_says_which(tmp_path, cli):
    d = written(tmp_path, 300)
    r = cli("verify", d, "--quick", "--json")
    led = r.json()["paths"][0]["ledger"]
    sealed = sorted(n for n in os.listdir(d) if n.startswith("wal-"))[:-1]
    assert r.code == 0 and led["trusted_by_stat"] == sealed and led["verified_by_hash"] == []
    human = cli("verify", d, "--quick")
    assert "trusted unchanged (--quick): " + ", ".join(sealed) in human.out
    # rewritten in place with the same size: the mtime changes, so --quick hashes it and finds the change
    p = os.path.join(d, sealed[1])
    data = open(p, "rb").read()
    open(p, "wb").write(flip_bit(data, record_offsets(data)[0] + 41))
    r = cli("verify", d, "--quick", "--json")
    assert r.code == 3 and sealed[1] not in r.json()["paths"][0]["ledger"]["trusted_by_stat"]


# ---- crashes on the simulated file system ---------------------------------------------------------

WAL = "/data/wal"


def fresh(seed=0, crash_at=None) -> SimFS:
    fs = SimFS(seed, crash_at)
    fs.makedirs_durable("/data")
    return fs


def session(fs, n=30, start=0):
    w = WalWriter(WAL, fs=fs, sync="batch", batch_records=3, max_chunk_bytes=400)
    for i in range(start, start + n):
        w.append(1, b"m", b"p" * (i % 40))
    w.close()


def assert_ledger_truthful(fs):
    """Every seal the ledger holds describes durable bytes exactly; no issued sequence is above the log."""
    read = SL.read_ledger(WAL, fs)
    if read is None:
        return
    assert read.bad == ()
    exp = L.fold(read.lines)
    import hashlib

    for name, line in exp.sealed.items():
        data = fs.read_durable(os.path.join(WAL, name))
        assert data is not None, name
        assert (len(data), hashlib.sha256(data).hexdigest()) == (line.get("size"), line.get("sha256")), name


def test_crash_at_every_operation_of_a_sealing_writer():
    probe = fresh()
    session(probe)
    total = probe.ops
    assert any(".walctl" in op for op in probe.log)
    for n in range(1, total + 1):
        fs = fresh(n, crash_at=n)
        with pytest.raises(SimCrash):
            session(fs)
        fs.crash()
        assert_ledger_truthful(fs)
        rep = verify_path(WAL, fs=fs) if fs.exists(WAL) else None
        assert rep is None or rep.exit_code in (0, 1, 5), (n, classes(rep))
        last = rep.last_sequence if rep is not None and rep.exit_code != 5 else None
        w = WalWriter(WAL, fs=fs)  # a rerun opens, cuts what is torn and goes on
        top = w.opened.first_sequence - 1
        w.append(1, b"m", b"again")
        w.close()
        after = verify_path(WAL, fs=fs)
        assert after.exit_code == 0, (n, classes(after))
        assert after.last_sequence == top + 1 and (last is None or top >= last)


def test_crash_at_every_operation_of_seal():
    def setup(fs):
        fs.makedirs_durable(WAL)
        for i in range(4):
            p = os.path.join(WAL, f"wal-{i:06d}.bin")
            fd = fs.open_append(p, create=True)
            fs.write(fd, make_chunk(range(1 + 10 * i, 11 + 10 * i)))
            fs.fsync(fd)
            fs.close(fd)
        fs.fsync_dir(WAL)
        fs.ops = 0

    probe = fresh()
    setup(probe)
    seal(WAL, apply=True, fs=probe)
    total = probe.ops
    for n in range(1, total + 1):
        fs = fresh(n)
        setup(fs)
        fs.crash_at = n
        with pytest.raises(SimCrash):
            seal(WAL, apply=True, fs=fs)
        fs.crash()
        assert_ledger_truthful(fs)
        assert verify_path(WAL, fs=fs).exit_code == 0
        rep = seal(WAL, apply=True, fs=fs)  # the rerun finishes
        assert [i.action for i in rep.items][:3] in (["seal"] * 3, ["already-sealed"] * 3)
        assert sorted(L.fold(SL.read_ledger(WAL, fs).lines).sealed) == [f"wal-00000{i}.bin" for i in range(3)]
        assert verify_path(WAL, fs=fs).exit_code == 0


def test_crash_at_every_operation_of_quarantine_move_never_lets_a_writer_reuse():
    probe = fresh()
    session(probe)
    last = sorted(e.name for e in probe.listdir(WAL) if e.name.startswith("wal-"))[-1]
    hwm = verify_path(WAL, fs=probe).last_sequence
    probe.ops = 0
    q_move(WAL, last, reason="x", apply=True, fs=probe)
    total = probe.ops
    for n in range(1, total + 1):
        fs = fresh(7)
        session(fs)
        fs.ops, fs.crash_at = 0, n
        with pytest.raises(SimCrash):
            q_move(WAL, last, reason="x", apply=True, fs=fs)
        fs.crash()
        assert_ledger_truthful(fs)
        if fs.exists(os.path.join(WAL, last)):
            q_move(WAL, last, reason="x", apply=True, fs=fs)  # the rerun finishes the job
        rep = verify_path(WAL, fs=fs)
        assert rep.exit_code == 4, (n, classes(rep))
        with pytest.raises(Exception) as e:
            WalWriter(WAL, fs=fs)
        assert getattr(e.value, "exit_code", None) == 4
        a = rep.last_sequence + 1
        accept_loss(WAL, a, hwm, "gone", apply=True, fs=fs)
        w = WalWriter(WAL, fs=fs)
        assert w.append(1, b"m", b"") == hwm + 1, n
        w.close()


def test_crash_at_every_operation_of_accept_loss():
    def setup():
        fs = fresh(3)
        session(fs)
        last = sorted(e.name for e in fs.listdir(WAL) if e.name.startswith("wal-"))[-1]
        q_move(WAL, last, reason="x", apply=True, fs=fs)
        fs.ops = 0
        return fs

    probe = setup()
    rep = verify_path(WAL, fs=probe)
    a, b = rep.last_sequence + 1, L.fold(SL.read_ledger(WAL, probe).lines).hwm
    accept_loss(WAL, a, b, "gone", apply=True, fs=probe)
    total = probe.ops
    for n in range(1, total + 1):
        fs = setup()
        fs.crash_at = n
        with pytest.raises(SimCrash):
            accept_loss(WAL, a, b, "gone", apply=True, fs=fs)
        fs.crash()
        assert verify_path(WAL, fs=fs).exit_code in (0, 4)
        accept_loss(WAL, a, b, "gone", apply=True, fs=fs)  # rerun: records it, or finds it recorded
        assert verify_path(WAL, fs=fs).exit_code == 0
        assert sum(ln.event == "accept-loss" for ln in SL.read_ledger(WAL, fs).lines) == 1
        w = WalWriter(WAL, fs=fs)
        assert w.append(1, b"m", b"") == b + 1
        w.close()


def test_verify_chooses_jobs_by_the_work_and_an_explicit_jobs_wins(tmp_path, monkeypatch):
    """A sealed chunk is hashed by a worker as an unsealed one is scanned (issue #27): a sealed directory
    gets one process per core as its unsealed copy does; --quick's unchanged chunks are no work at all."""
    import walctl.ops.wal.chunkscan as CS
    import walctl.ops.wal.verify as V

    d = written(tmp_path, 300)
    seen = []
    real = V.scan_chunks
    monkeypatch.setattr(V, "scan_chunks", lambda chunks, **kw: seen.append(kw["jobs"]) or real(chunks, **kw))
    monkeypatch.setattr(CS, "AUTO_JOBS_BYTES", 20_000)  # 7 chunks of ~4 KB: 28 KB, sealed or not
    monkeypatch.setattr(CS.os, "cpu_count", lambda: 3)
    sealed = V.verify_path(d, jobs=None)
    quick = V.verify_path(d, jobs=None, quick=True)
    shutil.rmtree(os.path.join(d, ".walctl"))
    V.verify_path(d, jobs=None)
    V.verify_path(d, jobs=1)
    assert seen == [3, 1, 3, 1]
    assert len(sealed.ledger["verified_by_hash"]) == 6 and len(quick.ledger["trusted_by_stat"]) == 6


@pytest.mark.parametrize("args, code", [
    (["--accept-loss", "5..3", "--reason", "x"], 2),
    (["--accept-loss", "0..3", "--reason", "x"], 2),
    (["--accept-loss", "a..b", "--reason", "x"], 2),
    (["--accept-loss", "21..30"], 2),
    (["--accept-loss", "21..30", "--reason", "  "], 2),
    (["--accept-loss", "5..6", "--reason", "x", "--apply"], 7),  # present, not missing
    (["--accept-loss", "21..31", "--reason", "x", "--apply"], 7),  # 31 was never issued
])
def test_accept_loss_refusals_change_nothing_and_still_print_one_json_document(tmp_path, cli, args, code):
    d = write_dir(tmp_path / "d", {0: make_chunk(range(1, 11)), 1: make_chunk(range(11, 21)),
                                   3: make_chunk(range(31, 41))})
    before = sorted(os.listdir(d))
    r = cli("repair", d, *args, "--json")
    doc = r.json()
    assert r.code == code and doc["exit_code"] == code
    if code == 2:  # it could not start: walctl.error/1 (docs/json.md)
        assert doc["schema"] == "walctl.error/1" and doc["error"]["reason"] == "usage"
    else:  # it examined the directory: its own document, with what it found
        assert doc["schema"] == "walctl.repair/2" and doc["applied"] is False and doc["outcome"] == "refused"
        assert doc["missing"] == [[21, 30]] and doc["accept_loss"]["missing"] == [[21, 30]]
        assert doc["error"].startswith(f"sequences {args[1]} are not all missing here")
        assert [f["class"] for f in doc["findings"]] == ["sequence-gap"]
    assert r.err.startswith("walctl: error: ") and "Traceback" not in r.err
    assert sorted(os.listdir(d)) == before or sorted(os.listdir(d)) == sorted(before + [".walctl.lock"])


def test_seal_json_on_failure_and_on_a_live_writer(tmp_path, cli):
    r = cli("seal", str(tmp_path / "nope"), "--json")
    assert r.code == 6 and r.json()["exit_code"] == 6 and r.json()["error"]["reason"] == "not-found"
    d = written(tmp_path, 100)
    with WalWriter(d):
        r = cli("seal", d, "--apply", "--json")
        assert r.code == 6 and r.json()["exit_code"] == 6
        assert cli("seal", d).code == 7


def test_a_linked_ledger_is_refused_before_anything_changes(tmp_path, cli):
    d = written(tmp_path, 300)
    outside = tmp_path / "elsewhere"
    shutil.move(os.path.join(d, ".walctl"), outside)
    os.symlink(outside, os.path.join(d, ".walctl"))
    before = open(outside / "ledger.jsonl", "rb").read()
    last = sorted(n for n in os.listdir(d) if n.startswith("wal-"))[-1]
    assert cli("quarantine", "move", d, last, "--reason", "x", "--apply").code == 7
    assert os.path.exists(os.path.join(d, last)) and not os.path.exists(os.path.join(d, ".quarantine", last))
    assert cli("repair", d, "--accept-loss", "1..1", "--reason", "x", "--apply").code == 7
    assert cli("seal", d, "--apply").code == 7
    assert open(outside / "ledger.jsonl", "rb").read() == before


def test_a_long_unterminated_ledger_tail_is_damage_not_a_torn_line(tmp_path, cli):
    """A zero-filled or overwritten tail can swallow whole lines (their seals and HWM): past the length of
    any line it is a corrupt-ledger finding, never cut silently by a writer, and never read whole."""
    d = tmp_path / "wal"
    with WalWriter(str(d), sync="none", max_chunk_bytes=600) as w:
        for i in range(30):
            w.append(0, "m", b"x" * 40)
    ledger = d / ".walctl" / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(lines[0] + bytes(100 << 10))  # the rest zeroed: longer than any line
    r = cli("verify", str(d), "--json")
    assert r.code == 3
    found = [f for p in r.json()["paths"] for f in p["findings"] if "not a torn append" in f["reason"]]
    assert len(found) == 1
    r = cli("write", str(d), "--type", "REMEMBER", "--id", "m", "--payload", "x")
    assert r.code == 3 and "refusing to append" in r.err and "not a torn append" in r.err
    assert ledger.stat().st_size == len(lines[0]) + (100 << 10)  # the evidence stays


@pytest.mark.parametrize("case", ["wal-healthy", "wal-torn-tail", "wal-midlog-corrupt", "wal-legacy-v1"])
def test_verify_without_expectations_reports_exactly_what_the_ledger_rules_would(tmp_path, cli, case):
    """A directory with no ledger, quarantine or checkpoint.meta skips loading the ledger rules (cold start);
    an empty .quarantine/ makes verify run them: the two reports must be the same."""
    import shutil

    ex = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", case)
    d = tmp_path / "d"
    shutil.copytree(ex, d)
    fast = cli("verify", str(d), "--json")
    (d / ".quarantine").mkdir()
    full = cli("verify", str(d), "--json")
    assert fast.code == full.code
    strip = lambda doc: [{k: v for k, v in p.items() if k != "elapsed_s"} for p in doc["paths"]]  # noqa: E731
    assert strip(fast.json()) == strip(full.json())


def test_the_index_crc_shortcut_holds_for_every_line_walctl_writes_and_no_one_byte_change():
    """crc_holds_as_written (used for the sequence index's lines only; the ledger's are checked by the rule):
    true for lines as walctl writes them, whatever key sorts before `crc32c`, false after any one-byte change."""
    import random

    from walctl.format import ledger as L

    lines = [L.encode_line(L.SEAL, "2026-11-27T00:00:00Z", file="wal-000001.bin", size=9, records=1, first_seq=1,
                           last_seq=1, sha256="ab" * 32, stat={"ino": 5, "mtime_ns": 7}),
             L.encode_line(L.CUT, "2026-11-27T00:00:00Z", file="wal-000002.bin", offset=8, bytes=3,
                           last_seq_kept=None, evidence="q/x"),
             L.encode_line(L.ACCEPT_LOSS, "2026-11-27T00:00:00Z", first_seq=3, last_seq=4, reason='a "crc32c":"x" é')]
    rng = random.Random(5)
    for line in lines:
        raw = line.rstrip(b"\n")
        stored = json.loads(raw)["crc32c"]
        assert L.crc_holds_as_written(raw, stored)
        for i in range(len(raw)):
            changed = raw[:i] + bytes([(raw[i] + 1 + rng.randrange(255)) % 256]) + raw[i + 1:]
            assert not L.crc_holds_as_written(changed, stored), i
