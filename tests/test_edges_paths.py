"""Issue 15, the edges: a missing or wrong path is never clean, --json is always one document, one exit code
per situation across commands, and a dry run's "to do it" line is the exact command.

Table-driven over every command: each row is a command line with PATH where the target goes; the test
puts a missing path there, then a plain file where a directory is expected."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import tree_digest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

# (argv with "PATH" for the target, what the target must be: "dir" or "path" (a file is accepted too))
COMMANDS = [
    (["inspect", "PATH"], "path"),
    (["stats", "PATH", "--json"], "path"),
    (["map", "PATH", "--json"], "path"),
    (["replay", "PATH"], "path"),
    (["seal", "PATH", "--json"], "dir"),
    (["repair", "PATH", "--json"], "dir"),
    (["repair", "PATH", "--apply", "--json"], "dir"),
    (["heal", "PATH", "--from", "file://OUT", "--json"], "dir"),
    (["heal", "PATH", "--from", "file://OUT", "--apply", "--json"], "dir"),
    (["salvage", "PATH", "--out", "OUT", "--json"], "path"),
    (["migrate", "PATH", "--out", "OUT", "--json"], "path"),
    (["compact", "PATH", "--to", "5", "--json"], "dir"),
    (["quarantine", "list", "PATH", "--json"], "dir"),
    (["quarantine", "show", "PATH", "x", "--json"], "dir"),
    (["quarantine", "move", "PATH", "wal-000000.bin", "--reason", "r", "--json"], "dir"),
    (["quarantine", "restore", "PATH", "x", "--json"], "dir"),
    (["quarantine", "purge", "PATH", "--older-than", "0", "--json"], "dir"),
    (["checkpoint", "list", "PATH", "--json"], "dir"),
    (["checkpoint", "inspect", "PATH", "--json"], "path"),
    (["checkpoint", "prune", "PATH", "--keep", "1", "--json"], "dir"),
    (["checkpoint", "restore", "PATH", "--out", "OUT"], "path"),
    (["checkpoint", "create", "CK", "--log", "PATH", "--json"], "path"),
    (["recover", "--checkpoints", "PATH", "--json"], "dir"),
    (["recover", "--log", "PATH", "--json"], "path"),
    (["archive", "list", "file://PATH", "--json"], "dir"),
    (["archive", "verify", "file://PATH", "--json"], "dir"),
    (["archive", "restore", "file://PATH", "OUT", "--json"], "dir"),
    (["archive", "prune", "file://PATH", "--namespace", "x", "--keep", "1", "--json"], "dir"),
    (["archive", "push", "PATH", "file://OUT", "--json"], "path"),
    (["workflow", "list", "PATH", "--json"], "dir"),
    (["workflow", "show", "PATH", "x"], "dir"),
    (["workflow", "delete", "PATH", "x", "--json"], "dir"),
    (["workflow", "cleanup", "PATH", "--max-age", "1d", "--json"], "dir"),
    (["workflow", "pause", "PATH", "x", "--block", "b", "--prompt", "p", "--json"], "dir"),
    (["workflow", "resume", "PATH", "x", "--json"], "dir"),
    (["workflow", "complete", "PATH", "x", "--apply", "--json"], "dir"),
    (["tasklog", "verify", "PATH", "--json"], "path"),
    (["tasklog", "inspect", "PATH", "--json"], "path"),
    (["tasklog", "resume", "PATH", "--json"], "path"),
    (["tasklog", "replay", "PATH"], "path"),
    (["agents", "verify", "PATH", "--json"], "dir"),
    (["agents", "tree", "PATH", "--json"], "dir"),
    (["agents", "pending", "PATH", "--json"], "dir"),
    (["agents", "recover", "PATH", "--json"], "dir"),
    (["agents", "recover", "PATH", "--apply", "--json"], "dir"),
    (["agents", "set-aside", "PATH", "0" * 32, "--session", "--json"], "dir"),
    (["merge", "PATH", "PATH2", "--out", "OUT", "--json"], "path"),
    (["import", "FOLLOWER", "--from", "PATH", "--json"], "path"),
    (["fingerprint", "PATH", "--json"], "path"),
    (["cut", "PATH", "--after", "1", "--json"], "dir"),
    (["cut", "PATH", "--after", "1", "--apply", "--json"], "dir"),
]

# Commands whose target is created when missing (or that take no path): not in the table, on purpose.
CREATES_OR_NO_PATH = {"write", "checkpoint create", "tasklog append", "import", "help", "schema", "verify",
                      "checkpoint verify"}  # verify: a per-path finding in its own document (test below)


GROUPS = ("quarantine", "checkpoint", "archive", "workflow", "tasklog", "agents")


def _name(row) -> str:
    return " ".join(row[:2]) if row[0] in GROUPS else row[0]


def _argv(row, target, tmp_path):
    out = []
    for a in row:
        a = a.replace("PATH2", str(tmp_path / "missing2")).replace("PATH", target)
        a = a.replace("FOLLOWER", str(tmp_path / "follower")).replace("file://OUT", "file://" + str(tmp_path / "arch"))
        a = str(tmp_path / "out") if a == "OUT" else str(tmp_path / "ck") if a == "CK" else a
        out.append(a)
    return out


def _one_document(out: str) -> dict:
    doc = json.loads(out)  # raises unless stdout is exactly one JSON document
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("row,kind", COMMANDS, ids=[" ".join(r[:2]) for r, _ in COMMANDS])
def test_a_missing_path_is_exit_6_not_found_for_every_command(cli, tmp_path, row, kind):
    missing = str(tmp_path / "no-such-dir")
    before = sorted(os.listdir(tmp_path))
    r = cli(*_argv(row, missing, tmp_path))
    assert r.code == 6, (row, r.code, r.err)
    assert r.err.count("\n") == 1 and r.err.startswith("walctl: error: ") and "Traceback" not in r.err
    assert f"{missing}: no such file or directory" in r.err
    if "--json" in row:
        doc = _one_document(r.out)
        assert doc["schema"] == "walctl.error/1" and doc["exit_code"] == 6 and doc["outcome"] == "error"
        assert doc["error"] == {"reason": "not-found", "message": "no such file or directory", "path": missing,
                                "offset": None}
        assert doc["command"] == _name(row)
    else:
        assert r.out == ""
    assert sorted(os.listdir(tmp_path)) == before  # nothing was created: no directory, no lock, no OUT


@pytest.mark.parametrize("row,kind", [c for c in COMMANDS if c[1] == "dir"],
                         ids=[" ".join(r[:2]) for r, k in COMMANDS if k == "dir"])
def test_a_file_where_a_directory_is_expected_is_exit_6_not_a_directory(cli, tmp_path, row, kind):
    afile = tmp_path / "afile"
    afile.write_bytes(b"not a directory\n")
    before = tree_digest(tmp_path)
    r = cli(*_argv(row, str(afile), tmp_path))
    assert r.code == 6, (row, r.code, r.err)
    assert f"{afile}: not a directory (a file where a directory is expected)" in r.err and r.err.count("\n") == 1
    if "--json" in row:
        doc = _one_document(r.out)
        assert doc["exit_code"] == 6 and doc["error"]["reason"] == "not-a-directory"
        assert doc["error"]["path"] == str(afile)
    assert tree_digest(tmp_path) == before


def test_a_fifo_where_a_directory_is_expected_says_fifo(cli, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = cli("quarantine", "list", fifo, "--json")
    assert r.code == 6 and "a FIFO where a directory is expected" in r.err
    assert _one_document(r.out)["error"]["reason"] == "not-a-directory"


def test_the_table_covers_every_command_that_takes_a_path():
    """A new command with a path argument must be added to COMMANDS (or to CREATES_OR_NO_PATH)."""
    import typer

    from walctl.cli import build_app

    tree = typer.main.get_command(build_app())
    names = set()
    for name, cmd in tree.commands.items():
        for sub in getattr(cmd, "commands", {None: cmd}):
            names.add(name if sub is None else f"{name} {sub}")
    covered = {_name(r) for r, _ in COMMANDS}
    assert len(names) > 40 and names - covered - CREATES_OR_NO_PATH == set()


def test_verify_reports_a_missing_path_as_a_not_found_finding(cli, tmp_path):
    missing = str(tmp_path / "nope")
    r = cli("verify", missing, EXAMPLES + "/wal-healthy", "--json")
    assert r.code == 6
    doc = _one_document(r.out)
    first, second = doc["paths"]
    assert first["exit_code"] == 6 and first["findings"][0]["env_reason"] == "not-found"
    assert first["findings"][0]["reason"] == "no such file or directory"
    assert second["exit_code"] == 0 and second["summary"]["records"] == 80


def test_a_locked_directory_is_exit_6_locked_with_one_document(cli, tmp_path):
    from walctl.store.fs import DEFAULT_FS
    from walctl.store.lock import DirectoryLock

    wal = tmp_path / "wal"
    shutil.copytree(os.path.join(EXAMPLES, "wal-torn-tail"), wal)
    before = tree_digest(wal)
    with DirectoryLock(str(wal), "pid 1 on test: a writer", DEFAULT_FS):
        locked = tree_digest(wal)
        for argv in (["repair", wal, "--json"], ["repair", wal, "--apply", "--json"]):
            r = cli(*argv)
            assert r.code == 6, argv
            doc = _one_document(r.out)
            assert doc["error"]["reason"] == "locked" and "locked by a live writer (pid 1 on test" in \
                doc["error"]["message"]
            assert "locked by a live writer" in r.err and r.err.count("\n") == 1
            assert tree_digest(wal) == locked  # nothing was cut
    assert {k: v[:2] for k, v in tree_digest(wal).items() if k != ".walctl.lock"} == \
        {k: v[:2] for k, v in before.items()}


def test_recover_with_a_gap_prints_its_own_document_of_what_it_tried(cli, tmp_path):
    """It read the checkpoints and the log: recover's own document (not walctl.error/1), outcome failed."""
    from test_recover import independent_fold, random_entries, write_segments
    from walctl.ops.checkpoints import checkpoint as C

    entries = random_entries(60)
    log = write_segments(str(tmp_path / "log"), entries[:20] + entries[30:])
    ck = str(tmp_path / "ck")
    C.create(ck, independent_fold(entries[:20]), 20)
    r = cli("recover", "--checkpoints", ck, "--log", log, "--out", tmp_path / "state.json", "--json")
    assert r.code == 4
    doc = _one_document(r.out)
    assert doc["schema"] == "walctl.recover/2" and doc["outcome"] == "failed" and doc["exit_code"] == 4
    assert doc["error"].startswith("sequence gap after the checkpoint: 21..30 missing")
    assert doc["checkpoint"]["wal_sequence"] == 20 and doc["fallbacks"] == doc["rejected"] == doc["passed_over"] == []
    (gap,) = doc["findings"]
    assert gap["class"] == "sequence-gap" and gap["sequence_range"] == [21, 30] and gap["exit_code"] == 4
    assert doc["state_written"] is None and doc["entries_replayed"] == 0
    assert r.err.startswith("walctl: error: ") and "21..30 missing" in r.err
    assert not (tmp_path / "state.json").exists()


def test_a_usage_error_in_a_json_command_is_one_document_too(cli):
    r = cli("repair", EXAMPLES + "/wal-healthy", "--max-drop-bytes", "-1", "--json")
    assert r.code == 2
    doc = _one_document(r.out)
    assert doc["error"]["reason"] == "usage" and "--max-drop-bytes" in doc["error"]["message"]
    r = cli("inspect", EXAMPLES + "/wal-healthy", "--json")  # no --json option: no document pretends one
    assert r.code == 2 and r.out == ""


def test_a_refusal_is_one_document_with_outcome_refused(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_bytes(b"x")
    r = cli("salvage", EXAMPLES + "/wal-midlog-corrupt", "--out", out, "--json")
    assert r.code == 7
    doc = _one_document(r.out)
    assert doc["outcome"] == "refused" and doc["error"]["reason"] == "refused" and doc["error"]["path"] == str(out)
    assert sorted(os.listdir(out)) == ["keep"] and not os.path.exists(str(out) + ".tmp")


@pytest.mark.parametrize("entry", ["dir", "fifo", "dangling-link"])
def test_a_non_file_named_like_a_chunk_is_unsupported_for_every_reader(cli, tmp_path, entry):
    wal = tmp_path / "wal"
    shutil.copytree(os.path.join(EXAMPLES, "wal-healthy"), wal)
    odd = wal / "wal-000003.bin"
    if entry == "dir":
        odd.mkdir()
    elif entry == "fifo":
        os.mkfifo(odd)
    else:
        os.symlink(tmp_path / "nowhere", odd)
    codes = {}
    for argv in (["verify", wal], ["inspect", wal], ["stats", wal], ["map", wal], ["replay", wal, "--out",
                                                                                  tmp_path / "r.jsonl"]):
        codes[argv[0]] = cli(*argv).code
    assert codes == {"verify": 5, "inspect": 5, "stats": 5, "map": 5, "replay": 5}
    with open(tmp_path / "r.jsonl") as f:
        assert len(f.read().splitlines()) == 80  # replay streamed the readable chunks, then stopped: not 0


def test_dry_run_lines_print_the_exact_command_and_it_works(cli, tmp_path):
    wal = tmp_path / "my wal"
    shutil.copytree(os.path.join(EXAMPLES, "wal-healthy"), wal)
    r = cli("compact", wal, "--to", "45")
    assert r.code == 0
    line = r.out.splitlines()[-1]
    assert line == f"dry run: nothing was changed; to do it: walctl compact '{wal}' --to 45 --apply"
    again = shlex.split(line.split("to do it: ", 1)[1])
    assert cli(*again[1:]).code == 0
    assert sorted(os.listdir(wal / ".quarantine")) == ["MANIFEST.jsonl", "wal-000000.bin"]
    r = cli("seal", wal)
    assert r.out.splitlines()[-1].endswith(f": walctl seal '{wal}' --apply")


def test_cron_script_alerts_on_a_missing_directory_instead_of_retrying(tmp_path):
    from test_examples import _walctl_on_path

    env = {**os.environ, "WALCTL": _walctl_on_path(tmp_path), "ALERT": "echo ALERT", "PYTHONPATH": ROOT}
    missing = str(tmp_path / "typo")
    out = subprocess.run(["sh", os.path.join(EXAMPLES, "cron-verify.sh"), missing,
                          os.path.join(EXAMPLES, "wal-healthy")], capture_output=True, text=True, env=env)
    assert out.returncode == 6
    lines = out.stdout.splitlines()
    assert lines[0] == f"ALERT MISSING {missing}: not-found: not a WAL directory that exists"
    assert lines[1] == f"MISSING {missing} (not-found)"
    assert lines[2].startswith("ok ") and not any(line.startswith("RETRY") for line in lines)
    assert sys.executable
