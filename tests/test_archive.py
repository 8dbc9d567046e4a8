"""archive: push / list / verify / restore / prune against a real S3 API (moto's server, started here on
127.0.0.1) and against file://; faults: the server stopping mid-push, an object rotting in the bucket,
a manifest missing or stale."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from walctl.errors import WalctlError
from walctl.ops.archive import objects as ar
from walctl.ops.archive.adapter import StorageAdapter
from walctl.ops.archive.prune import prune
from walctl.ops.archive.push import push
from walctl.ops.archive.restore import restore
from walctl.ops.archive.verify import verify_archive
from walctl.ops.checkpoints.checkpoint import create as create_checkpoint
from walctl.ops.wal.write import WalWriter

BUCKET = "walctl-test"


@pytest.fixture(scope="module")
def s3_server():
    moto_server = pytest.importorskip("moto.server")
    pytest.importorskip("boto3")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    import boto3

    endpoint = f"http://127.0.0.1:{port}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
    holder = {"server": server, "endpoint": endpoint, "port": port, "module": moto_server}
    yield holder
    holder["server"].stop()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def make_wal(path, n=400, max_chunk=6000, salt=b"payload"):
    with WalWriter(str(path), sync="none", max_chunk_bytes=max_chunk) as w:
        for i in range(n):
            w.append(i % 6, f"mem-{i % 17}", (salt + b" %d " % i) * (1 + i % 20), 1795300000000 + 1000 * i)
    return str(path)


def make_checkpoints(path, seqs):
    for s in seqs:
        create_checkpoint(str(path), {"memory_blocks": [], "wal_sequence_hint": s}, s)
    return str(path)


@pytest.fixture(params=["file", "s3"])
def dest(request, tmp_path):
    if request.param == "file":
        return {"url": "file://" + str(tmp_path / "archive"), "endpoint": None, "kind": "file"}
    srv = request.getfixturevalue("s3_server")
    return {"url": f"s3://{BUCKET}/{tmp_path.name}", "endpoint": srv["endpoint"], "kind": "s3"}


def events(path):
    from walctl.ops.wal.replay import ReplayOptions, replay

    got: list[bytes] = []
    replay(str(path), got.extend, ReplayOptions())
    return [(e["sequence"], e["type_ordinal"], e["memory_id_hex"], e["timestamp_ms"], e["payload_hex"])
            for e in map(json.loads, b"".join(got).splitlines())]


def test_push_list_verify_restore_round_trip(tmp_path, dest):
    wal = make_wal(tmp_path / "wal")
    ck = make_checkpoints(tmp_path / "ck", [100, 250])
    rep = push(wal, dest["url"], namespace="agent-1", checkpoints=ck, jobs=4, endpoint_url=dest["endpoint"])
    n_chunks = len([n for n in os.listdir(wal) if n.endswith(".bin")])
    assert rep.exit_code == 0 and len(rep.uploaded) == (n_chunks - 1) + 2 and not rep.failed
    again = push(wal, dest["url"], namespace="agent-1", checkpoints=ck, endpoint_url=dest["endpoint"])
    assert again.uploaded == () and len(again.already_archived) == len(rep.uploaded)
    summaries, findings, code = verify_archive(dest["url"], endpoint_url=dest["endpoint"])
    assert (code, findings) == (0, [])
    (s,) = summaries
    archived_last = s["last_sequence"]
    assert s["first_sequence"] == 1 and archived_last < 400 and s["gaps"] == []  # the last chunk stays local
    full = events(wal)
    out = tmp_path / "restored"
    r = restore(dest["url"], str(out), namespace="agent-1", endpoint_url=dest["endpoint"])
    assert events(out / "wal") == full[:archived_last]
    assert (r.checkpoint_wal_sequence, r.verdict) == (250, "clean")
    r = restore(dest["url"], str(tmp_path / "r2"), namespace="agent-1", to_seq=180, endpoint_url=dest["endpoint"])
    assert events(tmp_path / "r2" / "wal") == full[:180] and r.checkpoint_wal_sequence == 100
    t = 1795300000000 + 1000 * 211 + 500  # between events 212 and 213
    r = restore(dest["url"], str(tmp_path / "r3"), namespace="agent-1", to_time_ms=t, endpoint_url=dest["endpoint"])
    assert r.target_sequence == 212 and events(tmp_path / "r3" / "wal") == full[:212]


def test_conflicting_local_file_is_never_pushed_over(tmp_path, dest):
    wal = make_wal(tmp_path / "wal")
    push(wal, dest["url"], namespace="n", endpoint_url=dest["endpoint"])
    other = make_wal(tmp_path / "other", salt=b"PAYLOAD")  # the same chunk names, other bytes
    rep = push(other, dest["url"], namespace="n", endpoint_url=dest["endpoint"])
    assert rep.exit_code == 7 and rep.conflicts and not rep.uploaded
    assert verify_archive(dest["url"], namespace="n", endpoint_url=dest["endpoint"])[2] == 0
    out = tmp_path / "r"
    restore(dest["url"], str(out), namespace="n", endpoint_url=dest["endpoint"])
    assert events(out / "wal") == events(wal)[:len(events(out / "wal"))]


def test_server_stopping_mid_push_then_resume_ends_consistent(tmp_path, s3_server, monkeypatch):
    from walctl.store import objstore

    wal = make_wal(tmp_path / "wal", n=600)
    url, ep = f"s3://{BUCKET}/{tmp_path.name}", s3_server["endpoint"]
    real_put = objstore.S3Store.put_file
    calls = []

    def put_then_stop(self, key, path, sha256, metadata=None):
        calls.append(key)
        if len(calls) == 4:  # the service goes away in the middle of the push
            s3_server["server"].stop()
        return real_put(self, key, path, sha256, metadata)

    monkeypatch.setattr(objstore.S3Store, "put_file", put_then_stop)
    with pytest.raises(WalctlError) as e:
        push(wal, url, namespace="n", jobs=1, endpoint_url=ep)
    assert e.value.exit_code == 6  # the manifest could not be written either: nothing claims more than is there
    monkeypatch.setattr(objstore.S3Store, "put_file", real_put)
    server = s3_server["module"].ThreadedMotoServer(ip_address="127.0.0.1", port=s3_server["port"], verbose=False)
    server.start()
    s3_server["server"] = server
    rep = push(wal, url, namespace="n", jobs=2, endpoint_url=ep)
    assert rep.exit_code == 0 and not rep.failed
    assert len(rep.uploaded) + len(rep.already_archived) == len([n for n in os.listdir(wal) if n.endswith(".bin")]) - 1
    assert any("rebuilt" in w for w in rep.warnings)  # the objects of the first run had no manifest
    assert verify_archive(url, namespace="n", endpoint_url=ep)[2] == 0
    out = tmp_path / "r"
    r = restore(url, str(out), namespace="n", endpoint_url=ep)
    assert events(out / "wal") == events(wal)[:r.target_sequence]


def _corrupt(dest, tmp_path, key, mutate):
    if dest["kind"] == "file":
        p = os.path.join(dest["url"][len("file://"):], *key.split("/"))
        data = open(p, "rb").read()
        with open(p, "wb") as f:
            f.write(mutate(data))
        return
    import boto3

    c = boto3.client("s3", endpoint_url=dest["endpoint"])
    full = f"{tmp_path.name}/{key}"
    data = c.get_object(Bucket=BUCKET, Key=full)["Body"].read()
    c.put_object(Bucket=BUCKET, Key=full, Body=mutate(data))


def flip(data: bytes) -> bytes:
    b = bytearray(data)
    b[len(b) // 2] ^= 0x10
    return bytes(b)


def pushed(tmp_path, dest, checkpoint_seqs=(50, 150)):
    """A WAL and its checkpoints pushed to namespace n: (the WAL directory, the manifest's entries)."""
    wal = make_wal(tmp_path / "wal")
    ck = make_checkpoints(tmp_path / "ck", checkpoint_seqs)
    push(wal, dest["url"], namespace="n", checkpoints=ck, endpoint_url=dest["endpoint"])
    return wal, ar.read_manifest(ar.open_store(dest["url"], dest["endpoint"]), "n").entries


def test_rotten_object_is_named_by_verify_and_refused_by_restore(tmp_path, dest):
    wal, man = pushed(tmp_path, dest)
    chunks = sorted((e for e in man.values() if e.kind == "chunks"), key=lambda e: e.first_sequence)
    victim = chunks[2]
    _corrupt(dest, tmp_path, f"n/chunks/{victim.name}", flip)
    _, findings, code = verify_archive(dest["url"], endpoint_url=dest["endpoint"])
    assert code == 3 and [f.file for f in findings] == [f"n/chunks/{victim.name}"]
    with pytest.raises(WalctlError) as e:
        restore(dest["url"], str(tmp_path / "r"), namespace="n", endpoint_url=dest["endpoint"])
    assert e.value.exit_code == 3 and f"--to {victim.first_sequence - 1}" in e.value.reason
    restore(dest["url"], str(tmp_path / "r2"), namespace="n", to_seq=victim.first_sequence - 1,
            endpoint_url=dest["endpoint"])
    assert events(tmp_path / "r2" / "wal") == events(wal)[:victim.first_sequence - 1]


def test_rotten_newest_checkpoint_restore_falls_back(tmp_path, dest):
    _, man = pushed(tmp_path, dest)
    newest = max((e for e in man.values() if e.kind == "checkpoints"), key=lambda e: e.wal_sequence)
    _corrupt(dest, tmp_path, f"n/checkpoints/{newest.name}", flip)
    _, findings, code = verify_archive(dest["url"], endpoint_url=dest["endpoint"])
    assert code == 3 and [f.file for f in findings] == [f"n/checkpoints/{newest.name}"]
    r = restore(dest["url"], str(tmp_path / "r"), namespace="n", to_seq=200, endpoint_url=dest["endpoint"])
    assert r.checkpoint_wal_sequence == 50 and len(r.fallbacks) == 1 and newest.name in r.fallbacks[0]
    assert os.listdir(tmp_path / "r" / "checkpoints") == [r.checkpoint]


def test_missing_and_stale_manifest_are_rebuilt_with_a_warning(tmp_path, dest):
    wal = make_wal(tmp_path / "wal")
    push(wal, dest["url"], namespace="n", endpoint_url=dest["endpoint"])
    store = ar.open_store(dest["url"], dest["endpoint"])
    full = ar.read_manifest(store, "n")
    doc = json.loads(store.get_bytes("n/MANIFEST.json"))
    doc["objects"] = doc["objects"][:2]  # stale: lists only two objects
    store.put_bytes("n/MANIFEST.json", json.dumps(doc).encode())
    stale = ar.read_manifest(store, "n")
    assert any("stale" in w for w in stale.warnings)
    key = lambda m: {n: (e.sha256, e.first_sequence, e.last_sequence) for n, e in m.entries.items()}  # noqa: E731
    assert key(stale) == key(full)
    store.delete("n/MANIFEST.json")
    gone = ar.read_manifest(store, "n")
    assert any("no MANIFEST.json" in w for w in gone.warnings) and key(gone) == key(full)
    assert verify_archive(dest["url"], endpoint_url=dest["endpoint"])[2] == 0
    rep = push(wal, dest["url"], namespace="n", endpoint_url=dest["endpoint"])  # writes it back
    assert rep.uploaded == () and store.get_bytes("n/MANIFEST.json") is not None
    assert ar.read_manifest(store, "n").warnings == ()


def test_manifest_listing_an_object_the_store_lacks_is_a_finding(tmp_path):
    url = "file://" + str(tmp_path / "a")
    wal = make_wal(tmp_path / "wal")
    push(wal, url, namespace="n")
    store = ar.open_store(url)
    victim = sorted(o.key for o in store.list("n/chunks/"))[1]
    store.delete(victim)
    _, findings, code = verify_archive(url)
    assert code == 4 and {f.cls for f in findings} == {"missing-object", "sequence-gap"}
    rep = push(wal, url, namespace="n")  # the next push puts it back
    assert rep.uploaded == (victim.rsplit("/", 1)[-1],) and verify_archive(url)[2] == 0


def test_prune_keeps_what_the_newest_checkpoints_need(tmp_path, dest):
    import time

    wal = make_wal(tmp_path / "wal")
    ck = make_checkpoints(tmp_path / "ck", [60, 200, 300])
    push(wal, dest["url"], namespace="n", checkpoints=ck, endpoint_url=dest["endpoint"])
    dry = prune(dest["url"], namespace="n", keep=2, max_age_s=0, endpoint_url=dest["endpoint"],
                   now=time.time() + 10)
    store = ar.open_store(dest["url"], dest["endpoint"])
    before = ar.read_manifest(store, "n").entries
    assert dry.horizon == 200 and not dry.applied
    doomed = set(dry.delete)
    assert all(before[n].kind == "checkpoints" and before[n].wal_sequence < 200 or
               before[n].kind == "chunks" and before[n].last_sequence <= 200 for n in doomed)
    assert any(before[n].kind == "checkpoints" for n in doomed) and len(doomed) > 1
    young = prune(dest["url"], namespace="n", keep=2, max_age_s=3600, endpoint_url=dest["endpoint"])
    assert young.delete == ()
    prune(dest["url"], namespace="n", keep=2, max_age_s=0, apply=True, endpoint_url=dest["endpoint"],
             now=time.time() + 10)
    after = ar.read_manifest(store, "n")
    assert set(after.entries) == set(before) - doomed and after.warnings == ()
    assert verify_archive(dest["url"], endpoint_url=dest["endpoint"])[2] == 0
    r = restore(dest["url"], str(tmp_path / "r"), namespace="n", endpoint_url=dest["endpoint"])
    assert r.checkpoint_wal_sequence == 300 and events(tmp_path / "r" / "wal")[0][0] <= 201


def test_delete_local_only_archived_chunks_below_the_hwm(tmp_path, cli):
    wal = make_wal(tmp_path / "wal")
    url = "file://" + str(tmp_path / "a")
    r = cli("archive", "push", wal, url, "--delete-local", "--to", "150")
    assert r.code == 0 and "would remove" in r.out
    names_before = sorted(n for n in os.listdir(wal) if n.endswith(".bin"))
    r = cli("archive", "push", wal, url, "--delete-local", "--to", "150", "--apply", "--json")
    doc = r.json()
    assert r.code == 0 and doc["deleted_local"]
    left = sorted(n for n in os.listdir(wal) if n.endswith(".bin"))
    assert left == [n for n in names_before if n not in doc["deleted_local"]]
    man = ar.read_manifest(ar.open_store(url), "wal").entries
    assert all(man[n].last_sequence <= 150 for n in doc["deleted_local"])
    lines = [json.loads(x) for x in open(os.path.join(wal, ".quarantine", "MANIFEST.jsonl"))]
    assert sorted(x["source"] for x in lines) == sorted(doc["deleted_local"])
    assert all(x["action"] == "archive-delete" and x["evidence"].startswith(url) for x in lines)


def test_storage_adapter_api(tmp_path, dest):
    a = StorageAdapter(dest["url"], dest["endpoint"])
    assert a.is_available() or dest["kind"] == "file"
    a.upload("agent-9", "wal-000001.bin", b"one")
    a.upload("agent-9", "wal-000000.bin", b"zero")
    assert a.list_chunks("agent-9") == ["wal-000000.bin", "wal-000001.bin"]
    assert a.download("agent-9", "wal-000001.bin") == b"one" and a.download("agent-9", "nope") is None
    assert "agent-9" in a.list_namespaces()
    with pytest.raises(WalctlError) as e:
        a.upload("agent-9", "wal-000001.bin", b"other")
    assert e.value.exit_code == 7


def test_cli_errors_are_one_line(cli, tmp_path):
    r = cli("archive", "list", "ftp://x/y")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    r = cli("archive", "push", tmp_path, "file://" + str(tmp_path / "a"))
    assert r.code in (2, 5) and "Traceback" not in r.err
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "x")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "x")
    r = cli("archive", "list", "s3://nobucket/p", "--endpoint-url", "http://127.0.0.1:9")
    assert r.code == 6 and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def test_push_through_the_describer_process_gives_the_same_archive(tmp_path, monkeypatch):
    """Large pushes scan and hash in a spawned process; it must judge exactly as the in-process path."""
    from walctl.ops.archive import push as archive_push

    wal = make_wal(tmp_path / "wal")
    c = sorted(n for n in os.listdir(wal) if n.endswith(".bin"))
    with open(os.path.join(wal, c[2]), "r+b") as f:  # a damaged sealed chunk must be held back either way
        f.seek(100)
        f.write(b"\xff")
    results = {}
    for name, threshold in (("inline", 1 << 60), ("spawned", 0)):
        monkeypatch.setattr(archive_push, "SPAWN_WORTH_BYTES", threshold)
        url = "file://" + str(tmp_path / name)
        rep = push(wal, url, namespace="n")
        man = ar.read_manifest(ar.open_store(url), "n").entries
        results[name] = (rep.exit_code, sorted(rep.uploaded), [f.file for f in rep.held_back],
                         {n: (e.sha256, e.first_sequence, e.last_sequence) for n, e in man.items()})
    assert results["inline"] == results["spawned"]
    assert results["inline"][0] == 3 and results["inline"][2] == [c[2]]


def test_segments_push_and_restore_to_a_point(tmp_path, dest):
    seg = tmp_path / "seg"
    with WalWriter(str(seg), format="segments", sync="none") as w:
        for i in range(25_000):  # three segments: two sealed, the last still open
            w.append_entry("memory_add", {"i": i}, timestamp=1795300000 + i)
    rep = push(str(seg), dest["url"], namespace="s", endpoint_url=dest["endpoint"])
    assert rep.exit_code == 0 and len(rep.uploaded) == 2
    r = restore(dest["url"], str(tmp_path / "r"), namespace="s", to_seq=12_345, endpoint_url=dest["endpoint"])
    assert (r.first_sequence, r.last_sequence, r.verdict) == (1, 12_345, "clean")
    got = [json.loads(x) for x in subprocess.run(
        [sys.executable, "-m", "walctl", "replay", str(tmp_path / "r" / "wal"), "--after", "12340"],
        capture_output=True).stdout.splitlines()]
    assert [(e["sequence"], e["data"]) for e in got] == [(s, {"i": s - 1}) for s in range(12_341, 12_346)]
    # byte for byte: the first restored segment is the archived (and original) one
    first = sorted(n for n in os.listdir(seg) if n.startswith("wal_"))[0]
    assert open(os.path.join(seg, first), "rb").read() == open(os.path.join(tmp_path, "r", "wal", first), "rb").read()


@pytest.mark.parametrize("objects", [[{"name": "wal-000000.bin", "kind": "chunks", "size": "big"}], "not a list",
                                     [{"name": "../x", "kind": "chunks", "size": 1, "sha256": "0" * 64,
                                       "uploaded_at": "t"}], [None]])
def test_a_manifest_that_is_not_one_is_rebuilt(tmp_path, objects):
    url = "file://" + str(tmp_path / "a")
    wal = make_wal(tmp_path / "wal")
    push(wal, url, namespace="n")
    store = ar.open_store(url)
    good = {n: e.sha256 for n, e in ar.read_manifest(store, "n").entries.items()}
    store.put_bytes("n/MANIFEST.json", json.dumps({"schema": ar.MANIFEST_SCHEMA, "objects": objects}).encode())
    man = ar.read_manifest(store, "n")
    assert {n: e.sha256 for n, e in man.entries.items()} == good and any("rebuilt" in w for w in man.warnings)


def test_push_takes_hashes_and_ranges_from_matching_seal_lines(tmp_path, dest, monkeypatch):
    import walctl.ops.archive.push as ap
    from walctl.format.ledger import fold
    from walctl.store.ledger import read_ledger

    wal = str(tmp_path / "wal")
    make_wal(wal)
    sealed = fold(read_ledger(wal).lines).sealed
    names = sorted(n for n in os.listdir(wal) if n.startswith("wal-"))
    assert sorted(sealed) == names[:-1] and len(sealed) >= 3
    touched = names[1]
    with open(os.path.join(wal, touched), "r+b") as f:  # same bytes, new mtime: the seal no longer vouches
        data = f.read()
        f.seek(0)
        f.write(data)
    described = []
    real = ap._describe
    monkeypatch.setattr(ap, "_describe", lambda path, kind: described.append(os.path.basename(path)) or real(path, kind))
    rep = push(wal, dest["url"], namespace="n", jobs=2, endpoint_url=dest["endpoint"])
    assert rep.exit_code == 0 and sorted(rep.uploaded) == names[:-1]
    assert described == [touched]  # only the file whose stat data changed was read again
    from walctl.store.objstore import open_store
    man = dict(ar.read_manifest(open_store(dest["url"], dest["endpoint"]), "n", 2).entries)
    for name, line in sealed.items():
        assert (man[name].sha256, man[name].first_sequence, man[name].last_sequence, man[name].size) == (
            line.get("sha256"), line.get("first_seq"), line.get("last_seq"), line.get("size"))
    assert verify_archive(dest["url"], namespace="n", endpoint_url=dest["endpoint"])[2] == 0


@pytest.mark.parametrize("after_close", ["as-sealed", "grew", "unsealed"])
def test_push_ships_the_last_chunk_when_the_ledger_seals_it_as_it_is(tmp_path, after_close):
    """A writer that sealed on close starts a new chunk when it reopens, so its last chunk is closed:
    push ships it (a lost disk then loses nothing the archive could hold). Grown after its seal, or never
    sealed, it stays the writer's: push leaves it for --follow."""
    wal = str(tmp_path / "wal")
    with WalWriter(wal, max_chunk_bytes=4000, sync="none", seal_on_close=after_close != "unsealed") as w:
        for i in range(120):
            w.append(i % 5, f"m{i}", b"x" * 60)
    names = sorted(n for n in os.listdir(wal) if n.endswith(".bin"))
    last = os.path.join(wal, names[-1])
    if after_close == "grew":
        with open(last, "ab") as f:
            f.write(b"\0" * 16)
    rep = push(wal, "file://" + str(tmp_path / "a"))
    shipped = names if after_close == "as-sealed" else names[:-1]
    assert sorted(rep.uploaded) == shipped and len(names) >= 3
    with open(tmp_path / "a" / "wal" / "MANIFEST.json") as f:
        objects = {o["name"]: o for o in json.load(f)["objects"]}
    assert sorted(objects) == shipped
    if after_close == "as-sealed":
        assert objects[names[-1]]["last_sequence"] == 120
