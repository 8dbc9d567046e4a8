"""ADR-002's core flow (issue 28): pause_workflow, resume_workflow, completion deletes the checkpoint. The
stored documents are compared byte for byte with walctl's own encoder, both stores behave alike, two
resumes race and exactly one wins, and a crash at any step of each finishes on one rerun."""
from __future__ import annotations

import json
import os
import threading
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from simfs import SimCrash, load_tree
from walctl import WorkflowConflict, complete_workflow, pause_workflow, resume_workflow
from walctl.errors import EnvironmentProblem, NotClean, UsageError
from walctl.format.workflow import CheckpointState, PauseMetadata, decode, encode
from walctl.ops.workflow.store import SUBDIR, DirectoryWorkflowStore, InMemoryWorkflowStore
from walctl.store import quarantine as q

T0 = datetime(2026, 11, 21, 12, 0, 0, 123456, tzinfo=timezone.utc)
T1 = T0 + timedelta(minutes=5, microseconds=7)
WAVES = [[{"id": "build"}], [{"id": "approve"}], [{"id": "ship"}]]
CONTEXT = {"blocks": {"build": {"outputs": {"ok": True}}}}


def running(cid="wf-1", waves=1, context=CONTEXT):
    return CheckpointState(cid, "deploy", {"env": "prod"}, WAVES, waves, context, T0, None)


def paused(cid="wf-1", block="approve", prompt="Ship to prod?"):
    return running(cid)._replace(created_at=T1, pause_metadata=PauseMetadata(block, prompt, None))


def answered(cid="wf-1", response="yes"):
    blocks = dict(CONTEXT["blocks"], approve={"outputs": {"response": response}})
    return running(cid)._replace(created_at=T1, context={"blocks": blocks})


def doc_path(root, cid="wf-1"):
    return os.path.join(root, SUBDIR, cid + ".json")


def stored(root, cid="wf-1") -> bytes:
    with open(doc_path(root, cid), "rb") as f:
        return f.read()


@pytest.fixture(params=["memory", "directory"])
def store(request, tmp_path):
    return InMemoryWorkflowStore() if request.param == "memory" else DirectoryWorkflowStore(str(tmp_path / "root"))


def test_the_adrs_flow_pause_resume_complete_on_both_stores(store):
    cid = str(uuid.uuid4())  # the ADR's pause creates its checkpoint under a fresh uuid4
    p = pause_workflow(store, running(cid), "approve", "Ship to prod?", now=T1)
    assert p.changed and p.state == paused(cid) and store.load(cid) == paused(cid)
    r = resume_workflow(store, cid, "yes")
    assert r.state == answered(cid) and store.load(cid) == answered(cid)
    assert r.pause == PauseMetadata("approve", "Ship to prod?", "yes") and r.next_wave == 2
    c = complete_workflow(store, cid)
    assert c.existed and store.load(cid) is None and store.list() == []
    assert complete_workflow(store, cid).existed is False  # idempotent, says it was not there


def test_directory_documents_are_the_encoders_bytes_at_every_step(tmp_path):
    root = str(tmp_path / "root")
    store = DirectoryWorkflowStore(root)
    store.save(running())
    before = stored(root)
    pause_workflow(store, "wf-1", "approve", "Ship to prod?", now=T1)
    assert stored(root) == encode(paused())
    doc = json.loads(stored(root))
    assert doc["pause_metadata"] == {"block_id": "approve", "prompt": "Ship to prod?", "response": None}
    assert doc["created_at"] == "2026-11-21T12:05:00.123463Z"  # when: the pause's time, as the ADR stamps it
    assert {k: v for k, v in doc.items() if k not in ("pause_metadata", "created_at")} == \
        {k: v for k, v in json.loads(before).items() if k not in ("pause_metadata", "created_at")}
    resume_workflow(store, "wf-1", "yes")
    assert stored(root) == encode(answered())
    entry = complete_workflow(store, "wf-1").entry
    assert not os.path.exists(doc_path(root))
    kept = os.path.join(root, SUBDIR, entry["evidence"])
    assert open(kept, "rb").read() == encode(answered())  # evidence first: the last document, whole
    assert (entry["action"], entry["source"], entry["length"], entry["sha256"]) == \
        ("workflow-complete", "wf-1.json", len(encode(answered())), q.sha256_bytes(encode(answered())))
    lines, _ = q.read_manifest(os.path.join(root, SUBDIR))
    assert lines == [entry]


def test_a_repeated_pause_is_done_another_pause_is_a_conflict(store):
    store.save(running())
    pause_workflow(store, "wf-1", "approve", "Ship to prod?", now=T1)
    again = pause_workflow(store, "wf-1", "approve", "Ship to prod?", now=T1 + timedelta(hours=1))
    assert again.changed is False and store.load("wf-1") == paused()  # the first pause's time is kept
    with pytest.raises(WorkflowConflict, match='already paused at block "approve"') as e:
        pause_workflow(store, "wf-1", "other", "Really?", now=T1)
    assert e.value.exit_code == 6 and e.value.state == "paused" and store.load("wf-1") == paused()


def test_resume_records_the_response_as_given_or_none(store):
    store.save(paused())
    r = resume_workflow(store, "wf-1", "")  # an empty response is recorded as given
    assert r.state.context["blocks"]["approve"] == {"outputs": {"response": ""}} and r.pause.response == ""
    store.save(paused("wf-2"))
    r = resume_workflow(store, "wf-2")
    assert r.state == running("wf-2")._replace(created_at=T1) and r.pause.response is None


def test_resume_of_a_running_workflow_and_complete_of_a_paused_one_are_refused(store):
    store.save(running())
    with pytest.raises(WorkflowConflict, match="wf-1 is not paused") as e:
        resume_workflow(store, "wf-1", "yes")
    assert (e.value.exit_code, e.value.kind, e.value.state) == (6, "locked", "running")
    assert store.load("wf-1") == running()
    store.save(paused())
    with pytest.raises(WorkflowConflict, match='is paused at block "approve" awaiting a response'):
        complete_workflow(store, "wf-1")
    assert store.load("wf-1") == paused()
    with pytest.raises(UsageError, match="no checkpoint nope"):
        resume_workflow(store, "nope")
    with pytest.raises(UsageError, match="no checkpoint nope"):
        pause_workflow(store, "nope", "b", "p")


@pytest.mark.parametrize("state, why", [
    (paused()._replace(completed_waves=3), "paused in wave 3 but execution_waves has 3"),
    (paused()._replace(context={"blocks": []}), "context.blocks is not a JSON object"),
    (paused()._replace(context={"blocks": {"approve": {"outputs": "x"}}}),
     r'context.blocks\["approve"\].outputs is not a JSON object'),
])
def test_resume_validates_what_continuing_needs_and_changes_nothing(store, state, why):
    store.save(state)
    with pytest.raises(NotClean, match=why):
        resume_workflow(store, "wf-1", "yes")
    assert store.load("wf-1") == state


@pytest.mark.parametrize("bad", ["", ".hidden", "..", "../etc", "a/b", "x" * 201, "nul\x00", "é"])
def test_untrusted_ids_are_plain_names_for_every_step(store, bad):
    for call in (lambda: pause_workflow(store, bad, "b", "p"), lambda: resume_workflow(store, bad, "r"),
                 lambda: complete_workflow(store, bad)):
        with pytest.raises(UsageError, match="not starting with a dot"):
            call()
    assert store.list() == []


def test_a_refused_id_creates_nothing(tmp_path):
    store = DirectoryWorkflowStore(str(tmp_path / "root"))
    with pytest.raises(UsageError):
        pause_workflow(store, running("../escape"), "b", "p")
    assert not os.path.exists(tmp_path / "root") and os.listdir(tmp_path) == []


# --- two resumes of one workflow: exactly one wins ------------------------------------------------------


def _race_resume(root, i, barrier, out):
    """A child process: wait for the other, then `walctl workflow resume --json`; its exit code and document."""
    import contextlib
    import io

    from walctl.cli import run

    barrier.wait()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        code = run(["workflow", "resume", root, "wf-1", "--response", f"from-{i}", "--json"])
    out.put((i, code, json.loads(buf.getvalue())))


def test_two_processes_resume_one_workflow_exactly_one_wins(tmp_path):
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    root = str(tmp_path / "root")
    store = DirectoryWorkflowStore(root)
    for _ in range(12):
        store.save(paused())
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_race_resume, args=(root, i, barrier, out)) for i in (0, 1)]
        for p in procs:
            p.start()
        got = sorted((out.get(timeout=60) for _ in procs), key=lambda g: g[1])
        for p in procs:
            p.join(60)
        (wi, wcode, wdoc), (li, lcode, ldoc) = got
        assert (wcode, lcode) == (0, 6), got
        assert stored(root) == encode(answered(response=f"from-{wi}"))  # the winner's response, whole
        assert wdoc["document"] == json.loads(encode(answered(response=f"from-{wi}")))
        if ldoc["schema"] == "walctl.error/1":  # it met the winner's lock
            assert ldoc["error"]["reason"] == "locked" and "locked by a live writer" in ldoc["error"]["message"]
        else:  # it came after the winner: the workflow is not paused any more
            assert (ldoc["schema"], ldoc["outcome"], ldoc["state"]) == ("walctl.workflow-resume/1", "failed", "running")
            assert ldoc["exit_code"] == 6 and "not paused" in ldoc["error"]
        # (which of the two ways the loser lost is up to the scheduler; both are exit 6, nothing changed)


@pytest.mark.parametrize("kind", ["memory", "directory"])
def test_threads_resume_one_workflow_exactly_one_wins(tmp_path, kind):
    store = InMemoryWorkflowStore() if kind == "memory" else DirectoryWorkflowStore(str(tmp_path / "root"))
    for _ in range(20):
        store.save(paused())
        n = 4
        barrier, results = threading.Barrier(n), [None] * n

        def go(i):
            barrier.wait()
            try:
                results[i] = resume_workflow(store, "wf-1", f"from-{i}")
            except EnvironmentProblem as e:  # the winner's lock held, or a WorkflowConflict: not paused any more
                results[i] = e

        threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        won = [i for i, r in enumerate(results) if not isinstance(r, Exception)]
        assert len(won) == 1 and all(r.exit_code == 6 for r in results if isinstance(r, Exception)), results
        assert store.load("wf-1") == answered(response=f"from-{won[0]}")


def test_resume_while_another_holds_the_lock_is_exit_6_and_changes_nothing(cli, tmp_path):
    from conftest import tree_digest
    from walctl.store.fs import DEFAULT_FS
    from walctl.store.lock import DirectoryLock

    root = str(tmp_path / "root")
    DirectoryWorkflowStore(root).save(paused())
    DirectoryWorkflowStore(root).save(running("wf-2"))
    with DirectoryLock(os.path.join(root, SUBDIR), "pid 1 on test: walctl workflow resume", DEFAULT_FS):
        before = tree_digest(root)
        for args in (("resume", root, "wf-1"), ("pause", root, "wf-2", "--block", "b", "--prompt", "p"),
                     ("complete", root, "wf-2", "--apply")):
            r = cli("workflow", *args, "--json")
            assert r.code == 6 and "locked by a live writer (pid 1 on test" in r.err, args
            assert r.json()["schema"] == "walctl.error/1" and r.json()["error"]["reason"] == "locked"
        assert tree_digest(root) == before


# --- a crash at any step, then one rerun ----------------------------------------------------------------


def _crash_every_step(tmp_path, seed_state, step, check):
    """For every mutating operation of `step(fs)`: crash there, reboot, run `step` once more (it may say the
    first run already did it), then `check(fs)` the result."""
    src = tmp_path / "src"
    DirectoryWorkflowStore(str(src)).save(seed_state)
    start = load_tree(str(src)).ops
    done = load_tree(str(src))
    step(done)
    check(done)
    steps = done.ops - start
    assert steps >= 4
    for n in range(1, steps + 1):
        fs = load_tree(str(src), crash_at=start + n)
        with pytest.raises(SimCrash):
            step(fs)
        fs.crash()
        try:
            step(fs)  # the one rerun
        except WorkflowConflict:
            pass  # resume: the first run's claim had landed; the document says so (checked below)
        check(fs)
        names = {p for p in fs.files if p.startswith(f"/r/{SUBDIR}/") and not p.endswith(".tmp")}
        assert not {p for p in names if p.endswith(".json") and "/.quarantine/" not in p} - {f"/r/{SUBDIR}/wf-1.json"}


def _doc(fs, cid="wf-1"):
    path = f"/r/{SUBDIR}/{cid}.json"
    return bytes(fs.files[path].data) if path in fs.files else None


def test_crash_at_every_step_of_pause_then_one_rerun_finishes(tmp_path):
    def step(fs):
        return pause_workflow(DirectoryWorkflowStore("/r", fs), "wf-1", "approve", "Ship to prod?", now=T1)

    _crash_every_step(tmp_path, running(), step, lambda fs: _assert_eq(_doc(fs), encode(paused())))


def test_crash_at_every_step_of_resume_then_one_rerun_finishes(tmp_path):
    def step(fs):
        return resume_workflow(DirectoryWorkflowStore("/r", fs), "wf-1", "yes")

    _crash_every_step(tmp_path, paused(), step, lambda fs: _assert_eq(_doc(fs), encode(answered())))


def test_crash_at_every_step_of_complete_then_one_rerun_finishes(tmp_path):
    from walctl.ops.wal import quarantine as Q

    def step(fs):
        return complete_workflow(DirectoryWorkflowStore("/r", fs), "wf-1")

    def check(fs):
        qdir = f"/r/{SUBDIR}"
        assert _doc(fs) is None
        entries, _ = q.read_manifest(qdir, fs)
        assert [(e["action"], e["source"]) for e in entries] == [("workflow-complete", "wf-1.json")]
        held = [i for i in Q.list_quarantine(qdir, fs).items if i.entry is not None]
        assert [i.name for i in held] == ["wf-1.json"]
        assert bytes(fs.files[f"{qdir}/.quarantine/wf-1.json"].data) == encode(running())

    _crash_every_step(tmp_path, running(), step, check)


def _assert_eq(got, want):
    assert got == want, (got, want)


# --- the CLI -----------------------------------------------------------------------------------------


def _root(tmp_path, *states):
    from test_advice_pasted import odd_dir

    root = odd_dir(tmp_path)
    for s in states:
        DirectoryWorkflowStore(root).save(s)
    return root


def test_cli_pause_resume_complete_documents(cli, tmp_path):
    root = _root(tmp_path, running())
    before = datetime.now(timezone.utc)
    r = cli("workflow", "pause", root, "wf-1", "--block", "approve", "--prompt", "Ship to prod?", "--json")
    doc = r.json()
    assert r.code == 0 and (doc["outcome"], doc["changed"], doc["state"]) == ("paused", True, "paused")
    assert doc["document"] == json.loads(stored(root)) and doc["exit_code"] == 0
    when = decode(stored(root)).created_at
    assert before <= when <= datetime.now(timezone.utc)
    assert stored(root) == encode(paused()._replace(created_at=when))
    r = cli("workflow", "pause", root, "wf-1", "--block", "approve", "--prompt", "Ship to prod?")
    assert r.code == 0 and r.out.startswith("already paused (nothing changed): wf-1 at block \"approve\" in wave 1")
    r = cli("workflow", "resume", root, "wf-1", "--response", "yes", "--json")
    doc = r.json()
    want = answered()._replace(created_at=when)
    assert r.code == 0 and stored(root) == encode(want) and doc["document"] == json.loads(encode(want))
    assert doc["paused"] == {"block_id": "approve", "prompt": "Ship to prod?", "response": "yes"}
    assert (doc["next_wave"], doc["outcome"], doc["state"]) == (2, "resumed", "running")
    r = cli("workflow", "complete", root, "wf-1", "--json")
    assert r.code == 0 and r.json()["applied"] is False and r.json()["existed"] is True and os.path.exists(doc_path(root))
    r = cli("workflow", "complete", root, "wf-1", "--apply", "--json")
    m = r.json()["manifest"]
    assert r.code == 0 and not os.path.exists(doc_path(root)) and m["action"] == "workflow-complete"
    assert open(os.path.join(root, SUBDIR, m["evidence"]), "rb").read() == encode(want)
    r = cli("workflow", "complete", root, "wf-1", "--apply", "--json")
    assert r.code == 0 and r.json()["existed"] is False and r.json()["manifest"] is None


def test_cli_resume_prints_the_state_to_continue_from(cli, tmp_path):
    root = _root(tmp_path, paused())
    r = cli("workflow", "resume", root, "wf-1", "--response", "yes")
    lines = r.out.splitlines()
    assert r.code == 0 and lines[:3] == ['resumed wf-1: paused at block "approve" awaiting a response to: "Ship to prod?"',
                                         'response: "yes"', "continue at wave 2 of 3; the state to continue from:"]
    assert json.loads("\n".join(lines[3:])) == json.loads(encode(answered()))


def test_cli_refusals_print_commands_that_run_as_printed(cli, tmp_path):
    from test_advice_pasted import printed_commands, run_printed

    root = _root(tmp_path, paused(), running("wf-2"))
    r = cli("workflow", "pause", root, "wf-1", "--block", "other", "--prompt", "p")
    assert r.code == 6 and 'wf-1 is already paused at block "approve" awaiting a response to "Ship to prod?"' in r.err
    (show,) = printed_commands(r.err)
    assert show == ["walctl", "workflow", "show", os.path.abspath(root), "wf-1"]
    assert run_printed(cli, show).code == 0 and stored(root) == encode(paused())
    r = cli("workflow", "complete", root, "wf-1", "--apply")
    assert r.code == 6 and 'wf-1 is paused at block "approve" awaiting a response; nothing was changed' in r.err
    assert stored(root) == encode(paused())
    (delete,) = printed_commands(r.err)
    assert delete == ["walctl", "workflow", "delete", os.path.abspath(root), "wf-1", "--apply"]
    assert run_printed(cli, delete).code == 0 and not os.path.exists(doc_path(root))
    r = cli("workflow", "resume", root, "wf-2", "--json")
    doc = r.json()
    assert r.code == 6 and (doc["schema"], doc["outcome"], doc["state"], doc["applied"]) == \
        ("walctl.workflow-resume/1", "failed", "running", False)
    (show,) = printed_commands(r.err)
    shown = run_printed(cli, show)
    assert shown.code == 0 and json.loads(shown.out) == json.loads(encode(running("wf-2")))
    r = cli("workflow", "complete", root, "wf-2")
    (again,) = printed_commands(r.out)
    assert r.code == 0 and "would complete wf-2" in r.out and stored(root, "wf-2") == encode(running("wf-2"))
    assert run_printed(cli, again).code == 0 and not os.path.exists(doc_path(root, "wf-2"))


def test_cli_invalid_document_is_exit_3_and_names_the_delete_that_sets_it_aside(cli, tmp_path):
    from test_advice_pasted import printed_commands, run_printed

    root = _root(tmp_path, running("ok"))
    with open(doc_path(root, "bad"), "wb") as f:
        f.write(b'{"schema_version": 1, "checkpoint_id": "bad"')
    for args in (("resume", root, "bad"), ("pause", root, "bad", "--block", "b", "--prompt", "p"),
                 ("complete", root, "bad", "--apply")):
        r = cli("workflow", *args)
        assert r.code == 3 and "bad: not a JSON document" in r.err, args
        assert stored(root, "bad") == b'{"schema_version": 1, "checkpoint_id": "bad"'
    (delete,) = printed_commands(r.err)
    assert run_printed(cli, delete).code == 0 and not os.path.exists(doc_path(root, "bad"))


def test_cli_steps_refuse_a_symlinked_entry(cli, tmp_path):
    from test_agents_edges import full_digest

    root = _root(tmp_path, running("ok"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "wf-1.json").write_bytes(encode(paused()))
    os.symlink(outside / "wf-1.json", doc_path(root))
    before = full_digest(str(outside))
    for args in (("resume", root, "wf-1", "--response", "x"), ("complete", root, "wf-1", "--apply"),
                 ("pause", root, "wf-1", "--block", "b", "--prompt", "p")):
        r = cli("workflow", *args)
        assert r.code == 7 and "wf-1.json is a symbolic link" in r.err, args
    assert full_digest(str(outside)) == before and os.path.islink(doc_path(root))
