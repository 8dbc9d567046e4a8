"""walctl heal: stories (damage, verify names the heal command, the plan, --apply, evidence, verify clean,
records byte-identical), refusals (a healthy file, a rotten or foreign archived copy, a live writer, an
archive missing the object), segments, checkpoints, a torn tail whose bytes were shipped as live pieces,
and a crash at every operation of a heal (tests/simfs.py) finished by one rerun."""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil

import pytest

from simfs import SimCrash, load_tree
from test_archive import BUCKET, events, make_checkpoints, make_wal, s3_server  # noqa: F401 - fixture for `dest`
from walctl.ops.archive.push import push
from walctl.ops.archive.heal_apply import heal
from walctl.ops.wal.verify import verify_path
from walctl.store import quarantine as q
from walctl.store.lock import DirectoryLock
from walctl.store.fs import DEFAULT_FS

NS = "agent-1"


@pytest.fixture(params=["file", "s3"])
def dest(request, tmp_path, monkeypatch):
    if request.param == "file":
        return {"url": "file://" + str(tmp_path / "archive"), "endpoint": None}
    srv = request.getfixturevalue("s3_server")
    monkeypatch.setenv("AWS_ENDPOINT_URL", srv["endpoint"])  # so that a pasted command finds the server
    return {"url": f"s3://{BUCKET}/{tmp_path.name}", "endpoint": srv["endpoint"]}


def files(d) -> dict:
    return {n: open(os.path.join(d, n), "rb").read() for n in sorted(os.listdir(d)) if n.startswith("wal")}


def flip(path, offset=None):
    b = bytearray(open(path, "rb").read())
    b[len(b) // 2 if offset is None else offset] ^= 0x10
    open(path, "wb").write(bytes(b))


def archived(tmp_path, dest, **kw):
    wal = make_wal(tmp_path / "wal", **kw)
    rep = push(wal, dest["url"], namespace=NS, endpoint_url=dest["endpoint"])
    assert rep.exit_code == 0 and rep.uploaded
    return wal, files(wal), events(wal)


def paste(cli, line: str):
    """Runs a printed `walctl ...` line exactly as printed."""
    argv = shlex.split(line)
    assert argv[0] == "walctl"
    return cli(*argv[1:])



def shipped_live(wal: str, url: str, ns: str, n: int, endpoint: str | None = None) -> str:
    """A writer's n events in one chunk, shipped by a follower's one poll as live pieces (never sealed)."""
    from walctl.ops.archive.follow import Shipper
    from walctl.ops.wal.write import WalWriter

    os.makedirs(wal)
    sh = Shipper(wal, url, namespace=ns, endpoint_url=endpoint)
    with WalWriter(wal, sync="always") as w:
        for i in range(n):
            w.append(i % 5, f"mem-{i % 7}", b"event %d " % i * (1 + i % 9), 1795300000000 + 10 * i)
        w.flush()
        sh.poll()
    sh.close()
    return wal

def next_lines(out: str) -> list[str]:
    lines, on = [], False
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("next:"):
            on, s = True, s[len("next:"):].strip()
        if on and s.startswith("walctl "):
            lines.append(s)
    return lines


def test_story_mid_log_rot_and_a_deleted_chunk_come_back_byte_identical(tmp_path, dest, cli):
    wal, original, evs = archived(tmp_path, dest)
    flip(os.path.join(wal, "wal-000002.bin"))
    os.unlink(os.path.join(wal, "wal-000004.bin"))
    damaged = open(os.path.join(wal, "wal-000002.bin"), "rb").read()
    v = cli("verify", wal, "--from", dest["url"])
    assert v.code == 3
    heal_cmd = next_lines(v.out)[0]
    assert heal_cmd == f"walctl heal {wal} --from {dest['url']} --namespace {NS}"
    plan = paste(cli, heal_cmd)
    assert plan.code == 3 and files(wal) == {n: b for n, b in original.items() if n != "wal-000004.bin"} | {
        "wal-000002.bin": damaged}  # the dry run changed nothing
    assert not os.path.exists(os.path.join(wal, ".quarantine")) and not any(n.endswith(".tmp") for n in os.listdir(wal))
    planned = [line.split()[:3] for line in plan.out.splitlines() if line.startswith("would ")]
    assert planned == [["would", "replace", "wal-000002.bin"], ["would", "restore", "wal-000004.bin"]]
    doc = cli("heal", wal, "--from", dest["url"], "--json").json()
    assert [(s["file"], s["action"], s["matched_by"], s["objects"]) for s in doc["steps"]] == [
        ("wal-000002.bin", "replace", "ledger-seal", [f"{NS}/chunks/wal-000002.bin"]),
        ("wal-000004.bin", "restore", "ledger-seal", [f"{NS}/chunks/wal-000004.bin"])]
    assert doc["lost"] == [] and doc["left"] == [] and doc["exit_code"] == 3
    applied = paste(cli, next_lines(plan.out.replace("  walctl heal", "next: walctl heal"))[0])
    assert applied.code == 0, applied.out
    assert files(wal) == original and events(wal) == evs
    entries, problems = q.read_manifest(wal)
    sha = hashlib.sha256(damaged).hexdigest()
    evidence = f".quarantine/wal-000002.bin.0-{len(damaged)}.{sha[:12]}"
    assert problems == [] and [(e["action"], e["source"], e["offset"], e["length"], e["sha256"], e["evidence"])
                               for e in entries] == [("heal", "wal-000002.bin", 0, len(damaged), sha, evidence)]
    assert open(os.path.join(wal, evidence), "rb").read() == damaged
    after = cli("verify", wal, "--from", dest["url"])
    assert after.code == 0 and "heal" not in after.out
    again = cli("heal", wal, "--from", dest["url"], "--apply")
    assert again.code == 0 and "nothing the archive can heal" in again.out


def test_map_and_repair_name_the_heal_command_from_the_environment(tmp_path, dest, cli, monkeypatch):
    wal, original, _ = archived(tmp_path, dest)
    os.unlink(os.path.join(wal, "wal-000003.bin"))
    monkeypatch.setenv("WALCTL_ARCHIVE", dest["url"])
    expected = f"walctl heal {wal} --from {dest['url']} --namespace {NS}"
    m = cli("map", wal)
    assert m.code == 3 and next_lines(m.out) == [expected]
    r = cli("repair", wal)
    assert next_lines(r.out)[0] == expected  # heal first, then repair's own steps
    assert paste(cli, expected + " --apply").code == 0 and files(wal) == original
    monkeypatch.delenv("WALCTL_ARCHIVE")
    os.unlink(os.path.join(wal, "wal-000003.bin"))
    assert "walctl heal" not in cli("verify", wal).out  # no archive named: no heal advice


def test_healthy_files_are_never_touched_and_a_rotten_archived_copy_is_refused(tmp_path, dest, cli):
    wal, original, _ = archived(tmp_path, dest)
    flip(os.path.join(wal, "wal-000001.bin"))
    damaged = open(os.path.join(wal, "wal-000001.bin"), "rb").read()
    inodes = {n: os.stat(os.path.join(wal, n)).st_ino for n in original}
    # the archive's copies of the damaged chunk and of a healthy one rot in the bucket
    from walctl.store.objstore import open_store

    store = open_store(dest["url"], dest["endpoint"])
    for name in ("wal-000001.bin", "wal-000005.bin"):
        key = f"{NS}/chunks/{name}"
        data = bytearray(store.get_bytes(key))
        data[100] ^= 1
        store.put_bytes(key, bytes(data))
    r = cli("heal", wal, "--from", dest["url"], "--apply", "--json")
    doc = r.json()
    assert r.code == 3 and [(s["file"], s["outcome"]) for s in doc["steps"]] == [("wal-000001.bin", "refused")]
    assert "SHA-256" in doc["steps"][0]["reason"] and doc["downloaded_bytes"] == len(original["wal-000001.bin"])
    assert files(wal) == dict(original, **{"wal-000001.bin": damaged})  # nothing changed, no .tmp left
    assert {n: os.stat(os.path.join(wal, n)).st_ino for n in original} == inodes
    assert not os.path.exists(os.path.join(wal, ".quarantine")) and not any(n.endswith(".tmp") for n in os.listdir(wal))


def test_a_copy_that_does_not_continue_its_neighbours_is_refused(tmp_path, cli):
    dest = {"url": "file://" + str(tmp_path / "archive"), "endpoint": None}
    other = make_wal(tmp_path / "other", max_chunk=5800)  # same names, shifted ranges
    push(other, dest["url"], namespace=NS)
    wal = make_wal(tmp_path / "wal")
    shutil.rmtree(os.path.join(wal, ".walctl"))  # no ledger: matched by name and manifest, then checked
    before = files(wal)
    os.unlink(os.path.join(wal, "wal-000004.bin"))
    plan = cli("heal", wal, "--from", dest["url"], "--json").json()
    (step,) = plan["steps"]
    assert step["file"] == "wal-000004.bin" and step["outcome"] == "refused" and "does not continue" in step["reason"]
    assert cli("heal", wal, "--from", dest["url"], "--apply").code == 4
    assert files(wal) == {n: b for n, b in before.items() if n != "wal-000004.bin"}


def test_a_live_writer_is_exit_6_and_nothing_changes(tmp_path, dest, cli):
    wal, original, _ = archived(tmp_path, dest)
    os.unlink(os.path.join(wal, "wal-000002.bin"))
    with DirectoryLock(wal, "pid 1 on test: walctl write", DEFAULT_FS.beneath(wal)):
        for extra in ((), ("--apply",)):
            r = cli("heal", wal, "--from", dest["url"], *extra)
            assert r.code == 6 and "locked by a live writer" in r.err
    assert "wal-000002.bin" not in os.listdir(wal)


def test_an_archive_missing_the_object_says_what_stays_lost(tmp_path, dest, cli):
    wal, original, _ = archived(tmp_path, dest)
    os.unlink(os.path.join(wal, "wal-000002.bin"))
    os.unlink(os.path.join(wal, "wal-000006.bin"))
    from walctl.store.objstore import open_store

    open_store(dest["url"], dest["endpoint"]).delete(f"{NS}/chunks/wal-000006.bin")
    r = cli("heal", wal, "--from", dest["url"], "--apply")
    assert r.code == 3
    assert "restored wal-000002.bin" in r.out
    lost = [line for line in r.out.splitlines() if line.startswith("stays")]
    rng = verify_path(os.path.join(str(tmp_path), "wal")).findings
    assert [f.cls for f in rng] == ["sequence-gap", "sealed-chunk-missing"]
    a, b = rng[0].missing
    assert lost == [f"stays: wal-000006.bin (sealed-chunk-missing): no archived object holds it with its sealed "
                    f"SHA-256", f"stays lost: seq {a}..{b}: no archived copy that can be used holds it"]
    assert files(wal) == {n: b for n, b in original.items() if n != "wal-000006.bin"}
    advice = [line.strip() for line in r.out.splitlines() if line.strip().startswith("walctl ")]
    assert advice == [f"walctl verify {wal}"]
    v = paste(cli, advice[0])  # what it says: the sequences still missing, and what comes next
    assert v.code == 3 and f"{a}..{b}" in v.out
    assert f"walctl repair {wal} --accept-loss {a}..{b} --reason 'seq {a}..{b} held by no file' --apply" in v.out


@pytest.mark.parametrize("repaired_first", [False, True])
def test_a_torn_tail_shipped_as_live_pieces_comes_back(tmp_path, dest, cli, repaired_first):
    """The writer died; its last chunk's tail had been shipped as live pieces. Torn (its `hwm` ledger line
    says more was issued: exit 4), or already cut by `repair --apply` (the same sequences missing): heal
    brings the records back from the pieces, byte for byte."""
    wal = shipped_live(str(tmp_path / "wal"), dest["url"], NS, 60, dest["endpoint"])
    whole = files(wal)
    evs = events(wal)
    (last,) = whole
    path = os.path.join(wal, last)
    os.truncate(path, len(whole[last]) - 300)  # the crash tore the tail: records the shipper had shipped
    torn = verify_path(wal)
    assert torn.exit_code == 4 and torn.last_sequence < 60
    assert {f.cls for f in torn.findings} == {"tail-damage", "sequence-missing"}
    if repaired_first:
        assert cli("repair", wal, "--apply").code == 4  # cut: the sequences after it are now missing
    local = open(path, "rb").read()
    rep = heal(wal, dest["url"], apply=True, endpoint_url=dest["endpoint"])
    (step,) = rep.plan.steps
    assert (step.file, step.action, step.matched_by, step.outcome) == (last, "replace", "live-pieces", "healed")
    assert step.finding == ("sequence-missing" if repaired_first else "tail-damage")
    assert rep.exit_code == 0 and files(wal) == whole and events(wal) == evs
    assert open(os.path.join(wal, step.evidence), "rb").read() == local


def test_segments_heal(tmp_path):
    from walctl.ops.wal.write import WalWriter

    url = "file://" + str(tmp_path / "a")
    seg = str(tmp_path / "seg")
    with WalWriter(seg, format="segments", sync="none") as w:
        for i in range(25_000):  # three segments: two sealed, the last still open
            w.append_entry("memory_add", {"i": i}, timestamp=1795300000 + i)
    push(seg, url, namespace=NS)
    original = files(seg)
    first = sorted(original)[0]
    flip(os.path.join(seg, first))
    assert verify_path(seg).exit_code == 3
    rep = heal(seg, url, apply=True)
    assert [(s.file, s.outcome) for s in rep.plan.steps] == [(first, "healed")] and rep.exit_code == 0
    assert files(seg) == original


def test_checkpoints_heal(tmp_path, cli):
    url = "file://" + str(tmp_path / "a")
    wal = make_wal(tmp_path / "wal")
    ck = make_checkpoints(tmp_path / "ck", [100, 250])
    push(wal, url, namespace=NS, checkpoints=ck)
    original = {n: open(os.path.join(ck, n), "rb").read() for n in os.listdir(ck)}
    name = sorted(original)[1]
    flip(os.path.join(ck, name), 60)
    v = cli("verify", ck, "--from", url)
    assert v.code == 3 and next_lines(v.out)[0] == f"walctl heal {ck} --from {url} --namespace {NS}"
    r = cli("heal", ck, "--from", url, "--namespace", NS, "--apply", "--json")
    assert r.code == 0 and [(s["file"], s["outcome"]) for s in r.json()["steps"]] == [(name, "healed")]
    assert {n: open(os.path.join(ck, n), "rb").read() for n in original} == original


def _heal_on(fs, url):
    from walctl.errors import WalctlError

    try:
        return heal("/r/wal", url, apply=True, fs=fs, transfers=1)
    except WalctlError as e:  # a crash's leftovers may make a step refuse; the rerun must still finish
        return e


def crash_every_operation(src: str, url: str, original: dict, sources: set) -> int:
    """Heals a SimFS copy of `src` (its `wal` directory) with a crash at every operation in turn; after
    each crash one rerun must finish: every file byte-identical to `original`, and the quarantine holding
    only damaged originals of `sources`, each recorded once. Returns the number of operations."""
    probe = load_tree(src)
    start = probe.ops
    heal("/r/wal", url, apply=True, fs=probe, transfers=1)
    total = probe.ops - start
    for n in range(1, total + 1):
        fs = load_tree(src, seed=n)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            heal("/r/wal", url, apply=True, fs=fs, transfers=1)
        fs.crash()
        fs.crash_at = None
        rep = _heal_on(fs, url)
        assert getattr(rep, "exit_code", None) == 0, (n, rep, fs.log[-8:])
        got = {e.name: fs.read_range(e.path, 0, e.size) for e in fs.listdir("/r/wal") if e.name.startswith("wal")}
        assert got == original, n
        entries, _ = q.read_manifest("/r/wal", fs)
        assert {e["source"] for e in entries} <= sources and {e["action"] for e in entries} <= {"heal"}, n
        assert len({e["evidence"] for e in entries}) == len(entries), n
    return total


@pytest.mark.parametrize("ledger", [True, False])
def test_a_crash_at_every_operation_of_a_heal_is_finished_by_one_rerun(tmp_path, ledger):
    url = "file://" + str(tmp_path / "archive")
    os.makedirs(tmp_path / "src")
    wal = make_wal(tmp_path / "src" / "wal")
    push(wal, url, namespace="wal")
    original = files(wal)
    if not ledger:  # then a chunk set aside before the crash is found through the quarantine manifest
        shutil.rmtree(os.path.join(wal, ".walctl"))
    flip(os.path.join(wal, "wal-000002.bin"))
    os.unlink(os.path.join(wal, "wal-000005.bin"))
    assert crash_every_operation(str(tmp_path / "src"), url, original, {"wal-000002.bin"}) > 10


def test_a_crash_at_every_operation_of_a_torn_tail_heal_from_live_pieces(tmp_path):
    url = "file://" + str(tmp_path / "a")
    wal = shipped_live(str(tmp_path / "src" / "wal"), url, "wal", 40)
    original = files(wal)
    (last,) = original
    os.truncate(os.path.join(wal, last), len(original[last]) - 200)
    assert crash_every_operation(str(tmp_path / "src"), url, original, {last}) > 5


def test_readme_incident_runs_as_written(tmp_path):
    """Every line of README's "An incident, start to finish", in order, with /srv paths moved into tmp."""
    import re
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    block = re.search(r"## An incident, start to finish\n.*?```sh\n(.*?)```", text, re.S).group(1)
    wal, archive = str(tmp_path / "srv" / "wal"), str(tmp_path / "srv" / "archive")
    os.makedirs(archive)
    make_wal(wal)
    original = files(wal)
    shim = tmp_path / "bin" / "walctl"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m walctl \"$@\"\n")
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}", "PYTHONPATH": root}
    ran = 0
    for line in block.replace("/srv/", str(tmp_path / "srv") + "/").splitlines():
        command, _, comment = line.partition("#")
        command = command.strip()
        if line.startswith("export "):
            name, value = command[len("export "):].split("=", 1)
            env[name] = value
        elif line.startswith("# the incident"):
            flip(os.path.join(wal, "wal-000002.bin"))
            os.unlink(os.path.join(wal, "wal-000004.bin"))
        elif command:
            out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, env=env)
            code = re.match(r"\s*exit (\d)", comment)
            assert out.returncode == (int(code.group(1)) if code else 0), (command, out.stdout, out.stderr)
            said = re.search(r"next: (walctl .*)$", comment)
            if said:
                assert said.group(1).strip() in [x.strip().removeprefix("next:").strip() for x in out.stdout.splitlines()]
            for planned in re.findall(r"would \w+ wal-\d+\.bin", comment):
                assert planned in out.stdout
            ran += 1
    assert ran == 5 and files(wal) == original
    kept = sorted(os.listdir(os.path.join(wal, ".quarantine")))
    assert len(kept) == 2 and kept[0] == "MANIFEST.jsonl" and kept[1].startswith("wal-000002.bin.0-")


def test_a_chunk_set_aside_by_quarantine_move_comes_back_from_the_archive(tmp_path, cli):
    """The ledger's `moved` line explains the gap; heal puts the sealed bytes back and writes `restored`,
    so the seal holds again (verify checks it by hash) and the evidence stays in .quarantine/."""
    url = "file://" + str(tmp_path / "archive")
    wal = make_wal(tmp_path / "wal")
    push(wal, url, namespace=NS)
    original = files(wal)
    assert cli("quarantine", "move", wal, "wal-000003.bin", "--reason", "suspect disk", "--apply").code == 0
    v = cli("verify", wal, "--from", url, "--json")
    assert v.code == 4
    r = cli("heal", wal, "--from", url, "--apply", "--json")
    doc = r.json()
    assert r.code == 0 and [(s["file"], s["action"], s["matched_by"], s["outcome"]) for s in doc["steps"]] == [
        ("wal-000003.bin", "restore", "ledger-seal", "healed")]
    assert files(wal) == original
    from walctl.format import ledger as L
    from walctl.store.ledger import read_ledger

    lines = read_ledger(wal).lines
    assert [ln.event for ln in lines][-2:] == ["moved", "restored"] and "wal-000003.bin" in L.fold(lines).sealed
    after = cli("verify", wal, "--json").json()["paths"][0]
    assert after["exit_code"] == 0 and "wal-000003.bin" in after["ledger"]["verified_by_hash"]
    assert os.listdir(os.path.join(wal, ".quarantine")) != []


def test_a_missing_segment_comes_back_and_unsupported_kinds_are_exit_5(tmp_path, cli):
    from walctl.ops.wal.write import WalWriter

    url = "file://" + str(tmp_path / "a")
    seg = str(tmp_path / "seg")
    with WalWriter(seg, format="segments", sync="none") as w:
        for i in range(25_000):
            w.append_entry("memory_add", {"i": i}, timestamp=1795300000 + i)
    push(seg, url, namespace=NS)
    original = files(seg)
    second = sorted(original)[1]
    os.unlink(os.path.join(seg, second))
    r = cli("heal", seg, "--from", url, "--apply", "--json")
    assert r.code == 0 and [(s["file"], s["action"]) for s in r.json()["steps"]] == [(second, "restore")]
    assert files(seg) == original
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "t.wal").write_text("{}\n")
    bad = cli("heal", str(tasks), "--from", url)
    assert bad.code == 5 and "heal mends" in bad.err
    nowhere = str(tmp_path / "no-archive")
    gone = cli("heal", seg, "--from", "file://" + nowhere)
    assert gone.code == 6 and f"{nowhere}: no such file or directory" in gone.err


def test_a_torn_tail_the_archive_holds_no_more_of_is_left_to_repair(tmp_path, cli):
    url = "file://" + str(tmp_path / "archive")
    wal = make_wal(tmp_path / "wal")
    push(wal, url, namespace=NS)  # the last chunk stays local: no copy of it anywhere
    last = sorted(files(wal))[-1]
    with open(os.path.join(wal, last), "ab") as f:
        f.write(b"WA\x02\x00")  # a torn append
    before = files(wal)
    r = cli("heal", wal, "--from", url, "--json")
    assert r.code == 1
    doc = r.json()
    assert doc["steps"] == [] and doc["lost"] == [] and [x["file"] for x in doc["left"]] == [last]
    printed = doc["left"][0]["reason"].split(": ", 1)[1].split(" shows")[0]
    assert printed == f"walctl repair {wal}"
    shown = paste(cli, printed)
    assert shown.code == 1 and f"would cut {last}" in shown.out
    assert cli("heal", wal, "--from", url, "--apply").code == 1 and files(wal) == before
