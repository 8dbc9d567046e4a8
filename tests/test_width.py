"""Readable at 80 columns, clean in a pipe (issue #26): every line of the human output fits COLUMNS at 80,
120 and 200, and piped (no COLUMNS) no line is padded; a value cut to fit says how long it is whole."""
from __future__ import annotations

import os
import re

import pytest

from conftest import flip_bit, make_chunk, record_offsets, truncate_to, write_dir

BIG_ID = b"m" * 3000
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def scene(tmp_path, monkeypatch, cli):
    """Relative paths (a path is a word no width can break): a WAL of 4 KB payloads and 3,000-byte
    memoryIds with mid-log damage, a torn tail repaired into .quarantine/, checkpoints with one invalid."""
    monkeypatch.chdir(tmp_path)
    big = make_chunk(range(1, 6), lambda s: b"p" * 4096, memory_id=BIG_ID)
    second = make_chunk(range(6, 11), lambda s: b"q" * 4096, memory_id=BIG_ID)
    write_dir("wal", {0: big, 1: flip_bit(second, record_offsets(second)[2] + 60)})
    torn = make_chunk(range(1, 8))
    write_dir("torn", {0: truncate_to(torn, record_offsets(torn)[6] + 5)})
    assert cli("repair", "torn", "--apply").code == 0
    with open("s.json", "w") as f:
        f.write('{"a": 1}')
    for seq in (100, 200, 300):
        assert cli("checkpoint", "create", "ck", "--state", "s.json", "--to", seq).code == 0
    victim = os.path.join("ck", sorted(os.listdir("ck"))[0])
    with open(victim, "r+b") as f:  # a body byte: step 8, SHA-256 mismatch
        f.seek(-3, os.SEEK_END)
        b = f.read(1)
        f.seek(-3, os.SEEK_END)
        f.write(bytes([b[0] ^ 1]))
    return tmp_path


COMMANDS = [
    ("inspect", "wal", "--limit", "4"),
    ("inspect", "wal"),
    ("verify", "wal"),
    ("verify", "wal", "--verbose"),
    ("map", "wal"),
    ("checkpoint", "list", "ck"),
    ("checkpoint", "verify", "ck"),
    ("stats", "wal"),
    ("quarantine", "list", "torn"),
]


@pytest.mark.parametrize("columns", [80, 120, 200])
@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_every_line_fits_the_terminal(scene, cli, monkeypatch, args, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    r = cli(*args)
    assert r.code in (0, 3), r.err
    lines = ANSI.sub("", r.out).splitlines()
    assert lines
    too_long = [ln for ln in lines if len(ln) > columns]
    assert not too_long, f"{len(too_long)} lines over {columns}: {too_long[0]!r}"
    assert not [ln for ln in lines if ln != ln.rstrip()]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_a_pipe_is_never_padded(scene, cli, monkeypatch, args):
    monkeypatch.delenv("COLUMNS", raising=False)
    r = cli(*args)
    assert r.code in (0, 3), r.err
    padded = [ln for ln in r.out.splitlines() if ln != ln.rstrip()]
    assert not padded, padded[0]
    assert "\x1b[" not in r.out  # no colour on a pipe


def test_inspect_cuts_long_values_saying_their_size(scene, cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("inspect", "wal", "--limit", "2").out
    assert "…(3000 B)" in out and "…(4096 B)" in out  # the memoryId and the payload, with their whole sizes
    assert len(out.splitlines()) <= 1 + 2 * 2  # not one letter per line (116 lines before)
    monkeypatch.setenv("COLUMNS", "200")
    wide = cli("inspect", "wal", "--limit", "2").out.splitlines()
    assert len(wide) == 3 and all("…(4096 B)" in ln for ln in wide[1:])
    monkeypatch.delenv("COLUMNS")
    piped = cli("inspect", "wal", "--limit", "2").out.splitlines()
    assert len(piped) == 3 and all(ln.endswith("…(4096 B)") for ln in piped[1:])  # whole rows, never padded
    full = cli("inspect", "wal", "--limit", "1", "--jsonl").jsonl()[0]  # the whole value, one flag away
    assert full["memory_id"] == BIG_ID.decode() and len(full["payload_hex"]) == 2 * 4096


def test_verify_wraps_between_words(scene, cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = cli("verify", "wal").out
    monkeypatch.delenv("COLUMNS")
    piped = cli("verify", "wal").out
    assert out != piped and max(map(len, out.splitlines())) <= 80 < max(map(len, piped.splitlines()))
    assert out.split() == piped.split()  # the same words, none broken in two


def test_checkpoint_list_prints_times_and_exits_as_verify(scene, cli):
    r = cli("checkpoint", "list", "ck")
    assert r.code == 3  # an INVALID checkpoint is corruption, as checkpoint verify says
    assert re.search(r"\b20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\b", r.out) and "INVALID" in r.out
    assert "step 8: body SHA-256 mismatch" in r.out
    v = cli("checkpoint", "verify", "ck")
    assert v.code == 3 and "seq 100..300" in v.out  # not 300..100 (the files are listed by name)
    assert "walctl map" not in v.out  # a checkpoint is checked whole: no map


def test_counts_say_one_chunk_not_one_chunks(scene, cli):
    write_dir("one", {0: make_chunk(range(1, 41))})
    assert "40 records in 1 chunk," in cli("stats", "one").out
    assert "1 chunk, 40 records" in cli("verify", "one", "--verbose").out


def test_small_things_people_read(cli, tmp_path):
    r = cli("help", "verfy")
    assert r.code == 2 and "did you mean 'walctl help verify'?" in r.err
    write_dir(tmp_path / "w", {0: make_chunk(range(1, 3))})
    r = cli("inspect", tmp_path / "w", "--around")  # an option's missing value: the command's own help
    assert r.code == 2 and "(see 'walctl inspect --help')" in r.err
    r = cli("archive", "restore", "file:///nowhere", tmp_path / "o", "--to")
    assert r.code == 2 and "(see 'walctl archive restore --help')" in r.err
    for words, usage in ((("verify",), "walctl verify [OPTIONS] PATH..."),
                         (("help",), "walctl help [OPTIONS] [COMMAND]..."),
                         (("schema",), "walctl schema [OPTIONS] [NAME]"),
                         (("checkpoint", "verify"), "walctl checkpoint verify [OPTIONS] PATH...")):
        out = cli(*words, "--help").out
        assert f"Usage: {usage}\n" in out, out.splitlines()[0]
        assert "{" not in out.splitlines()[0] and "[[" not in out.splitlines()[0]
