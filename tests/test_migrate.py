"""walctl migrate: legacy V1 chunks (made by our own V1 encoder, format/v1.py) rewritten as V2 in a new
directory, read back by walctl; byte layout against the Java writer's V2 vectors; damage accounting per
chunk; mixed V1/V2 directories; the source never changes; a crash at every step, then a rerun finishes."""
from __future__ import annotations

import json
import os
import re
import shlex

import pytest

from conftest import VECTORS, make_chunk, tree_digest, write_dir
from simfs import SimCrash, SimFS
from walctl.errors import WalctlError
from walctl.format.v1 import encode_v1_file_header, encode_v1_record
from walctl.ops.wal.migrate import MIGRATE_MARK, migrate
from walctl.ops.wal.records import Record, RecordWalk

TS = 1795300000000


def corpus(first: int, n: int) -> list[tuple]:
    """(seq, type, memoryId, timestamp_ms, payload): every type, odd ids, empty and large payloads."""
    ids = (b"", "m\u00e9m-\u00fc-\u65e5\u672c".encode(), b"x" * 300, b"tab\there", b"mem")
    out = []
    for s in range(first, first + n):
        payload = b"" if s % 7 == 0 else (b"text %d " % s) * (s % 5 * 60 + 1)
        out.append((s, s % 16, ids[s % len(ids)], TS + s * 1000 + s % 3, payload))
    return out


def v1_chunk(events, tail: bytes = b"") -> bytes:
    return encode_v1_file_header() + b"".join(encode_v1_record(*e) for e in events) + tail


def replayed(cli, path) -> list[tuple]:
    r = cli("replay", path, "--jsonl", "--quiet")
    assert r.code == 0, r.err
    return [(j["sequence"], j["type_ordinal"], bytes.fromhex(j["memory_id_hex"]), j["timestamp_ms"],
             bytes.fromhex(j["payload_hex"])) for j in r.jsonl()]


def test_a_v1_corpus_migrates_and_replays_record_for_record_and_the_source_is_unchanged(tmp_path, cli):
    events = corpus(1, 60)
    src = write_dir(tmp_path / "v1", {0: v1_chunk(events[:25]), 1: v1_chunk(events[25:]), 2: v1_chunk([])})
    before = tree_digest(src)
    out = tmp_path / "v2"
    r = cli("migrate", src, "--out", out, "--compress-threshold", "512", "--max-chunk-bytes", "2048", "--json")
    doc = json.loads(r.out)
    assert r.code == 0 and doc["schema"] == "walctl.migrate/1" and doc["exit_code"] == 0
    assert (doc["records"], doc["converted"], doc["copied"], doc["lost_sequences"], doc["damaged_bytes"]) == \
        (60, 60, 0, 0, 0)
    rows = {c["file"]: c for c in doc["chunks"]}
    assert [(c["action"], c["records"], c["first_sequence"], c["last_sequence"]) for c in rows.values()] == \
        [("converted", 25, 1, 25), ("converted", 35, 26, 60), ("header-only", 0, None, None)]
    assert rows["wal-000000.bin"]["read_bytes"] == len(v1_chunk(events[:25])) - 8
    assert any("no CRC" in u for u in rows["wal-000000.bin"]["unchecked"])
    assert tree_digest(src) == before
    assert replayed(cli, out) == events
    assert len(os.listdir(out)) > 2  # rolled at 2 KiB
    stored = cli("inspect", out, "--jsonl").jsonl()
    assert [j["sequence"] for j in stored if j["compressed"]] == [s for s, _, _, _, p in events if len(p) > 512]
    assert cli("verify", out).code == 0


def _vector_events(case):
    with open(os.path.join(VECTORS, case, "expected.json"), encoding="utf-8") as f:
        exp = json.load(f)
    events = [(a["sequence"], a["type_ordinal"], bytes.fromhex(a["memory_id_utf8_hex"]), a["timestamp_ms"],
               bytes.fromhex(a["payload_hex"])) for a in exp["appended"]]
    return exp, events


def _chunks(path) -> dict[str, bytes]:
    return {n: open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))}


@pytest.mark.parametrize("case", ["basic", "compressed", "rolled", "reopened"])
def test_migrated_v1_records_are_byte_for_byte_what_the_java_writer_wrote(case, tmp_path):
    """The vector's events, written as V1 by our encoder and migrated with the vector's writer settings,
    give the Java writer's V2 bytes: file header, record headers, CRCs, compression and padding."""
    exp, events = _vector_events(case)
    c = exp["constructor"]
    src = write_dir(tmp_path / "v1", {0: v1_chunk(events)})
    migrate(src, str(tmp_path / "v2"), max_chunk_bytes=c["maxChunkBytes"],
            compress_threshold=c["compressionThreshold"] if c["compressionEnabled"] else None)
    got, want = _chunks(tmp_path / "v2"), _chunks(os.path.join(VECTORS, case, "wal"))
    if case == "reopened":  # Java's second open started a new chunk; the records are the same bytes
        assert b"".join(v[8:] for v in got.values()) == b"".join(v[8:] for v in want.values())
        assert {v[:8] for v in got.values()} == {v[:8] for v in want.values()} == {b"SPEC\0\0\0\2"}
    else:
        assert got == want


def test_damaged_v1_chunks_are_reported_per_chunk_with_bytes_and_sequences(tmp_path, cli):
    """Chunk 0's last record is cut short, chunk 1 ends in garbage, chunk 2 holds a type V2 cannot carry:
    every readable record is written, and the account names each range and each sequence lost."""
    ev = corpus(1, 30)
    c0 = v1_chunk(ev[:10])
    cut = len(c0) - 5
    bad = ev[25][:1] + (200,) + ev[25][2:]
    garbage = b"\xde\xad\xbe\xef" * 5
    src = write_dir(tmp_path / "v1", {0: c0[:cut], 1: v1_chunk(ev[10:20], garbage),
                                      2: v1_chunk(ev[20:25] + [bad] + ev[26:])})
    before = tree_digest(src)
    r = cli("migrate", src, "--out", tmp_path / "v2", "--json")
    doc = json.loads(r.out)
    assert r.code == 4 and doc["out_verdict"] == "discontinuous"  # the copy has gaps at 10 and 26
    assert doc["lost_sequence_ranges"] == [[10, 10], [26, 26]] and doc["records"] == 28
    rows = {c["file"]: c for c in doc["chunks"]}
    start10 = len(v1_chunk(ev[:9]))
    assert rows["wal-000000.bin"]["damaged"] == [
        {"offset": start10, "end_offset": cut, "length": cut - start10,
         "reason": rows["wal-000000.bin"]["damaged"][0]["reason"]}]
    assert "does not fit the file" in rows["wal-000000.bin"]["damaged"][0]["reason"]
    assert (rows["wal-000000.bin"]["records"], rows["wal-000000.bin"]["last_sequence"]) == (9, 9)
    end1 = len(v1_chunk(ev[10:20]))
    d1 = rows["wal-000001.bin"]["damaged"]
    assert [(d["offset"], d["end_offset"], d["length"]) for d in d1] == [(end1, end1 + 20, 20)]
    assert rows["wal-000001.bin"]["records"] == 10
    u = rows["wal-000002.bin"]["unconvertible"]
    assert [(x["sequence"], x["offset"]) for x in u] == [(26, len(v1_chunk(ev[20:25])))] and "200" in u[0]["reason"]
    assert doc["damaged_bytes"] == cut - start10 + 20 and doc["unconvertible_records"] == 1
    assert [e[0] for e in replayed_skipping(cli, tmp_path / "v2")] == [s for s in range(1, 31) if s not in (10, 26)]
    assert tree_digest(src) == before
    human = cli("migrate", src, "--out", tmp_path / "v2b")
    assert f"damaged: bytes {end1}..{end1 + 20} (20 bytes)" in human.out
    assert "not convertible: seq 26" in human.out and "lost: seq 10" in human.out


def replayed_skipping(cli, path):
    r = cli("replay", path, "--jsonl", "--quiet", "--skip-damaged")
    return [(j["sequence"],) for j in r.jsonl()]


def test_a_mixed_directory_migrates_in_order_with_v2_records_copied_verbatim(tmp_path, cli):
    ev = corpus(1, 15)
    v2 = make_chunk(range(6, 11))
    src = write_dir(tmp_path / "mixed", {0: v1_chunk(ev[:5]), 1: v2, 2: v1_chunk(ev[10:])})
    rep = migrate(src, str(tmp_path / "out"))
    assert (rep.records, rep.converted, rep.copied, rep.lost_sequences, rep.exit_code) == (15, 10, 5, (), 0)
    assert [(c.file, c.action, c.first_sequence, c.last_sequence) for c in rep.chunks] == [
        ("wal-000000.bin", "converted", 1, 5), ("wal-000001.bin", "copied", 6, 10),
        ("wal-000002.bin", "converted", 11, 15)]
    got = [r for r in RecordWalk(str(tmp_path / "out"), keep_raw=True) if isinstance(r, Record)]
    assert [r.sequence for r in got] == list(range(1, 16))
    assert b"".join(r.raw for r in got[5:10]) == v2[8:]  # the V2 records, same bytes and CRCs
    assert [(r.sequence, r.type_ordinal, r.memory_id, r.timestamp_ms, r.payload) for r in got[:5]] == ev[:5]


def test_verify_names_the_migrate_command_and_it_runs_as_printed(tmp_path, cli, monkeypatch):
    events = corpus(1, 8)
    write_dir(tmp_path / "legacy wal", {0: v1_chunk(events)})
    monkeypatch.chdir(tmp_path)
    where = str(tmp_path / "legacy wal")
    for cwd, target, named in ((tmp_path, "legacy wal", "legacy wal"), (tmp_path, where, where),
                               (tmp_path, os.path.join("legacy wal", "wal-000000.bin"), "legacy wal"),
                               (where, ".", where)):
        monkeypatch.chdir(cwd)
        r = cli("verify", target, "--json")
        reason = json.loads(r.out)["paths"][0]["findings"][0]["reason"]
        printed = re.search(r"`(walctl migrate [^`]*)`", reason).group(1)
        argv = shlex.split(printed)
        assert argv[2] == named and argv[4] == named + ".v2"
        m = cli(*argv[1:])
        assert m.code == 0, m.err
        assert replayed(cli, argv[4]) == events
        os.rename(argv[4], str(tmp_path / f"done-{len(os.listdir(tmp_path))}"))


def test_refusals_change_nothing(tmp_path, cli):
    src = write_dir(tmp_path / "v1", {0: v1_chunk(corpus(1, 3))})
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep").write_text("mine")
    before = tree_digest(tmp_path)
    for out, words in ((busy, "not an empty directory"), (os.path.join(src, "inner"), "outside the source")):
        r = cli("migrate", src, "--out", out)
        assert r.code == 7 and words in r.err
        assert tree_digest(tmp_path) == before
    empty = write_dir(tmp_path / "empty", {0: encode_v1_file_header()})
    r = cli("migrate", empty, "--out", tmp_path / "nothing")
    assert r.code == 7 and "no record" in r.err and not (tmp_path / "nothing").exists()
    assert not (tmp_path / "nothing.tmp").exists()


# ---- crash at every step (tests/simfs.py) -------------------------------------------------------------

SRC = "/data/wal"


def _sim_source(seed: int) -> SimFS:
    fs = SimFS(seed)
    fs.makedirs_durable(SRC)
    ev = corpus(1, 12)
    for name, data in (("wal-000000.bin", v1_chunk(ev[:6])), ("wal-000001.bin", make_chunk(range(7, 10))),
                       ("wal-000002.bin", v1_chunk(ev[9:]))):
        fd = fs.open_append(os.path.join(SRC, name), create=True)
        fs.write(fd, data)
        fs.fsync(fd)
        fs.close(fd)
    fs.fsync_dir(SRC)
    return fs


def _files(fs, path) -> dict[str, bytes]:
    return {e.name: fs.read_range(e.path, 0, e.size) for e in fs.listdir(path)}


def test_a_crash_at_every_step_then_one_rerun_to_the_same_out_finishes():
    probe = _sim_source(0)
    start = probe.ops
    whole = migrate(SRC, "/data/out", fs=probe, max_chunk_bytes=600)
    steps = probe.ops - start
    want = _files(probe, "/data/out")
    assert whole.records == 12 and len(want) >= 3 and MIGRATE_MARK not in want
    for n in range(1, steps + 1):
        fs = _sim_source(n)
        source = _files(fs, SRC)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            migrate(SRC, "/data/out", fs=fs, max_chunk_bytes=600)
        fs.crash()
        if fs.exists("/data/out") and MIGRATE_MARK not in {e.name for e in fs.listdir("/data/out")}:
            assert _files(fs, "/data/out") == want, n  # no mark: whole
        rep = migrate(SRC, "/data/out", fs=fs, max_chunk_bytes=600)
        assert rep.records == 12 and rep.exit_code == 0, n
        assert _files(fs, "/data/out") == want, f"crash at {n}"
        assert not fs.exists("/data/out.tmp") and _files(fs, SRC) == source


def test_a_leftover_tmp_that_is_not_ours_is_refused():
    fs = _sim_source(0)
    fs.makedirs_durable("/data/out.tmp")
    fd = fs.open_append("/data/out.tmp/notes", create=True)
    fs.write(fd, b"operator's")
    fs.fsync(fd)
    fs.close(fd)
    with pytest.raises(WalctlError) as err:
        migrate(SRC, "/data/out", fs=fs)
    assert err.value.exit_code == 7 and "not left by walctl migrate" in err.value.reason
    assert _files(fs, "/data/out.tmp") == {"notes": b"operator's"} and not fs.exists("/data/out")


def test_a_leftover_tmp_holding_only_the_marks_staging_file_is_ours_to_clear():
    """Interrupted (Ctrl-C) while the mark itself was being written: OUT.tmp holds only the mark's staging
    file. The rerun clears it and finishes (salvage's sweep found this; both now share store/marked.py)."""
    want = _files(_done(), "/data/out")
    fs = _sim_source(0)
    fs.makedirs_durable("/data/out.tmp")
    fd = fs.open_append("/data/out.tmp/" + MIGRATE_MARK + ".tmp", create=True)
    fs.write(fd, b"walctl mig")
    fs.fsync(fd)
    fs.close(fd)
    rep = migrate(SRC, "/data/out", fs=fs, max_chunk_bytes=600)
    assert rep.records == 12 and rep.exit_code == 0
    assert _files(fs, "/data/out") == want and not fs.exists("/data/out.tmp")


def _done() -> SimFS:
    fs = _sim_source(0)
    migrate(SRC, "/data/out", fs=fs, max_chunk_bytes=600)
    return fs


def test_a_damaged_v2_chunk_in_a_mixed_directory_is_copied_past_its_damage_with_the_range_named(tmp_path):
    """V1 seq 1..5, then a V2 chunk whose record 8 rotted mid-chunk: 6, 7 and 9, 10 are copied (verbatim),
    bytes of record 8 are reported for that chunk, and the copy's verify names the lost sequence."""
    from conftest import record_offsets

    v2 = bytearray(make_chunk(range(6, 11)))
    offs = record_offsets(bytes(v2))
    v2[offs[2] + 45] ^= 0x01  # a payload byte of seq 8: its payload CRC fails, later records are intact
    src = write_dir(tmp_path / "mixed", {0: v1_chunk(corpus(1, 5)), 1: bytes(v2)})
    rep = migrate(src, str(tmp_path / "out"))
    row = rep.chunks[1]
    assert (row.action, row.records, row.first_sequence, row.last_sequence) == ("copied", 4, 6, 10)
    assert [(d["offset"], d["end_offset"]) for d in row.damaged] == [(offs[2], offs[3])]
    assert rep.lost_sequences == ((8, 8),) and rep.exit_code == 4
    assert (rep.converted, rep.copied) == (5, 4)
    got = [r for r in RecordWalk(str(tmp_path / "out"), keep_raw=True) if isinstance(r, Record)]
    assert [r.sequence for r in got] == [1, 2, 3, 4, 5, 6, 7, 9, 10]
    assert got[7].raw == bytes(v2[offs[3]:offs[4]])
    finding = [f for f in rep.out_report.findings if f.cls == "sequence-gap"]
    assert finding and finding[0].sequence_range == (8, 8)
