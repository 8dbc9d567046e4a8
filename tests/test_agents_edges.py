"""Substrat roots at the edges (issues #15 and #12): wrong-typed fields are a finding on their line only,
every bad line says what it held, session.json.tmp is kept before recovery replaces it, orphans that may be
orphans only because of an unreadable line are not terminated without --force, duplicate agent.created,
set-aside, pending's exit code, verify's byte accounting, and symlinked session files refused."""
from __future__ import annotations

import json
import os

import pytest

from conftest import tree_digest
from walctl.ops.agents.roots import read_root, verify_root
from walctl.ops.agents.mend import recover

P, C, G = "a" * 32, "b" * 32, "c" * 32  # parent, child, grandchild sessions


def ev(sid, event, **data):
    return {"session_id": sid, "ts": "2026-11-21T00:00:00+00:00", "event": event, "data": data}


def line(e) -> bytes:
    return (json.dumps(e, separators=(",", ":")) + "\n").encode()


def make_session(root, sid, events, state="active", raw_lines=()):
    d = os.path.join(root, "agents", sid)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "session.json"), "w") as f:
        json.dump({"id": sid, "state": state, "provider_name": "p", "model": "m",
                   "created_at": "2026-11-21T00:00:00+00:00", "suspended_at": None, "provider_state": ""}, f, indent=2)
    with open(os.path.join(d, "events.jsonl"), "wb") as f:
        for e in events:
            f.write(e if isinstance(e, bytes) else line(e))
    return d


def created(sid, agent, parent=None, name="n"):
    return ev(sid, "agent.created", agent_id=agent, name=name, parent_session_id=parent)


def family(root, parent_lines=None):
    """P <- C <- G, each with its agent.created; parent_lines replaces P's log."""
    make_session(str(root), P, parent_lines if parent_lines is not None else [created(P, "A" * 8)])
    make_session(str(root), C, [created(C, "B" * 8, P)])
    make_session(str(root), G, [created(G, "C" * 8, C)])


def full_digest(path) -> dict:
    """Every name below path (and path itself) with mode, size, content and mtime, links not followed."""
    import hashlib

    out = {}
    for d, dirs, files in os.walk(path):
        for n in ["."] + dirs + files:
            full = os.path.normpath(os.path.join(d, n))
            st = os.lstat(full)
            digest = None
            if os.path.isfile(full) and not os.path.islink(full):
                with open(full, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(full, path)] = (st.st_mode, st.st_size, digest, st.st_mtime_ns)
    return out


def findings_of(root, cls):
    return [f for f in verify_root(str(root))[0] if f.cls == cls]


@pytest.mark.parametrize("bad, why", [
    (ev(C, "message.enqueued", message_id=["x"], recipient="r"), "message.enqueued data.message_id is a list"),
    (ev(C, "message.delivered", message_id={"a": 1}), "message.delivered data.message_id is an object"),
    ({"session_id": C, "ts": "2026-11-21T00:00:00+00:00", "event": "agent.created", "data": [1, 2]}, "agent.created data is a list"),
    (ev(C, "agent.created", agent_id=7), "agent.created data.agent_id is a number"),
    (ev(C, "agent.created", agent_id="z", parent_session_id="../../etc"), "data.parent_session_id is a string, not a "
                                                                          "session id"),
    (ev(C, "metadata.updated", key=None, value=1), "metadata.updated data.key is null"),
])
def test_wrong_typed_fields_are_a_finding_on_that_line_only(tmp_path, cli, bad, why):
    root = tmp_path / "root"
    family(root)
    log = root / "agents" / C / "events.jsonl"
    good = log.read_bytes()
    tail_event = line(ev(C, "metadata.updated", key="k", value="v"))
    log.write_bytes(good + line(bad) + tail_event)
    bad_lines = findings_of(root, "corrupt-line")
    assert [(f.file, f.offset, f.end_offset, f.extra["line"]) for f in bad_lines] == [
        (f"agents/{C}/events.jsonl", len(good), len(good) + len(line(bad)), 2)]
    assert why in bad_lines[0].reason and "it held" in bad_lines[0].reason
    _, tree, _ = verify_root(str(root))
    assert sorted(a.agent_id for a in tree.agents.values()) == ["A" * 8, "B" * 8, "C" * 8]  # the rest still read
    assert tree.agents["B" * 8].metadata == {"k": "v"}  # the line after the bad one is folded
    for args in (("agents", "verify", root), ("agents", "tree", root, "--json"), ("agents", "pending", root),
                 ("agents", "recover", root), ("verify", root, "--json")):
        r = cli(*args)
        assert r.code == 3 and "internal error" not in r.err, args


@pytest.mark.parametrize("raw, shows", [(b"null", "'null'"), (b"[1, 2]", "'[1, 2]'"), (b'"text"', "'\"text\"'"),
                                        (b"42", "'42'"), (b"{}", "'{}'"), (b"[" * 100_000, "'[[[["),
                                        (b'{"session_id":"x","event":"e"}', 'session_id "x"')])
def test_every_kind_of_bad_line_shows_what_it_held(tmp_path, raw, shows):
    root = tmp_path / "root"
    family(root)
    log = root / "agents" / P / "events.jsonl"
    good = log.read_bytes()
    log.write_bytes(good + raw + b"\n")
    (f,) = findings_of(root, "corrupt-line")
    assert (f.offset, f.end_offset) == (len(good), len(good) + len(raw) + 1)
    assert "it held " in f.reason and shows in f.reason
    assert len(f.reason) < 300  # a 100,000-byte line is shown shortened


def test_unparseable_session_json_and_deep_session_json_are_findings(tmp_path, cli):
    root = tmp_path / "root"
    family(root)
    (root / "agents" / G / "session.json").write_bytes(b"{" * 100_000)
    (f,) = findings_of(root, "session-json")
    assert f.file == f"agents/{G}/session.json" and "nested deeper than 256" in f.reason
    assert cli("agents", "verify", root).code == 3


def test_session_json_tmp_is_kept_and_listed_before_recovery_replaces_it(tmp_path, cli):
    root = tmp_path / "root"
    family(root)
    tmp = root / "agents" / P / "session.json.tmp"
    tmp.write_bytes(b'{"id": "%s", "state": "suspend' % P.encode())  # torn by a crash
    r = cli("agents", "recover", root, "--json")
    plan = r.json()["plan"]
    assert {"session_id": P, "action": "quarantine-tmp",
            "detail": "session.json.tmp (60 bytes) left by a crash, kept in .quarantine/ before session.json is "
                      "replaced"} in plan
    assert [a["action"] for a in plan if a["session_id"] == P] == ["quarantine-tmp", "suspend"]
    assert tmp.exists()  # the dry run changed nothing
    r = cli("agents", "recover", root, "--apply", "--json")
    assert r.code == 0 and not tmp.exists()
    manifest = [json.loads(x) for x in (root / ".quarantine" / "MANIFEST.jsonl").read_text().splitlines()]
    (kept,) = [m for m in manifest if m["source"] == f"agents__{P}__session.json.tmp"]
    assert kept["length"] == 60 and (root / kept["evidence"]).read_bytes() == \
        b'{"id": "%s", "state": "suspend' % P.encode()
    assert {s.session_id: s.state for s in read_root(str(root))} == {P: "suspended", C: "suspended", G: "suspended"}


def test_orphan_only_because_a_parents_agent_created_is_unreadable_needs_force(tmp_path, cli):
    root = tmp_path / "root"
    family(root, parent_lines=[b'{"session_id":"' + P.encode() + b'","event":"agent.cre\xff\n'])
    _, tree, _ = verify_root(str(root))
    assert tree.uncertain == {P, C, G} and tree.agents == {}
    orphans = findings_of(root, "orphan")
    assert [(f.file, f.extra["uncertain"]) for f in orphans] == [(f"agents/{P}", True), (f"agents/{C}", True),
                                                                 (f"agents/{G}", True)]
    assert "only with --force" in orphans[1].reason and "unreadable or set-aside line" in orphans[1].reason
    r = cli("agents", "recover", root, "--apply", "--json")
    assert r.code == 3  # the root is still damaged: the bad line and the orphans are reported, not acted on
    assert [a["action"] for a in r.json()["plan"]] == ["suspend", "suspend", "suspend"]
    assert {s.session_id: s.state for s in read_root(str(root))} == {P: "suspended", C: "suspended", G: "suspended"}
    r = cli("agents", "recover", root, "--apply", "--force", "--json")
    assert [a["action"] for a in r.json()["plan"]] == ["terminate", "terminate", "terminate"]
    assert {s.session_id: s.state for s in read_root(str(root))} == {P: "terminated", C: "terminated",
                                                                    G: "terminated"}


def test_a_certain_orphan_is_still_terminated_without_force(tmp_path):
    root = tmp_path / "root"
    family(root)
    make_session(str(root), "d" * 32, [created("d" * 32, "D" * 8, "e" * 32)])  # parent never existed
    plan = recover(str(root), apply=True).plan
    assert [(a.session_id, a.action) for a in plan if a.session_id == "d" * 32] == [("d" * 32, "terminate")]


def test_two_agent_created_lines_the_tree_is_the_last_as_the_runtime_loads_it(tmp_path, cli):
    """Substrat's Orchestrator.recover keeps the last agent.created it reads (the vectors' reference
    implementation): the tree walctl shows is that one, the duplicate stays a finding, and set-aside --line can
    set a readable duplicate aside (either one), after which the root is clean."""
    root = tmp_path / "root"
    first, second = created(P, "A" * 8), created(P, "Z" * 8, name="impostor")
    family(root, parent_lines=[first, second])
    (f,) = findings_of(root, "duplicate-created")
    assert (f.file, f.offset, f.end_offset, f.extra["line"]) == (f"agents/{P}/events.jsonl", len(line(first)),
                                                          len(line(first)) + len(line(second)), 2)
    assert f.exit_code == 3 and "the runtime uses the last, line 2 (agent 'ZZZZZZZZ', name 'impostor')" in f.reason
    _, tree, _ = verify_root(str(root))
    assert tree.agents["Z" * 8].name == "impostor" and "A" * 8 not in tree.agents
    assert tree.roots == ("Z" * 8,) and tree.children["Z" * 8] == ["B" * 8]  # C still hangs on session P
    r = cli("agents", "tree", root, "--json")
    assert r.code == 3 and [a["name"] for a in r.json()["agents"] if a["session_id"] == P] == ["impostor"]
    assert cli("agents", "verify", root).code == 3
    r = cli("agents", "set-aside", root, P, "--line", "3")
    assert r.code == 2  # no such line
    r = cli("agents", "set-aside", root, P, "--line", "2", "--json")
    doc = r.json()
    assert r.code == 3 and doc["outcome"] == "dry-run" and "one of 2 agent.created lines (lines 1, 2)" in doc["why"]
    log = root / "agents" / P / "events.jsonl"
    r = cli("agents", "set-aside", root, P, "--line", "2", "--apply", "--force", "--json")
    assert r.code == 0 and r.json()["applied"] is True and r.json()["warnings"] == []
    assert log.read_bytes() == line(first) and (root / r.json()["evidence"]).read_bytes() == line(first) + line(second)
    _, tree, _ = verify_root(str(root))
    assert tree.agents["A" * 8].name == "n" and cli("agents", "verify", root).code == 0
    # the one left is single: a rerun finds nothing to do
    r = cli("agents", "set-aside", root, P, "--line", "1", "--apply", "--force")
    assert r.code == 7 and "only an unreadable line or a duplicate agent.created" in r.err


def test_set_aside_a_corrupt_line(tmp_path, cli):
    root = tmp_path / "root"
    family(root)
    log = root / "agents" / C / "events.jsonl"
    good = log.read_bytes()
    after = line(ev(C, "metadata.updated", key="k", value="v"))
    bad = b'{"session_id": null\n'
    log.write_bytes(good + bad + after)
    r = cli("agents", "set-aside", root, C, "--line", "2", "--json")
    doc = r.json()
    # a dry run exits with the state it leaves, the state before: the unreadable line is corruption (3)
    assert r.code == 3 and doc["exit_code"] == 3 and cli("agents", "verify", root).code == 3
    assert doc["outcome"] == "dry-run" and (doc["offset"], doc["length"]) == (len(good), len(bad))
    assert log.read_bytes() == good + bad + after
    r = cli("agents", "set-aside", root, C, "--line", "2", "--apply")
    assert r.code == 7 and "--force" in r.err and log.read_bytes() == good + bad + after
    assert not (root / ".quarantine").exists()
    r = cli("agents", "set-aside", root, C, "--line", "1", "--apply", "--force")
    assert r.code == 7 and "readable event" in r.err and log.read_bytes() == good + bad + after
    r = cli("agents", "set-aside", root, C, "--line", "2", "--apply", "--force", "--json")
    doc = r.json()
    assert r.code == 0 and doc["applied"] is True and log.read_bytes() == good + after
    assert (root / doc["evidence"]).read_bytes() == good + bad + after  # the whole old file
    (m,) = [json.loads(x) for x in (root / ".quarantine" / "MANIFEST.jsonl").read_text().splitlines()]
    assert (m["action"], m["offset"], m["length"]) == ("set-aside", 0, len(good + bad + after))
    assert cli("agents", "verify", root).code == 0  # active sessions are warnings
    r = cli("agents", "set-aside", root, C, "--line", "2", "--apply", "--force")  # a rerun finds nothing to do
    assert r.code == 7 and log.read_bytes() == good + after


def test_set_aside_exits_with_the_state_after_it_ran_as_recover_and_repair_do(tmp_path, cli):
    """A dry run changes nothing, so it exits as verify does on the root; --apply exits with the state after."""
    root = tmp_path / "root"
    family(root)
    sj = root / "agents" / G / "session.json"
    sj.write_bytes(b"{ torn")
    before = full_digest(root)
    v = cli("agents", "verify", root, "--json")
    bad = [f for f in v.json()["findings"] if f["exit_code"]]
    assert v.code == 3 and [f["file"] for f in bad] == [f"agents/{G}/session.json"]
    for args in ([], ["--json"]):
        r = cli("agents", "set-aside", root, G, "--session", *args)
        said = f"would set aside the session directory agents/{G} (session.json, events.jsonl)"
        assert r.code == 3 and (said in r.out if not args else True)
        assert full_digest(root) == before  # nothing changed, not even a lock file or .quarantine/
    doc = r.json()
    assert (doc["outcome"], doc["applied"], doc["exit_code"], doc["length"]) == ("dry-run", False, 3, 6)
    assert cli("agents", "recover", root).code == 3  # recover's dry run says the same of the same root
    r = cli("agents", "set-aside", root, G, "--session", "--apply", "--force", "--json")
    doc = r.json()
    # the whole session directory is set aside, so the root is clean: 0 after, where the dry run said 3
    assert r.code == 0 and (doc["outcome"], doc["applied"], doc["exit_code"]) == ("applied", True, 0)
    assert doc["files"] == ["session.json", "events.jsonl"] and doc["warnings"] == []
    assert not (root / "agents" / G).exists() and (root / doc["evidence"]).read_bytes() == b"{ torn"
    v = cli("agents", "verify", root, "--json")
    assert v.code == 0 and [f for f in v.json()["findings"] if f["exit_code"]] == []
    make_session(str(root), G, [created(G, "C" * 8, C)])
    # a line set aside leaves a clean root: 0 after, where the dry run said 3
    log = root / "agents" / C / "events.jsonl"
    log.write_bytes(log.read_bytes() + b'{"session_id": null\n')
    assert cli("agents", "set-aside", root, C, "--line", "2").code == 3
    r = cli("agents", "set-aside", root, C, "--line", "2", "--apply", "--force", "--json")
    assert r.code == 0 and r.json()["exit_code"] == 0 and r.json()["applied"] is True
    assert cli("agents", "verify", root).code == 0
    # refused: the JSON carries the refusal's code, and no byte changed (the lock file is touched by taking it)
    def unlocked():
        return {k: v for k, v in tree_digest(root).items() if k != ".walctl.lock"}

    after = unlocked()
    r = cli("agents", "set-aside", root, C, "--line", "1", "--apply", "--force", "--json")
    assert r.code == 7 and r.json()["exit_code"] == 7 and r.json()["outcome"] == "refused"
    assert unlocked() == after


def test_set_aside_an_unreadable_session_json_and_bad_ids(tmp_path, cli):
    root = tmp_path / "root"
    family(root)
    sj = root / "agents" / G / "session.json"
    sj.write_bytes(b"{ torn")
    log = (root / "agents" / G / "events.jsonl").read_bytes()
    r = cli("agents", "set-aside", root, G, "--session", "--apply", "--force")
    assert r.code == 0 and not (root / "agents" / G).exists()  # the state after: clean
    manifest = [json.loads(x) for x in (root / ".quarantine" / "MANIFEST.jsonl").read_text().splitlines()]
    assert [(m["action"], m["source"], (root / m["evidence"]).read_bytes()) for m in manifest] == [
        ("set-aside", f"agents__{G}__session.json", b"{ torn"), ("set-aside", f"agents__{G}__events.jsonl", log)]
    assert sorted(s.session_id for s in read_root(str(root))) == [P, C]
    for bad_id in ("../" + P, P[:31], P.upper(), "/etc"):
        r = cli("agents", "set-aside", root, bad_id, "--line", "1")
        assert r.code == 2 and "not a session id" in r.err
    r = cli("agents", "set-aside", root, "f" * 32, "--line", "1")
    assert r.code == 6 and "no such session directory" in r.err
    r = cli("agents", "set-aside", root, P, "--line", "9")
    assert r.code == 2 and "line 9: the log has 1 newline-terminated lines" in r.err
    r = cli("agents", "set-aside", root, P)
    assert r.code == 2 and "give one of --line N or --session" in r.err


def test_pending_exit_code_follows_the_findings(tmp_path, cli):
    root = tmp_path / "root"
    family(root)
    log = root / "agents" / C / "events.jsonl"
    log.write_bytes(log.read_bytes() + line(ev(C, "message.enqueued", message_id="m1", sender="s")))
    r = cli("agents", "pending", root, "--json")
    assert r.code == 0 and r.json()["pending"]["B" * 8][0]["message_id"] == "m1"
    log.write_bytes(log.read_bytes() + b"junk\n")  # a lost message.delivered may hide here
    r = cli("agents", "pending", root, "--json")
    assert r.code == 3 and r.json()["exit_code"] == 3 and [f["class"] for f in r.json()["findings"] if f["exit_code"]] == ["corrupt-line"]
    log.write_bytes(log.read_bytes() + b'{"sess')
    assert cli("agents", "pending", root).code == 3


def test_verify_json_does_not_count_torn_or_corrupt_bytes_as_valid(tmp_path, cli):
    root = tmp_path / "root"
    family(root)
    log = root / "agents" / P / "events.jsonl"
    good = log.read_bytes()
    log.write_bytes(good + b"junk\n" + b'{"torn')
    doc = cli("verify", root, "--json").json()
    (chunk,) = [c for p in doc["paths"] for c in p["chunks"] if c["file"] == P]
    assert (chunk["valid_bytes"], chunk["damaged_bytes"], chunk["size"]) == (len(good), 11, len(good) + 11)


@pytest.mark.parametrize("victim", ["dir", "events.jsonl", "session.json", "events.pending"])
def test_recover_apply_refuses_symlinked_session_files(tmp_path, cli, victim):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    outside.mkdir()
    family(root)
    d = root / "agents" / C
    (d / "events.jsonl").write_bytes((d / "events.jsonl").read_bytes() + b'{"torn')  # something to cut
    if victim == "dir":
        os.rename(d, outside / C)
        os.symlink(outside / C, d)
    else:
        target = outside / victim
        if victim == "events.pending":
            target.write_bytes(line(ev(C, "metadata.updated", key="k", value="v")))
        else:
            os.rename(d / victim, target)
        os.symlink(target, d / victim)
    (outside / "sentinel").write_bytes(b"do not touch")
    os.chmod(outside / "sentinel", 0o600)
    before_out, before_root = full_digest(outside), tree_digest(root)
    r = cli("agents", "recover", root, "--apply")
    assert r.code == 7 and "symbolic link" in r.err and f"agents/{C}" in r.err
    assert full_digest(outside) == before_out
    assert {k: v for k, v in tree_digest(root).items() if k != ".walctl.lock"} == \
        {k: v for k, v in before_root.items() if k != ".walctl.lock"}
    assert not (root / ".quarantine").exists()
    r = cli("agents", "recover", root, "--apply", "--json")  # refused before it started: walctl.error/1
    assert r.code == 7 and r.json()["schema"] == "walctl.error/1" and r.json()["error"]["reason"] == "refused"
    r = cli("agents", "set-aside", root, C, "--line", "1", "--apply", "--force")
    assert r.code in (2, 7) and full_digest(outside) == before_out


def test_crash_at_every_step_of_recover_with_a_leftover_tmp_then_rerun(tmp_path):
    """Keeping session.json.tmp, then replacing session.json: after a crash anywhere one rerun ends where an
    uninterrupted recovery ends, and the tmp's bytes are in .quarantine/ (never lost unrecorded)."""
    from simfs import SimCrash, load_tree

    src = tmp_path / "src"
    family(src)
    tmp_bytes = b'{"id": "%s", "state": "suspen' % P.encode()
    (src / "agents" / P / "session.json.tmp").write_bytes(tmp_bytes)
    probe = load_tree(str(src), "/r")
    start = probe.ops
    recover("/r", apply=True, fs=probe)
    steps = probe.ops - start
    assert steps > 10
    for n in range(1, steps + 1):
        fs = load_tree(str(src), "/r", seed=n)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            recover("/r", apply=True, fs=fs)
        fs.crash()
        recover("/r", apply=True, fs=fs)
        assert {s.session_id: s.state for s in read_root("/r", fs)} == {P: "suspended", C: "suspended",
                                                                       G: "suspended"}, n
        assert not fs.exists(f"/r/agents/{P}/session.json.tmp"), n
        kept = [e for e in fs.listdir("/r/.quarantine") if e.name.startswith(f"agents__{P}__session.json.tmp")]
        assert [fs.read_range(e.path, 0, e.size) for e in kept] == [tmp_bytes], n
        from walctl.store.quarantine import read_manifest

        lines = [e for e in read_manifest("/r", fs)[0] if e["source"] == f"agents__{P}__session.json.tmp"]
        assert len(lines) == 1 and lines[0]["length"] == len(tmp_bytes), n
        assert [f for f in verify_root("/r", fs)[0] if f.exit_code] == [], n


@pytest.mark.parametrize("what", ["line", "duplicate", "session"])
def test_crash_at_every_step_of_set_aside_then_one_rerun(tmp_path, what):
    """After a crash anywhere, one rerun ends as one uninterrupted run: the new file in place, the old one
    kept once, with exactly one manifest line."""
    from simfs import SimCrash, load_tree
    from walctl.ops.agents.aside import set_aside

    src = tmp_path / "src"
    family(src)
    log = src / "agents" / C / "events.jsonl"
    good = log.read_bytes()
    log.write_bytes(good + (good if what == "duplicate" else b"{broken\n"))  # a readable duplicate agent.created
    if what == "session":
        (src / "agents" / C / "session.json").write_bytes(b"{ torn")
    kw = {"line": 2} if what != "session" else {"session": True}
    names = ["events.jsonl"] if what != "session" else ["session.json", "events.jsonl"]
    old = {name: (src / "agents" / C / name).read_bytes() for name in names}
    probe = load_tree(str(src), "/r")
    start = probe.ops
    set_aside("/r", C, apply=True, force=True, fs=probe, **kw)
    steps = probe.ops - start
    for n in range(1, steps + 1):
        fs = load_tree(str(src), "/r", seed=n)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            set_aside("/r", C, apply=True, force=True, fs=fs, **kw)
        fs.crash()
        set_aside("/r", C, apply=True, force=True, fs=fs, **kw)
        d = f"/r/agents/{C}"
        if what != "session":
            assert fs.read_range(f"{d}/events.jsonl", 0, fs.stat(f"{d}/events.jsonl").size) == good, n
        else:
            assert not fs.exists(d), n
        from walctl.store.quarantine import read_manifest

        entries, problems = read_manifest("/r", fs)
        # one line per file kept, each once, each holding the old bytes (a line torn by the crash stays
        # behind, reported and never acted on: store/quarantine.record)
        assert [e["action"] for e in entries] == ["set-aside"] * len(old), n
        assert all("torn" in p for p in problems) and len(problems) <= 1, (n, problems)
        assert [e["source"] for e in entries] == [f"agents__{C}__{name}" for name in old], n
        for e, data in zip(entries, old.values()):
            assert fs.read_range(f"/r/{e['evidence']}", 0, fs.stat(f"/r/{e['evidence']}").size) == data, n
