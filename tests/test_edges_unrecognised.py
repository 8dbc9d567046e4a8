"""A directory (or file) holding nothing walctl recognises: every command says so the same way, exit 5
(unsupported: "not a known format"), one line on stderr, one JSON document with --json, nothing changed.
Never exit 0 with an empty "clean" answer, never a usage error (2) for it.

Table-driven over test_edges_paths.COMMANDS (every command that takes a path), with an empty directory as
the target; the rows that do not answer 5 are listed below with the reason."""
from __future__ import annotations

import json

import pytest

from conftest import tree_digest
from test_edges_paths import COMMANDS, _argv

# Rows whose answer on an empty directory is not "unsupported", on purpose.
NOT_UNSUPPORTED = {
    # the quarantine of any directory: "nothing in quarantine" is a real answer (it says so in words)
    ("quarantine", "list"): 0, ("quarantine", "purge"): 0,
    # a named item that is not there: the argument is wrong
    ("quarantine", "show"): 2, ("quarantine", "move"): 2, ("quarantine", "restore"): 2,
    # one task log expected, a directory given
    ("tasklog", "resume"): 2, ("tasklog", "replay"): 2,
    # checkpoints.md: a log directory holding no log files is no log, a fresh start (recover, create)
    ("recover", "--checkpoints"): 0, ("recover", "--log"): 0, ("checkpoint", "create"): 0,
    # --namespace names an absent namespace (prune keeps nothing to remove; not changed here)
    ("archive", "prune"): 0,
    # the session directory named is missing; the second path is missing
    ("agents", "set-aside"): 6, ("merge", "PATH"): 6,
    # --from must be a file or a stream
    ("import", "FOLLOWER"): 6,
}


# Commands that answer with their report (the unsupported finding in it), as verify does, not an error line.
REPORTS = {("map", "PATH"), ("repair", "PATH"), ("checkpoint", "verify")}


def _key(row):
    return tuple(row[:2])


@pytest.mark.parametrize("row,kind", COMMANDS, ids=[" ".join(r[:2]) for r, _ in COMMANDS])
def test_an_empty_directory_is_exit_5_unsupported_for_every_command(cli, tmp_path, row, kind):
    empty = tmp_path / "empty"
    empty.mkdir()
    before = tree_digest(tmp_path)
    r = cli(*_argv(row, str(empty), tmp_path))
    expected = NOT_UNSUPPORTED.get(_key(row), 5)
    assert r.code == expected, (row, r.code, r.err)
    assert "Traceback" not in r.err and "internal error" not in r.err
    if expected == 5:
        if _key(row) in REPORTS:  # the finding is in their report, as verify's is
            assert "unsupported" in r.out
        else:
            assert r.err.count("\n") == 1 and r.err.startswith("walctl: error: ") and str(empty) in r.err
        if "--json" in row:
            doc = json.loads(r.out)  # exactly one document
            assert doc["exit_code"] == 5
            if _key(row) in REPORTS:
                pass
            elif doc["schema"] == "walctl.error/1":
                assert doc["outcome"] == "error" and doc["error"]["reason"] == "unsupported"
                assert doc["error"]["path"].endswith(str(empty))
            else:  # agents recover (issue 23): its own document. seal, repair --accept-loss and workflow
                # cleanup/delete could not start on a target of the wrong kind: walctl.error/1 (docs/json.md)
                assert _key(row) == ("agents", "recover"), row
                assert str(empty) in str(doc.get("error", doc.get("message")))
    if _key(row) != ("checkpoint", "create"):  # (create writes its checkpoint of the empty log into CK)
        assert tree_digest(tmp_path) == before  # nothing created: no lock, no .walctl, no OUT


@pytest.mark.parametrize("argv", [
    ["seal", "D", "--json"], ["seal", "D", "--apply", "--json"], ["compact", "D", "--to", "5", "--json"],
    ["compact", "D", "--to", "5", "--apply", "--json"],
    ["repair", "D", "--accept-loss", "1..2", "--reason", "r", "--json"],
    ["repair", "D", "--accept-loss", "1..2", "--reason", "r", "--apply", "--json"],
    ["verify", "D", "--json"], ["map", "D", "--json"], ["stats", "D", "--json"], ["repair", "D", "--json"],
    ["tasklog", "verify", "D", "--json"], ["tasklog", "inspect", "D", "--json"],
    ["agents", "verify", "D", "--json"], ["agents", "tree", "D", "--json"], ["agents", "pending", "D", "--json"],
    ["agents", "recover", "D", "--apply", "--json"], ["workflow", "list", "D", "--json"],
    ["workflow", "cleanup", "D", "--apply", "--json"], ["workflow", "delete", "D", "x", "--apply", "--json"],
    ["checkpoint", "list", "D", "--json"], ["checkpoint", "inspect", "D", "--json"],
    ["checkpoint", "prune", "D", "--apply", "--json"], ["checkpoint", "verify", "D", "--json"],
    ["archive", "list", "file://D", "--json"], ["archive", "verify", "file://D", "--json"],
], ids=lambda a: " ".join(a[:2]))
def test_commands_agree_on_a_directory_with_only_foreign_files(cli, tmp_path, argv):
    """Not empty but nothing recognised (a README, a stray file): the same 5 as verify, with or without --apply."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "README").write_text("nothing walctl knows\n")
    (d / "data.bin").write_bytes(b"\x00" * 64)
    before = tree_digest(tmp_path)
    r = cli(*[a.replace("D", str(d)) if a in ("D", "file://D") else a for a in argv])
    assert r.code == 5, (argv, r.code, r.err)
    assert "Traceback" not in r.err
    if argv[0] not in ("verify", "map", "repair") and argv[:2] != ["checkpoint", "verify"] or "--accept-loss" in argv:
        assert r.err.count("\n") == 1 and r.err.startswith("walctl: error: ")
    doc = json.loads(r.out)
    assert doc["exit_code"] == 5
    assert tree_digest(tmp_path) == before


def test_tasklog_of_a_file_not_named_wal_is_unsupported_like_verify(cli, tmp_path):
    f = tmp_path / "notes.txt"
    f.write_bytes(b'{"v":1,"type":"TaskCreated"}\n')
    before = tree_digest(tmp_path)
    v = cli("verify", f, "--json")
    assert v.code == 5 and v.json()["paths"][0]["findings"][0]["class"] == "unsupported"
    for sub in ("verify", "inspect", "resume", "replay"):
        r = cli("tasklog", sub, f, *(["--json"] if sub != "replay" else []))
        assert r.code == 5, (sub, r.code, r.err)
        assert r.err == f"walctl: error: {f}: not a task log (a task log is named <task_id>.wal)\n"
        if sub != "replay":
            doc = json.loads(r.out)
            assert doc["exit_code"] == 5
    assert tree_digest(tmp_path) == before
    # creating one under such a name stays a usage error (the name is the argument's fault)
    r = cli("tasklog", "append", tmp_path / "new.txt", "--entry", '{"type":"TaskCreated"}')
    assert r.code == 2 and not (tmp_path / "new.txt").exists()


def test_a_substrat_root_with_an_empty_agents_directory_is_still_recognised(cli, tmp_path):
    (tmp_path / "agents").mkdir()
    r = cli("agents", "verify", tmp_path, "--json")
    assert r.code == 0 and r.json()["exit_code"] == 0
