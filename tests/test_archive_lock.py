"""Issue #24, "One follower per archive namespace": `archive push --follow` holds `<ns>/LOCK.json` (a
conditional write: If-None-Match / If-Match on S3, O_EXCL and a winning rename on file://). A second
follower refuses at start (exit 6, naming the holder); a stale lock (its process gone from this host, or
no heartbeat for STALE_BEATS heartbeats) is taken over and said so; a follower whose lock was taken stops.
MANIFEST.json is replaced atomically, never absent. On file:// and on S3 (moto on 127.0.0.1)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from test_archive import dest, s3_server  # noqa: F401  (the archive fixtures: file:// and moto's S3)
from walctl.errors import EnvironmentProblem
from walctl.ops.archive.follow import Shipper
from walctl.ops.archive.lock import LOCK, STALE_BEATS, NamespaceLock
from walctl.ops.wal.write import WalWriter
from walctl.store.objstore import open_store

NS = "agent"
HOST = socket.gethostname()
GONE = (1 << 22) + 7  # above Linux's pid_max: no such process


def wal_with(path, n=30):
    with WalWriter(str(path), sync="none", max_chunk_bytes=4096) as w:
        for i in range(n):
            w.append(0, f"m{i}", b"event %d " % i * 20, 1795300000000 + i)
    return str(path)


def ship(wal, d, **kw):
    return Shipper(wal, d["url"], namespace=NS, endpoint_url=d["endpoint"], **kw)


def lock_doc(store):
    got = store.read_tagged(f"{NS}/{LOCK}")
    return None if got is None else json.loads(got[0])


def test_a_second_follower_refuses_naming_the_holder_and_changes_nothing(tmp_path, dest):
    wal = wal_with(tmp_path / "wal")
    first = ship(wal, dest)
    first.poll()
    store = open_store(dest["url"], dest["endpoint"])
    held = lock_doc(store)
    assert (held["holder"], held["pid"], held["host"]) == (f"{HOST} pid {os.getpid()}", os.getpid(), HOST)
    before = sorted((o.key, o.size) for o in store.list(f"{NS}/"))
    second = ship(wal, dest, lock_identity=(HOST, GONE))
    with pytest.raises(EnvironmentProblem) as e:
        second.poll()
    assert e.value.exit_code == 6 and e.value.kind == "locked"
    assert f"namespace {NS} is already followed by {HOST} pid {os.getpid()}; last heartbeat" in e.value.reason
    assert sorted((o.key, o.size) for o in store.list(f"{NS}/")) == before and lock_doc(store) == held
    first.close()
    assert lock_doc(store) is None  # released at close
    third = ship(wal, dest, lock_identity=(HOST, GONE))
    third.poll()
    assert lock_doc(store)["pid"] == GONE and not any("took over" in w for w in third.warnings)  # released: free
    third.close()


def test_a_lock_whose_process_is_gone_is_taken_over_and_said(tmp_path, dest):
    wal = wal_with(tmp_path / "wal")
    crashed = ship(wal, dest, lock_identity=(HOST, GONE))
    crashed.poll()  # ... and the process dies: its lock stays
    store = open_store(dest["url"], dest["endpoint"])
    assert lock_doc(store)["pid"] == GONE
    nxt = ship(wal, dest)
    nxt.poll()
    assert f"{NS}: took over the follower lock of {HOST} pid {GONE}: process {GONE} no longer runs on this host" \
        in nxt.warnings
    assert lock_doc(store)["pid"] == os.getpid()
    nxt.close()


def test_another_hosts_lock_is_stale_only_after_missed_heartbeats(tmp_path, dest):
    store = open_store(dest["url"], dest["endpoint"])
    now = [1_800_000_000.0]
    other = NamespaceLock(store, NS, 5, wall=lambda: now[0], host="elsewhere", pid=123)
    assert other.acquire() is None
    mine = NamespaceLock(store, NS, 5, wall=lambda: now[0])
    now[0] += STALE_BEATS * 5 - 1  # not stale yet: a live holder on a host we cannot ask
    with pytest.raises(EnvironmentProblem, match="already followed by elsewhere pid 123; last heartbeat 29 s ago"):
        mine.acquire()
    now[0] += 2
    said = mine.acquire()
    assert said == f"{NS}: took over the follower lock of elsewhere pid 123: no heartbeat for 31 s (stale after " \
                   f"{STALE_BEATS} x 5 s)"
    # the old holder wakes up: its next heartbeat finds the lock is not its own and it stops
    with pytest.raises(EnvironmentProblem, match=f"lost the follower lock \\(now held by {HOST} pid {os.getpid()}\\)"):
        other.beat(force=True)
    mine.beat(force=True)  # still ours
    mine.release()
    assert store.read_tagged(f"{NS}/{LOCK}") is None


def test_a_lock_that_does_not_parse_is_held_until_it_is_as_old_as_a_stale_one(tmp_path, dest):
    store = open_store(dest["url"], dest["endpoint"])
    store.put_bytes(f"{NS}/{LOCK}", b"")  # a creator caught between its create and its write
    now = time.time()
    mine = NamespaceLock(store, NS, 5, wall=lambda: now)
    with pytest.raises(EnvironmentProblem, match=f"already followed by an unreadable {LOCK}"):
        mine.acquire()
    later = NamespaceLock(store, NS, 5, wall=lambda: now + STALE_BEATS * 5 + 60)
    assert "took over the follower lock of an unreadable" in later.acquire()


def _walctl(*args):
    return subprocess.Popen([sys.executable, "-m", "walctl", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_two_followers_on_the_command_line(tmp_path, dest):
    wal = wal_with(tmp_path / "wal")
    endpoint = ["--endpoint-url", dest["endpoint"]] if dest["endpoint"] else []
    store = open_store(dest["url"], dest["endpoint"])
    first = _walctl("archive", "push", wal, dest["url"], "--namespace", NS, "--follow", "--interval", "0.2",
                    "--timeout", "60", *endpoint)
    try:
        deadline = time.monotonic() + 30
        while lock_doc(store) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock_doc(store)["pid"] == first.pid
        second = _walctl("archive", "push", wal, dest["url"], "--namespace", NS, "--follow", "--interval", "0.2",
                         *endpoint)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 6, err
        assert err.decode().startswith(f"walctl: error: {store.url}/{NS}/{LOCK}: namespace {NS} is already followed "
                                       f"by {HOST} pid {first.pid}") and len(err.decode().strip().splitlines()) == 1
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 0 and lock_doc(store) is None
    man = json.loads(store.get_bytes(f"{NS}/MANIFEST.json"))
    assert max(o["last_sequence"] for o in man["objects"]) == 30  # the one follower shipped everything


def test_the_manifest_is_replaced_atomically_never_absent(tmp_path):
    """Every file-system step of a manifest rewrite on file:// happens while MANIFEST.json exists (tmp,
    fsync, rename over it): a reader never finds it missing."""
    from walctl.ops.archive.objects import write_manifest

    url = "file://" + str(tmp_path / "a")
    store = open_store(url)
    write_manifest(store, NS, {})
    path = os.path.join(str(tmp_path / "a"), NS, "MANIFEST.json")
    seen = []

    class Watching:
        def __init__(self, fs):
            self.fs = fs

        def __getattr__(self, name):
            op = getattr(self.fs, name)

            def call(*a, **kw):
                seen.append((name, os.path.exists(path)))
                return op(*a, **kw)
            return call if callable(op) else op

    store.fs = Watching(store.fs)
    write_manifest(store, NS, {})
    assert [n for n, _ in seen][-3:] == ["close", "rename", "fsync_dir"] and all(present for _, present in seen)
    assert os.path.exists(path) and json.loads(open(path).read())["objects"] == []
