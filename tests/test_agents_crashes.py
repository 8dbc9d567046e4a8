"""Issue #23: roots the real Substrat package leaves after ordinary crashes, built from the real vectors with
the same crash points (a kill during the pending write, between opening a new session's log and its first
save, between logging agent.terminated and saving the session), end clean after one `agents recover --apply`,
with the tree walctl printed before; a live daemon's lock stops every command that changes a root; the tree
agrees with what the runtime loads; and recover's own JSON document on failure."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from conftest import tree_digest

LEAD, WORKER_A, HELPER, WORKER_B = ("1860aabdf4444c9ca26cda431ac886de", "faaba514c17e44579a7d91c660db03b8",
                                    "5dd933d2d33f4ee9a5bb96c197f82af0", "eef162ee784046bc85ba2501e4fa4f5d")
HELPER_AGENT = "a1227e7f2b664a6a88c6360012af0f72"
NEW = "0123456789abcdef0123456789abcdef"  # a session the daemon was creating when it was killed
TS = "2026-11-21T23:09:38.000001+00:00"


def vector_root(tmp_path, case="crashed-active") -> str:
    from test_agents import copy_root

    return copy_root(case, tmp_path)


def substrat_line(sid: str, event: str, data: dict) -> bytes:
    """An event line as Substrat's EventLog._serialize writes it."""
    return (json.dumps({"session_id": sid, "ts": TS, "event": event, "data": data}, separators=(",", ":"))
            + "\n").encode()


def session_json(sid: str, state: str = "active") -> bytes:
    """session.json as Substrat's SessionStore._serialize writes it (indent 2, no trailing newline)."""
    return json.dumps({"id": sid, "state": state, "provider_name": "fake", "model": "m", "created_at": TS,
                       "suspended_at": None, "provider_state": ""}, indent=2).encode()


def read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def tree_doc(cli, root):
    doc = cli("agents", "tree", root, "--json").json()
    return {k: doc[k] for k in ("roots", "agents", "orphans")}


def manifest(root) -> list[dict]:
    path = os.path.join(root, ".quarantine", "MANIFEST.jsonl")
    return [json.loads(x) for x in read(path).splitlines()] if os.path.exists(path) else []


def run_printed(cli, text: str, marker: str):
    """Runs the command printed after `marker` exactly as printed (advice is code)."""
    line = next(x for x in text.splitlines() if marker in x)
    words = shlex.split(line.split(marker, 1)[1].split("   (")[0])
    assert words[0] == "walctl"
    return cli(*words[1:])


def runtime_tree(root) -> dict:
    """What Substrat's loader makes of a root (an oracle written from Orchestrator.recover and
    SessionStore.scan of the reference implementation, not from walctl): sessions with a session.json, each
    not terminated and without agent.terminated taken from its LAST agent.created (lines that do not parse
    skipped), agents whose parent session does not resolve dropped. agent_id -> (name, parent_session_id)."""
    index = {}
    for sid in sorted(os.listdir(os.path.join(root, "agents"))):
        d = os.path.join(root, "agents", sid)
        if not os.path.isfile(os.path.join(d, "session.json")):
            continue  # scan() skips a directory without one
        if json.loads(read(os.path.join(d, "session.json")))["state"] == "terminated":
            continue
        created, terminated = None, False
        for raw in read(os.path.join(d, "events.jsonl")).split(b"\n"):
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            if isinstance(e, dict) and e.get("event") == "agent.created":
                created = e.get("data", {})
            elif isinstance(e, dict) and e.get("event") == "agent.terminated":
                terminated = True
        if created is not None and not terminated:
            index[sid] = created
    return {c["agent_id"]: (c.get("name"), c.get("parent_session_id")) for sid, c in index.items()
            if c.get("parent_session_id") is None or c["parent_session_id"] in index}


def recover_clean(cli, root, tree_before) -> dict:
    """One recover --apply ends clean (verify 0, no finding with an exit code), with the tree printed before,
    which is the tree the runtime loads."""
    r = cli("agents", "recover", root, "--apply", "--json")
    doc = r.json()
    assert r.code == 0 and (doc["outcome"], doc["exit_code"], doc["done"]) == ("recovered", 0, len(doc["plan"]))
    v = cli("agents", "verify", root, "--json")
    assert v.code == 0 and [f for f in v.json()["findings"] if f["exit_code"]] == []
    assert tree_doc(cli, root) == tree_before
    assert runtime_tree(root) == {a["agent_id"]: (a["name"], a["parent_session_id"]) for a in tree_before["agents"]}
    assert cli("agents", "recover", root, "--json").json()["plan"] == []  # nothing left to do
    return doc


# ---- a kill during the pending write ------------------------------------------------------------------

ENQUEUED = substrat_line(WORKER_B, "message.enqueued", {"message_id": "f" * 32, "sender": "e26175bb9475499b94a3ee"
                         "23adaa81a7", "recipient": "2e652a84a0004f089785d10b94126c8b", "kind": "request",
                         "payload": "Any news?", "timestamp": TS, "reply_to": None, "metadata": {}})


@pytest.mark.parametrize("cut", [0, 1, 57, len(ENQUEUED) - 1], ids=["empty", "1-byte", "mid", "no-newline"])
def test_a_kill_during_the_pending_write_is_set_aside_and_nothing_is_appended(tmp_path, cli, cut):
    root = vector_root(tmp_path)
    d = os.path.join(root, "agents", WORKER_B)
    log_before = read(os.path.join(d, "events.jsonl"))
    with open(os.path.join(d, "events.pending"), "wb") as f:
        f.write(ENQUEUED[:cut])
    tree_before = tree_doc(cli, root)
    v = cli("agents", "verify", root, "--json")
    (f,) = [f for f in v.json()["findings"] if f["class"] == "pending-entry"]
    assert v.code == 1 and f["verdict"] == "torn" and "never acknowledged" in f["reason"]
    assert f"{cut} bytes" in f["reason"]
    dry = cli("agents", "recover", root)
    assert dry.code == 1 and f"would set-aside-pending {WORKER_B}: events.pending: {cut} bytes" in dry.out
    assert "never acknowledged; kept in .quarantine/, nothing appended" in dry.out
    assert os.path.exists(os.path.join(d, "events.pending"))  # the dry run changed nothing
    r = run_printed(cli, dry.out, "to do it: ")  # the dry run's own advice, as printed
    assert r.code == 0
    assert read(os.path.join(d, "events.jsonl")) == log_before  # nothing appended, no blank line
    assert not os.path.exists(os.path.join(d, "events.pending"))
    (kept,) = [m for m in manifest(root) if m["source"] == f"agents__{WORKER_B}__events.pending"]
    assert kept["length"] == cut and read(os.path.join(root, kept["evidence"])) == ENQUEUED[:cut]
    assert cli("agents", "verify", root).code == 0 and tree_doc(cli, root) == tree_before


def test_a_kill_during_the_pending_write_of_a_new_agents_agent_created(tmp_path, cli):
    """The session was saved, its log opened, and agent.created was being written to the pending file: the
    spawn never returned, so the session is an orphan (as Substrat finds it) and recover terminates it."""
    root = vector_root(tmp_path)
    d = os.path.join(root, "agents", NEW)
    os.makedirs(d)
    with open(os.path.join(d, "session.json"), "wb") as f:
        f.write(session_json(NEW))
    open(os.path.join(d, "events.jsonl"), "wb").close()
    line = substrat_line(NEW, "agent.created", {"agent_id": "e" * 32, "name": "reviewer",
                                                "parent_session_id": LEAD, "metadata": None})
    with open(os.path.join(d, "events.pending"), "wb") as f:
        f.write(line[:90])
    tree_before = tree_doc(cli, root)
    assert [o["session_id"] for o in tree_before["orphans"]] == [NEW]
    tree_before["orphans"] = []  # terminated, it is no longer an orphan
    doc = recover_clean(cli, root, tree_before)
    assert [(a["session_id"], a["action"]) for a in doc["plan"] if a["session_id"] == NEW] == [
        (NEW, "set-aside-pending"), (NEW, "terminate")]
    assert json.loads(read(os.path.join(d, "session.json")))["state"] == "terminated"
    assert read(os.path.join(d, "events.jsonl")) == b""


# ---- a kill between opening a new session's log and its first save --------------------------------------

@pytest.mark.parametrize("tmp", [None, b"", "whole"], ids=["log-only", "empty-tmp", "whole-tmp"])
def test_a_kill_between_log_open_and_first_save_is_set_aside_by_recover(tmp_path, cli, tmp):
    root = vector_root(tmp_path)
    d = os.path.join(root, "agents", NEW)
    os.makedirs(d)
    open(os.path.join(d, "events.jsonl"), "wb").close()  # EventLog.open created it
    files = {"events.jsonl": b""}
    if tmp is not None:  # killed inside the first save's atomic write, before its rename
        files["session.json.tmp"] = session_json(NEW) if tmp == "whole" else tmp
        with open(os.path.join(d, "session.json.tmp"), "wb") as f:
            f.write(files["session.json.tmp"])
    tree_before = tree_doc(cli, root)
    v = cli("agents", "verify", root, "--json")
    assert v.code == 1 and [(f["class"], f["file"]) for f in v.json()["findings"] if f["exit_code"]] == [
        ("unsaved-session", f"agents/{NEW}")]
    assert "never saved" in cli("agents", "recover", root).out
    doc = recover_clean(cli, root, tree_before)
    assert [(a["session_id"], a["action"]) for a in doc["plan"] if a["session_id"] == NEW] == [
        (NEW, "set-aside-session")]
    assert not os.path.exists(d)
    kept = {m["source"]: read(os.path.join(root, m["evidence"])) for m in manifest(root)
            if m["source"].startswith(f"agents__{NEW}__")}
    assert kept == {f"agents__{NEW}__{n}": data for n, data in files.items()}
    assert all(m["action"] == "set-aside" for m in manifest(root) if m["source"].startswith(f"agents__{NEW}"))


def test_set_aside_session_works_on_a_session_never_saved_and_exits_0(tmp_path, cli):
    root = vector_root(tmp_path)
    d = os.path.join(root, "agents", NEW)
    os.makedirs(d)
    open(os.path.join(d, "events.jsonl"), "wb").close()
    cli("agents", "recover", root, "--apply")  # the other sessions suspended; the new one set aside...
    os.makedirs(d)  # ...and a second crash leaves another one
    open(os.path.join(d, "events.jsonl"), "wb").close()
    dry = cli("agents", "set-aside", root, NEW, "--session")
    assert dry.code == 1 and f"would set aside the session directory agents/{NEW} (events.jsonl)" in dry.out
    r = run_printed(cli, dry.out, "to do it: ")
    assert r.code == 0 and not os.path.exists(d) and "kept in .quarantine/" in r.out
    assert cli("agents", "verify", root).code == 0


# ---- a kill between logging agent.terminated and saving the session ------------------------------------

@pytest.mark.parametrize("where", ["log", "pending"])
def test_an_interrupted_termination_is_torn_like_and_recover_finishes_it(tmp_path, cli, where):
    """terminate_agent logs agent.terminated, then saves the session TERMINATED; killed in between. With
    `pending` the kill came one step earlier: the line is in events.pending, fsynced, not yet appended."""
    root = vector_root(tmp_path)
    d = os.path.join(root, "agents", HELPER)
    line = substrat_line(HELPER, "agent.terminated", {"agent_id": HELPER_AGENT})
    with open(os.path.join(d, "events.jsonl" if where == "log" else "events.pending"), "ab") as f:
        f.write(line)
    tree_before = tree_doc(cli, root)
    assert tree_before["orphans"] == [] and HELPER_AGENT not in [a["agent_id"] for a in tree_before["agents"]]
    v = cli("agents", "verify", root, "--json")
    bad = [f for f in v.json()["findings"] if f["exit_code"]]
    assert v.code == 1 and "orphan" not in [f["class"] for f in bad]
    (t,) = [f for f in bad if f["class"] == "interrupted-termination"]
    assert "recover finishes the termination" in t["reason"] and t["file"] == f"agents/{HELPER}/session.json"
    shown = cli("agents", "tree", root)
    assert shown.code == 1 and f"terminating session {HELPER}: agent.terminated is logged" in shown.out
    assert "orphan" not in shown.out and "helper" not in shown.out
    doc = recover_clean(cli, root, tree_before)
    assert [a["action"] for a in doc["plan"] if a["session_id"] == HELPER][-1] == "finish-termination"
    assert json.loads(read(os.path.join(d, "session.json")))["state"] == "terminated"
    assert read(os.path.join(d, "events.jsonl")).count(line) == 1


# ---- an old pending file whose line is already in the log ------------------------------------------------

def test_an_old_pending_file_already_in_the_log_is_removed_and_said_so(tmp_path, cli):
    root = vector_root(tmp_path, "pending-file")
    sid = "c89fa177d137420e90c23037dc31153f"
    d = os.path.join(root, "agents", sid)
    pending = read(os.path.join(d, "events.pending"))
    later = substrat_line(sid, "metadata.updated", {"key": "status", "value": "parsing"})
    with open(os.path.join(d, "events.jsonl"), "ab") as f:  # appended, then a later entry; the unlink was lost
        f.write(pending + later)
    log = read(os.path.join(d, "events.jsonl"))
    n = log[:log.index(pending)].count(b"\n") + 1
    dry = cli("agents", "recover", root)
    assert f"would remove-pending {sid}: events.pending: already in the log (line {n}): removed" in dry.out
    assert "complete-pending" not in dry.out
    assert cli("agents", "recover", root, "--apply").code == 0
    assert read(os.path.join(d, "events.jsonl")) == log and not os.path.exists(os.path.join(d, "events.pending"))
    assert cli("agents", "verify", root).code == 0


# ---- a session.json.tmp that is not a session ------------------------------------------------------------

@pytest.mark.parametrize("tmp, says", [(b"", "empty"), (b"\x00\x00\x00\x00", "4 bytes that are not a session"),
                                       (b'{"id": "eef1', "12 bytes that are not a session")])
def test_a_garbage_or_empty_session_json_tmp_is_a_finding_and_recover_keeps_and_removes_it(tmp_path, cli, tmp,
                                                                                          says):
    root = vector_root(tmp_path)
    path = os.path.join(root, "agents", WORKER_B, "session.json.tmp")  # worker-b is SUSPENDED: no state change
    with open(path, "wb") as f:
        f.write(tmp)
    v = cli("agents", "verify", root, "--json")
    (f,) = [f for f in v.json()["findings"] if f["class"] == "session-json-tmp"]
    assert v.code == 0 and says in f["reason"] and f["file"] == f"agents/{WORKER_B}/session.json.tmp"
    plan = cli("agents", "recover", root, "--json").json()["plan"]
    assert {"session_id": WORKER_B, "action": "quarantine-tmp", "detail": f"session.json.tmp ({len(tmp)} bytes) "
            "left by a crash, kept in .quarantine/ and removed"} in plan
    assert cli("agents", "recover", root, "--apply").code == 0 and not os.path.exists(path)
    (kept,) = [m for m in manifest(root) if m["source"] == f"agents__{WORKER_B}__session.json.tmp"]
    assert read(os.path.join(root, kept["evidence"])) == tmp
    assert [f for f in cli("agents", "verify", root, "--json").json()["findings"]
            if f["class"] == "session-json-tmp"] == []


# ---- a live daemon's lock stops every command that changes a root ------------------------------------------

DAEMON = """
import fcntl, os, sys
root = sys.argv[1]
fd = os.open(os.path.join(root, "daemon.lock"), os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # what a running Substrat daemon holds (docs/format.md 10)
with open(os.path.join(root, "daemon.pid"), "w") as f:
    f.write(str(os.getpid()))
log = os.open(os.path.join(root, "agents", sys.argv[2], "events.jsonl"), os.O_WRONLY | os.O_APPEND)
print("locked", flush=True)
for line in sys.stdin:  # each line read: one append through the handle the daemon keeps open
    os.write(log, line.encode())
    os.fsync(log)
    print("appended", flush=True)
"""


@pytest.fixture
def damaged_root(tmp_path):
    """crashed-active with something for every root-changing command to do: a corrupt line, a readable
    duplicate agent.created, an unreadable session.json, a torn pending file."""
    root = vector_root(tmp_path)
    with open(os.path.join(root, "agents", LEAD, "events.jsonl"), "ab") as f:
        f.write(b"\xff not json\n")
    first = read(os.path.join(root, "agents", WORKER_A, "events.jsonl")).split(b"\n")[0] + b"\n"
    with open(os.path.join(root, "agents", WORKER_A, "events.jsonl"), "ab") as f:
        f.write(first)
    with open(os.path.join(root, "agents", HELPER, "session.json"), "wb") as f:
        f.write(b"{ torn")
    with open(os.path.join(root, "agents", WORKER_B, "events.pending"), "wb") as f:
        f.write(ENQUEUED[:30])
    return root


def n_lines(root, sid) -> int:
    return read(os.path.join(root, "agents", sid, "events.jsonl")).count(b"\n")


CHANGERS = {
    "recover": lambda root: ("agents", "recover", root, "--apply"),
    "recover-force": lambda root: ("agents", "recover", root, "--apply", "--force"),
    "set-aside-line": lambda root: ("agents", "set-aside", root, LEAD, "--line", n_lines(root, LEAD), "--apply",
                                    "--force"),
    "set-aside-duplicate": lambda root: ("agents", "set-aside", root, WORKER_A, "--line", n_lines(root, WORKER_A),
                                         "--apply", "--force"),
    "set-aside-session": lambda root: ("agents", "set-aside", root, HELPER, "--session", "--apply", "--force"),
    "set-aside-no-force": lambda root: ("agents", "set-aside", root, LEAD, "--line", n_lines(root, LEAD),
                                        "--apply"),
}


@pytest.mark.parametrize("command", sorted(CHANGERS))
def test_every_command_that_changes_a_root_refuses_under_a_live_daemon(damaged_root, cli, command):
    root = damaged_root
    daemon = subprocess.Popen([sys.executable, "-c", DAEMON, root, LEAD], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert daemon.stdout.readline().strip() == "locked"
        before = tree_digest(root)
        argv = CHANGERS[command](root)
        r = cli(*argv)
        assert r.code == 6 and f"a live daemon holds daemon.lock (Substrat daemon pid {daemon.pid})" in r.err
        assert "nothing was changed" in r.err and tree_digest(root) == before  # not even walctl's lock file
        r = cli(*argv, "--json")
        doc = r.json()  # refused before it started: walctl.error/1, reason locked
        assert r.code == 6 and doc["schema"] == "walctl.error/1" and doc["error"]["reason"] == "locked"
        extra = substrat_line(LEAD, "metadata.updated", {"key": "k", "value": "v"})
        daemon.stdin.write(extra.decode())
        daemon.stdin.flush()
        assert daemon.stdout.readline().strip() == "appended"
        assert read(os.path.join(root, "agents", LEAD, "events.jsonl")).endswith(extra)  # the daemon's append
    finally:
        daemon.stdin.close()
        daemon.wait(timeout=10)
    r = cli(*CHANGERS[command](root))  # the daemon gone, the command runs
    assert r.code != 6 and "live daemon" not in r.err


# ---- agree with the runtime; set-aside of a corrupt agent.created ----------------------------------------

def test_after_set_aside_of_a_corrupt_agent_created_recover_keeps_the_subtree_suspended(tmp_path, cli):
    root = vector_root(tmp_path)
    log = os.path.join(root, "agents", WORKER_A, "events.jsonl")
    lines = read(log).split(b"\n")
    lines[0] = lines[0].replace(b'"agent.created"', b'"agent.cr\xffated"')  # worker-a's agent.created, unreadable
    with open(log, "wb") as f:
        f.write(b"\n".join(lines))
    from walctl.ops.agents.roots import verify_root

    assert verify_root(root)[1].uncertain == {WORKER_A, HELPER}
    r = cli("agents", "set-aside", root, WORKER_A, "--line", "1", "--apply", "--force")
    assert r.code == 3
    assert f"walctl: warning: session {WORKER_A} (no agent.created left), session {HELPER} become orphans: " \
           "recover keeps them suspended" in r.err
    printed = r.out
    plain = cli("agents", "recover", root, "--apply", "--json")
    doc = plain.json()
    assert plain.code == 3 and doc["outcome"] == "incomplete" and doc["done"] == len(doc["plan"])
    assert {a["session_id"]: a["action"] for a in doc["plan"]} == {
        LEAD: "suspend", WORKER_A: "suspend", HELPER: "suspend"}
    assert [(f["class"], f["file"], f["uncertain"]) for f in doc["findings"] if f["exit_code"]] == [
        ("orphan", f"agents/{WORKER_A}", True), ("orphan", f"agents/{HELPER}", True)]
    assert [f["reason"] for f in doc["findings"] if f["exit_code"]] == [
        "orphan session: no agent.created in its log (a line of it was set aside: it may have been it) (recover "
        "terminates it only with --force)",
        f"orphan session: its parent session {WORKER_A} is not in the tree only because of an unreadable or set-aside "
        "line (recover terminates it only with --force)"]
    states = {sid: json.loads(read(os.path.join(root, "agents", sid, "session.json")))["state"]
              for sid in (WORKER_A, HELPER)}
    assert states == {WORKER_A: "suspended", HELPER: "suspended"}
    assert runtime_tree(root) == {a["agent_id"]: (a["name"], a["parent_session_id"]) for a in tree_doc(cli, root)[
        "agents"]}
    forced = run_printed(cli, printed, "next: ")  # set-aside's advice, exactly as printed
    assert forced.code == 0
    states = {sid: json.loads(read(os.path.join(root, "agents", sid, "session.json")))["state"]
              for sid in (WORKER_A, HELPER)}
    assert states == {WORKER_A: "terminated", HELPER: "terminated"}
    assert cli("agents", "verify", root).code == 0


# ---- recover's own document on failure --------------------------------------------------------------------

def test_recover_json_on_a_failure_part_way_prints_its_own_document(tmp_path, cli, monkeypatch):
    import errno

    from walctl.store import fs as fsmod

    root = vector_root(tmp_path)
    real = os.write

    def enospc(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(f"{HELPER}/session.json.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(fsmod.os, "write", enospc)
    r = cli("agents", "recover", root, "--apply", "--json")
    monkeypatch.setattr(fsmod.os, "write", real)
    doc = r.json()
    assert r.code == 6 and doc["schema"] == "walctl.agents-recover/2"
    assert (doc["outcome"], doc["exit_code"], doc["applied"]) == ("failed", 6, True)
    assert "no space left on device" in doc["message"].lower() and "no space left on device" in r.err.lower()
    order = [a["session_id"] for a in doc["plan"]]
    assert doc["done"] == order.index(HELPER) and doc["done"] < len(order)
    assert [f["class"] for f in doc["findings"]].count("active-session") == len(order) - doc["done"]
    r = cli("agents", "recover", root, "--apply", "--json")  # the disk has room again: one rerun finishes
    assert r.code == 0 and r.json()["outcome"] == "recovered"
    assert cli("agents", "verify", root).code == 0


# ---- crash at every step of a recover that does all of the above -------------------------------------------

def test_crash_at_every_step_of_recover_over_every_ordinary_crash_outcome_then_one_rerun(tmp_path):
    """A root with a torn pending file, a session never saved, an interrupted termination and an empty
    session.json.tmp: after a crash at any step of recover --apply, one rerun ends where one uninterrupted
    recovery ends (clean, the same states, each piece of evidence under one manifest line)."""
    from simfs import SimCrash, load_tree
    from walctl.ops.agents.roots import read_root, verify_root
    from walctl.ops.agents.mend import recover
    from walctl.store.quarantine import read_manifest

    src = vector_root(tmp_path)
    with open(os.path.join(src, "agents", WORKER_B, "events.pending"), "wb") as f:
        f.write(ENQUEUED[:57])
    with open(os.path.join(src, "agents", WORKER_B, "session.json.tmp"), "wb") as f:
        f.write(b"")
    os.makedirs(os.path.join(src, "agents", NEW))
    with open(os.path.join(src, "agents", NEW, "events.jsonl"), "wb") as f:
        f.write(b"")
    with open(os.path.join(src, "agents", HELPER, "events.jsonl"), "ab") as f:
        f.write(substrat_line(HELPER, "agent.terminated", {"agent_id": HELPER_AGENT}))

    def outcome(fs):
        return ({s.session_id: s.state for s in read_root("/r", fs)},
                sorted((e["action"], e["source"], e["length"]) for e in read_manifest("/r", fs)[0]))

    probe = load_tree(src, "/r")
    start = probe.ops
    assert recover("/r", apply=True, fs=probe).error is None
    steps = probe.ops - start
    assert steps > 40
    expected = outcome(probe)
    assert expected[0] == {LEAD: "suspended", "2cfa9358320440f2bea156eabb7024ce": "terminated", HELPER: "terminated",
                           WORKER_B: "suspended", WORKER_A: "suspended"}
    assert [f for f in verify_root("/r", probe)[0] if f.exit_code] == []
    for n in range(1, steps + 1):
        fs = load_tree(src, "/r", seed=n)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            recover("/r", apply=True, fs=fs)
        fs.crash()
        for s in read_root("/r", fs):
            assert s.meta is not None or s.session_id == NEW, (n, s.session_id)  # old or new, never torn
        assert recover("/r", apply=True, fs=fs).error is None, n
        assert outcome(fs) == expected, n
        assert [f for f in verify_root("/r", fs)[0] if f.exit_code] == [], n
        assert not fs.exists(f"/r/agents/{NEW}") and not fs.exists(f"/r/agents/{WORKER_B}/events.pending"), n


STARTING_DAEMON = """
import fcntl, os, sys
fd = os.open(os.path.join(sys.argv[1], "daemon.lock"), os.O_RDWR | os.O_CREAT, 0o644)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    sys.exit(1)  # a daemon that cannot have its lock does not start
"""


@pytest.mark.parametrize("command", ["recover", "set-aside"])
def test_a_daemon_starting_while_a_root_is_changed_cannot_take_its_lock(damaged_root, command):
    """Between walctl's check and its last write a daemon may start: walctl holds daemon.lock shared while it
    writes, so the daemon's exclusive flock fails (and once walctl is done, it succeeds)."""
    from walctl.ops.agents.aside import set_aside
    from walctl.ops.agents.mend import recover
    from walctl.store.fs import OsFileSystem

    tries = []

    class DaemonStartsMidway(OsFileSystem):
        def fsync(self, fd, path=""):
            if not tries:  # the first durable write of the change: a daemon starts now
                tries.append(subprocess.run([sys.executable, "-c", STARTING_DAEMON, damaged_root]).returncode)
            return super().fsync(fd, path)

    before = read(os.path.join(damaged_root, "daemon.lock"))
    if command == "recover":
        assert recover(damaged_root, apply=True, fs=DaemonStartsMidway()).error is None
    else:
        assert set_aside(damaged_root, LEAD, line=n_lines(damaged_root, LEAD), apply=True, force=True,
                         fs=DaemonStartsMidway()).applied
    assert tries == [1]  # refused while walctl was writing
    assert read(os.path.join(damaged_root, "daemon.lock")) == before  # walctl never wrote it
    assert subprocess.run([sys.executable, "-c", STARTING_DAEMON, damaged_root]).returncode == 0  # free after


def test_two_agent_created_lines_walctl_shows_the_tree_the_runtime_loads(tmp_path, cli):
    root = vector_root(tmp_path)
    log = os.path.join(root, "agents", LEAD, "events.jsonl")
    n = read(log).count(b"\n")
    with open(log, "ab") as f:
        f.write(substrat_line(LEAD, "agent.created", {"agent_id": "9" * 32, "name": "impostor",
                                                      "parent_session_id": None, "metadata": None}))
    tree = tree_doc(cli, root)
    assert [a["name"] for a in tree["agents"] if a["session_id"] == LEAD] == ["impostor"]
    assert runtime_tree(root) == {a["agent_id"]: (a["name"], a["parent_session_id"]) for a in tree["agents"]}
    v = cli("agents", "verify", root, "--json")
    assert v.code == 3 and [(f["class"], f["line"]) for f in v.json()["findings"] if f["exit_code"]] == [
        ("duplicate-created", n + 1)]
    r = cli("agents", "set-aside", root, LEAD, "--line", n + 1, "--apply", "--force")  # the impostor goes
    assert r.code == 0 and "one of 2 agent.created lines (lines 1, " in r.out
    tree = tree_doc(cli, root)
    assert [a["name"] for a in tree["agents"] if a["session_id"] == LEAD] == ["lead"]
    assert runtime_tree(root) == {a["agent_id"]: (a["name"], a["parent_session_id"]) for a in tree["agents"]}
