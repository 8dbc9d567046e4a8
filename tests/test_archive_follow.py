"""archive push --follow: live pieces of the active file, sealed objects replacing them, restore and
verify over pieces, bounded uploads, resume after a crash at each step, a writer and a shipper in other
processes killed at random moments (file:// and moto's S3 server on 127.0.0.1)."""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time

import pytest

from test_archive import BUCKET, dest, events, s3_server  # noqa: F401 - the archive fixtures: file:// and moto's S3
from walctl.errors import NotClean, Refused
from walctl.format.livepiece import Piece, parse_piece_name, piece_name
from walctl.ops.archive import objects as ar
from walctl.ops.archive import listing as al
from walctl.ops.archive.follow import Shipper, push_follow
from walctl.ops.archive.restore import restore
from walctl.ops.archive.verify import verify_archive
from walctl.ops.wal.write import WalWriter
from walctl.store.objstore import open_store

NS = "agent"


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


GONE_PIDS = iter(range((1 << 22) + 1, 1 << 30))  # above Linux's pid_max: processes that no longer run


def shipper(wal, d, clock, **kw):
    """A Shipper standing in for a process of its own (one follower per namespace: the lock names a process
    that is gone by the time the next stand-in starts, as after a crash)."""
    os.makedirs(wal, exist_ok=True)  # the writer has not started yet: the shipper waits for its first file
    kw.setdefault("lock_identity", (socket.gethostname(), next(GONE_PIDS)))
    return Shipper(str(wal), d["url"], namespace=NS, endpoint_url=d["endpoint"], clock=clock, **kw)


def append(w, lo, hi):
    """Appends events lo..hi-1 (sequences lo+1..hi) and flushes them: a group commit."""
    for i in range(lo, hi):
        w.append(i % 5, f"mem-{i % 7}", b"event %d " % i * (1 + i % 9), 1795300000000 + 10 * i)
    w.flush()


def shipped_once(tmp_path, n):
    """A file:// archive holding what one poll shipped of n events a writer wrote: (dest, wal dir, clock)."""
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal, clock = tmp_path / "wal", Clock()
    sh = shipper(wal, d, clock)
    with WalWriter(str(wal), sync="none") as w:
        append(w, 0, n)
        sh.poll()
    sh.close()
    return d, wal, clock


def polls(sh, clock, n, step):
    """n polls of a shipper, the clock moving `step` seconds after each."""
    for _ in range(n):
        sh.poll()
        clock.t += step


def keys(d, kind):
    store = open_store(d["url"], d["endpoint"])
    return sorted(o.key.rsplit("/", 1)[-1] for o in store.list(f"{NS}/{kind}/"))


class Died(Exception):
    """The shipper's process ended at this step (raised by CrashingStore)."""


class CrashingStore:
    """The archive as a store that fails the shipper at one step of its work: once `crash_at(op, part)` is
    set, the first `op` (put_bytes, delete, ...) on a key containing `part` raises Died before it acts,
    as a process killed there leaves the archive. Everything else reaches the real store."""

    def __init__(self, d):
        self.store, self.at = open_store(d["url"], d["endpoint"]), None

    def crash_at(self, op, part):
        self.at = (op, part)

    def __getattr__(self, name):
        real = getattr(self.store, name)
        if self.at is None or name != self.at[0]:
            return real

        def op(key, *a, **kw):
            if self.at is not None and self.at[1] in key:
                self.at = None
                raise Died(f"{name} {key}")
            return real(key, *a, **kw)
        return op


def manifest(d):
    return json.loads(open_store(d["url"], d["endpoint"]).get_bytes(f"{NS}/MANIFEST.json"))


def chunk_bytes(wal, name):
    with open(os.path.join(wal, name), "rb") as f:
        return f.read()


# ---- the story: pieces as the chunk grows, a seal replacing them, a byte-exact restore ---------------

def test_pieces_as_the_chunk_grows_then_the_sealed_object_replaces_them(tmp_path, dest):
    wal = tmp_path / "wal"
    clock = Clock()
    shipped = []
    sh = shipper(wal, dest, clock, interval=1.0, on_shipped=shipped.append)
    with WalWriter(str(wal), sync="none", max_chunk_bytes=4000) as w:
        append(w, 0, 10)
        assert sh.poll() == 10  # the first poll uploads (nothing uploaded before: the interval has passed)
        (p1,) = keys(dest, "live")
        assert parse_piece_name(p1) == Piece("wal-000000.bin", 0, len(chunk_bytes(wal, "wal-000000.bin")), 1, 10)
        append(w, 10, 15)
        clock.t += 0.5
        assert sh.poll() == 10 and len(keys(dest, "live")) == 1  # within the interval: buffered, not uploaded
        clock.t += 0.5
        assert sh.poll() == 15
        p2 = parse_piece_name(keys(dest, "live")[1])
        assert (p2.start, p2.first_sequence, p2.last_sequence) == (parse_piece_name(p1).end, 11, 15)
        assert p2.end == len(chunk_bytes(wal, "wal-000000.bin"))
        append(w, 15, 60)  # rolls to wal-000001.bin
        assert len([n for n in os.listdir(wal) if n.endswith(".bin")]) >= 2
        clock.t += 1
        sh.poll()
    sh.poll()
    sh.close()
    first = chunk_bytes(wal, "wal-000000.bin")
    last_of_first = ar.describe(str(wal / "wal-000000.bin"), ar.CHUNKS)[0].last_sequence
    assert keys(dest, "chunks") == ["wal-000000.bin"]
    assert not [k for k in keys(dest, "live") if k.startswith("wal-000000.bin")]  # deleted after the seal
    rep = sh.report("stopped")
    assert len(rep.pieces_deleted) >= 2 and all(n.startswith("wal-000000.bin") for n in rep.pieces_deleted)
    assert rep.sealed_uploaded == ("wal-000000.bin",) and rep.shipped_through == 60
    m = manifest(dest)
    kinds = {(o["kind"], o["name"].split(".piece")[0][:14]) for o in m["objects"]}
    assert ("chunks", "wal-000000.bin") in kinds and ("live", "wal-000000.bin") not in kinds
    live = [o for o in m["objects"] if o["kind"] == "live"]
    assert live and all(o["file"] == "wal-000001.bin" and o["end"] - o["start"] == o["size"] for o in live)
    assert shipped == sorted(shipped) and shipped[-1] == 60 and last_of_first in shipped
    # restore on a fresh directory: byte for byte, the active chunk reassembled from its pieces
    out = tmp_path / "restored"
    r = restore(dest["url"], str(out), namespace=NS, endpoint_url=dest["endpoint"])
    assert (r.first_sequence, r.last_sequence, r.verdict) == (1, 60, "clean")
    for name in ("wal-000000.bin", "wal-000001.bin"):
        assert chunk_bytes(out / "wal", name) == chunk_bytes(wal, name)
    assert chunk_bytes(out / "wal", "wal-000000.bin") == first
    assert events(out / "wal") == events(wal)
    summaries, findings, code = verify_archive(dest["url"], endpoint_url=dest["endpoint"])
    assert (code, findings) == (0, []) and summaries[0]["last_sequence"] == 60


def test_restore_to_a_sequence_inside_a_piece_cuts_at_that_record(tmp_path):
    d, wal, clock = shipped_once(tmp_path, 30)
    out = tmp_path / "r"
    r = restore(d["url"], str(out), namespace=NS, to_seq=17)
    assert (r.last_sequence, r.events, r.verdict) == (17, 17, "clean")
    local = chunk_bytes(wal, "wal-000000.bin")
    got = chunk_bytes(out / "wal", "wal-000000.bin")
    assert local.startswith(got) and len(got) < len(local)
    assert [e[0] for e in events(out / "wal")] == list(range(1, 18))
    assert events(out / "wal") == events(wal)[:17]


def test_a_torn_tail_is_never_shipped(tmp_path):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    with WalWriter(str(wal), sync="always") as w:
        append(w, 0, 12)
    intact = len(chunk_bytes(wal, "wal-000000.bin"))
    with WalWriter(str(wal / ".." / "donor"), sync="none") as w:
        append(w, 100, 101)
    torn = chunk_bytes(tmp_path / "donor", "wal-000000.bin")[16:16 + 30]  # a record cut in its payload
    with open(wal / "wal-000000.bin", "ab") as f:
        f.write(torn)
    clock = Clock()
    sh = shipper(wal, d, clock)
    polls(sh, clock, 3, 2)
    sh.close()
    (p,) = keys(d, "live")
    assert parse_piece_name(p) == Piece("wal-000000.bin", 0, intact, 1, 12)
    out = tmp_path / "r"
    r = restore(d["url"], str(out), namespace=NS)
    assert (r.last_sequence, r.verdict) == (12, "clean")
    assert chunk_bytes(out / "wal", "wal-000000.bin") == chunk_bytes(wal, "wal-000000.bin")[:intact]


def test_mid_log_damage_stops_the_shipper_with_exit_3_keeping_what_came_before(tmp_path):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    with WalWriter(str(wal), sync="always") as w:
        append(w, 0, 20)
    raw = bytearray(chunk_bytes(wal, "wal-000000.bin"))
    raw[200] ^= 0xFF  # inside an early record, with intact records after it
    (wal / "wal-000000.bin").write_bytes(bytes(raw))
    rep = push_follow(str(wal), d["url"], namespace=NS, interval=0.01, poll_interval=0.01, timeout=5,
                      install_signals=False)
    assert rep.ended_by == "damage" and rep.exit_code == 3 and "mid-log" in rep.problem
    (p,) = keys(d, "live")
    piece = parse_piece_name(p)
    assert piece.start == 0 and piece.end <= 200 and piece.first_sequence == 1
    assert open_store(d["url"]).get_bytes(f"{NS}/live/{p}") == bytes(raw[:piece.end])


# ---- bounded cost ------------------------------------------------------------------------------

def test_a_busy_writer_uploads_at_most_one_piece_per_interval_and_a_quiet_one_nothing(tmp_path):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    clock = Clock()
    sh = shipper(wal, d, clock, interval=1.0)
    with WalWriter(str(wal), sync="none", max_chunk_bytes=1 << 20) as w:
        for i in range(50):  # 5 s of a writer appending every 0.1 s, polled as often
            append(w, i * 4, i * 4 + 4)
            sh.poll()
            clock.t += 0.1
        assert sh.pieces_uploaded == 5  # at 0.0, 1.0, ... 4.0 (one per interval), not 50
        n = sh.pieces_uploaded
        for _ in range(30):  # quiet for 3 s
            sh.poll()
            clock.t += 0.1
        assert sh.pieces_uploaded == n + 1  # only what was buffered when it went quiet
        polls(sh, clock, 30, 0.1)
        assert sh.pieces_uploaded == n + 1 and sh.shipped_through == 200
    sizes = [parse_piece_name(k).size for k in keys(d, "live")]
    assert sum(sizes) == len(chunk_bytes(wal, "wal-000000.bin"))


def test_a_piece_under_the_size_floor_waits_for_max_wait(tmp_path):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    clock = Clock()
    sh = shipper(wal, d, clock, interval=1.0, min_piece_bytes=1 << 20, max_wait=3.0)
    with WalWriter(str(wal), sync="none") as w:
        append(w, 0, 3)
        polls(sh, clock, 29, 0.1)
        assert sh.pieces_uploaded == 0 and sh.shipped_through is None
        clock.t += 0.2
        sh.poll()
        assert sh.pieces_uploaded == 1 and sh.shipped_through == 3


# ---- crashes and resumption -----------------------------------------------------------------

def test_resume_after_a_crash_before_the_manifest_adopts_the_pieces_and_resends_nothing(tmp_path, dest):
    wal = tmp_path / "wal"
    clock = Clock()
    sh = shipper(wal, dest, clock, manifest_interval=1e9)
    with WalWriter(str(wal), sync="none") as w:
        for i in range(3):
            append(w, i * 10, i * 10 + 10)
            sh.poll()
            clock.t += 1
        assert sh.pieces_uploaded == 3
        # the shipper dies here: its pieces are uploaded, the manifest was never written
        assert open_store(dest["url"], dest["endpoint"]).get_bytes(f"{NS}/MANIFEST.json") is None
        append(w, 30, 35)
        again = shipper(wal, dest, clock)
        again.poll()
        assert again.pieces_uploaded == 1  # the new records only
        assert any("rebuilt" in x for x in again.warnings)
        again.close()
    got = [parse_piece_name(k) for k in keys(dest, "live")]
    assert [(p.first_sequence, p.last_sequence) for p in got] == [(1, 10), (11, 20), (21, 30), (31, 35)]
    assert all(a.end == b.start for a, b in zip(got, got[1:]))
    out = tmp_path / "r"
    restore(dest["url"], str(out), namespace=NS, endpoint_url=dest["endpoint"])
    assert chunk_bytes(out / "wal", "wal-000000.bin") == chunk_bytes(wal, "wal-000000.bin")


def test_resume_after_a_crash_between_the_seal_and_the_deletes_deletes_the_stale_pieces(tmp_path):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    clock = Clock()
    store = CrashingStore(d)
    sh = shipper(wal, d, clock, store=store)
    with WalWriter(str(wal), sync="none", max_chunk_bytes=3000) as w:
        append(w, 0, 10)
        sh.poll()
        clock.t += 1
        append(w, 10, 40)
    stale = [k for k in keys(d, "live") if k.startswith("wal-000000.bin")]
    store.crash_at("delete", f"{NS}/live/")  # dies after the manifest, before the first delete
    with pytest.raises(Died):
        sh.poll()
    assert keys(d, "chunks") == ["wal-000000.bin"] and set(stale) <= set(keys(d, "live"))
    man = ar.read_manifest(open_store(d["url"]), NS)
    assert set(man.stale_pieces) == set(stale) and not set(stale) & set(man.entries)
    again = shipper(wal, d, clock)
    again.poll()
    again.close()
    assert not [k for k in keys(d, "live") if k.startswith("wal-000000.bin")]
    assert set(stale) <= set(again.report("stopped").pieces_deleted)
    assert again.pieces_uploaded == 0 or all(not n.startswith("wal-000000") for n in keys(d, "live"))


def test_a_local_log_rewritten_under_the_archive_is_refused(tmp_path):
    d, wal, clock = shipped_once(tmp_path, 10)
    raw = bytearray(chunk_bytes(wal, "wal-000000.bin"))
    raw[-1] ^= 1
    (wal / "wal-000000.bin").write_bytes(bytes(raw))
    with pytest.raises(Refused) as e:
        shipper(wal, d, clock).poll()
    assert e.value.exit_code == 7 and "differ from the archived piece" in e.value.reason
    assert len(keys(d, "live")) == 1


# ---- verify and names -------------------------------------------------------------------------

def test_verify_finds_a_missing_piece_and_a_rotten_one(tmp_path):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    clock = Clock()
    sh = shipper(wal, d, clock)
    with WalWriter(str(wal), sync="none") as w:
        for i in range(3):
            append(w, i * 5, i * 5 + 5)
            sh.poll()
            clock.t += 1
    sh.close()
    names = keys(d, "live")
    root = tmp_path / "a" / NS / "live"
    mid = parse_piece_name(names[1])
    os.rename(root / names[1], tmp_path / "aside")
    _, findings, code = verify_archive(d["url"])
    assert code == 4
    by_cls = {f.cls: f for f in findings}
    assert by_cls["missing-object"].file.endswith(names[1])
    assert by_cls["piece-hole"].sequence_range == (11, 15) and by_cls["piece-hole"].offset == mid.end
    # restore stops where the pieces stop being contiguous: sequences 1..5 only, byte for byte
    out = tmp_path / "r"
    r = restore(d["url"], str(out), namespace=NS)
    assert r.last_sequence == 5 and chunk_bytes(out / "wal", "wal-000000.bin") == chunk_bytes(wal, "wal-000000.bin")[
        :mid.start]
    os.rename(tmp_path / "aside", root / names[1])
    raw = bytearray((root / names[0]).read_bytes())
    raw[40] ^= 4
    (root / names[0]).write_bytes(bytes(raw))
    _, findings, code = verify_archive(d["url"])
    assert code == 3 and [f.cls for f in findings] == ["archived-sha256-mismatch"]
    assert findings[0].file == f"{NS}/live/{names[0]}"
    with pytest.raises(NotClean) as e:
        restore(d["url"], str(tmp_path / "r2"), namespace=NS)
    assert e.value.exit_code == 3 and names[0] in e.value.reason


@pytest.mark.parametrize("name", [
    "../wal-000000.bin.000000000000-000000000064.00000000000000000001-00000000000000000001.piece",
    "wal-0.bin.000000000000-000000000064.00000000000000000001-00000000000000000001.piece",
    "wal-000000.bin.000000000064-000000000064.00000000000000000001-00000000000000000001.piece",  # empty
    "wal-000000.bin.000000000000-000000000064.00000000000000000002-00000000000000000001.piece",  # backwards
    "wal-000000.bin.000000000000-000000000064.00000000000000000000-00000000000000000001.piece",  # seq 0
    "wal-000000.bin.0000000000-000000000064.00000000000000000001-00000000000000000001.piece",  # widths
    "wal-000000.bin.000000000000-000000000064.00000000000000000001-00000000000000000001.piece.tmp",
    "x.000000000000-000000000064.00000000000000000001-00000000000000000001.piece", None, 7,
])
def test_untrusted_live_names_are_refused(name):
    assert parse_piece_name(name) is None and not ar.valid_object(ar.LIVE, name)


def test_piece_names_round_trip_and_sort_by_file_then_offset():
    ps = [Piece("wal-000001.bin", 0, 100, 5, 9), Piece("wal-000000.bin", 16000, 17000, 3, 4),
          Piece("wal-000000.bin", 0, 16000, 1, 2), Piece("wal_00000002.log", 0, 9, 10, 10)]
    assert [parse_piece_name(piece_name(p)) for p in ps] == ps
    assert sorted(piece_name(p) for p in ps) == [piece_name(p) for p in sorted(ps)]


def test_a_manifest_entry_whose_size_disagrees_with_its_piece_name_is_rebuilt(tmp_path):
    d, _, _ = shipped_once(tmp_path, 5)
    path = tmp_path / "a" / NS / "MANIFEST.json"
    doc = json.loads(path.read_text())
    doc["objects"][0]["size"] += 1
    path.write_text(json.dumps(doc))
    man = ar.read_manifest(open_store(d["url"]), NS)
    assert any("does not parse" in w for w in man.warnings)
    (e,) = man.entries.values()
    assert e.size == parse_piece_name(e.name).size and (e.first_sequence, e.last_sequence) == (1, 5)


# ---- ADR-003 segments ----------------------------------------------------------------------------

def test_segments_ship_as_pieces_and_restore_byte_exact(tmp_path):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "seg"
    clock = Clock()
    sh = shipper(wal, d, clock)
    with WalWriter(str(wal), sync="none", format="segments") as w:
        for i in range(3):
            for j in range(5):
                w.append_entry("put", {"k": i * 5 + j}, timestamp=1795300000 + i)
            w.flush()
            sh.poll()
            clock.t += 1
    sh.close()
    got = [parse_piece_name(k) for k in keys(d, "live")]
    assert [(p.file, p.first_sequence, p.last_sequence) for p in got] == [
        ("wal_00000001.log", 1, 5), ("wal_00000001.log", 6, 10), ("wal_00000001.log", 11, 15)]
    out = tmp_path / "r"
    r = restore(d["url"], str(out), namespace=NS, to_seq=12)
    assert (r.last_sequence, r.verdict) == (12, "clean")
    local = chunk_bytes(wal, "wal_00000001.log")
    assert local.startswith(chunk_bytes(out / "wal", "wal_00000001.log"))


# ---- the command line, and a writer and a shipper in other processes killed at random moments -------

WRITER = r"""
import sys, time
from walctl.ops.wal.write import WalWriter
d, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with WalWriter(d, sync="batch", batch_ms=5, max_chunk_bytes=6000) as w:
    for i in range(start, start + n):
        w.append(i % 5, "mem-%d" % (i % 7), b"event %d " % i * (1 + i % 9), 1795300000000 + 10 * i)
        time.sleep(0.002)
"""


def _walctl(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "walctl", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kw)


def _until(cond, what, *procs, timeout=120.0):
    """Waits for a condition (never for a guessed delay): fails naming it when a process it needs ended or
    the (generous) deadline passed."""
    deadline = time.monotonic() + timeout
    while not cond():
        for p in procs:
            if p.poll() is not None:  # its stderr says why (a shipper's exit 7 once went unexplained)
                err = p.stderr.read().decode("utf-8", "replace")[-2000:] if p.stderr else ""
                raise AssertionError(f"waiting for {what}: {p.args[:3]} ended with {p.returncode}: {err}")
        assert time.monotonic() < deadline, f"still waiting for {what} after {timeout:.0f} s"
        time.sleep(0.02)


def _wal_files(wal):
    return sorted(n for n in os.listdir(wal) if n.endswith(".bin"))


def _archived_keys(store):
    return {o.key for o in store.list(f"{NS}/")} - {f"{NS}/MANIFEST.json", f"{NS}/LOCK.json"}


def _holds_lock(store, pid):
    raw = store.get_bytes(f"{NS}/LOCK.json")
    try:
        return raw is not None and json.loads(raw)["pid"] == pid
    except ValueError:
        return False  # being written


def _archived_through(d):
    """The last sequence the archive holds (its manifest and the objects it does not list yet)."""
    man = ar.read_manifest(open_store(d["url"], d["endpoint"]), NS)
    return max((e.last_sequence for e in man.entries.values() if e.last_sequence is not None), default=None)


def _kill_story(tmp_path, d, rounds, seed):
    """Each round: a writer and a shipper run; once both are under way (the writer has rolled a chunk, the
    shipper holds the namespace lock and has uploaded something), one or both are killed (-9) after a
    seeded delay, then the writer. Every wait is for a condition, so a loaded machine only makes it slower.
    A last shipper catches up (the archive holds the last local sequence) and is stopped with SIGTERM."""
    rng = random.Random(seed)
    wal = tmp_path / "wal"
    wal.mkdir()
    store = open_store(d["url"], d["endpoint"])
    endpoint = ["--endpoint-url", d["endpoint"]] if d["endpoint"] else []
    next_i = 0
    for _ in range(rounds):
        files, before = len(_wal_files(wal)), _archived_keys(store)
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(wal), str(next_i), "100000"])
        ship = _walctl("archive", "push", str(wal), d["url"], "--namespace", NS, "--follow", "--interval", "0.2",
                       *endpoint)
        # A kill inside the shipper's lock write (O_EXCL, then the bytes) leaves a LOCK.json that does not
        # parse, held (by design) until it is as old as a stale lock (30 s): not a moment this story kills at.
        _until(lambda: len(_wal_files(wal)) >= files + 2 and _holds_lock(store, ship.pid)
               and _archived_keys(store) - before, "the writer to roll and the shipper to upload", writer, ship)
        time.sleep(rng.uniform(0.0, 0.5))  # where in their work the kill lands: any moment must do
        who = rng.choice(["writer", "shipper", "both"])
        if who in ("writer", "both"):
            writer.kill()
        if who in ("shipper", "both"):
            ship.kill()
        time.sleep(rng.uniform(0.0, 0.3))
        writer.kill()
        writer.wait()
        if ship.poll() is None:
            ship.send_signal(signal.SIGTERM)
        ship.communicate(timeout=120)
        next_i = 100000 * 10  # any payloads; sequences come from the directory
    local = events(wal)
    assert local, "the writers wrote nothing"
    # a last shipper catches up with what the writers left; stopped once the archive holds it all
    fin = _walctl("archive", "push", str(wal), d["url"], "--namespace", NS, "--follow", "--interval", "0.1",
                  "--json", *endpoint)
    # (holding its lock, it has its SIGTERM handler: the archive may hold it all before it starts)
    _until(lambda: _holds_lock(store, fin.pid) and _archived_through(d) == local[-1][0],
           "the last shipper to catch up", fin)
    fin.send_signal(signal.SIGTERM)
    out, err = fin.communicate(timeout=120)
    assert fin.returncode == 0, err
    rep = json.loads(out)
    assert rep["ended_by"] == "signal" and rep["shipped_through"] == local[-1][0]  # nothing skipped
    restored = tmp_path / "restored"
    r = restore(d["url"], str(restored), namespace=NS, endpoint_url=d["endpoint"])
    assert r.verdict == "clean" and r.last_sequence == rep["shipped_through"]
    assert events(restored / "wal") == local  # every event, byte for byte, in order
    names = sorted(n for n in os.listdir(restored / "wal") if n.endswith(".bin"))
    for n in names:
        here = chunk_bytes(wal, n)
        assert chunk_bytes(restored / "wal", n) == here[:len(chunk_bytes(restored / "wal", n))]
    _, findings, code = verify_archive(d["url"], endpoint_url=d["endpoint"])
    assert code == 0, findings


def test_writer_and_shipper_killed_at_random_moments_file(tmp_path):
    _kill_story(tmp_path, {"url": "file://" + str(tmp_path / "a"), "endpoint": None}, rounds=1, seed=18)


def test_sigterm_stops_the_shipper_cleanly_with_its_report(tmp_path, dest):
    wal = tmp_path / "wal"
    with WalWriter(str(wal), sync="none", max_chunk_bytes=4000) as w:
        append(w, 0, 80)
    ship = _walctl("archive", "push", str(wal), dest["url"], "--namespace", NS, "--follow", "--json",
                   *(["--endpoint-url", dest["endpoint"]] if dest["endpoint"] else []))
    deadline = time.time() + 30
    store = open_store(dest["url"], dest["endpoint"])
    while time.time() < deadline and not list(store.list(f"{NS}/live/")):
        time.sleep(0.1)
    ship.send_signal(signal.SIGTERM)
    out, err = ship.communicate(timeout=30)
    assert ship.returncode == 0, err
    rep = json.loads(out)
    assert rep["schema"] == "walctl.archive-follow/1" and rep["ended_by"] == "signal" and rep["shipped_through"] == 80
    assert manifest(dest)["objects"] and rep["exit_code"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_writer_and_shipper_killed_at_random_moments_long(tmp_path, dest, seed):
    _kill_story(tmp_path, dest, rounds=4, seed=seed)


# ---- large files: multipart, each part checked -------------------------------------------------

def test_a_file_over_the_threshold_goes_up_in_parts_and_is_verified(tmp_path, s3_server, monkeypatch):  # noqa: F811
    from walctl.errors import EnvironmentProblem
    from walctl.ops.archive.objects import Entry, verify_upload
    from walctl.store.objstore import S3Store

    st = S3Store(BUCKET, tmp_path.name, s3_server["endpoint"], multipart_threshold=1 << 20, part_bytes=5 << 20)
    data = random.Random(5).randbytes((10 << 20) + 4321)
    path = tmp_path / "big.ckpt"
    path.write_bytes(data)
    import hashlib

    sha = hashlib.sha256(data).hexdigest()
    info = st.put_file("ns/checkpoints/big.ckpt", str(path), sha)
    head = st.client.head_object(Bucket=BUCKET, Key=f"{tmp_path.name}/ns/checkpoints/big.ckpt")
    assert head["ETag"].strip('"').endswith("-3")  # three parts: 5 MiB, 5 MiB, the rest
    assert info.size == len(data) and info.sha256 == sha
    assert verify_upload(st, "ns/checkpoints/big.ckpt", Entry("big.ckpt", "checkpoints", len(data), sha, None, None,
                                                               ""), info) is None
    assert st.get_bytes("ns/checkpoints/big.ckpt") == data
    # a part that fails: the upload is aborted, nothing is left (no object, no orphan parts)
    real = st.client.upload_part
    calls = []

    def flaky(**kw):
        calls.append(kw["PartNumber"])
        if kw["PartNumber"] == 2:
            raise st._errors[1]({"Error": {"Code": "BadDigest", "Message": "checksum"}}, "UploadPart")
        return real(**kw)

    monkeypatch.setattr(st.client, "upload_part", flaky)
    with pytest.raises(EnvironmentProblem) as e:
        st.put_file("ns/checkpoints/other.ckpt", str(path), sha)
    assert "BadDigest" in e.value.reason and calls == [1, 2]
    assert st.head("ns/checkpoints/other.ckpt") is None
    assert not st.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads")


def test_list_reports_the_lag_behind_the_local_log_and_the_archive_age(tmp_path):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    sh = shipper(wal, d, Clock())
    with WalWriter(str(wal), sync="none") as w:
        append(w, 0, 10)
        sh.poll()
        append(w, 10, 15)  # written, not shipped yet
    s = al.summary(ar.read_manifest(open_store(d["url"]), NS))
    assert (s["live_pieces"], s["last_sequence"]) == (1, 10)
    lag = al.lag(s, str(wal), now_ms=0)
    assert (lag["sequences"], lag["local_sequence"], lag["archived_sequence"]) == (5, 15, 10)
    assert lag["seconds"] == pytest.approx(0.05)  # events are stamped 10 ms apart
    old = al.lag(s, None, now_ms=1795300000000 + 90 + 2500)
    assert old["seconds"] == pytest.approx(2.5) and old["age_of"] == "newest archived record"
    sh.poll()
    sh.close()
    caught_up = al.lag(al.summary(ar.read_manifest(open_store(d["url"]), NS)), str(wal), now_ms=0)
    assert (caught_up["sequences"], caught_up["seconds"]) == (0, 0.0)


# ---- a writer that shuts down without rolling: its ledger seal closes the chunk -----------------

def _no_pieces_of(d, file):
    return not [k for k in keys(d, "live") if k.startswith(file)]


def test_a_writer_that_closes_without_rolling_is_sealed_from_its_ledger_line(tmp_path, dest):
    wal = tmp_path / "wal"
    clock = Clock()
    sh = shipper(wal, dest, clock, interval=1.0)
    with WalWriter(str(wal), sync="none", seal_on_close=True) as w:
        append(w, 0, 20)
        sh.poll()
        clock.t += 1
        append(w, 20, 25)
        sh.poll()
        assert sh.pieces_uploaded == 2 and keys(dest, "chunks") == [] and sh.seals.reads == 0  # no ledger yet
    for _ in range(3):  # the writer has shut down: its last chunk is sealed in the ledger, nothing rolls
        clock.t += 1
        sh.poll()
    chunk = chunk_bytes(wal, "wal-000000.bin")
    assert keys(dest, "chunks") == ["wal-000000.bin"] and _no_pieces_of(dest, "wal-000000.bin")
    rep = sh.report("stopped")
    assert rep.sealed_uploaded == ("wal-000000.bin",) and len(rep.pieces_deleted) == 2
    assert rep.shipped_through == 25 and rep.pieces_uploaded == 2 and sh.seals.reads == 1  # read once: size unchanged
    m = manifest(dest)
    assert [(o["kind"], o["name"], o["size"], o["last_sequence"]) for o in m["objects"]] == \
        [("chunks", "wal-000000.bin", len(chunk), 25)]
    assert open_store(dest["url"], dest["endpoint"]).get_bytes(f"{NS}/chunks/wal-000000.bin") == chunk
    # the next writer starts a new chunk (a sealed one is never appended to); the roll does not close
    # wal-000000.bin a second time
    with WalWriter(str(wal), sync="none") as w:
        append(w, 25, 30)
    for _ in range(3):
        clock.t += 1
        sh.poll()
    sh.close()
    rep = sh.report("stopped")
    assert rep.sealed_uploaded == ("wal-000000.bin",) and rep.shipped_through == 30
    assert len(rep.pieces_deleted) == 2 and keys(dest, "chunks") == ["wal-000000.bin"]
    assert [parse_piece_name(k) for k in keys(dest, "live")] == \
        [Piece("wal-000001.bin", 0, len(chunk_bytes(wal, "wal-000001.bin")), 26, 30)]
    out = tmp_path / "r"
    r = restore(dest["url"], str(out), namespace=NS, endpoint_url=dest["endpoint"])
    assert (r.first_sequence, r.last_sequence, r.verdict) == (1, 30, "clean")
    for name in ("wal-000000.bin", "wal-000001.bin"):
        assert chunk_bytes(out / "wal", name) == chunk_bytes(wal, name)
    assert events(out / "wal") == events(wal)
    _, findings, code = verify_archive(dest["url"], endpoint_url=dest["endpoint"])
    assert (code, findings) == (0, [])


def _forge_seal(wal, name, **over):
    """Appends a seal line for `name` as the writer would, with `over` replacing its fields."""
    from walctl.format import ledger as L
    from walctl.store.fs import DEFAULT_FS
    from walctl.store.ledger import append_lines, sha256_file

    sha, size = sha256_file(str(wal / name))
    fields = dict(file=name, size=size, records=15, first_seq=1, last_seq=15, sha256=sha,
                  stat={"ino": 0, "mtime_ns": 0})
    fields.update(over)
    append_lines(str(wal), [L.encode_line(L.SEAL, "2026-01-01T00:00:00.000Z", **fields)], DEFAULT_FS.beneath(str(wal)))
    return fields


@pytest.mark.parametrize("damage", ["grew-after-the-seal", "other-bytes", "cut-below-the-seal"])
def test_a_seal_that_does_not_match_what_was_consumed_does_not_close_the_chunk(tmp_path, damage):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    with WalWriter(str(wal), sync="always") as w:
        append(w, 0, 10)
        at_10 = len(chunk_bytes(wal, "wal-000000.bin"))
        append(w, 10, 15)
    full = chunk_bytes(wal, "wal-000000.bin")
    want = {"grew-after-the-seal": (at_10, "grew after its seal"), "other-bytes": (len(full), "hash to"),
            "cut-below-the-seal": (at_10, None)}[damage]
    if damage == "grew-after-the-seal":  # the seal of the first 10 records; 5 more came after it
        seal = _forge_seal(wal, "wal-000000.bin", size=at_10, records=10, last_seq=10, sha256="ab" * 32)
    elif damage == "other-bytes":  # the right size and sequences, another SHA-256: the bytes were changed
        seal = _forge_seal(wal, "wal-000000.bin", sha256="cd" * 32)
    else:  # the seal of all 15 records, then the file lost its last 5 (a cut nobody recorded)
        seal = _forge_seal(wal, "wal-000000.bin")
        with open(wal / "wal-000000.bin", "r+b") as f:
            f.truncate(at_10)
    clock = Clock()
    sh = shipper(wal, d, clock)
    polls(sh, clock, 4, 1)
    sh.close()
    here = chunk_bytes(wal, "wal-000000.bin")
    assert keys(d, "chunks") == [] and sh.report("stopped").sealed_uploaded == ()  # not closed by the seal
    pieces = [parse_piece_name(k) for k in keys(d, "live")]
    assert (pieces[0].start, pieces[-1].end, pieces[-1].last_sequence) == (0, len(here), 15 if len(here) > at_10
                                                                            else 10)
    assert seal["size"] != len(here) or seal["sha256"] != ar.hashlib.sha256(here).hexdigest()
    why = [x for x in sh.warnings if "ledger seal" in x]
    assert (want[1] in why[0]) if want[1] else why == []
    assert sh.seals.reads == 1  # once: the ledger did not change while the shipper polled
    out = tmp_path / "r"
    r = restore(d["url"], str(out), namespace=NS)
    assert r.verdict == "clean" and chunk_bytes(out / "wal", "wal-000000.bin") == here


@pytest.mark.parametrize("dies", ["before-the-seal", "after-the-sealed-upload", "before-the-deletes"])
def test_resume_closes_a_chunk_its_writer_sealed_without_rolling(tmp_path, dies):
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    clock = Clock()
    store = CrashingStore(d)
    sh = shipper(wal, d, clock, store=store)
    with WalWriter(str(wal), sync="none", seal_on_close=True) as w:
        append(w, 0, 10)
        sh.poll()
        clock.t += 1
        append(w, 10, 20)
        if dies != "before-the-seal":
            sh.poll()  # ships 11..20 as a piece
            clock.t += 1
        append(w, 20, 24)  # written, not shipped: the resumed shipper ships it in the sealed object
    pieces_before = keys(d, "live")
    if dies == "after-the-sealed-upload":  # the sealed object is uploaded and verified, the manifest still lists pieces
        store.crash_at("put_bytes", f"{NS}/MANIFEST.json")
    elif dies == "before-the-deletes":
        store.crash_at("delete", f"{NS}/live/")
    if dies != "before-the-seal":
        with pytest.raises(Died):
            sh.poll()
        assert keys(d, "chunks") == ["wal-000000.bin"] and keys(d, "live") == pieces_before
    again = shipper(wal, d, clock)
    polls(again, clock, 3, 1)
    rep = again.report("stopped")
    assert keys(d, "chunks") == ["wal-000000.bin"] and keys(d, "live") == []
    assert set(rep.pieces_deleted) == set(pieces_before) and rep.pieces_uploaded == 0  # nothing re-sent as a piece
    assert rep.sealed_uploaded == (() if dies != "before-the-seal" else ("wal-000000.bin",))
    assert rep.shipped_through == 24
    assert [(o["kind"], o["name"]) for o in manifest(d)["objects"]] == [("chunks", "wal-000000.bin")]
    with WalWriter(str(wal), sync="none") as w:  # the next writer: a new chunk, shipped live
        append(w, 24, 30)
    again.poll()
    again.close()
    assert again.report("stopped").sealed_uploaded == rep.sealed_uploaded  # not closed twice
    out = tmp_path / "r"
    r = restore(d["url"], str(out), namespace=NS)
    assert (r.last_sequence, r.verdict) == (30, "clean")
    for name in ("wal-000000.bin", "wal-000001.bin"):
        assert chunk_bytes(out / "wal", name) == chunk_bytes(wal, name)
    assert events(out / "wal") == events(wal)
    _, findings, code = verify_archive(d["url"])
    assert (code, findings) == (0, [])


def _lines(lo, hi):
    return "".join(json.dumps({"type": i % 5, "id": f"mem-{i % 7}", "payload": f"event {i} " * (1 + i % 9),
                               "timestamp_ms": 1795300000000 + 10 * i}) + "\n" for i in range(lo, hi)).encode()


def test_write_seal_on_close_then_a_killed_shipper_resumed_ships_the_sealed_chunk(tmp_path):
    """The processes as an operator runs them: a shipper following, `walctl write --seal-on-close` shutting
    down, the shipper killed (-9) before it saw the seal; the next shipper closes the chunk from the
    ledger, deletes its pieces, and the archive restores byte-exact."""
    d = {"url": "file://" + str(tmp_path / "a"), "endpoint": None}
    wal = tmp_path / "wal"
    w = subprocess.run([sys.executable, "-m", "walctl", "write", str(wal), "--sync", "always"], input=_lines(0, 40),
                       capture_output=True)
    assert w.returncode == 0, w.stderr
    ship = _walctl("archive", "push", str(wal), d["url"], "--namespace", NS, "--follow", "--interval", "0.1")
    store = open_store(d["url"])
    deadline = time.time() + 30
    while time.time() < deadline and not list(store.list(f"{NS}/live/")):
        time.sleep(0.05)
    ship.kill()
    ship.communicate(timeout=30)
    pieces = keys(d, "live")
    assert pieces and keys(d, "chunks") == []
    w = subprocess.run([sys.executable, "-m", "walctl", "write", str(wal), "--seal-on-close", "--sync", "batch"],
                       input=_lines(40, 55), capture_output=True)
    assert w.returncode == 0, w.stderr
    fin = _walctl("archive", "push", str(wal), d["url"], "--namespace", NS, "--follow", "--interval", "0.1", "--json")
    _until(lambda: keys(d, "chunks") == ["wal-000000.bin"] and not keys(d, "live"), "the seal and its deletes", fin)
    fin.send_signal(signal.SIGTERM)  # once the archive holds the sealed chunk (no timeout to outrun)
    out, err = fin.communicate(timeout=120)
    assert fin.returncode == 0, err
    rep = json.loads(out)
    assert rep["ended_by"] == "signal" and rep["sealed_uploaded"] == ["wal-000000.bin"]
    assert rep["shipped_through"] == 55
    assert sorted(rep["pieces_deleted"]) == pieces and rep["pieces_uploaded"] == 0
    assert keys(d, "chunks") == ["wal-000000.bin"] and keys(d, "live") == []
    assert store.get_bytes(f"{NS}/chunks/wal-000000.bin") == chunk_bytes(wal, "wal-000000.bin")
    r = restore(d["url"], str(tmp_path / "r"), namespace=NS)
    assert (r.last_sequence, r.verdict) == (55, "clean") and events(tmp_path / "r" / "wal") == events(wal)
    seg = subprocess.run([sys.executable, "-m", "walctl", "write", str(tmp_path / "s"), "--format", "segments",
                          "--seal-on-close"], input=b"", capture_output=True)
    assert seg.returncode == 2 and b"--seal-on-close" in seg.stderr and not (tmp_path / "s").exists()
