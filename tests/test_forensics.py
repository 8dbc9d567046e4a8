"""From a finding to its bytes: inspect --damaged / --seq / --around CHUNK:OFFSET, quarantined pieces
read at their original offset, partial headers decoded as far as the bytes go."""
from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from conftest import flip_bit, make_chunk, make_record, record_offsets, tree_digest, truncate_to, write_dir, zero_fill
from walctl.format.partial import decode_partial, decode_pieces

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


# ---- format/partial.py: pure, never raises ----------------------------------------------------------

def test_a_29_byte_partial_header_names_its_sequence_type_and_lengths():
    rec = make_record(81, b"abcd", memory_id=b"mem-0004", type_ordinal=5)
    p = decode_partial(rec[:29])
    assert (p.sequence, p.fields["type_ordinal"], p.fields["id_len"], p.fields["stored_len"]) == (81, 5, 8, 4)
    assert "payload_crc" not in p.fields and "header_crc" not in p.fields
    assert (p.header_complete, p.header_crc_ok, p.payload_crc_ok, p.complete) == (False, None, None, False)
    assert p.record_size == len(rec) and p.available == 29


def test_a_longer_torn_record_shows_the_payload_bytes_present():
    payload = bytes(range(61))
    rec = make_record(7, payload, memory_id=b"m")
    cut = rec[:40 + 1 + 20]
    p = decode_partial(cut)
    assert p.header_crc_ok is True and p.payload_present == 20 and p.payload_crc_ok is None
    from walctl.format.hexdump import record_fields

    fields = {f.name: f for f in record_fields(cut, 0, base=1000)}
    assert fields["payload"].value.startswith("20 of 61 bytes present (41 missing): " + payload[:20].hex())
    assert (fields["payload"].start, fields["payload"].end, fields["payload"].status) == (1041, 1061, "unknown")
    assert fields["header CRC"].status == "valid" and fields["payload CRC"].status == "unknown"


def test_a_complete_record_with_a_bad_payload_crc_is_decoded_as_usual_and_marked():
    rec = flip_bit(make_record(3, b"hello"), 40 + 3 + 1)
    p = decode_partial(rec)
    assert p.complete and p.header_crc_ok is True and p.payload_crc_ok is False
    assert p.computed_payload_crc is not None and p.computed_payload_crc != p.fields["payload_crc"]


def test_pieces_walk_records_end_to_end_and_stop_at_the_torn_one():
    a, b = make_record(4, b"x" * 10), make_record(5, b"y" * 30)
    recs = decode_pieces(a + b[:33])
    assert [(r.offset, r.sequence, r.complete) for r in recs] == [(0, 4, True), (len(a), 5, False)]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.integers(min_value=-5, max_value=250))
def test_any_bytes_decode_without_raising(data, offset):
    p = decode_partial(data, offset)
    assert 0 <= p.available <= len(data)
    assert set(p.fields) <= set(RecordHeader_fields())
    assert len(decode_pieces(data)) <= 64


def RecordHeader_fields():
    from walctl.format.v2 import RecordHeader

    return RecordHeader._fields


# ---- inspect --damaged --------------------------------------------------------------------------------

def _damaged(tmp_path):
    c0 = make_chunk(range(1, 6))
    o0 = record_offsets(c0)
    c0 = flip_bit(c0, o0[2] + 44)  # a payload byte of seq 3: mid-log
    c1 = make_chunk(range(6, 9))
    size1 = len(c1)
    c1 = zero_fill(c1, 2000)  # a long zero-filled tail: start and end shown, the middle counted
    return write_dir(tmp_path / "wal", {0: c0, 1: c1}), o0, size1


def test_inspect_damaged_shows_every_region_in_order_with_lost_and_resumes(cli, tmp_path):
    d, o0, size1 = _damaged(tmp_path)
    before = tree_digest(d)
    r = cli("inspect", d, "--damaged", "--context", "8")
    assert r.code == 3
    out = r.out
    assert "2 damaged regions" in out
    first, second = out.index("=== 1/2 wal-000000.bin: mid-log-damage"), out.index("=== 2/2 wal-000001.bin: tail-damage")
    assert first < second
    part1 = out[first:second]
    assert f"lost:    {o0[3] - o0[2]} bytes at offsets {o0[2]}..{o0[3]}; sequence 3; last good sequence before it 2" in part1
    assert f"resumes: intact record at offset {o0[3]}, sequence 4 (2 records, seq 4..5, in this chunk)" in part1
    assert f"-- record at offset {o0[2]} (damaged)" in part1
    assert "payload CRC" in part1 and "INVALID" in part1
    assert f"-- record at offset {o0[3]}\n" in part1  # the record where reading resumes, annotated
    part2 = out[second:]
    assert f"lost:    2000 bytes at offsets {size1}..{size1 + 2000}" in part2
    assert "more damaged bytes not shown" in part2
    assert tree_digest(d) == before


def test_inspect_damaged_on_bundled_examples_follows_verify(cli):
    r = cli("inspect", os.path.join(EXAMPLES, "wal-torn-tail"), "--damaged")
    assert r.code == 1
    assert "=== 1/1 wal-000001.bin: tail-damage (exit 1)" in r.out
    assert "2808..2816       sequence             81" in r.out  # the partial header still names its sequence
    assert "29 of 40 header bytes present" in r.out
    clean = cli("inspect", os.path.join(EXAMPLES, "wal-healthy"), "--damaged")
    assert clean.code == 0 and "no damaged region" in clean.out


# ---- --seq and --around on a directory ---------------------------------------------------------------

def test_inspect_seq_goes_straight_to_the_record_bytes(cli, tmp_path):
    d, o0, _ = _damaged(tmp_path)
    r = cli("inspect", d, "--seq", "4")
    assert r.code == 0
    assert f"== sequence 4: {os.path.join(d, 'wal-000000.bin')} offset {o0[3]}" in r.out
    assert f"-- record at offset {o0[3]}\n" in r.out and "sequence             4" in r.out
    assert ">" in r.out.splitlines()[-3] or any(line.startswith(">") for line in r.out.splitlines())
    lost = cli("inspect", d, "--seq", "3")
    assert lost.code == 3 and "no valid record carries it; lost: mid-log-damage" in lost.out
    assert f"-- record at offset {o0[2]} (damaged)" in lost.out
    none = cli("inspect", d, "--seq", "999")
    assert none.code == 2 and "sequences 1..8" in none.err and none.out == ""


def test_inspect_seq_names_the_quarantined_piece_that_holds_it(cli, tmp_path):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 4)), 1: make_chunk(range(4, 7)), 2: make_chunk(range(7, 9))})
    assert cli("quarantine", "move", d, "wal-000001.bin", "--reason", "rot", "--apply").code == 0
    r = cli("inspect", d, "--seq", "5")
    assert r.code == 4  # verify's code for the gap the move left (sequences 4..6), as verify exits
    assert cli("verify", d).code == 4
    assert "set aside: .quarantine/wal-000001.bin (move of wal-000001.bin, bytes 0.." in r.out


def test_inspect_around_chunk_offset_on_a_directory(cli, tmp_path):
    d, o0, _ = _damaged(tmp_path)
    r = cli("inspect", d, "--around", f"wal-000000.bin:{o0[2]}", "--context", "8")
    # the code of the damage at that place (mid-log, 3), as --damaged gives that region
    assert r.code == 3 and f"-- record at offset {o0[2]} (damaged)" in r.out
    assert f"verify: wal-000000.bin: offset {o0[2]}..{o0[3]}" in r.out and "(mid-log-damage, exit 3)" in r.out
    same = cli("inspect", os.path.join(d, "wal-000000.bin"), "--around", str(o0[2]), "--context", "8")
    assert same.out.splitlines()[1:] == r.out.splitlines()[1:]


@pytest.mark.parametrize("args, why", [
    (["--around", "744"], "needs CHUNK:OFFSET"),
    (["--around", "wal-000000.bin:99999"], "outside the file"),
    (["--around", "wal-000007.bin:8"], "no chunk wal-000007.bin"),
    (["--around", "../etc/passwd:1"], "CHUNK must be a file name"),
    (["--around", "wal-000000.bin:-1"], "expected OFFSET or CHUNK:OFFSET"),
    (["--around", "x"], "expected OFFSET or CHUNK:OFFSET"),
    (["--seq", "3", "--damaged"], "give one"),
])
def test_around_and_seq_usage_errors_are_exit_2_with_one_line(cli, tmp_path, args, why):
    d, _, _ = _damaged(tmp_path)
    r = cli("inspect", d, *args)
    assert r.code == 2 and why in r.err and r.out == "" and len(r.err.strip().splitlines()) == 1


def test_around_outside_a_chunk_file_is_exit_2_also_as_chunk_offset(cli, tmp_path):
    d, _, _ = _damaged(tmp_path)
    f = os.path.join(d, "wal-000000.bin")
    size = os.path.getsize(f)
    for spec in (str(size), f"wal-000000.bin:{size}"):
        r = cli("inspect", f, "--around", spec)
        assert r.code == 2 and f"outside the file ({size} bytes" in r.err and r.out == ""
    ok = cli("inspect", f, "--around", str(size - 1), "--context", "4")
    assert ok.code == 0 and f"bytes {size - 5}..{size}" in ok.out


def test_hexdump_of_a_damaged_sequence_shows_its_bytes(cli):
    r = cli("inspect", os.path.join(EXAMPLES, "wal-midlog-corrupt"), "--from", "10", "--to", "10", "--hexdump")
    assert r.code == 3
    assert "-- record at offset 744 (damaged)" in r.out
    assert ">000002e0        736" in r.out and "[57]" in r.out  # the bytes, the damaged offset bracketed


# ---- quarantined pieces --------------------------------------------------------------------------------

def _cut(cli, tmp_path, keep_bytes: int):
    c = make_chunk(range(1, 5), payload_for=lambda s: bytes(range(61)) if s == 4 else b"p%d" % s)
    offs = record_offsets(c)
    d = write_dir(tmp_path / "wal", {0: truncate_to(c, offs[3] + keep_bytes)})
    assert cli("repair", d, "--apply").code == 0
    name = next(n for n in os.listdir(os.path.join(d, ".quarantine")) if n != "MANIFEST.jsonl")
    return d, name, offs[3]


def test_quarantine_show_decodes_a_29_byte_partial_header_at_its_original_offset(cli, tmp_path):
    d, name, off = _cut(cli, tmp_path, 29)
    r = cli("quarantine", "show", d, name)
    assert r.code == 0
    assert f"-- record at offset {off} of wal-000000.bin" in r.out
    assert f"{off + 8}..{off + 16}" in r.out and "sequence             4" in r.out
    assert "payloadLen           61" in r.out and "29 of 40 header bytes present" in r.out
    assert f"{off:>10d}  57  41" in r.out  # the dump at the chunk's own offsets
    j = cli("quarantine", "show", d, name, "--json").json()
    assert j["source_offset"] == off and j["records"][0]["offset"] == off
    assert {f["name"]: f["value"] for f in j["records"][0]["fields"]}["sequence"] == "4"
    assert f"walctl quarantine restore {d} {name}" in r.out


def test_quarantine_show_and_inspect_show_the_payload_bytes_present(cli, tmp_path):
    d, name, off = _cut(cli, tmp_path, 40 + 3 + 20)  # header, "mem", 20 of 61 payload bytes
    for r in (cli("quarantine", "show", d, name), cli("inspect", os.path.join(d, ".quarantine", name))):
        assert r.code == 0, r.err
        assert "20 of 61 bytes present (41 missing): " + bytes(range(20)).hex() in r.out
        assert "header CRC" in r.out and "valid" in r.out
        assert "payload CRC          0x" in r.out and "cannot be checked" in r.out
        assert f"-- record at offset {off} of wal-000000.bin" in r.out
        assert "not a known format" not in r.out + r.err


def test_an_untrusted_manifest_line_is_reported_and_its_offset_not_used(cli, tmp_path):
    d, name, off = _cut(cli, tmp_path, 29)
    man = os.path.join(d, ".quarantine", "MANIFEST.jsonl")
    lines = [json.loads(x) for x in open(man)]
    lines[0]["offset"] = -3
    with open(man, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    r = cli("quarantine", "show", d, name)
    assert r.code == 0
    assert "-- record at offset 0 of" in r.out and "offset -3 is not a byte count" in r.out


# ---- advice names the real directory, chunk and range, shell-quoted ------------------------------------

def test_repair_advice_names_the_directory_chunk_and_range_and_copy_pastes(cli, tmp_path):
    import shlex

    c = make_chunk(range(1, 6))
    o = record_offsets(c)
    d = write_dir(tmp_path / "my wal's dir", {0: flip_bit(c, o[1] + 44), 1: make_chunk(range(6, 8))})
    r = cli("repair", d)
    assert r.code == 3
    q = shlex.quote(d)
    assert "DIR" not in r.out and "NEWDIR" not in r.out and "CHUNK" not in r.out
    assert f"walctl salvage {q} --out {shlex.quote(d + '.salvaged')}" in r.out
    assert f"walctl inspect {q} --damaged" in r.out
    move = next(line for line in r.out.splitlines() if "quarantine move" in line)
    assert f"bytes {o[1]}..{o[2]}, seq 2..2" in move
    words = shlex.split(move[move.index("walctl quarantine"):], comments=True)  # the note is a shell comment
    assert words == ["walctl", "quarantine", "move", d, "wal-000000.bin", "--reason", f"mid-log-damage bytes {o[1]}..{o[2]}"]
    j = cli("repair", d, "--json").json()
    assert any(f"walctl salvage {q}" in a for a in j["advice"])


def test_verify_says_what_to_run_next_with_the_real_path(cli, tmp_path):
    import shlex

    c = make_chunk(range(1, 4))
    d = write_dir(tmp_path / "a b", {0: truncate_to(c, len(c) - 5)})
    r = cli("verify", d)
    assert r.code == 1
    assert f"next: walctl inspect {shlex.quote(d)} --damaged" in r.out
    assert f"walctl repair {shlex.quote(d)}" in r.out
    clean = cli("verify", write_dir(tmp_path / "ok", {0: c}))
    assert clean.code == 0 and "next:" not in clean.out


def test_dry_runs_print_the_exact_command_to_apply(cli, tmp_path):
    import shlex

    c = make_chunk(range(1, 4))
    d = write_dir(tmp_path / "w", {0: c, 1: truncate_to(make_chunk(range(4, 6)), 30)})
    r = cli("repair", d)
    assert f"walctl repair {shlex.quote(d)} --apply" in r.out
    m = cli("quarantine", "move", d, "wal-000000.bin", "--reason", "it's rotten")
    assert f"walctl quarantine move {d} wal-000000.bin --reason 'it'\"'\"'s rotten' --apply" in m.out
    assert os.path.exists(os.path.join(d, "wal-000000.bin"))  # a dry run


def test_control_characters_in_manifest_text_are_escaped_for_humans(cli, tmp_path):
    d, name, off = _cut(cli, tmp_path, 29)
    man = os.path.join(d, ".quarantine", "MANIFEST.jsonl")
    lines = [json.loads(x) for x in open(man)]
    lines[0]["reason"] = "evil\x1b[2J\rreason"
    with open(man, "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    for args in (("quarantine", "show", d, name), ("quarantine", "list", d), ("map", d)):
        r = cli(*args)
        assert "\x1b" not in r.out and "\r" not in r.out, args
    assert "evil\\x1b[2J\\x0dreason" in cli("quarantine", "show", d, name).out
