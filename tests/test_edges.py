"""Issue #15, "bad input gets a contract exit code": one bounded-depth JSON loader for every JSON reader,
and the single-command edges that ended in "internal error" (replay --skip-damaged on segments, salvage of
V1 and of sequences <= 0, --hexdump of V1, archive prune with a bad uploaded_at, write/import type and
memoryId bounds)."""
from __future__ import annotations

import json
import os
import shutil
import struct
import time

import pytest

from conftest import make_chunk, tree_digest
from walctl.format import jsonload

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
DEEP = "[" * 100_000


# --- the loader ---------------------------------------------------------------------------------------------


def nested(depth: int, kind: str = "[") -> str:
    close = "]" if kind == "[" else "}"
    if kind == "{":
        return '{"a":' * depth + "1" + close * depth
    return kind * depth + close * depth


def test_loader_bound_is_exact_and_the_same_for_arrays_and_objects():
    bound = jsonload.MAX_DEPTH
    assert bound == 256
    for kind in "[{":
        assert jsonload.nesting_depth(nested(bound, kind)) == bound
        jsonload.loads(nested(bound, kind))  # at the bound: fine
        with pytest.raises(jsonload.TooDeep, match="nested deeper than 256"):
            jsonload.loads(nested(bound + 1, kind))
    mixed = '{"a":[' * 129 + "0" + "]}" * 129  # 258 levels, alternating
    with pytest.raises(ValueError):
        jsonload.loads(mixed)


def test_loader_ignores_brackets_inside_strings_and_counts_only_nesting():
    many_flat = "[" + ",".join(["[]"] * 5000) + "]"  # 10,001 brackets, depth 2
    assert jsonload.loads(many_flat)[0] == [] and jsonload.nesting_depth(many_flat) == 2
    in_strings = json.dumps({"k": "[" * 5000 + '\\"{' * 300})  # escaped quotes too
    assert jsonload.nesting_depth(in_strings) == 1 and jsonload.loads(in_strings)["k"].startswith("[[[")


@pytest.mark.parametrize("text", [DEEP, "{" * 100_000, '{"a":' * 50_000, "[" * 300 + "]" * 300])
def test_loader_refuses_deep_nesting_as_a_value_error_not_recursion(text):
    with pytest.raises(ValueError) as err:
        jsonload.loads(text)
    assert isinstance(err.value, jsonload.TooDeep)


def test_loader_nan_surrogates_and_bytes():
    with pytest.raises(ValueError, match="NaN is not JSON"):
        jsonload.loads('{"x": NaN}')
    assert jsonload.loads('{"x": NaN}', allow_nan=True)["x"] != 0
    assert jsonload.loads('"\\ud800"') == "\ud800"
    with pytest.raises(jsonload.NotText):
        jsonload.loads('{"\\udc00": 1}', allow_lone_surrogates=False)
    assert jsonload.loads('"\\ud83d\\ude00"', allow_lone_surrogates=False) == "\U0001F600"  # a pair is text
    with pytest.raises(jsonload.NotText, match="not UTF-8 text .byte 0xff at offset 0"):
        jsonload.loads('"x"'.encode("utf-16"))  # bytes are UTF-8, never guessed


# --- deep JSON in every reader: a finding or a usage error, never an internal error ----------------------


def test_deep_json_on_write_and_import_input_is_a_usage_error(tmp_path, cli, monkeypatch):
    import io

    for args in (("write", tmp_path / "w"), ("import", tmp_path / "i", "--format", "jsonl")):
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(DEEP.encode() + b"\n")))
        r = cli(*args)
        assert r.code == 2 and "nested deeper than 256" in r.err and "internal error" not in r.err, args
    assert os.listdir(tmp_path) == []  # nothing was created


def test_deep_json_state_for_checkpoint_create_and_merge_is_a_usage_error(tmp_path, cli):
    state = tmp_path / "state.json"
    state.write_text('{"a":' * 100_000)
    r = cli("checkpoint", "create", tmp_path / "ck", "--state", state, "--to", "1")
    assert r.code == 2 and "nested deeper than 256" in r.err and "internal error" not in r.err
    assert not (tmp_path / "ck").exists()
    merged = tmp_path / "m.json"
    merged.write_text(DEEP)
    r = cli("merge", merged, merged, "--out", tmp_path / "out")
    assert r.code == 2 and "nested deeper than 256" in r.err and "internal error" not in r.err
    assert not (tmp_path / "out").exists()


def test_deep_json_segment_frame_is_corruption_on_that_frame(tmp_path, cli):
    seg = tmp_path / "seg"
    shutil.copytree(os.path.join(EXAMPLES, "segments"), seg)
    last = seg / "wal_00000002.log"
    data = last.read_bytes()
    body = b'{"a":' + DEEP.encode() + b"}"
    last.write_bytes(data + struct.pack(">I", len(body)) + body)
    for args in (("verify", seg, "--json"), ("inspect", seg, "--jsonl"), ("replay", seg)):
        r = cli(*args)
        assert r.code in (1, 3) and "internal error" not in r.err, (args, r.err[-300:])
    doc = cli("verify", seg, "--json").json()
    finding = [f for p in doc["paths"] for f in p["findings"] if f["offset"] == len(data)]
    assert finding and "nested deeper than 256" in finding[0]["reason"]


def test_deep_json_in_the_quarantine_manifest_is_a_reported_line(tmp_path, cli):
    wal = tmp_path / "wal"
    wal.mkdir()
    (wal / "wal-000000.bin").write_bytes(make_chunk([1, 2]))
    q = wal / ".quarantine"
    q.mkdir()
    good = {"time": "2026-11-21T10:00:00.000Z", "action": "truncate", "source": "wal-000000.bin", "offset": 0, "length": 1,
            "sha256": "0" * 64, "evidence": ".quarantine/x", "reason": "r", "walctl_version": "0"}
    (q / "x").write_bytes(b"x")
    (q / "MANIFEST.jsonl").write_text(DEEP + "\n" + json.dumps(good) + "\n")
    r = cli("quarantine", "list", wal, "--json")
    assert r.code in (0, 3) and "internal error" not in r.err
    assert "MANIFEST.jsonl line 1" in r.out


def test_deep_json_archive_manifest_is_rebuilt_from_a_listing(tmp_path, cli):
    wal = tmp_path / "wal"
    wal.mkdir()
    from walctl.ops.wal.write import WalWriter

    with WalWriter(str(wal), sync="none", max_chunk_bytes=4096) as w:
        for i in range(60):
            w.append(0, f"m{i}", b"p" * 200)
    url = "file://" + str(tmp_path / "a")
    assert cli("archive", "push", wal, url).code == 0
    (ns,) = os.listdir(tmp_path / "a")
    (tmp_path / "a" / ns / "MANIFEST.json").write_text(DEEP)
    r = cli("archive", "list", url, "--json")
    assert r.code in (0, 3) and "internal error" not in r.err
    assert "does not parse (JSON nested deeper than 256 levels): rebuilt from a listing" in r.out + r.err


# --- one command at a time ----------------------------------------------------------------------------------


def test_replay_skip_damaged_on_a_damaged_segment_directory(tmp_path, cli):
    seg = tmp_path / "seg"
    shutil.copytree(os.path.join(EXAMPLES, "segments"), seg)
    first = seg / "wal_00000001.log"
    b = bytearray(first.read_bytes())
    b[len(b) // 2] ^= 0xFF
    first.write_bytes(bytes(b))
    r = cli("replay", seg)
    assert r.code == 3 and "internal error" not in r.err
    r = cli("replay", seg, "--skip-damaged")
    assert r.code == 3 and "internal error" not in r.err
    seqs = [e["sequence"] for e in r.jsonl()]
    assert len(seqs) == 39 and 13 not in seqs and seqs == sorted(seqs) and seqs[-1] == 40
    assert "skipped wal_00000001.log: offset 2074" in r.err and "lost sequences 13..13" in r.err


def test_salvage_of_a_legacy_v1_directory_is_unsupported_and_creates_nothing(tmp_path, cli):
    out = tmp_path / "out"
    r = cli("salvage", os.path.join(EXAMPLES, "wal-legacy-v1"), "--out", out)
    assert r.code == 5 and "legacy V1" in r.err and "internal error" not in r.err
    assert os.listdir(tmp_path) == []  # neither OUT nor OUT.tmp


@pytest.mark.parametrize("seqs", [[0, 1, 2], [-2, -1, 0, 1]])
def test_salvage_copies_sequences_at_or_below_zero(tmp_path, cli, seqs):
    src = tmp_path / "wal"
    src.mkdir()
    chunk = make_chunk(seqs)
    (src / "wal-000000.bin").write_bytes(chunk)
    r = cli("salvage", src, "--out", tmp_path / "out", "--json")
    doc = r.json()
    assert "internal error" not in r.err and (doc["records"], doc["first_sequence"], doc["last_sequence"]) == (
        len(seqs), seqs[0], seqs[-1])
    assert (tmp_path / "out" / "wal-000000.bin").read_bytes() == chunk  # copied verbatim
    assert sorted(os.listdir(tmp_path)) == ["out", "wal"]  # no OUT.tmp left


def test_inspect_hexdump_on_the_legacy_v1_example(cli):
    r = cli("inspect", "--hexdump", os.path.join(EXAMPLES, "wal-legacy-v1"))
    assert r.code == cli("verify", os.path.join(EXAMPLES, "wal-legacy-v1")).code == 5  # V1: unsupported version
    assert "internal error" not in r.err
    assert "== wal-000000.bin offset 8 seq 1 (41 bytes)" in r.out
    lines = r.out.splitlines()
    i = lines.index("== wal-000000.bin offset 8 seq 1 (41 bytes)")
    fields = [ln.split()[1] for ln in lines[i + 1:i + 9]]
    assert fields == ["length", "sequence", "type", "idLen", "memoryId", "timestamp", "payloadLen", "payload"]
    assert "8..12" in lines[i + 1] and "no CRC in V1" in lines[i + 1] and "'mem-0001'" in lines[i + 5]


def test_archive_prune_with_a_non_iso_uploaded_at_keeps_that_object(tmp_path, cli):
    from walctl.ops.archive.prune import prune
    from walctl.ops.checkpoints.checkpoint import create as create_checkpoint
    from walctl.ops.wal.write import WalWriter

    wal, ck = tmp_path / "wal", tmp_path / "ck"
    with WalWriter(str(wal), sync="none", max_chunk_bytes=4096) as w:
        for i in range(120):
            w.append(0, f"m{i}", b"p" * 200)
    for s in (60, 100):
        create_checkpoint(str(ck), {"memory_blocks": [], "wal_sequence_hint": s}, s)
    url = "file://" + str(tmp_path / "a")
    assert cli("archive", "push", wal, url, "--namespace", "n", "--checkpoints", ck).code == 0
    mpath = tmp_path / "a" / "n" / "MANIFEST.json"
    doc = json.loads(mpath.read_text())
    doomed = prune(url, namespace="n", keep=1, max_age_s=0, now=time.time() + 10).delete
    assert doomed
    victim = next(o for o in doc["objects"] if o["name"] == doomed[0])
    victim["uploaded_at"] = "yesterday"
    mpath.write_text(json.dumps(doc))
    rep = prune(url, namespace="n", keep=1, max_age_s=0, now=time.time() + 10)
    # issue #24: a non-ISO time makes the manifest invalid (named by object and field); prune deletes nothing
    # from an archive whose manifest is damaged, and says why for each object
    assert rep.delete == ()
    assert "uploaded_at: \"yesterday\" is not an ISO 8601 time" in rep.keep_reasons[victim["name"]]
    assert all("nothing is deleted while the manifest is damaged" in rep.keep_reasons[n] for n in doomed)
    r = cli("archive", "prune", url, "--namespace", "n", "--keep", "1", "--max-age", "0s", "--apply", "--json")
    assert r.code == 0 and "internal error" not in r.err
    left = {o["name"] for o in json.loads(mpath.read_text())["objects"]}
    assert victim["name"] in left and (tmp_path / "a" / "n" / victim["kind"] / victim["name"]).exists()


def test_write_refuses_a_long_memory_id_and_type_ordinals_over_15_creating_nothing(tmp_path, cli, monkeypatch):
    import io

    r = cli("write", tmp_path / "w", "--type", "REMEMBER", "--id", "x" * 65_536, "--payload", "p")
    assert r.code == 2 and "memoryId of 65536 bytes" in r.err
    r = cli("write", tmp_path / "w", "--type", "16", "--payload", "p")
    assert r.code == 2 and "type ordinal 16 is outside 0..15" in r.err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'{"type": 255, "id": "m"}\n')))
    r = cli("write", tmp_path / "w", "--json")
    assert r.code == 2 and r.json()["exit_code"] == 2 and r.json()["records"] == 0
    assert os.listdir(tmp_path) == []
    r = cli("write", tmp_path / "w", "--type", "15", "--id", "x" * 65_535, "--payload", "p")
    assert r.code == 0 and cli("verify", tmp_path / "w").code == 0  # the bounds themselves are fine


def _replay_line(seq=1, **kw):
    line = {"sequence": seq, "type": "REMEMBER", "type_ordinal": 0, "memory_id": "m", "memory_id_hex": "6d",
            "timestamp_ms": 1795300000000, "payload_hex": "00"}
    line.update(kw)
    return (json.dumps(line) + "\n").encode()


@pytest.mark.parametrize("line, why", [
    (_replay_line(type="(16)", type_ordinal=16), "type_ordinal 16 is not an integer in 0..15"),
    (_replay_line(type=16, type_ordinal=16), "type_ordinal 16 is not an integer in 0..15"),
    (_replay_line(type="FORGET"), "type 'FORGET' and type_ordinal 0 disagree"),
    (_replay_line(type=3), "type 3 and type_ordinal 0 disagree"),
])
def test_import_refuses_bad_type_ordinals_and_disagreeing_types(tmp_path, cli, monkeypatch, line, why):
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(line)))
    r = cli("import", tmp_path / "i", "--format", "jsonl")
    assert r.code == 2 and why in r.err and "internal error" not in r.err
    assert os.listdir(tmp_path) == []
    ok = _replay_line()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(ok)))
    assert cli("import", tmp_path / "i", "--format", "jsonl").code == 0


def test_read_only_commands_on_these_inputs_change_nothing(tmp_path, cli):
    src = tmp_path / "v1"
    shutil.copytree(os.path.join(EXAMPLES, "wal-legacy-v1"), src)
    before = tree_digest(src)
    cli("inspect", "--hexdump", src)
    cli("replay", src, "--skip-damaged")
    assert tree_digest(src) == before
