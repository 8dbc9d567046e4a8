"""User-supplied numbers take ASCII digits only: Python's int() and float() also accept '١٢' (Arabic-Indic),
'１２' (full-width), '1_000' and int() chokes on '²' after isdigit() said yes. Each is a usage error (exit
2, one line, nothing changed). And `walctl help` refuses a word it does not use."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import tree_digest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

NOT_ASCII = ["١٢", "１２", "1_0", "²", "٣"]

# argv with W for a copy of a WAL directory and N for the number under test
ROWS = [
    ["repair", "W", "--accept-loss", "N..20", "--reason", "r", "--json"],
    ["repair", "W", "--accept-loss", "1..N", "--reason", "r", "--apply", "--json"],
    ["repair", "W", "--accept-loss", "N", "--reason", "r", "--json"],
    ["repair", "W", "--max-drop-bytes", "N", "--apply", "--json"],
    ["inspect", "W", "--seq", "N"],
    ["inspect", "W", "--around", "wal-000001.bin:N"],
    ["inspect", "W", "--around", "N"],
    ["inspect", "W", "--since", "N"],
    ["compact", "W", "--to", "N", "--apply", "--json"],
    ["checkpoint", "prune", "W", "--max-age", "Nh", "--json"],
    ["write", "W", "--type", "N", "--id", "m", "--payload", "p", "--json"],
    ["replay", "W", "--from-seq", "N"],
]


def _wal(tmp_path) -> str:
    d = str(tmp_path / "wal")
    shutil.copytree(os.path.join(EXAMPLES, "wal-torn-tail"), d)
    return d


@pytest.mark.parametrize("number", NOT_ASCII)
@pytest.mark.parametrize("row", ROWS, ids=lambda r: " ".join(r[:1] + [a for a in r if a.startswith("--")][:1]))
def test_a_number_that_is_not_ascii_digits_is_a_usage_error_and_changes_nothing(cli, tmp_path, row, number):
    d = _wal(tmp_path)
    before = tree_digest(tmp_path)
    argv = [d if a == "W" else a.replace("N", number) if "N" in a and not a.startswith("--") else a for a in row]
    r = cli(*argv)
    assert r.code == 2, (argv, r.code, r.err)
    assert r.err.count("\n") == 1 and r.err.startswith("walctl: error: ") and "Traceback" not in r.err
    assert "internal error" not in r.err and "invalid literal" not in r.err
    if "--json" in row:
        doc = json.loads(r.out)
        assert doc["exit_code"] == 2
        if doc["schema"] == "walctl.error/1":
            assert doc["error"]["reason"] == "usage"
    else:
        assert r.out == ""
    assert tree_digest(tmp_path) == before


def test_ascii_digits_still_work_for_the_same_options(cli, tmp_path):
    d = _wal(tmp_path)
    r = cli("inspect", d, "--seq", "3")
    assert r.code in (0, 1) and "== sequence 3:" in r.out
    r = cli("repair", d, "--accept-loss", "1..2", "--reason", "r", "--json")
    assert r.code == 7 and "not all missing" in r.err  # parsed, then refused on its merits
    assert cli("checkpoint", "prune", tmp_path / "nock", "--max-age", "1h").code == 6  # parsed; path missing


@pytest.mark.parametrize("words,ok", [
    (["verify"], True), (["quarantine", "purge"], True), (["archive", "push"], True), ([], True),
    (["verify", "extra"], False), (["quarantine", "nope"], False), (["archive", "push", "x"], False),
    (["verify", "--", "x"], False),
])
def test_help_refuses_words_it_does_not_use(cli, words, ok):
    r = cli("help", *words, "--width", "80")
    if ok:
        assert r.code == 0 and r.out.strip() and r.err == ""
    else:
        assert r.code == 2 and r.out == "" and r.err.count("\n") == 1
        assert "unexpected" in r.err and words[-1] in r.err
