"""The CLI contract: exit codes, JSON schema, --jsonl keys, one-line errors, filters, forensic views."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import case_dir, flip_bit, load_expected, make_chunk, record_offsets, truncate_to, write_dir

CONTRACT_JSONL_KEYS = {"sequence", "type", "type_ordinal", "memory_id", "memory_id_hex", "timestamp_ms",
                       "compressed", "payload_hex", "stored_len", "file", "offset"}
FINDING_KEYS = {"class", "severity", "exit_code", "file", "offset", "end_offset", "length", "sequence_range",
                "reason", "stored", "computed"}


def test_verify_json_document_schema_and_findings(cli):
    r = cli("verify", "--json", case_dir("payload-bitflip-midlog"), case_dir("basic"))
    assert r.code == 3
    doc = r.json()
    assert doc["schema"] == "walctl.verify/2" and doc["walctl_version"]
    assert doc["exit_code"] == 3 and doc["verdict"] == "corrupt"
    bad, good = doc["paths"]
    assert (bad["exit_code"], good["exit_code"]) == (3, 0)
    (f,) = bad["findings"]
    assert FINDING_KEYS <= set(f)
    assert (f["class"], f["offset"], f["end_offset"], f["length"]) == ("mid-log-damage", 2368, 2616, 248)
    assert f["sequence_range"] == [25, 25] and f["salvageable_records"] == 24
    assert bad["summary"] == {"chunks": 1, "records": 48, "first_sequence": 1, "last_sequence": 49,
                              "bytes": 9312, "damaged_bytes": 248, "findings": 1}
    assert good["summary"]["records"] == 49 and good["findings"] == []


@pytest.mark.parametrize("case, code, classes, last", [
    ("basic", 0, [], 49), ("torn-tail-mid-payload", 1, ["tail-damage"], 28),
    ("payload-bitflip-midlog", 3, ["mid-log-damage"], 49), ("wrong-file-magic", 5, ["unsupported"], None)])
def test_verify_exit_codes_on_vectors(cli, case, code, classes, last):
    r = cli("verify", case_dir(case))
    assert r.code == code
    assert r.err == ""  # findings are the output; stderr is for errors about the run
    doc = cli("verify", "--json", case_dir(case)).json()  # the code comes from what verify found
    (path,) = doc["paths"]
    assert (doc["exit_code"], path["exit_code"]) == (code, code)
    assert [f["class"] for f in path["findings"]] == classes and path["summary"]["last_sequence"] == last
    assert all(f["exit_code"] == code for f in path["findings"])


def test_verify_human_output_names_file_offset_and_values(cli):
    r = cli("verify", case_dir("payload-bitflip-midlog"))
    assert "CORRUPT (exit 3)" in r.out
    assert "wal-000000.bin: offset 2368..2616: payload CRC mismatch" in r.out
    assert "stored 0x8a35a9a6, computed 0x7aaffd0a" in r.out
    assert "salvageable after it: 24 records, seq 26..49" in r.out


def test_verify_quiet_prints_nothing(cli):
    r = cli("verify", "-q", case_dir("torn-tail-mid-payload"))
    assert (r.code, r.out, r.err) == (1, "", "")


def test_strict_turns_anomalies_into_exit_3(cli, tmp_path):
    from conftest import make_record
    from walctl.format.v2 import encode_file_header

    d = write_dir(tmp_path / "w", {0: encode_file_header() + make_record(1, reserved32=5)})
    assert cli("verify", d).code == 0
    r = cli("verify", "--strict", "--json", d)
    assert r.code == 3 and r.json()["strict"] is True
    assert r.json()["paths"][0]["findings"][0]["code"] == "reserved-nonzero"


def test_multiple_paths_exit_with_precedence(cli, tmp_path):
    gap = write_dir(tmp_path / "gap", {0: make_chunk([1, 2, 5])})
    r = cli("verify", case_dir("torn-tail-mid-payload"), gap, case_dir("wrong-file-magic"))
    assert r.code == 4  # 4 before 5 before 1
    doc = cli("verify", "--json", case_dir("torn-tail-mid-payload"), gap, case_dir("wrong-file-magic")).json()
    assert doc["exit_code"] == 4 and [p["exit_code"] for p in doc["paths"]] == [1, 4, 5]
    (g,) = doc["paths"][1]["findings"]  # the gap: sequences 3 and 4 are in no chunk
    assert (g["exit_code"], g["sequence_range"]) == (4, [3, 4])
    assert doc["paths"][1]["summary"]["records"] == 3


@pytest.mark.parametrize("args", [
    ["verify", "--bogus", "x"],
    ["verify", "--jobs", "-1", "x"],
    ["inspect", case_dir("basic"), "--type", "NOPE"],
    ["inspect", case_dir("basic"), "--since", "yesterday"],  # (a missing path would be exit 6)
    ["inspect", case_dir("basic"), "--payload", "klingon"],
    ["nosuchcommand"],
])
def test_usage_errors_are_exit_2_and_one_line(cli, args):
    r = cli(*args)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("walctl: error: ")


def test_errors_are_one_line_without_traceback(cli, tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(os.urandom(100))
    for args, code in ((["inspect", str(junk)], 5), (["stats", str(tmp_path / "absent")], 6),
                       (["inspect", "--jsonl", str(tmp_path / "absent")], 6)):
        r = cli(*args)
        assert r.code == code
        assert r.err.count("\n") == 1 and r.err.startswith("walctl: error: ") and "Traceback" not in r.err


def test_inspect_jsonl_matches_contract_and_expected_json(cli):
    r = cli("inspect", "--jsonl", case_dir("compressed"))
    assert r.code == 0
    rows = r.jsonl()
    expected = load_expected("compressed")["appended"]
    assert len(rows) == len(expected)
    for row, want in zip(rows, expected):
        assert set(row) == CONTRACT_JSONL_KEYS
        assert row["payload_hex"] == want["payload_hex"]  # decoded, not stored
        assert (row["sequence"], row["type"], row["memory_id"], row["timestamp_ms"], row["compressed"]) == \
            (want["sequence"], want["type"], want["memory_id"], want["timestamp_ms"], want["stored_compressed"])
        assert (row["file"], row["offset"]) == (want["chunk"], want["record_offset"])


def test_inspect_jsonl_invalid_utf8_id_and_unknown_type(cli, tmp_path):
    from conftest import make_record
    from walctl.format.v2 import encode_file_header

    d = write_dir(tmp_path / "w", {0: encode_file_header() + make_record(1, memory_id=b"a\xffb", type_ordinal=200)})
    (row,) = cli("inspect", "--jsonl", d).jsonl()
    assert row["memory_id"] == "a\ufffdb" and row["memory_id_hex"] == "61ff62"
    assert row["type"] == 200 and row["type_ordinal"] == 200


def test_inspect_filters_combine(cli):
    d = case_dir("basic")
    expected = load_expected("basic")["appended"]
    rows = cli("inspect", "--jsonl", d, "--from", "10", "--to", "30", "--type", "remember").jsonl()
    assert [r["sequence"] for r in rows] == [e["sequence"] for e in expected
                                             if 10 <= e["sequence"] <= 30 and e["type"] == "REMEMBER"]
    rows = cli("inspect", "--jsonl", d, "--id", "mém-ü-日本").jsonl()
    assert [r["sequence"] for r in rows] == [e["sequence"] for e in expected if e["memory_id"] == "mém-ü-日本"]
    ts = expected[5]["timestamp_ms"]
    rows = cli("inspect", "--jsonl", d, "--since", str(ts), "--limit", "3").jsonl()
    assert [r["sequence"] for r in rows] == [e["sequence"] for e in expected if e["timestamp_ms"] >= ts][:3]
    rows = cli("inspect", "--jsonl", d, "--type", "15", "--type", "CHAIN_LINK").jsonl()
    assert sorted(r["type_ordinal"] for r in rows) == sorted(e["type_ordinal"] for e in expected
                                                            if e["type_ordinal"] in (14, 15))


def test_inspect_since_accepts_iso_8601(cli):
    expected = load_expected("basic")["appended"]
    from datetime import datetime, timezone

    ts = expected[40]["timestamp_ms"]
    iso = datetime.fromtimestamp(ts / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    rows = cli("inspect", "--jsonl", case_dir("basic"), "--since", iso).jsonl()
    assert rows[0]["sequence"] == expected[40]["sequence"]


def test_inspect_reads_past_midlog_damage_and_reports_it(cli):
    r = cli("inspect", "--jsonl", case_dir("payload-bitflip-midlog"))
    assert r.code == 3
    seqs = [row["sequence"] for row in r.jsonl()]
    assert seqs == [s for s in range(1, 50) if s != 25]
    assert "offset 2368..2616: mid-log damage: payload CRC mismatch" in r.err


def test_inspect_table_shows_damage_row_and_payload_views(cli):
    r = cli("inspect", case_dir("payload-bitflip-midlog"), "--from", "20", "--to", "30")
    assert "DAMAGE" in r.out and "wal-000000.bin@2368" in r.out
    r = cli("inspect", case_dir("basic"), "--to", "1")
    assert "hello world" in r.out
    r = cli("inspect", case_dir("basic"), "--to", "1", "--payload", "base64")
    assert "aGVsbG8gd29ybGQ=" in r.out


def test_inspect_hexdump_names_fields_and_marks_crcs(cli):
    r = cli("inspect", case_dir("basic"), "--hexdump", "--limit", "1")
    out = r.out
    for name in ("record magic", "record version", "flags", "type", "idLen", "sequence", "timestamp",
                 "payloadLen", "payload CRC", "header CRC", "memoryId", "payload"):
        assert name in out
    assert out.count("valid") >= 6 and "INVALID" not in out
    assert "68 " in out or " 68" in out  # 'h' of hello world in the dump


def test_inspect_around_damaged_offset_marks_invalid_crc(cli):
    path = os.path.join(case_dir("payload-bitflip-midlog"), "wal-000000.bin")
    r = cli("inspect", path, "--around", "2441", "--context", "16")
    assert r.code == 3 == cli("verify", path).code  # the code of the damage at that offset (mid-log)
    assert "record at offset 2368 (damaged)" in r.out
    assert "payload CRC          0x8a35a9a6 (computed 0x7aaffd0a) INVALID" in r.out
    assert "[60]" in r.out  # the flipped byte is bracketed
    r = cli("inspect", path, "--around", "99999")  # outside the file: a usage error, no inverted range
    assert r.code == 2 and r.out == "" and "outside the file" in r.err


def test_inspect_legacy_v1_chunk(cli, tmp_path):
    import struct

    def v1(seq, mid, ts, payload):
        body = struct.pack(">qBI", seq, 0, len(mid)) + mid + struct.pack(">qI", ts, len(payload)) + payload
        return struct.pack(">I", len(body)) + body

    data = b"SPEC\x00\x00\x00\x01" + v1(1, b"a", 10, b"one") + v1(2, b"b", 20, b"two")
    d = write_dir(tmp_path / "w", {0: data})
    rows = cli("inspect", "--jsonl", d).jsonl()
    assert [(r["sequence"], r["memory_id"], bytes.fromhex(r["payload_hex"])) for r in rows] == \
        [(1, "a", b"one"), (2, "b", b"two")]
    assert cli("verify", d).code == 5  # readable, but not verifiable
    (f,) = cli("verify", "--json", d).json()["paths"][0]["findings"]
    assert (f["class"], f["exit_code"], f["file"]) == ("unsupported", 5, "wal-000000.bin")


def test_stats_json(cli):
    r = cli("stats", "--json", case_dir("compressed"))
    doc = r.json()
    expected = load_expected("compressed")["appended"]
    assert doc["schema"] == "walctl.stats/2" and r.code == 0
    assert doc["records"] == len(expected)
    assert doc["payload_bytes"] == sum(e["payload_len"] for e in expected)
    comp = [e for e in expected if e["stored_compressed"]]
    assert doc["compression"]["payload_bytes"] == sum(e["payload_len"] for e in comp)
    assert doc["compression"]["ratio"] > 1
    assert doc["sequence_range"] == [1, len(expected)]
    assert doc["timestamp_range_ms"] == [min(e["timestamp_ms"] for e in expected),
                                         max(e["timestamp_ms"] for e in expected)]
    by_type = {t["type"]: t["records"] for t in doc["types"]}
    for name in {e["type"] for e in expected}:
        assert by_type[name] == sum(1 for e in expected if e["type"] == name)


def test_stats_human_and_damaged_exit_code(cli):
    r = cli("stats", case_dir("torn-tail-mid-payload"))
    assert r.code == 1 and "REMEMBER" in r.out and "torn" in r.out
    doc = cli("stats", "--json", case_dir("torn-tail-mid-payload")).json()
    # the vector: records 1..28 intact, record 29 torn at offset 3064 of a 3215-byte file (8-byte header)
    assert (doc["exit_code"], doc["verdict"], doc["sequence_range"]) == (1, "torn", [1, 28])
    assert doc["records"] == 28 and doc["file_bytes"] == 3215 and doc["record_bytes"] == 3064 - 8
    assert sum(t["records"] for t in doc["types"]) == 28


def test_version_and_python_m(tmp_path):
    out = subprocess.run([sys.executable, "-m", "walctl", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("walctl 0.1.0\n")
    import importlib

    # crcmod falls back to pure Python when its C extension did not build: --version says which, without
    # calling it slow (it only checksums short ledger lines; the bulk CRC-32 is zlib's)
    ext = importlib.import_module("crcmod.crcmod")._usingExtension
    assert ("crcmod 1.7 (C extension)" if ext else "crcmod 1.7 (pure Python)") in out.stdout
    assert "slow" not in out.stdout and out.stderr == ""


@pytest.mark.parametrize("seed", range(3))
def test_subprocess_exit_code_and_no_traceback_on_junk(tmp_path, cli, seed):
    import random

    (tmp_path / "wal-000000.bin").write_bytes(b"SPEC\x00\x00\x00\x02" + random.Random(seed).randbytes(5000))
    out = subprocess.run([sys.executable, "-m", "walctl", "verify", "--json", str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert "Traceback" not in out.stderr + out.stdout and out.stderr == ""
    doc = json.loads(out.stdout)  # the process exits with the code of what verify found in the junk
    (f,) = doc["paths"][0]["findings"]
    assert out.returncode == doc["exit_code"] == f["exit_code"] and doc["paths"][0]["summary"]["records"] == 0
    assert (f["file"], f["offset"], f["end_offset"]) == ("wal-000000.bin", 8, 5008)
    assert cli("verify", "--json", str(tmp_path)).json()["paths"] == doc["paths"]  # as the library says


def test_help_ends_with_an_example_for_every_command(cli):
    for cmd in ("verify", "inspect", "stats"):
        r = cli(cmd, "--help")
        assert r.code == 0
        assert "Example: walctl " + cmd in r.out
    r = cli("--help")
    assert "Exit codes" in r.out and "Example: walctl" in r.out


def test_torn_then_truncate_story_through_cli(cli, tmp_path):
    """Break it, see it broken, with the exact bytes a repair would cut."""
    c0 = make_chunk(range(1, 11))
    offs = record_offsets(c0)
    d = write_dir(tmp_path / "w", {0: flip_bit(truncate_to(c0, offs[9] + 30), offs[9] + 2)})
    doc = cli("verify", "--json", d).json()
    (f,) = doc["paths"][0]["findings"]
    assert (f["class"], f["offset"], f["length"], doc["exit_code"]) == ("tail-damage", offs[9], 30, 1)
    assert json.dumps(doc)  # serialisable all the way down


def test_inspect_auto_payload_view_decodes_msgpack_maps(cli, tmp_path):
    import msgpack

    from conftest import make_record
    from walctl.format.v2 import encode_file_header

    d = write_dir(tmp_path / "w", {0: encode_file_header() + make_record(1, payload=msgpack.packb({"k": [1, 2]}))})
    r = cli("inspect", d)
    assert '{"k": [1, 2]}' in r.out
    r = cli("inspect", d, "--jsonl", "--payload", "msgpack")
    assert r.jsonl()[0]["payload_view"] == "msgpack" and r.jsonl()[0]["payload"] == '{"k": [1, 2]}'
