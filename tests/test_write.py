"""The writer: byte-compatible with the Java writer, sync policies, rolling, locking, opening rules."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from conftest import case_dir, flip_bit, load_expected, make_chunk, record_offsets, truncate_to, write_dir
from walctl.errors import EnvironmentProblem, NotClean, Refused
from walctl.format.ckptmeta import encode_checkpoint_meta
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.verify import verify_path
from walctl.ops.wal.write import WalWriter, parse_event
from walctl.store import quarantine as q


def records(path):
    return [r for r in RecordWalk(path) if isinstance(r, Record)]


@pytest.mark.parametrize("case", ["basic", "compressed", "rolled"])
def test_writer_reproduces_java_files_byte_for_byte(tmp_path, case):
    """Java reads what walctl writes because it is exactly what Java writes."""
    exp = load_expected(case)
    ctor = exp["constructor"]
    d = str(tmp_path / "w")
    with WalWriter(d, sync="always", max_chunk_bytes=ctor["maxChunkBytes"],
                   compress_threshold=ctor["compressionThreshold"] if ctor["compressionEnabled"] else None) as w:
        for e in exp["appended"]:
            seq = w.append(e["type_ordinal"], bytes.fromhex(e["memory_id_utf8_hex"]), bytes.fromhex(e["payload_hex"]),
                           e["timestamp_ms"])
            assert seq == e["sequence"]
    for f in exp["files"]:
        with open(os.path.join(case_dir(case), f["name"]), "rb") as a, open(os.path.join(d, f["name"]), "rb") as b:
            assert a.read() == b.read(), f["name"]
    assert sorted(n for n in os.listdir(d) if n.startswith("wal-")) == sorted(f["name"] for f in exp["files"])


@pytest.mark.parametrize("sync", ["always", "batch", "none"])
def test_sync_policies_read_back_and_report_durable_sequence(tmp_path, sync):
    d = str(tmp_path / "w")
    w = WalWriter(d, sync=sync, batch_records=10, batch_ms=60_000, max_chunk_bytes=1000)
    for i in range(25):
        w.append(i % 16, f"m{i}", b"p" * i, 1000 + i)
        if sync == "always":
            assert w.durable_sequence == i + 1
    if sync == "batch":
        assert 19 <= w.durable_sequence < 25  # synced at the roll after seq 19; 20..25 wait for their group
    if sync == "none":
        assert w.durable_sequence == 0
    assert w.close() == 25
    got = records(d)
    assert [(r.sequence, r.type_ordinal, r.memory_id, r.payload, r.timestamp_ms) for r in got] == \
        [(i + 1, i % 16, f"m{i}".encode(), b"p" * i, 1000 + i) for i in range(25)]
    assert len([n for n in os.listdir(d) if n.startswith("wal-")]) == 2  # rolled once at 1000 bytes
    assert verify_path(d).exit_code == 0


def test_batch_group_commit_every_n_records(tmp_path):
    """Groups of 10 are committed (by the sync helper here) while appends go on: durable_sequence moves in
    steps of whole groups, never past what was handed over, and flush makes everything durable."""
    w = WalWriter(str(tmp_path / "w"), sync="batch", batch_records=10, batch_ms=60_000)
    seen = []
    for i in range(25):
        w.append(0, "m", b"x")
        seen.append(w.durable_sequence)
        assert w.durable_sequence in (0, 10, 20) and w.durable_sequence <= (i + 1) // 10 * 10
    deadline = time.monotonic() + 5
    while w.durable_sequence < 20 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert w.durable_sequence == 20  # 21..25 wait for their group (or the time bound)
    assert w.flush() == 25
    w.close()


def test_batch_time_bound_syncs_a_quiet_writer(tmp_path):
    w = WalWriter(str(tmp_path / "w"), sync="batch", batch_records=1000, batch_ms=50)
    w.append(0, "a", b"x")
    deadline = time.monotonic() + 5
    while w.durable_sequence < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert w.durable_sequence == 1
    w.close()


def _events(n, start=0):
    return [(i % 16, f"m{i}", b"payload %d" % i, 1000 + i) for i in range(start, start + n)]


def _write_all(w, evs):
    for e in evs:
        w.append(*e)


def test_batch_groups_are_synced_by_a_helper_process_and_read_back_as_with_no_sync(tmp_path):
    """On the real file system groups go to the helper: the bytes (rolling included) are those of
    sync=none, durable_sequence reaches each whole group as soon as it is polled, and close ends it."""
    evs = _events(95)
    a, b = str(tmp_path / "helper"), str(tmp_path / "none")
    w = WalWriter(a, sync="batch", batch_records=10, batch_ms=60_000, max_chunk_bytes=900)
    _write_all(w, evs[:45])
    helper = w._appender._helper
    assert helper is not None and helper.proc.poll() is None
    deadline = time.monotonic() + 5
    while w.durable_sequence < 40 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert 40 <= w.durable_sequence <= 45  # whole groups, and whatever a roll synced
    _write_all(w, evs[45:])
    assert w.close() == 95 and helper.proc.returncode is not None
    with WalWriter(b, sync="none", max_chunk_bytes=900) as w2:
        _write_all(w2, evs)
    names = sorted(n for n in os.listdir(a) if n.startswith("wal-"))
    assert len(names) > 3 and names == sorted(n for n in os.listdir(b) if n.startswith("wal-"))
    for n in names:
        with open(os.path.join(a, n), "rb") as f, open(os.path.join(b, n), "rb") as g:
            assert f.read() == g.read(), n
    assert verify_path(a).exit_code == 0


def test_a_killed_sync_helper_is_replaced_by_syncing_in_place_without_losing_a_record(tmp_path):
    import signal

    d = str(tmp_path / "w")
    evs = _events(60)
    w = WalWriter(d, sync="batch", batch_records=10, batch_ms=60_000)
    _write_all(w, evs[:35])
    helper = w._appender._helper
    os.kill(helper.proc.pid, signal.SIGKILL)
    helper.proc.wait()
    _write_all(w, evs[35:])  # the next group finds it gone: sync in place, then the commit thread
    assert w._appender._helper is None and not w._appender._use_helper
    assert w.durable_sequence >= 40
    assert w.close() == 60
    assert [(r.sequence, r.memory_id, r.payload) for r in records(d)] == \
        [(i + 1, f"m{i}".encode(), b"payload %d" % i) for i in range(60)]


def test_a_failed_fdatasync_in_the_helper_poisons_the_writer(tmp_path):
    d = str(tmp_path / "w")
    w = WalWriter(d, sync="batch", batch_records=10, batch_ms=60_000)
    _write_all(w, _events(10))  # the first group starts the helper
    assert w.flush() == 10
    r, wp = os.pipe()
    w._appender._helper.open(r)  # its next fdatasync fails (EINVAL: a pipe cannot be synced)
    os.close(r), os.close(wp)
    with pytest.raises(EnvironmentProblem, match="fdatasync failed"):
        _write_all(w, _events(30, 10))  # the group of 11..20 is answered with the error at 21..30
    assert w.durable_sequence == 10  # nothing after the failure is reported durable
    with pytest.raises(EnvironmentProblem, match="fdatasync failed"):
        w.append(0, "m", b"x")  # every later call raises it
    with pytest.raises(EnvironmentProblem):
        w.close()


def test_the_sync_helper_is_handed_the_writers_descriptor_never_a_path(tmp_path):
    """The helper syncs the file the writer opened (from its target's descriptor), whatever its name leads
    to now: here the name was moved away and a dangling link put in its place (issue 24, the target is
    resolved once). Opened by its name, the helper would answer ENOENT."""
    from walctl.store.synchelper import SyncHelper

    f = tmp_path / "wal-000000.bin"
    f.write_bytes(b"x")
    fd = os.open(f, os.O_WRONLY | os.O_APPEND)
    os.rename(f, tmp_path / "moved")
    os.symlink(tmp_path / "nowhere", f)
    h = SyncHelper(fd)
    try:
        os.write(fd, b"y")
        h.request(1)
        assert h.answers(True) == [(0, 1)]
    finally:
        h.close()
        os.close(fd)
    assert (tmp_path / "moved").read_bytes() == b"xy"


def test_an_interpreter_that_does_not_greet_is_no_helper(tmp_path, monkeypatch):
    """sys.executable of an embedding application may not run -c: without the helper's greeting in time,
    the writer uses its commit thread, and the stray process is stopped."""
    from walctl.store import synchelper

    fake = tmp_path / "not-python"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(fake))
    monkeypatch.setattr(synchelper, "START_TIMEOUT_S", 0.5)
    d = str(tmp_path / "w")
    t = time.monotonic()
    with WalWriter(d, sync="batch", batch_records=10, batch_ms=60_000) as w:
        _write_all(w, _events(25))
        assert w._appender._helper is None and not w._appender._use_helper
    assert time.monotonic() - t < 10 and synchelper._live[0] == 0
    assert [r.sequence for r in records(d)] == list(range(1, 26))


def test_a_process_runs_at_most_max_live_sync_helpers_and_the_rest_use_commit_threads(tmp_path):
    from walctl.store import synchelper

    assert synchelper._live[0] == 0
    writers = [WalWriter(str(tmp_path / f"w{k}"), sync="batch", batch_records=10, batch_ms=60_000)
               for k in range(synchelper.MAX_LIVE + 2)]
    for w in writers:
        _write_all(w, _events(25))
    helpers = [w._appender._helper is not None for w in writers]
    assert helpers == [True] * synchelper.MAX_LIVE + [False, False] and synchelper._live[0] == synchelper.MAX_LIVE
    for k, w in enumerate(writers):
        assert w.close() == 25 and [r.sequence for r in records(str(tmp_path / f"w{k}"))] == list(range(1, 26))
    assert synchelper._live[0] == 0


def test_no_helper_when_none_can_start_the_commit_thread_syncs(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    d = str(tmp_path / "w")
    w = WalWriter(d, sync="batch", batch_records=10, batch_ms=60_000)
    _write_all(w, _events(25))
    assert w._appender._helper is None and not w._appender._use_helper
    assert w.close() == 25 and [r.sequence for r in records(d)] == list(range(1, 26))


def test_compression_is_strictly_above_threshold_and_reads_back_decoded(tmp_path):
    d = str(tmp_path / "w")
    with WalWriter(d, compress_threshold=100) as w:
        for n in (99, 100, 101, 5000):
            w.append(0, "m", b"a" * n)
    got = records(d)
    assert [r.compressed for r in got] == [False, False, True, True]
    assert [len(r.payload) for r in got] == [99, 100, 101, 5000]


def test_reopen_continues_last_chunk_with_next_sequence(tmp_path):
    d = str(tmp_path / "w")
    with WalWriter(d) as w:
        w.append(0, "a", b"1")
    with WalWriter(d) as w:
        assert (w.opened.first_sequence, w.opened.continued, w.opened.chunk) == (2, True, "wal-000000.bin")
        w.append(0, "b", b"2")
    assert [r.sequence for r in records(d)] == [1, 2]
    assert os.listdir(d).count("wal-000000.bin") == 1


def test_reopen_java_directory_continues_after_its_hwm(tmp_path):
    import shutil

    d = str(tmp_path / "w")
    shutil.copytree(case_dir("reopened"), d)
    with WalWriter(d) as w:
        assert w.opened.first_sequence == 21
        w.append(0, "x", b"y")
    assert verify_path(d).last_sequence == 21


def test_torn_tail_is_cut_with_evidence_on_open(tmp_path):
    c0 = make_chunk(range(1, 6))
    cut_at = record_offsets(c0)[4] + 20
    d = write_dir(tmp_path / "w", {0: truncate_to(c0, cut_at)})
    with WalWriter(d) as w:
        assert w.opened.first_sequence == 5
        rep = w.opened.repair
        assert rep is not None and rep.drop_bytes == 20
        w.append(0, "new", b"five")
    (entry,) = q.read_manifest(d)[0]
    with open(os.path.join(d, entry["evidence"]), "rb") as f:
        assert f.read() == c0[record_offsets(c0)[4]:cut_at]
    assert [(r.sequence, r.memory_id) for r in records(d)][-1] == (5, b"new")
    assert verify_path(d).exit_code == 0


@pytest.mark.parametrize("damage, code", [
    (lambda: {0: flip_bit(make_chunk(range(1, 6)), 100), 1: make_chunk(range(6, 8))}, 3),
    (lambda: {0: make_chunk(range(1, 4)), 1: make_chunk(range(7, 9))}, 4),
    (lambda: {0: make_chunk(range(1, 4)), 1: b"SPEC\x00\x00\x00\x01"}, 5),
])
def test_damaged_directory_is_refused_and_untouched(tmp_path, damage, code):
    from conftest import tree_digest

    d = write_dir(tmp_path / "w", damage())
    before = {k: v for k, v in tree_digest(d).items() if k != ".walctl.lock"}
    with pytest.raises(NotClean) as err:
        WalWriter(d)
    assert err.value.exit_code == code
    assert {k: v for k, v in tree_digest(d).items() if k != ".walctl.lock"} == before


def test_second_writer_is_refused_naming_the_holder(tmp_path):
    d = str(tmp_path / "w")
    with WalWriter(d, command="write (first)"):
        with pytest.raises(EnvironmentProblem) as err:
            WalWriter(d)
        assert "locked by a live writer" in str(err.value) and "write (first)" in str(err.value)
        assert err.value.exit_code == 6
    WalWriter(d).close()  # free again once the first is closed


def test_repair_against_a_directory_being_written_by_another_process_is_refused(tmp_path):
    d = str(tmp_path / "w")
    code = ("import sys, time\nfrom walctl.ops.wal.write import WalWriter\n"
            f"w = WalWriter({d!r})\nw.append(0, 'a', b'x'); w.flush()\nprint('ready', flush=True)\n"
            "sys.stdin.readline()\nw.close()\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.path.dirname(os.path.dirname(__file__))})
    try:
        assert proc.stdout.readline().strip() == "ready"
        for args in (["repair", d, "--apply"], ["write", d, "--type", "0"], ["compact", d, "--to", "1", "--apply"]):
            out = subprocess.run([sys.executable, "-m", "walctl", *args], capture_output=True, text=True)
            assert out.returncode == 6, (args, out.stderr)
            assert "locked by a live writer" in out.stderr and "pid" in out.stderr
        assert subprocess.run([sys.executable, "-m", "walctl", "verify", d]).returncode == 0
    finally:
        proc.communicate("\n", timeout=30)
    assert [r.sequence for r in records(d)] == [1]


def test_checkpoint_meta_hwm_prevents_sequence_reuse_after_compaction(tmp_path):
    d = write_dir(tmp_path / "w", {7: b"SPEC\x00\x00\x00\x02"})  # all records compacted away
    with open(os.path.join(d, "checkpoint.meta"), "wb") as f:
        f.write(encode_checkpoint_meta(500))
    with WalWriter(d) as w:
        assert w.append(0, "a", b"") == 501


def test_threads_share_a_writer_without_reusing_sequences(tmp_path):
    import threading

    d = str(tmp_path / "w")
    seqs = []
    with WalWriter(d, max_chunk_bytes=4096) as w:
        def work(k):
            for i in range(200):
                seqs.append(w.append(0, f"t{k}", b"%d" % i))
        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(seqs) == list(range(1, 801))
    assert [r.sequence for r in records(d)] == list(range(1, 801))


@pytest.mark.parametrize("obj, why", [
    ([], "JSON object"), ({"id": "x"}, "missing \"type\""), ({"type": "NOPE"}, "unknown event type"),
    ({"type": 300}, "outside 0..15"), ({"type": 0, "id": 5}, "\"id\" is a string"),
    ({"type": 0, "payload": "a", "payload_hex": "00"}, "one payload form"),
    ({"type": 0, "payload_hex": "zz"}, "does not decode"), ({"type": 0, "payload_b64": "!!"}, "does not decode"),
    ({"type": 0, "timestamp_ms": "now"}, "timestamp_ms"), ({"type": 0, "colour": 1}, "unknown key"),
    ({"type": 0, "payload": 5}, "payload"),
])
def test_parse_event_rejects_bad_events(obj, why):
    with pytest.raises(ValueError) as err:
        parse_event(obj)
    assert why in str(err.value)


def test_parse_event_forms():
    assert parse_event({"type": "remember", "id": "m", "payload": "hé"}) == (0, b"m", "hé".encode(), None)
    assert parse_event({"type": 15, "payload_b64": "AAE=", "timestamp_ms": 5}) == (15, b"", b"\x00\x01", 5)
    assert parse_event({"type": "FORGET", "payload_hex": "ff00"}) == (1, b"", b"\xff\x00", None)


def test_cli_write_stdin_json_and_bad_line(cli, tmp_path, monkeypatch):
    import io

    d = str(tmp_path / "w")
    lines = "\n".join(json.dumps(e) for e in ({"type": "REMEMBER", "id": "a", "payload": "one", "timestamp_ms": 1},
                                             {"type": 2, "id": "b", "payload_hex": "00ff", "timestamp_ms": 2})) + "\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    r = cli("write", d, "--sync", "always", "--json")
    doc = r.json()
    assert r.code == 0 and doc["schema"] == "walctl.write/1"
    assert (doc["records"], doc["first_sequence"], doc["last_sequence"], doc["durable_sequence"]) == (2, 1, 2, 2)
    monkeypatch.setattr(sys, "stdin", io.StringIO('{"type": 0, "id": "c"}\n{"type": \n{"type": 0}\n'))
    r = cli("write", d)
    assert r.code == 2 and "stdin line 2" in r.err and "wrote 1 record " in r.out
    assert [(x.sequence, x.memory_id) for x in records(d)] == [(1, b"a"), (2, b"b"), (3, b"c")]
    r = cli("write", d, "--type", "REFLECT", "--id", "z", "--payload", "hi", "--timestamp-ms", "9")
    assert r.code == 0 and records(d)[-1][1:] == records(d)[-1][1:]
    last = records(d)[-1]
    assert (last.sequence, last.type, last.payload, last.timestamp_ms) == (4, "REFLECT", b"hi", 9)
    assert cli("write", d, "--sync", "sometimes").code == 2
    assert cli("write", d, "--id", "x").code == 2


def test_cli_write_refuses_corrupt_directory_with_its_exit_code(cli, tmp_path):
    d = write_dir(tmp_path / "w", {0: flip_bit(make_chunk(range(1, 6)), 100), 1: make_chunk(range(6, 8))})
    r = cli("write", d, "--type", "0")
    assert r.code == 3 and r.err.startswith("walctl: error: ") and "refusing to append" in r.err


def test_max_drop_bytes_on_open_refuses(tmp_path):
    c0 = make_chunk(range(1, 6))
    d = write_dir(tmp_path / "w", {0: c0 + bytes(5000)})
    with pytest.raises(Refused):
        WalWriter(d, max_drop_bytes=100)
    assert os.path.getsize(os.path.join(d, "wal-000000.bin")) == len(c0) + 5000


class _FailingFsyncFS:
    """The real file system, except that the Nth data sync (an fsync, or a write on an O_DSYNC
    descriptor) fails like an EIO from the disk."""

    def __init__(self, fail_at: int):
        from walctl.store.fs import DEFAULT_FS

        self.real, self.fail_at, self.syncs, self.dsync = DEFAULT_FS, fail_at, 0, set()

    def __getattr__(self, name):
        return getattr(self.real, name)

    def beneath(self, *roots):
        self.real = self.real.beneath(*roots)
        return self

    def _maybe_fail(self, path):
        self.syncs += 1
        if self.syncs == self.fail_at:
            raise EnvironmentProblem("input/output error", path)

    def fsync(self, fd, path=""):
        self._maybe_fail(path)
        self.real.fsync(fd, path)

    def open_append(self, path, create=False, exclusive=False, dsync=False):
        fd = self.real.open_append(path, create, exclusive, dsync)
        if dsync:
            self.dsync.add(fd)
        return fd

    def write(self, fd, data, path=""):
        if fd in self.dsync:
            self._maybe_fail(path)
        self.real.write(fd, data, path)


@pytest.mark.parametrize("sync", ["batch", "none"])
def test_a_failed_sync_poisons_the_writer(tmp_path, sync):
    fs = _FailingFsyncFS(fail_at=3)  # 1: chunk header, 2: first group, 3: fails
    w = WalWriter(str(tmp_path / "w"), fs=fs, sync=sync, batch_records=2, batch_ms=60_000)
    with pytest.raises(EnvironmentProblem):
        for i in range(20):
            w.append(0, "m", b"x")
            if i in (5, 11):
                w.flush()
        w.flush()
    durable = w.durable_sequence
    with pytest.raises(EnvironmentProblem):  # every later call says so too
        w.append(0, "m", b"late")
    with pytest.raises(EnvironmentProblem):
        w.close()
    assert durable < 20
    assert WalWriter(str(tmp_path / "w")).opened.first_sequence >= durable + 1


def test_a_directory_at_the_last_sequence_takes_no_more_events(tmp_path, cli):
    from walctl.format import v2

    d = tmp_path / "w"
    d.mkdir()
    (d / "wal-000000.bin").write_bytes(v2.encode_file_header() + v2.encode_record(v2.MAX_SEQUENCE, 0, b"a", 1, b"x"))
    before = (d / "wal-000000.bin").read_bytes()
    r = cli("write", str(d), "--type", "REMEMBER", "--id", "a", "--payload", "x", "--json")
    assert r.code == 7 and r.json()["outcome"] == "refused" and "can take no more events" in r.err
    assert (d / "wal-000000.bin").read_bytes() == before
