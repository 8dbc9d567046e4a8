"""archive of task-log directories and Substrat roots (file versions): push, list, verify, restore --until
and push --follow on file:// and moto's S3; the sources are built over time by walctl's own writers
(tasklog append; Substrat's append protocol) and restored at several times, compared with the source
as it was then; a torn last line is never shipped; damage in the archive is found; nothing is written
outside OUT whatever the manifest or the object keys say."""
from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from test_archive import dest, s3_server  # noqa: F401  (the archive fixtures: file:// and moto's S3)
from test_tasklog import E, PLAN, SHA0, SHA1

from walctl.errors import WalctlError
from walctl.ops.archive import objects as ar
from walctl.ops.archive.files_follow import FilesShipper
from walctl.ops.archive.push import push
from walctl.ops.archive.restore import restore
from walctl.ops.archive.verify import verify_archive
from walctl.ops.tasklog.logs import append
from walctl.store.objstore import open_store

DATA = os.path.join(os.path.dirname(__file__), "data")
T1, T2 = "3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77", "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"


def snapshot(root) -> dict:
    """Every file's bytes by path, but walctl's own (the directory lock): what the archive holds."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.startswith(".walctl"):
                continue
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def ms(ts: str) -> int:
    from walctl.ops.archive.files import ts_ms

    return ts_ms(ts)[0]


def entries(tid):
    return [dict(e, task_id=tid) for e in (
        E("InstructionStart", 1, instruction="add validation", base_sha=SHA0), E("LLMPlan", 2, steps=PLAN),
        E("StepStart", 3, step_index=0), E("ToolResult", 4, step_index=0, tool="edit", success=True, output="ok"),
        E("Commit", 6, step_index=0, sha=SHA1, message="step 0"), E("StepStart", 7, step_index=1))]


def build_tasklogs(src, url, endpoint):
    """Two task logs appended in turn (by `tasklog append`), pushed every other entry; returns the source
    as it was after each entry, keyed by that entry's time (ms)."""
    os.makedirs(src)
    states = {}
    a, b = entries(T1), [dict(e, ts=e["ts"].replace(":00:0", ":00:3")) for e in entries(T2)]  # T2: 30 s later
    for i, (tid, e) in enumerate([(T1, x) for x in a] + [(T2, x) for x in b]):
        append(os.path.join(src, f"{tid}.wal"), [e])
        states[ms(e["ts"])] = snapshot(src)
        if i % 2:
            assert push(src, url, namespace="tasks", endpoint_url=endpoint).exit_code == 0
    push(src, url, namespace="tasks", endpoint_url=endpoint)
    return states


def test_task_logs_restored_at_several_times_are_the_source_as_it_was(tmp_path, dest):
    src = str(tmp_path / "tasks")
    states = build_tasklogs(src, dest["url"], dest["endpoint"])
    man = ar.read_manifest(open_store(dest["url"], dest["endpoint"]), "tasks")
    assert {e.kind for e in man.entries.values()} == {"tasklogs"} and len(man.entries) >= 6  # versions
    times = sorted(states)
    for n, t in enumerate([times[0], times[2], times[2] + 500, times[5], times[6], times[-1], times[-1] + 10**6]):
        out = tmp_path / f"r{n}"
        rep = restore(dest["url"], str(out), namespace="tasks", to_time_ms=t, endpoint_url=dest["endpoint"])
        want = states[max(x for x in times if x <= t)]
        assert snapshot(out) == want, t
        assert rep.kind == "tasklogs" and {f["path"] for f in rep.files} == set(want)
    whole = restore(dest["url"], str(tmp_path / "all"), namespace="tasks", endpoint_url=dest["endpoint"])
    assert snapshot(tmp_path / "all") == states[times[-1]] and whole.until_ms is None
    with pytest.raises(WalctlError) as e:  # nothing existed yet
        restore(dest["url"], str(tmp_path / "early"), namespace="tasks", to_time_ms=times[0] - 1,
                endpoint_url=dest["endpoint"])
    assert e.value.exit_code == 4 and not os.path.exists(tmp_path / "early")
    with pytest.raises(WalctlError) as e:
        restore(dest["url"], str(tmp_path / "seq"), namespace="tasks", to_seq=3, endpoint_url=dest["endpoint"])
    assert e.value.exit_code == 2


def test_an_open_log_ships_only_complete_lines(tmp_path, dest):
    src = tmp_path / "tasks"
    path = src / f"{T1}.wal"
    append(str(path), entries(T1)[:3])
    whole = path.read_bytes()
    with open(path, "ab") as f:
        f.write(b'{"v":1,"ts":"2026-11-21T10:00:0')  # an append in flight: a torn last line
    rep = push(str(src), dest["url"], namespace="t", endpoint_url=dest["endpoint"])
    (name,) = rep.uploaded
    assert name == f"{T1}.wal.{hashlib.sha256(whole).hexdigest()}"
    store = open_store(dest["url"], dest["endpoint"])
    assert store.get_bytes(f"t/tasklogs/{name}") == whole
    assert push(str(src), dest["url"], namespace="t", endpoint_url=dest["endpoint"]).already_archived == (name,)
    restore(dest["url"], str(tmp_path / "out"), namespace="t", endpoint_url=dest["endpoint"])
    assert snapshot(tmp_path / "out") == {f"{T1}.wal": whole}


def substrat_root(tmp_path):
    root = str(tmp_path / "root")
    shutil.copytree(os.path.join(DATA, "substrat", "clean-tree", "root"), root)
    return root


def test_agent_roots_restored_at_several_times_are_the_files_as_they_stood(tmp_path, dest):
    from walctl.ops.agents.mend import append_event

    root = substrat_root(tmp_path)
    sessions = sorted(os.listdir(os.path.join(root, "agents")))
    base = 1_795_300_000_000
    for d, _, files in os.walk(root):
        for f in files:
            os.utime(os.path.join(d, f), ns=(base * 10**6, base * 10**6))
    states = {base: snapshot(root)}
    push(root, dest["url"], namespace="sub", endpoint_url=dest["endpoint"])
    for i in range(1, 6):  # Substrat's append protocol (pending file, log, unlink), each at a known time
        sd = os.path.join(root, "agents", sessions[i % len(sessions)])
        append_event(sd, {"session_id": os.path.basename(sd), "ts": f"2026-11-21T23:1{i}:00+00:00",
                          "event": "turn.start", "data": {"prompt": f"step {i}"}})
        t = base + i * 60_000
        os.utime(os.path.join(sd, "events.jsonl"), ns=(t * 10**6, t * 10**6))
        states[t] = snapshot(root)
        assert push(root, dest["url"], namespace="sub", endpoint_url=dest["endpoint"]).exit_code == 0
    for n, t in enumerate([base, base + 60_000, base + 150_000, base + 300_000, base + 10**9]):
        out = tmp_path / f"r{n}"
        rep = restore(dest["url"], str(out), namespace="sub", to_time_ms=t, endpoint_url=dest["endpoint"])
        assert snapshot(out) == states[max(x for x in states if x <= t)], t
        assert rep.kind == "agents" and rep.verdict == "clean"


def test_follow_ships_appended_lines_once_complete(tmp_path, dest):
    src = tmp_path / "tasks"
    path = src / f"{T1}.wal"
    es = entries(T1)
    append(str(path), es[:2])
    sh = FilesShipper(str(src), dest["url"], namespace="f", endpoint_url=dest["endpoint"])
    sh.poll()
    first = path.read_bytes()
    append(str(path), es[2:4])
    with open(path, "ab") as f:
        f.write(b'{"v":1,"ts":"2026-11-21T10:00:0')  # torn: not shipped
    sh.poll()
    second = path.read_bytes()[:path.read_bytes().rfind(b"\n") + 1]
    sh.poll()  # nothing changed: nothing read or sent
    sh.close()
    assert [n.split(".wal.")[1] for n in sh.uploaded] == [hashlib.sha256(x).hexdigest() for x in (first, second)]
    restore(dest["url"], str(tmp_path / "out"), namespace="f", endpoint_url=dest["endpoint"])
    assert snapshot(tmp_path / "out") == {f"{T1}.wal": second}
    assert open_store(dest["url"], dest["endpoint"]).get_bytes("f/LOCK.json") is None  # the lock is dropped


def test_archive_verify_finds_corrupt_and_missing_versions(tmp_path, dest, cli):
    src = str(tmp_path / "tasks")
    build_tasklogs(src, dest["url"], dest["endpoint"])
    assert verify_archive(dest["url"], namespace="tasks", endpoint_url=dest["endpoint"])[1:] == ([], 0)
    store = open_store(dest["url"], dest["endpoint"])
    man = ar.read_manifest(store, "tasks")
    newest = max((e for e in man.entries.values() if e.name.startswith(T1)), key=lambda e: e.size)
    other = min((e for e in man.entries.values() if e.name.startswith(T2)), key=lambda e: e.size)
    key = f"tasks/tasklogs/{newest.name}"
    data = bytearray(store.get_bytes(key))
    data[10] ^= 1
    store.put_bytes(key, bytes(data))  # rot in the bucket
    store.delete(f"tasks/tasklogs/{other.name}")
    _, findings, code = verify_archive(dest["url"], namespace="tasks", endpoint_url=dest["endpoint"])
    assert code == 3  # corrupt (3) and missing (4): the contract's precedence gives 3
    assert sorted((f.cls, f.file) for f in findings) == sorted([
        ("archived-sha256-mismatch", key), ("missing-object", f"tasks/tasklogs/{other.name}")])
    r = cli("archive", "verify", dest["url"], "--namespace", "tasks", "--json",
            *(("--endpoint-url", dest["endpoint"]) if dest["endpoint"] else ()))
    assert r.code == 3 and {f["class"] for f in json.loads(r.out)["findings"]} == {"archived-sha256-mismatch",
                                                                                   "missing-object"}
    with pytest.raises(WalctlError) as e:  # the newest version of T1 is rotten: refused, OUT left as it was
        restore(dest["url"], str(tmp_path / "out"), namespace="tasks", endpoint_url=dest["endpoint"])
    assert e.value.exit_code == 3 and not os.path.exists(tmp_path / "out")


HOSTILE = ["../../evil.wal." + "a" * 64, "/etc/evil.wal." + "a" * 64, "..wal." + "a" * 64]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_manifest_lines_and_keys_never_lead_outside_out(tmp_path, name):
    src = str(tmp_path / "tasks")
    url = "file://" + str(tmp_path / "arch")
    append(os.path.join(src, f"{T1}.wal"), entries(T1)[:2])
    push(src, url, namespace="n")
    store = open_store(url)
    doc = json.loads(store.get_bytes("n/MANIFEST.json"))
    good = doc["objects"][0]
    doc["objects"].append(dict(good, name=name))  # a line no push writes
    store.put_bytes("n/MANIFEST.json", json.dumps(doc).encode())
    os.makedirs(tmp_path / "arch" / "n" / "tasklogs" / "sub")
    bad = tmp_path / "arch" / "n" / "tasklogs" / "sub" / f"x.wal.{good['sha256']}"  # a nested key: foreign
    bad.write_bytes(b"{}\n")
    before = set(os.listdir(tmp_path))
    out = tmp_path / "out"
    rep = restore(url, str(out), namespace="n")
    assert snapshot(out) == {f"{T1}.wal": open(os.path.join(src, f"{T1}.wal"), "rb").read()}
    assert set(os.listdir(tmp_path)) == before | {"out"} and not os.path.exists("/etc/evil.wal." + "a" * 64)
    assert any("does not parse" in w for w in rep.warnings) and any("foreign" in w for w in rep.warnings)


def test_cli_restore_until_and_the_old_spelling(tmp_path, cli):
    src = str(tmp_path / "tasks")
    url = "file://" + str(tmp_path / "arch")
    es = entries(T1)
    append(os.path.join(src, f"{T1}.wal"), es)
    assert cli("archive", "push", src, url).code == 0
    r = cli("archive", "restore", url, tmp_path / "a", "--until", es[2]["ts"], "--json")
    doc = json.loads(r.out)
    assert r.code == 0 and doc["schema"] == "walctl.archive-restore-files/1" and doc["until_ms"] == ms(es[2]["ts"])
    assert open(tmp_path / "a" / f"{T1}.wal", "rb").read().count(b"\n") == 3
    r = cli("archive", "restore", url, tmp_path / "b", "--to-time", es[2]["ts"])
    assert r.code == 0 and "note: --to-time is now --until" in r.err and "restored 1 tasklogs files" in r.out
    assert snapshot(tmp_path / "b") == snapshot(tmp_path / "a")
    r = cli("archive", "list", url, "--json")
    assert r.code == 0 and json.loads(r.out)["namespaces"][0]["objects"] == 1


def test_ctrl_c_during_a_files_restore_then_the_printed_rerun_finishes(tmp_path, cli, monkeypatch):
    import shlex

    from faultfs import interrupt_at
    from test_restore_interrupt import OPS, interrupted_line

    root = substrat_root(tmp_path)
    url = "file://" + str(tmp_path / "arch")
    assert push(root, url, namespace="sub").exit_code == 0
    counter = interrupt_at(monkeypatch, 10 ** 9, OPS)
    assert cli("archive", "restore", url, tmp_path / "whole").code == 0
    monkeypatch.undo()
    want = snapshot(tmp_path / "whole")
    assert want == snapshot(root) and counter.calls > 10
    total = counter.calls
    for n in sorted({1, 2, 3, total // 3, total // 2, 2 * total // 3, total - 1, total}):  # (every step: slow below)
        out = tmp_path / f"out{n}"
        hit = interrupt_at(monkeypatch, n, OPS)
        r = cli("archive", "restore", url, out)
        monkeypatch.undo()
        assert r.code == 130 and hit.fired, (n, r.err)
        assert not os.path.exists(out) and not [d for d in os.listdir(tmp_path) if d.startswith(".walctl-restore-")]
        rerun = interrupted_line(r.err).split("run the same restore again: ")[1]
        assert cli(*shlex.split(rerun)[1:]).code == 0, n
        assert snapshot(out) == want
