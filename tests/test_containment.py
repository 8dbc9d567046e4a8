"""Hostile setups (issue #12): no symbolic link, hard link, FIFO, manifest line or object key makes walctl
change anything outside the directory it was pointed at. Real file system. Every test builds a sentinel
tree outside the target, runs the command, and asserts that not one byte, name or mode there changed,
that the exit code is a contract code, and what happened (or did not) inside the target."""
from __future__ import annotations

import ast
import hashlib
import json
import os
import pathlib
import stat

import pytest

from conftest import make_chunk, tree_digest, write_dir

CONTRACT = set(range(8))
WALCTL = pathlib.Path(__file__).resolve().parent.parent / "walctl"


@pytest.fixture
def outside(tmp_path):
    o = tmp_path / "outside"
    o.mkdir()
    (o / "victim.txt").write_bytes(b"precious bytes, not walctl's\n")
    (o / "victim.bin").write_bytes(make_chunk(range(1, 6)))
    (o / "dir").mkdir()
    (o / "dir" / "keep").write_bytes(b"k")
    def names_modes_bytes():  # (some tests add and remove a file of their own there: mtimes move)
        return {k: v[:3] for k, v in tree_digest(o).items()}

    before = names_modes_bytes()
    yield o
    assert names_modes_bytes() == before, "walctl changed something outside its target"


def torn_dir(path) -> str:
    """Two chunks, the last with a torn tail (7 bytes short of its last record)."""
    return write_dir(path, {0: make_chunk(range(1, 11)), 1: make_chunk(range(11, 21))[:-7]})


def chunk_bytes(d, name="wal-000001.bin") -> bytes:
    with open(os.path.join(d, name), "rb") as f:
        return f.read()


# ---- the lock file ------------------------------------------------------------------------------------

def test_a_linked_lock_file_is_refused_by_repair_and_write(tmp_path, outside, cli):
    d = torn_dir(tmp_path / "wal")
    os.symlink(outside / "victim.txt", os.path.join(d, ".walctl.lock"))
    before = chunk_bytes(d)
    r = cli("repair", d, "--apply")
    assert r.code == 7 and "symbolic link" in r.err and chunk_bytes(d) == before
    assert not os.path.exists(os.path.join(d, ".quarantine"))
    r = cli("write", d, "--type", "0", "--id", "m", "--payload", "x")
    assert r.code == 7 and chunk_bytes(d) == before


def test_a_dangling_lock_link_creates_nothing(tmp_path, outside, cli):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 4))})
    os.symlink(outside / "created-by-walctl", os.path.join(d, ".walctl.lock"))
    r = cli("write", d, "--type", "0", "--id", "m", "--payload", "x")
    assert r.code == 7 and not os.path.lexists(outside / "created-by-walctl")
    assert chunk_bytes(d, "wal-000000.bin") == make_chunk(range(1, 4))


def test_a_hard_linked_or_fifo_lock_file_is_refused(tmp_path, outside, cli):
    d = torn_dir(tmp_path / "wal")
    os.link(outside / "victim.txt", os.path.join(d, ".walctl.lock"))
    before = chunk_bytes(d)
    assert cli("repair", d, "--apply").code == 7 and chunk_bytes(d) == before
    os.unlink(os.path.join(d, ".walctl.lock"))
    os.mkfifo(os.path.join(d, ".walctl.lock"))  # opening a FIFO for writing would block forever
    r = cli("repair", d, "--apply")
    assert r.code == 7 and "not a regular file" in r.err and chunk_bytes(d) == before


def test_a_repair_refused_by_its_bound_leaves_the_lock_file_as_it_was(tmp_path, cli):
    d = torn_dir(tmp_path / "wal")
    lock = os.path.join(d, ".walctl.lock")
    with open(lock, "wb") as f:
        f.write(b"an earlier holder's words\n")
    r = cli("repair", d, "--apply", "--max-drop-bytes", "1")
    assert r.code == 7 and "nothing was changed" in r.err
    with open(lock, "rb") as f:
        assert f.read() == b"an earlier holder's words\n"


# ---- .quarantine and its manifest -----------------------------------------------------------------------

@pytest.mark.parametrize("link", [".quarantine", ".quarantine/MANIFEST.jsonl"])
def test_a_linked_quarantine_or_manifest_is_refused(tmp_path, outside, cli, link):
    d = torn_dir(tmp_path / "wal")
    if link == ".quarantine":
        os.symlink(outside / "dir", os.path.join(d, link))
    else:
        os.mkdir(os.path.join(d, ".quarantine"))
        os.symlink(outside / "victim.txt", os.path.join(d, link))
    before = chunk_bytes(d)
    r = cli("repair", d, "--apply")
    assert r.code == 7 and "symbolic link" in r.err and chunk_bytes(d) == before
    r = cli("quarantine", "move", d, "wal-000000.bin", "--reason", "test", "--apply")
    assert r.code == 7 and os.path.exists(os.path.join(d, "wal-000000.bin"))


def _manifest_line(d, **over) -> None:
    line = {"time": "2026-01-01T00:00:00Z", "action": "move", "source": "wal-000000.bin", "offset": 0,
            "length": 5, "sha256": "0" * 64, "evidence": ".quarantine/x", "reason": "r", "walctl_version": "0"}
    line.update(over)
    os.makedirs(os.path.join(d, ".quarantine"), exist_ok=True)
    with open(os.path.join(d, ".quarantine", "MANIFEST.jsonl"), "a") as f:
        f.write(json.dumps(line) + "\n")


@pytest.mark.parametrize("source", ["../outside/victim.bin", "OUTSIDE_ABS", "a/b", "", ".."])
def test_manifest_sources_outside_the_directory_are_reported_and_never_restored(tmp_path, outside, cli, source):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 4))})
    source = str(outside / "victim.bin") if source == "OUTSIDE_ABS" else source
    q = os.path.join(d, ".quarantine")
    os.makedirs(q)
    with open(os.path.join(q, "piece"), "wb") as f:
        f.write(b"bytes to append")
    # A "truncate" line whose offset equals the victim's size: restore would append there.
    _manifest_line(d, action="truncate", source=source, offset=os.path.getsize(outside / "victim.bin"),
                   length=15, evidence=".quarantine/piece")
    r = cli("quarantine", "list", d, "--json")
    doc = r.json()
    assert [i["recorded"] for i in doc["items"]] == [False]
    assert any("MANIFEST.jsonl line 1:" in p and "never acted on" in p for p in doc["problems"])
    r = cli("quarantine", "restore", d, "piece", "--apply")
    assert r.code == 2 and os.path.getsize(os.path.join(q, "piece")) == 15


@pytest.mark.parametrize("evidence", [".quarantine/../../outside/moved", ".quarantine/", "/abs/path",
                                      ".quarantine/a/b"])
def test_a_pending_manifest_line_cannot_send_compaction_outside(tmp_path, outside, cli, evidence):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 6)), 1: make_chunk(range(6, 11))})
    sha = hashlib.sha256(chunk_bytes(d, "wal-000000.bin")).hexdigest()
    _manifest_line(d, action="compact", source="wal-000000.bin", length=os.path.getsize(os.path.join(d, "wal-000000.bin")),
                   sha256=sha, evidence=evidence)
    r = cli("compact", d, "--to", "5", "--apply", "--json")
    assert r.code == 0, r.err
    (ev,) = r.json()["manifest"]
    assert ev["evidence"] == ".quarantine/wal-000000.bin" and ev["sha256"] == sha
    assert os.path.exists(os.path.join(d, ".quarantine", "wal-000000.bin"))
    assert not os.path.exists(os.path.join(d, "wal-000000.bin"))
    assert not os.path.lexists(tmp_path / "moved") and not os.path.lexists("/abs/path")


def test_a_pending_line_cannot_send_checkpoint_prune_outside(tmp_path, outside, cli):
    from walctl.ops.checkpoints.checkpoint import create

    ck = tmp_path / "ck"
    made = [create(str(ck), {"n": i}, i * 10, timestamp=1_000 + i) for i in range(1, 5)]
    oldest = os.path.basename(made[0].path)
    with open(made[0].path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    _manifest_line(str(ck), action="checkpoint-prune", source=oldest, length=os.path.getsize(made[0].path),
                   sha256=sha, evidence=".quarantine/../../outside/victim.txt")
    r = cli("checkpoint", "prune", str(ck), "--keep", "2", "--max-age", "1s", "--apply", "--json")
    assert r.code == 0, r.err
    assert os.path.exists(ck / ".quarantine" / oldest) and not os.path.exists(made[0].path)


# ---- linked and hard-linked chunks ----------------------------------------------------------------------

def test_a_linked_chunk_with_a_torn_tail_is_read_through_but_never_cut(tmp_path, outside, cli):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 11))})
    real = outside / "dir" / "real.bin"
    real.write_bytes(make_chunk(range(11, 21))[:-7])
    os.symlink(real, os.path.join(d, "wal-000001.bin"))
    try:
        r = cli("verify", d, "--json")
        doc = r.json()["paths"][0]
        assert r.code == 1 and doc["summary"]["records"] == 19  # read-only: read through it, saying so
        assert [(f["class"], f["file"]) for f in doc["findings"] if f["class"] == "linked-file"] == [
            ("linked-file", "wal-000001.bin")]
        r = cli("repair", d, "--apply")
        assert r.code == 7 and "wal-000001.bin is a symbolic link" in r.err
        assert not os.path.exists(os.path.join(d, ".quarantine"))
    finally:
        real.unlink()  # the sentinel snapshot was taken before this file existed


def test_a_hard_linked_chunk_with_a_torn_tail_is_never_cut(tmp_path, outside, cli):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 11))})
    real = outside / "dir" / "twin.bin"
    real.write_bytes(make_chunk(range(11, 21))[:-7])
    os.link(real, os.path.join(d, "wal-000001.bin"))
    try:
        r = cli("repair", d, "--apply")
        assert r.code == 7 and "hard links" in r.err and os.path.getsize(real) == len(make_chunk(range(11, 21))) - 7
        r = cli("write", d, "--type", "0", "--id", "m", "--payload", "x")
        assert r.code == 7 and os.path.getsize(real) == len(make_chunk(range(11, 21))) - 7
    finally:
        os.unlink(os.path.join(d, "wal-000001.bin"))
        real.unlink()


def test_write_never_appends_through_a_linked_active_chunk(tmp_path, outside, cli):
    d = tmp_path / "wal"
    d.mkdir()
    os.symlink(outside / "victim.bin", d / "wal-000000.bin")
    r = cli("write", str(d), "--type", "0", "--id", "m", "--payload", "x")
    assert r.code == 7 and "symbolic link" in r.err


def test_salvage_refuses_a_linked_staging_directory(tmp_path, outside, cli):
    src = torn_dir(tmp_path / "wal")
    os.symlink(outside / "dir", tmp_path / "out.tmp")
    r = cli("salvage", src, "--out", str(tmp_path / "out"))
    assert r.code in (6, 7) and r.code in CONTRACT and not os.path.exists(tmp_path / "out")


def test_tasklog_resume_never_cuts_through_a_link(tmp_path, outside, cli):
    log = outside / "dir" / "task.wal"
    body = b'{"seq":1,"ts":"2026-01-01T00:00:00Z","type":"start"}\n{"seq":2,"ts'
    log.write_bytes(body)
    (tmp_path / "logs").mkdir()
    os.symlink(log, tmp_path / "logs" / "t1.wal")
    try:
        r = cli("tasklog", "resume", str(tmp_path / "logs" / "t1.wal"), "--apply")
        assert r.code in CONTRACT and r.code != 0 and log.read_bytes() == body
    finally:
        log.unlink()


# ---- archive keys -----------------------------------------------------------------------------------------

def test_foreign_object_keys_are_skipped_and_restore_writes_only_beneath_out(tmp_path, outside, cli):
    from walctl.ops.wal.write import WalWriter

    wal = tmp_path / "wal"
    with WalWriter(str(wal), sync="none", max_chunk_bytes=2000) as w:
        for i in range(60):
            w.append(0, "m", b"x" * 50)
    store = tmp_path / "archive"
    assert cli("archive", "push", str(wal), f"file://{store}", "--namespace", "n").code == 0
    chunks = store / "n" / "chunks"
    (chunks / "nested").mkdir()
    (chunks / "nested" / "wal-000099.bin").write_bytes(b"x")
    (chunks / "not-a-chunk").write_bytes(b"x")
    man = json.loads((store / "n" / "MANIFEST.json").read_text())
    man["objects"][0]["name"] = "../../outside/victim.txt"  # a hostile manifest line: rebuilt, not trusted
    (store / "n" / "MANIFEST.json").write_text(json.dumps(man))
    r = cli("archive", "list", f"file://{store}", "--json")
    assert r.code == 0 and "foreign object" in json.dumps(r.json())
    r = cli("archive", "verify", f"file://{store}")
    # the objects are all good; the manifest is not (issue #24: a damaged index is a finding, never used)
    assert r.code == 3 and "manifest-invalid: n/MANIFEST.json: MANIFEST.json does not parse (object 1" in r.out
    out = tmp_path / "restored"
    r = cli("archive", "restore", f"file://{store}", str(out), "--namespace", "n")
    assert r.code == 0, r.err
    assert sorted(os.listdir(out)) == ["wal"] and all(n.startswith("wal-") for n in os.listdir(out / "wal"))
    assert sorted(os.listdir(tmp_path)) == ["archive", "outside", "restored", "wal"]  # no staging left behind


def test_an_s3_folder_marker_does_not_break_the_archive(tmp_path, cli, request):
    srv = request.getfixturevalue("s3_server")
    import boto3

    from walctl.ops.wal.write import WalWriter

    wal = tmp_path / "wal"
    with WalWriter(str(wal), sync="none", max_chunk_bytes=2000) as w:
        for i in range(60):
            w.append(0, "m", b"x" * 50)
    url = f"s3://walctl-test/{tmp_path.name}"
    ep = ["--endpoint-url", srv["endpoint"]]
    assert cli("archive", "push", str(wal), url, "--namespace", "n", *ep).code == 0
    c = boto3.client("s3", endpoint_url=srv["endpoint"])
    for key in ("n/chunks/", "n/chunks/./x", "n/chunks/../wal-000001.bin", "n/checkpoints/"):
        c.put_object(Bucket="walctl-test", Key=f"{tmp_path.name}/{key}", Body=b"")
    assert cli("archive", "list", url, *ep).code == 0
    r = cli("archive", "verify", url, *ep)
    assert r.code == 0, r.err
    assert cli("archive", "push", str(wal), url, "--namespace", "n", *ep).code == 0
    out = tmp_path / "restored"
    assert cli("archive", "restore", url, str(out), "--namespace", "n", *ep).code == 0
    assert sorted(os.listdir(out)) == ["wal"]


# ---- terminal safety ------------------------------------------------------------------------------------

def test_names_and_memory_ids_never_reach_the_terminal_raw(tmp_path, cli):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 4), memory_id=b"\x1b]0;owned\x07\x1b[2J")})
    with open(os.path.join(d, "evil-\x1b[31m.bin"), "wb") as f:
        f.write(b"x")
    for args in (("verify", d, "-v"), ("inspect", d), ("stats", d), ("inspect", d, "--jsonl")):
        r = cli(*args)
        assert r.code in CONTRACT
        assert "\x1b" not in r.out + r.err and "\x07" not in r.out + r.err, args
    r = cli("inspect", d, "--jsonl")
    assert json.loads(r.out.splitlines()[0])["memory_id"] == "\x1b]0;owned\x07\x1b[2J"  # JSON keeps the value


# ---- the rule, as code: only store/ changes the file system; imports point down ---------------------------

FORBIDDEN_CALLS = {("os", n) for n in ("open", "truncate", "ftruncate", "replace", "rename", "renames", "unlink",
                                      "remove", "rmdir", "removedirs", "mkdir", "makedirs", "fsync", "fdatasync",
                                      "link", "symlink", "chmod", "chown")} | {("shutil", n) for n in (
    "rmtree", "move", "copy", "copy2", "copyfile", "copytree")}
LAYERS = ["format", "store", "ops", "cli"]


def _modules():
    for p in sorted(WALCTL.rglob("*.py")):
        rel = p.relative_to(WALCTL)
        yield rel, ast.parse(p.read_text(), str(p))


def test_nothing_outside_store_changes_the_file_system():
    bad = []
    for rel, tree in _modules():
        if rel.parts[0] == "store":
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in FORBIDDEN_CALLS:
                if (rel.as_posix(), f.attr) != ("cli/__init__.py", "open"):  # /dev/null for a closed pipe
                    bad.append(f"{rel}:{node.lineno}: {f.value.id}.{f.attr}")
            if isinstance(f, ast.Name) and f.id == "open" and len(node.args) > 1:
                mode = node.args[1]
                if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
                    bad.append(f"{rel}:{node.lineno}: open(..., {mode.value!r})")
    assert bad == []


def test_imports_point_down_the_layers():
    bad = []
    for rel, tree in _modules():
        if rel.parts[0] not in LAYERS:
            continue
        mine = LAYERS.index(rel.parts[0])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0 and node.module:
                target = node.module.split(".")[0] if node.level == 2 else rel.parts[0]
                if target in LAYERS and LAYERS.index(target) > mine:
                    bad.append(f"{rel}:{node.lineno}: imports {target}")
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("walctl."):
                target = node.module.split(".")[1]
                if target in LAYERS and LAYERS.index(target) > mine:
                    bad.append(f"{rel}:{node.lineno}: imports {target}")
    assert bad == []


from test_archive import s3_server  # noqa: E402,F401 - the moto server fixture, started on 127.0.0.1


# ---- found by attacking the change (issue #12 review) -------------------------------------------------

def test_the_lock_is_reached_beneath_the_callers_target_so_a_swapped_subdirectory_is_refused(tmp_path, outside):
    from walctl.errors import Refused
    from walctl.store.fs import DEFAULT_FS
    from walctl.store.lock import DirectoryLock

    root = tmp_path / "store"
    root.mkdir()
    os.symlink(outside / "dir", root / "workflow-checkpoints")  # swapped in after the caller's checks
    with pytest.raises(Refused, match="symbolic link"):
        with DirectoryLock(str(root / "workflow-checkpoints"), "test", DEFAULT_FS.beneath(str(root))):
            pass
    assert not os.path.lexists(outside / "dir" / ".walctl.lock")


@pytest.mark.parametrize("special", ["fifo", "devzero"])
def test_a_follower_never_blocks_or_floods_on_a_fifo_or_device_named_like_a_chunk(tmp_path, cli, special):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 4))})
    bad = os.path.join(d, "wal-000003.bin")
    os.mkfifo(bad) if special == "fifo" else os.symlink("/dev/zero", bad)
    r = cli("replay", d, "--follow", "--timeout", "3")
    assert r.code == 5 and "not a regular file" in r.err


def test_a_fifo_in_a_file_archive_is_no_object_and_blocks_nothing(tmp_path, cli):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 11)), 1: make_chunk(range(11, 21))})
    store = tmp_path / "st"
    assert cli("archive", "push", d, f"file://{store}", "--namespace", "n").code == 0
    os.mkfifo(store / "n" / "chunks" / "wal-000007.bin")  # never listed, never opened
    assert cli("archive", "verify", f"file://{store}").code == 0
    os.unlink(store / "n" / "MANIFEST.json")
    os.mkfifo(store / "n" / "MANIFEST.json")
    r = cli("archive", "list", f"file://{store}")
    assert r.code == 6 and "not a regular file" in r.err


def test_agents_recover_refuses_a_hard_linked_log_before_changing_anything(tmp_path, outside, cli):
    import shutil

    from conftest import DATA, tree_digest

    root = tmp_path / "root"
    shutil.copytree(os.path.join(DATA, "substrat", "clean-tree", "root"), root)
    sessions = sorted(os.listdir(root / "agents"))
    with open(root / "agents" / sessions[0] / "events.jsonl", "ab") as f:
        f.write(b'{"partial')  # a torn tail to cut
    victim = outside / "dir" / "hl.jsonl"
    shutil.copy(root / "agents" / sessions[1] / "events.jsonl", victim)
    with open(victim, "ab") as f:
        f.write(b'{"partial')
    os.unlink(root / "agents" / sessions[1] / "events.jsonl")
    os.link(victim, root / "agents" / sessions[1] / "events.jsonl")
    try:
        before = tree_digest(root)
        r = cli("agents", "recover", str(root), "--apply")
        assert r.code == 7 and "hard links" in r.err
        assert tree_digest(root) == before  # not even the lock file
    finally:
        os.unlink(root / "agents" / sessions[1] / "events.jsonl")
        victim.unlink()


def test_archive_push_never_ships_or_deletes_a_linked_chunk(tmp_path, outside, cli):
    d = write_dir(tmp_path / "wal", {1: make_chunk(range(6, 11)), 2: make_chunk(range(11, 16))})
    os.symlink(outside / "victim.bin", os.path.join(d, "wal-000000.bin"))  # seq 1..5, a valid chunk
    r = cli("archive", "push", d, f"file://{tmp_path / 'st'}", "--to", "12", "--delete-local", "--apply",
            "--json")
    doc = r.json()
    assert r.code == 5 and "internal" not in r.err
    assert [h["class"] for h in doc["held_back"]] == ["linked-file"] and doc["uploaded"] == ["wal-000001.bin"]
    assert os.path.islink(os.path.join(d, "wal-000000.bin"))  # the link stays, its target untouched
    assert not any(n.startswith("wal-000000") for _, _, fs in os.walk(tmp_path / "st") for n in fs)
    lines = open(os.path.join(d, ".quarantine", "MANIFEST.jsonl")).read()
    assert "wal-000000" not in lines and "wal-000001.bin" in lines  # only the archived chunk left


def test_compact_archive_to_refuses_a_conflict_before_moving_any_chunk(tmp_path, cli):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 6)), 1: make_chunk(range(6, 11)),
                                     2: make_chunk(range(11, 16))})
    arch = tmp_path / "arch"
    arch.mkdir()
    (arch / "wal-000001.bin").write_bytes(b"other bytes")  # the second chunk's name is taken
    r = cli("compact", d, "--to", "12", "--archive-to", str(arch), "--apply")
    assert r.code == 7 and "nothing was changed" in r.err
    assert sorted(n for n in os.listdir(d) if n.endswith(".bin")) == ["wal-000000.bin", "wal-000001.bin",
                                                                     "wal-000002.bin"]
    assert sorted(os.listdir(arch)) == ["wal-000001.bin"]


def test_an_age_beyond_any_date_is_a_usage_error(tmp_path, cli):
    r = cli("workflow", "cleanup", str(tmp_path), "--max-age", "99999999999999999999999999")
    assert r.code == 2 and "1,000 years" in r.err and "internal error" not in r.err
