"""The ADR-002 workflow store: both backends behave as the interface says; the directory backend is
durable, JSON only, and safe against path tricks."""
from __future__ import annotations

import json
import os
import pickle
from datetime import datetime, timedelta, timezone

import pytest

from simfs import SimCrash, SimFS
from walctl.errors import UsageError
from walctl.format.workflow import CheckpointState, PauseMetadata, decode, encode
from walctl.ops.workflow.store import DirectoryWorkflowStore, InMemoryWorkflowStore

T0 = datetime(2026, 11, 21, 12, 0, 0, 123456, tzinfo=timezone.utc)


def state(cid="wf-1", name="deploy", at=T0, pause=None, waves=1):
    return CheckpointState(cid, name, {"env": "prod"}, [[{"id": "a"}], [{"id": "b"}, {"id": "c"}]], waves,
                           {"blocks": {"a": {"outputs": {"ok": True}}}}, at, pause)


@pytest.fixture(params=["memory", "directory"])
def store(request, tmp_path):
    return InMemoryWorkflowStore() if request.param == "memory" else DirectoryWorkflowStore(str(tmp_path / "root"))


def test_round_trip_with_pause_metadata(store):
    s = state(pause=PauseMetadata("ask", "Continue?", ""))  # an empty response is recorded as given
    store.save(s)
    assert store.load("wf-1") == s
    s2 = state(cid="wf-2", pause=PauseMetadata("ask", "Continue?", None))
    store.save(s2)
    assert store.load("wf-2").pause_metadata.response is None
    assert store.load("nope") is None


def test_list_sorted_by_created_then_id_and_filtered(store):
    for cid, name, dt in (("b", "x", 5), ("a", "x", 5), ("c", "y", 1)):
        store.save(state(cid, name, T0 + timedelta(seconds=dt)))
    assert [s.checkpoint_id for s in store.list()] == ["c", "a", "b"]
    assert [s.checkpoint_id for s in store.list("x")] == ["a", "b"]


def test_delete_is_idempotent_and_says_whether_it_existed(store):
    store.save(state())
    assert store.delete("wf-1") is True and store.delete("wf-1") is False
    assert store.load("wf-1") is None


def test_cleanup_expired_is_strictly_older(store):
    store.save(state("old", at=T0 - timedelta(hours=24, microseconds=1)))
    store.save(state("edge", at=T0 - timedelta(hours=24)))
    store.save(state("new", at=T0))
    assert store.cleanup_expired(24, now=T0) == 1
    assert [s.checkpoint_id for s in store.list()] == ["edge", "new"]


@pytest.mark.parametrize("bad", ["", ".hidden", "..", "../etc", "a/b", "a\\b", "x" * 201, "nul\x00", "sp ace", "é"])
def test_ids_that_could_be_paths_are_refused(store, bad):
    with pytest.raises(UsageError):
        store.save(state(bad))
    with pytest.raises(UsageError):
        store.load(bad)


def test_directory_documents_are_sorted_json_never_pickle(tmp_path):
    root = str(tmp_path / "root")
    DirectoryWorkflowStore(root).save(state(pause=PauseMetadata("b", "p", None)))
    path = os.path.join(root, "workflow-checkpoints", "wf-1.json")
    text = open(path, encoding="utf-8").read()
    doc = json.loads(text)
    assert list(doc) == sorted(doc) and doc["schema_version"] == 1
    assert doc["created_at"] == "2026-11-21T12:00:00.123456Z" and doc["pause_metadata"]["response"] is None
    with open(path, "wb") as f:
        pickle.dump({"evil": True}, f)
    with pytest.raises(ValueError, match="not a JSON document"):
        DirectoryWorkflowStore(root).load("wf-1")
    s = DirectoryWorkflowStore(root)
    assert s.list() == [] and s.problems[0].file == "wf-1.json"


@pytest.mark.parametrize("mutate, why", [
    (lambda d: d.update(schema_version=2), "schema_version"),
    (lambda d: d.update(checkpoint_id="other"), "differs from the file name"),
    (lambda d: d.update(completed_waves=-1), "completed_waves"),
    (lambda d: d.update(created_at="2026-11-21 12:00"), "created_at"),
    (lambda d: d.update(execution_waves=[1]), "array of arrays"),
    (lambda d: d.update(pause_metadata={"block_id": 1}), "pause_metadata"),
])
def test_invalid_documents_name_their_problem(mutate, why):
    doc = json.loads(encode(state()))
    mutate(doc)
    with pytest.raises(ValueError, match=why):
        decode(json.dumps(doc).encode(), "wf-1")


def test_save_is_durable_replace_at_every_crash_point():
    def fresh():
        fs = SimFS()
        fs.makedirs_durable("/root")
        store = DirectoryWorkflowStore("/root", fs)
        store.save(state(waves=0))
        fs.settle()
        return fs, store

    fs, store = fresh()
    start = fs.ops
    store.save(state(waves=1))
    steps = fs.ops - start
    for n in range(1, steps + 1):
        fs, store = fresh()
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            store.save(state(waves=1))
        fs.crash()
        assert DirectoryWorkflowStore("/root", fs).load("wf-1").completed_waves in (0, 1), n


def test_cli_list_show_delete_cleanup(cli, tmp_path):
    root = str(tmp_path / "root")
    store = DirectoryWorkflowStore(root)
    now = datetime.now(timezone.utc)
    store.save(state("fresh", at=now))
    store.save(state("stale", at=now - timedelta(days=3), pause=PauseMetadata("ask", "Go?", None)))
    doc = cli("workflow", "list", root, "--json").json()
    assert [c["checkpoint_id"] for c in doc["checkpoints"]] == ["stale", "fresh"]
    assert doc["checkpoints"][0]["paused_at_block"] == "ask"
    assert json.loads(cli("workflow", "show", root, "stale", "--json").out)["workflow_name"] == "deploy"
    assert cli("workflow", "show", root, "../x").code == 2
    r = cli("workflow", "cleanup", root)
    assert "would set aside stale" in r.out and store.load("stale") is not None
    r = cli("workflow", "cleanup", root, "--apply", "--json")
    assert r.json()["expired"] == ["stale"] and store.load("stale") is None
    kept = os.path.join(root, "workflow-checkpoints", ".quarantine", "stale.json")
    assert decode(open(kept, "rb").read()).checkpoint_id == "stale"  # set aside, not destroyed
    assert "would set aside fresh" in cli("workflow", "delete", root, "fresh").out
    assert "set aside fresh" in cli("workflow", "delete", root, "fresh", "--apply").out
    assert "no such checkpoint" in cli("workflow", "delete", root, "fresh", "--apply").out


# --- issues #15 and #12: invalid documents, symlinked entries, the lock ------------------------------------


def _stale_store(tmp_path):
    root = str(tmp_path / "root")
    store = DirectoryWorkflowStore(root)
    now = datetime.now(timezone.utc)
    store.save(state("fresh", at=now))
    store.save(state("stale", at=now - timedelta(days=3)))
    return root, os.path.join(root, "workflow-checkpoints")


def _digest(path):
    from conftest import tree_digest

    return {k: v for k, v in tree_digest(path).items() if not k.endswith(".walctl.lock")}


@pytest.mark.parametrize("body, why", [(b'{"schema_version": 1, "checkpoint_id": "bad"', "not a JSON document"),
                                       (b"[" * 100_000, "nested deeper than 256"),
                                       (b'{"schema_version": 2}', "schema_version 2")])
def test_delete_dry_run_and_apply_on_an_invalid_document(cli, tmp_path, body, why):
    root, wdir = _stale_store(tmp_path)
    bad = os.path.join(wdir, "bad.json")
    with open(bad, "wb") as f:
        f.write(body)
    r = cli("workflow", "delete", root, "bad")
    assert r.code == 0 and "would set aside bad (an invalid document:" in r.out and why in r.out
    assert open(bad, "rb").read() == body
    r = cli("workflow", "delete", root, "bad", "--apply", "--json")
    doc = r.json()
    assert r.code == 0 and doc["existed"] is True and why in doc["problem"] and not os.path.exists(bad)
    assert open(os.path.join(wdir, doc["manifest"]["evidence"]), "rb").read() == body
    assert doc["manifest"]["length"] == len(body) and doc["manifest"]["source"] == "bad.json"
    assert sorted(os.listdir(wdir)) == [".quarantine", ".walctl.lock", "fresh.json", "stale.json"]


def test_cleanup_reports_invalid_documents_with_exit_3_and_leaves_them(cli, tmp_path):
    root, wdir = _stale_store(tmp_path)
    with open(os.path.join(wdir, "torn.json"), "wb") as f:
        f.write(b'{"schema_')
    r = cli("workflow", "cleanup", root, "--json")
    doc = r.json()
    assert r.code == 3 and doc["exit_code"] == 3 and doc["expired"] == ["stale"]
    assert [p["file"] for p in doc["problems"]] == ["torn.json"] and "not a JSON document" in doc["problems"][0]["reason"]
    r = cli("workflow", "cleanup", root, "--apply")
    assert r.code == 3 and "problem: torn.json" in r.out and "set aside stale" in r.out
    assert sorted(n for n in os.listdir(wdir) if n.endswith(".json")) == ["fresh.json", "torn.json"]


def test_cleanup_and_delete_apply_refuse_symlinked_entries(cli, tmp_path):
    root, wdir = _stale_store(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.rename(os.path.join(wdir, "stale.json"), outside / "stale.json")
    os.symlink(outside / "stale.json", os.path.join(wdir, "stale.json"))
    (outside / "sentinel").write_bytes(b"do not touch")
    from test_agents_edges import full_digest

    before_out, before_store = full_digest(str(outside)), _digest(root)
    r = cli("workflow", "cleanup", root, "--apply")
    assert r.code == 7 and "workflow-checkpoints/stale.json is a symbolic link" in r.err
    r = cli("workflow", "delete", root, "stale", "--apply")
    assert r.code == 7 and "symbolic link" in r.err
    assert full_digest(str(outside)) == before_out and _digest(root) == before_store
    assert os.path.islink(os.path.join(wdir, "stale.json")) and not os.path.exists(os.path.join(wdir, ".quarantine"))


def test_delete_and_cleanup_apply_take_the_stores_lock(cli, tmp_path):
    from walctl.store.fs import DEFAULT_FS
    from walctl.store.lock import DirectoryLock

    root, wdir = _stale_store(tmp_path)
    with DirectoryLock(wdir, "pid 1 on test: a writer", DEFAULT_FS):
        before = _digest(root)
        r = cli("workflow", "delete", root, "stale", "--apply")
        assert r.code == 6 and "locked by a live writer" in r.err
        r = cli("workflow", "cleanup", root, "--apply")
        assert r.code == 6 and "locked by a live writer" in r.err
        assert cli("workflow", "cleanup", root).code == 0  # the dry run needs no lock
    assert _digest(root) == before
    assert cli("workflow", "cleanup", root, "--apply").code == 0 and not os.path.exists(os.path.join(wdir, "stale.json"))


def test_a_symlinked_store_directory_is_refused_by_every_mutation(cli, tmp_path):
    from test_agents_edges import full_digest

    root, wdir = _stale_store(tmp_path)
    outside = tmp_path / "outside"
    os.rename(wdir, outside)
    os.symlink(outside, wdir)
    before = full_digest(str(outside))
    for args in (("workflow", "cleanup", root, "--apply"), ("workflow", "delete", root, "stale", "--apply")):
        r = cli(*args)
        assert r.code == 7 and "workflow-checkpoints is a symbolic link" in r.err, args
    assert full_digest(str(outside)) == before and not os.path.exists(outside / ".walctl.lock")
    assert cli("workflow", "cleanup", root).code == 0  # reading through it is fine
    for args in (("workflow", "cleanup", root, "--apply", "--json"),
                 ("workflow", "delete", root, "stale", "--apply", "--json")):
        r = cli(*args)
        assert r.code == 7 and r.json()["outcome"] == "refused" and r.json()["exit_code"] == 7, args


def test_crash_at_every_step_of_cleanup_then_one_rerun_finishes(tmp_path):
    """cleanup's line goes before its move (store/quarantine.py move_in_recorded): after a crash anywhere,
    one rerun leaves every expired document in .quarantine/ under exactly one manifest line."""
    from datetime import datetime, timedelta, timezone

    from simfs import SimCrash, load_tree
    from walctl.format.workflow import CheckpointState, PauseMetadata
    from walctl.ops.wal import quarantine as Q
    from walctl.ops.workflow import store as W
    from walctl.store import quarantine as q

    root = tmp_path / "flows"
    store = W.DirectoryWorkflowStore(str(root))
    old = datetime.now(timezone.utc) - timedelta(days=3)
    for cid in ("a-old", "b-old"):
        store.save(CheckpointState(cid, "deploy", {}, [[{"id": "x"}]], 0, {"blocks": {}}, old,
                                   PauseMetadata("ask", "Go?", None)))
    qroot = "/r/" + W.SUBDIR

    def load(crash_at=None):
        return load_tree(str(root), "/r", crash_at=crash_at)

    start = load().ops
    done = load()
    W.cleanup("/r", 24, apply=True, fs=done)
    steps = done.ops - start
    assert steps >= 4
    for n in range(1, steps + 1):
        fs = load(crash_at=start + n)
        with pytest.raises(SimCrash):
            W.cleanup("/r", 24, apply=True, fs=fs)
        fs.crash()
        W.cleanup("/r", 24, apply=True, fs=fs)  # one rerun
        entries, _ = q.read_manifest(qroot, fs)
        moved = sorted(e["source"] for e in entries if e["action"] == "workflow-delete")
        assert moved == ["a-old.json", "b-old.json"], (n, moved)
        held = sorted(i.name for i in Q.list_quarantine(qroot, fs).items if i.entry is not None)
        assert held == ["a-old.json", "b-old.json"], (n, held)
