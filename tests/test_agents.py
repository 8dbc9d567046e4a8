"""Substrat roots written by the real implementation: the same tree and pending messages as Substrat's own
recovery, the states after recovery, and what walctl does better (bad lines reported, partial tails cut,
nothing written before everything was read); plus a crash at every step of the append protocol."""
from __future__ import annotations

import json
import glob
import os
import shutil

import pytest

from conftest import DATA
from simfs import SimCrash, SimFS, load_tree
from walctl.ops.agents.roots import read_root, verify_root
from walctl.ops.agents.mend import append_event, recover
from walctl.ops.agents.tree import build_tree

CASES = ("clean-tree", "crashed-active", "pending-file")


def copy_root(case, tmp_path):
    root = str(tmp_path / case)
    shutil.copytree(os.path.join(DATA, "substrat", case, "root"), root)
    for d, _, files in os.walk(root):
        os.chmod(d, 0o755)
        for f in files:
            os.chmod(os.path.join(d, f), 0o644)
    return root


def expected(case):
    with open(os.path.join(DATA, "substrat", case, "expected.json")) as f:
        return json.load(f)


def tree_view(agents):
    return {a["agent_id"]: (a["name"], a["metadata"], a["pending_message_ids"], sorted(a["children"]))
            for a in agents}


@pytest.mark.parametrize("case", CASES)
def test_tree_and_pending_equal_substrats_own_recovery(case):
    exp = expected(case)["orchestrator_recover"]["tree"]
    _, tree, _ = verify_root(os.path.join(DATA, "substrat", case, "root"))
    ours = tree.to_json()
    assert tree_view(ours["agents"]) == tree_view(exp["agents"])
    assert sorted(ours["roots"]) == sorted(exp["roots"]) and ours["orphans"] == []


@pytest.mark.parametrize("case", CASES)
def test_recover_apply_gives_substrats_session_states_and_keeps_evidence(case, tmp_path, cli):
    root = copy_root(case, tmp_path)
    exp = expected(case)["orchestrator_recover"]["session_states_after"]
    assert cli("agents", "recover", root).code in (0, 1)  # the dry run
    assert {s.session_id: s.state for s in read_root(root)} != exp
    r = cli("agents", "recover", root, "--apply", "--json")
    assert r.code == 0
    assert {s.session_id: s.state for s in read_root(root)} == exp
    suspended = [a for a in r.json()["plan"] if a["action"] == "suspend"]
    kept = [n for n in os.listdir(os.path.join(root, ".quarantine")) if n.endswith(tuple("0123456789abcdef"))]
    assert len(kept) == len(suspended)
    assert not any(s.pending for s in read_root(root))
    assert cli("agents", "verify", root).code == 0


def test_pending_entry_is_completed_once(tmp_path):
    root = copy_root("pending-file", tmp_path)
    sid = "c89fa177d137420e90c23037dc31153f"
    d = os.path.join(root, "agents", sid)
    with open(os.path.join(d, "events.pending"), "rb") as f:
        pending = f.read()
    recover(root, apply=True)
    with open(os.path.join(d, "events.jsonl"), "rb") as f:
        log = f.read()
    assert log.endswith(pending) and log.count(pending) == 1 and not os.path.exists(os.path.join(d, "events.pending"))


def test_bad_lines_are_reported_with_offsets_never_skipped_silently(tmp_path):
    root = copy_root("crashed-active", tmp_path)
    sid = "1860aabdf4444c9ca26cda431ac886de"
    log = os.path.join(root, "agents", sid, "events.jsonl")
    with open(log, "rb") as f:
        lines = f.read().split(b"\n")
    lines[3] = b"\xff\xfe not utf-8"
    lines[5] = b"[1, 2, 3]"
    with open(log, "wb") as f:
        f.write(b"\n".join(lines) + bytes(20))  # and a NUL-filled tail
    findings, _, _ = verify_root(root)
    bad = [(f.cls, f.extra.get("line")) for f in findings if f.file.endswith("events.jsonl")]
    assert bad == [("corrupt-line", 4), ("corrupt-line", 6), ("tail-damage", None)]
    offsets = [f.offset for f in findings if f.cls == "corrupt-line"]
    assert offsets == [sum(len(x) + 1 for x in lines[:3]), sum(len(x) + 1 for x in lines[:5])]


def test_one_bad_session_json_does_not_stop_the_rest_and_orphans_are_terminated(tmp_path, cli):
    root = copy_root("crashed-active", tmp_path)
    parent = "faaba514c17e44579a7d91c660db03b8"  # worker-a, parent of helper
    with open(os.path.join(root, "agents", parent, "session.json"), "w") as f:
        f.write("{ not json")
    findings, tree, sessions = verify_root(root)
    assert any(f.cls == "session-json" and parent in f.file for f in findings)
    assert ("5dd933d2d33f4ee9a5bb96c197f82af0", "its parent session does not exist") in tree.orphans or \
        any(s == "5dd933d2d33f4ee9a5bb96c197f82af0" for s, _ in tree.orphans)
    assert len(tree.agents) == 2 and len(sessions) == 5
    assert cli("agents", "verify", root).code == 3


def test_partial_tail_without_pending_file_is_cut_with_evidence(tmp_path):
    root = copy_root("clean-tree", tmp_path)
    sid = sorted(os.listdir(os.path.join(root, "agents")))[0]
    log = os.path.join(root, "agents", sid, "events.jsonl")
    size = os.path.getsize(log)
    with open(log, "ab") as f:
        f.write(b'{"session_id":"')
    plan = recover(root, apply=True).plan
    assert ("cut-tail" in [a.action for a in plan]) and os.path.getsize(log) == size
    kept = [n for n in os.listdir(os.path.join(root, ".quarantine")) if "events.jsonl" in n]
    assert kept and open(os.path.join(root, ".quarantine", kept[0]), "rb").read() == b'{"session_id":"'


def substrat_append(session_dir, event, fs):
    """Substrat's own protocol, as it runs: pending (fsync), append (fsync), unlink without a directory fsync."""
    from walctl.store import durable

    line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
    fd = fs.open_new(f"{session_dir}/events.pending")
    fs.write(fd, line)
    fs.fsync(fd)
    fs.close(fd)
    durable.append(f"{session_dir}/events.jsonl", line, fs)
    fs.unlink(f"{session_dir}/events.pending")


@pytest.mark.parametrize("writer", [append_event, substrat_append], ids=["walctl", "substrat"])
def test_crash_at_every_step_of_the_append_protocol_then_recovery(writer):
    sid = "a" * 32
    d = f"/r/agents/{sid}"
    base = {"session_id": sid, "ts": "2026-11-21T00:00:00+00:00"}
    events = [dict(base, event="agent.created", data={"agent_id": "x" * 32, "name": "solo", "parent_session_id": None}),
              dict(base, event="message.enqueued", data={"message_id": "m1", "recipient": "x" * 32}),
              dict(base, event="message.delivered", data={"message_id": "m1"})]

    def setup(crash_at=None, seed=0):
        fs = SimFS(seed=seed, crash_at=crash_at)
        fs.makedirs_durable(d)
        from walctl.store import durable

        durable.create_file(f"{d}/session.json", json.dumps({"id": sid, "state": "active", "provider_name": "p",
                                                              "model": "m", "created_at": "x", "suspended_at": None,
                                                              "provider_state": ""}, indent=2).encode(), fs)
        fs.settle()
        return fs

    probe = setup()
    start = probe.ops
    for e in events:
        writer(d, e, probe)
    steps = probe.ops - start
    for n in range(1, steps + 1):
        fs = setup()
        fs.crash_at = fs.ops + n
        written = 0
        with pytest.raises(SimCrash):
            for e in events:
                writer(d, e, fs)
                written += 1
        fs.crash()
        recover("/r", apply=True, fs=fs)
        findings, tree, sessions = verify_root("/r", fs)
        assert [f for f in findings if f.exit_code] == [], (n, findings)
        (s,) = sessions
        got = s.events
        assert got == events[:len(got)] and len(got) >= written, n  # a prefix, acknowledged ones all there
        # without its agent.created the session is an orphan and is terminated; otherwise suspended
        assert s.pending is None and s.state == ("suspended" if got else "terminated"), n
        assert build_tree(sessions).orphans == ()


def test_live_daemon_blocks_recover_apply(tmp_path):
    import fcntl

    from walctl.errors import EnvironmentProblem

    root = copy_root("crashed-active", tmp_path)
    with open(os.path.join(root, "daemon.lock"), "w") as lf:
        fcntl.flock(lf.fileno(), fcntl.LOCK_EX)
        findings, _, _ = verify_root(root)
        assert [f.cls for f in findings] == ["live-daemon"]
        with pytest.raises(EnvironmentProblem):
            recover(root, apply=True)
    assert recover(root, apply=True).plan  # once the daemon is gone


def test_recover_apply_takes_the_walctl_lock_and_changes_nothing_without_it(tmp_path):
    from walctl.errors import EnvironmentProblem
    from walctl.store.fs import DEFAULT_FS
    from walctl.store.lock import DirectoryLock

    root = copy_root("crashed-active", tmp_path)
    before = {p: open(p, "rb").read() for p in glob.glob(os.path.join(root, "**", "*"), recursive=True)
              if os.path.isfile(p)}
    with DirectoryLock(root, "pid 1 on test: walctl agents recover", DEFAULT_FS):
        with pytest.raises(EnvironmentProblem, match="locked by a live writer"):
            recover(root, apply=True)
        assert recover(root).plan  # the plan alone needs no lock
    after = {p: open(p, "rb").read() for p in glob.glob(os.path.join(root, "**", "*"), recursive=True)
             if os.path.isfile(p) and not p.endswith(".walctl.lock")}
    assert after == before
    plan = recover(root, apply=True).plan
    assert plan and [a.action for a in recover(root).plan] == []


def test_crash_at_every_step_of_recover_apply_then_recover_again(tmp_path):
    """Replacing session.json files, completing the pending entry: a crash anywhere leaves each file old or
    new, and a second recovery ends where one uninterrupted recovery would."""
    src = os.path.join(DATA, "substrat", "pending-file", "root")
    expected_states = expected("pending-file")["orchestrator_recover"]["session_states_after"]

    def load(crash_at=None, seed=0):
        return load_tree(src, "/r", seed=seed, crash_at=crash_at)

    probe = load()
    start = probe.ops
    recover("/r", apply=True, fs=probe)
    steps = probe.ops - start
    from walctl.store import quarantine as q

    kept = sorted((e["action"], e["source"]) for e in q.read_manifest("/r", probe)[0])
    for n in range(1, steps + 1):
        fs = load(seed=n)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            recover("/r", apply=True, fs=fs)
        fs.crash()
        for s in read_root("/r", fs):
            assert s.meta is not None and s.problem is None, (n, s.session_id)  # old or new, never torn
        recover("/r", apply=True, fs=fs)
        assert {s.session_id: s.state for s in read_root("/r", fs)} == expected_states, n
        # the evidence of one recovery, each piece under one manifest line (a rerun never writes a second)
        assert sorted((e["action"], e["source"]) for e in q.read_manifest("/r", fs)[0]) == kept, n
        findings, _, _ = verify_root("/r", fs)
        assert [f for f in findings if f.exit_code] == [], n
        assert sum(ln.event == json.loads(open(os.path.join(src, "agents", "c89fa177d137420e90c23037dc31153f",
                                                                 "events.pending")).read())
                   for s in read_root("/r", fs) for ln in s.lines) == 1, n  # the pending entry exactly once
