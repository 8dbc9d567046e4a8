"""--follow: a live writer in another process appends and rolls; the follower prints every event once,
in order, never reads an in-flight record as damage, and stops cleanly."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import make_chunk, make_record, write_dir
from walctl.format.v2 import encode_file_header
from walctl.ops.wal.follow import follow

WALCTL = [sys.executable, "-m", "walctl"]
WRITER = textwrap.dedent("""
    import os, sys, time
    from walctl.ops.wal.write import WalWriter
    d, n, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with WalWriter(d, sync=sync, batch_records=7, batch_ms=5, max_chunk_bytes=3000) as w:
        for i in range(n):
            w.append(i % 6, f"mem-{i % 13}", os.urandom(i % 400), 1795300000000 + i)
            if i % 25 == 0:
                time.sleep(0.005)
""")


@pytest.mark.parametrize("sync", ["always", "batch", "none"])
def test_follow_prints_every_event_once_in_order_across_rolls(tmp_path, sync):
    d = tmp_path / "wal"
    d.mkdir()  # empty: the follower starts before the first chunk exists and waits for it
    follower = subprocess.Popen(WALCTL + ["replay", str(d), "--follow", "--interval", "0.02", "--timeout", "60"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.3)
    n = 600
    subprocess.run([sys.executable, "-c", WRITER, str(d), str(n), sync], check=True)
    chunks = [x for x in os.listdir(d) if x.endswith(".bin")]
    assert len(chunks) > 10  # it really rolled
    deadline = time.time() + 30
    lines: list[bytes] = []
    while len(lines) < n and time.time() < deadline:
        line = follower.stdout.readline()
        if not line:
            break
        lines.append(line)
    follower.send_signal(signal.SIGTERM)
    rest, err = follower.communicate(timeout=10)
    lines += rest.splitlines()
    seqs = [json.loads(x)["sequence"] for x in lines]
    assert seqs == list(range(1, n + 1))
    assert follower.returncode == 0, err
    assert b"stopped by signal" in err and b"damage" not in err


def test_in_flight_record_is_waited_for_not_reported(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 4))})
    path = os.path.join(d, "wal-000000.bin")
    rec = make_record(4, b"y" * 300)
    got: list[int] = []
    done = threading.Event()

    def writer():
        with open(path, "ab") as f:  # a record appearing in three pieces, slowly
            for piece in (rec[:30], rec[30:200], rec[200:]):
                f.write(piece)
                f.flush()
                time.sleep(0.15)
        done.set()

    t = threading.Thread(target=writer)
    t.start()
    res = follow(d, lambda recs: got.extend(r.sequence for r in recs), interval=0.02, timeout=1.0,
                 install_signals=False)
    t.join()
    assert got == [1, 2, 3, 4]
    assert (res.ended_by, res.exit_code, res.problem) == ("timeout", 0, None)


def test_mid_log_damage_stops_the_follower(tmp_path):
    from conftest import flip_bit, record_offsets

    c = make_chunk(range(1, 6))
    d = write_dir(tmp_path / "w", {0: flip_bit(c, record_offsets(c)[2] + 45)})
    got: list[int] = []
    res = follow(d, lambda recs: got.extend(r.sequence for r in recs), interval=0.01, timeout=2,
                 install_signals=False)
    assert got == [1, 2]
    assert res.ended_by == "damage" and res.exit_code == 3 and "mid-log" in res.problem


def test_torn_closed_chunk_continued_by_restart_is_followed_through(tmp_path):
    c0 = make_chunk(range(1, 4)) + make_record(4, b"z" * 50)[:20]
    d = write_dir(tmp_path / "w", {0: c0, 1: make_chunk(range(4, 7))})
    got: list[int] = []
    res = follow(d, lambda recs: got.extend(r.sequence for r in recs), interval=0.01, timeout=0.5,
                 install_signals=False)
    assert got == [1, 2, 3, 4, 5, 6] and res.exit_code == 0


def test_after_to_limit_and_inspect_follow(tmp_path, cli):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 11)), 1: make_chunk(range(11, 21)),
                                   2: encode_file_header()})
    got: list[int] = []
    res = follow(d, lambda recs: got.extend(r.sequence for r in recs), after=12, to=17, interval=0.01,
                 timeout=2, install_signals=False)
    assert got == [13, 14, 15, 16, 17] and res.ended_by == "to"
    r = cli("inspect", d, "--follow", "--jsonl", "--from", "5", "--limit", "3", "--timeout", "2")
    assert r.code == 0 and [x["sequence"] for x in r.jsonl()] == [5, 6, 7]
    r = cli("replay", d, "--follow", "--after", "18", "--timeout", "0.3")
    assert r.code == 0 and [x["sequence"] for x in r.jsonl()] == [19, 20]
    assert "stopped by timeout" in r.err


def test_follow_refuses_what_it_cannot_follow(tmp_path, cli):
    from walctl.ops.wal.write import WalWriter

    seg = tmp_path / "seg"
    with WalWriter(str(seg), format="segments", sync="none") as w:
        w.append_entry("memory_add", {"a": 1}, timestamp=1)
    r = cli("replay", seg, "--follow", "--sync-blob", "--timeout", "1")
    assert r.code == 2 and "ADR-003" in r.err
    r = cli("replay", tmp_path / "nope", "--follow", "--timeout", "1")
    assert r.code == 6 and "nope: no such file or directory" in r.err  # a missing path: cli-contract.md


SEGMENT_WRITER = textwrap.dedent("""
    import sys, time
    from walctl.ops.wal.write import WalWriter
    d, n = sys.argv[1], int(sys.argv[2])
    with WalWriter(d, format="segments", sync="batch", batch_records=50, batch_ms=5) as w:
        for i in range(n):
            w.append_entry("memory_add", {"i": i}, timestamp=1795300000 + i)
            if i % 2000 == 0:
                time.sleep(0.01)
""")


def test_follow_segments_across_rolls_from_another_process(tmp_path):
    d = tmp_path / "seg"
    d.mkdir()
    n = 22_000  # three segments of 10,000
    writer = subprocess.Popen([sys.executable, "-c", SEGMENT_WRITER, str(d), str(n)])
    time.sleep(0.2)
    got: list[int] = []
    res = follow(str(d), lambda es: got.extend(e.sequence for _, e in es), interval=0.02, to=n, timeout=60,
                 install_signals=False)
    writer.wait()
    assert got == list(range(1, n + 1)) and res.ended_by == "to" and res.exit_code == 0
    assert len([x for x in os.listdir(d) if x.startswith("wal_")]) == 3


def test_follow_segments_skips_resent_entries_and_stops_at_damage(tmp_path, cli):
    from walctl.format.segment import encode_frame, seal

    frames = [encode_frame(seal({"sequence": s, "timestamp": 1, "operation": "memory_add", "data": {"s": s}}))
              for s in range(1, 6)]
    d = tmp_path / "seg"
    d.mkdir()
    (d / "wal_00000001.log").write_bytes(frames[0] + frames[1] + frames[1] + frames[2])  # 2 re-sent
    r = cli("replay", d, "--follow", "--timeout", "0.5", "--after", "1")
    assert r.code == 0 and [x["sequence"] for x in r.jsonl()] == [2, 3]
    bad = bytearray(frames[3])
    bad[-3] ^= 1  # inside the body: the checksum no longer matches
    (d / "wal_00000001.log").write_bytes(frames[0] + frames[1] + frames[2] + bytes(bad) + frames[4])
    got: list[int] = []
    res = follow(str(d), lambda es: got.extend(e.sequence for _, e in es), interval=0.01, timeout=2,
                 install_signals=False)
    assert got == [1, 2, 3] and res.exit_code == 3 and "mid-log" in res.problem


def test_a_torn_tail_cut_by_a_reopening_writer_is_followed_through(tmp_path):
    """The writer crashed mid-record; a new writer cuts the torn bytes (repair on open) and appends in
    the same chunk: the follower drops what it held and reads the new records from the cut."""
    from walctl.ops.wal.write import WalWriter

    d = tmp_path / "w"
    with WalWriter(str(d), sync="always") as w:
        for i in range(5):
            w.append(0, "m", b"x" * 100, 1795300000000 + i)
    chunk = os.path.join(d, "wal-000000.bin")
    with open(chunk, "ab") as f:
        f.write(make_record(6, b"torn" * 40)[:70])  # half a record: a crash mid-append
    got: list[int] = []

    def reopen_and_append():
        time.sleep(0.3)
        with WalWriter(str(d), sync="always") as w:
            for i in range(3):
                w.append(0, "m", b"y" * 50, 1795300001000 + i)

    t = threading.Thread(target=reopen_and_append)
    t.start()
    res = follow(str(d), lambda recs: got.extend(r.sequence for r in recs), interval=0.02, timeout=1.5,
                 install_signals=False)
    t.join()
    assert got == [1, 2, 3, 4, 5, 6, 7, 8] and res.exit_code == 0


def test_follow_started_before_the_first_segment_exists_waits_for_it(tmp_path):
    """An empty directory says nothing of its format: the follower waits for the first file instead of
    taking it for a V2 directory and never seeing the segments."""
    d = tmp_path / "seg"
    d.mkdir()
    n = 300
    clock = [0.0]

    def sleep(s):
        clock[0] += s
        if clock[0] >= 1.0 and not any(d.iterdir()):
            subprocess.run([sys.executable, "-c", SEGMENT_WRITER, str(d), str(n)], check=True)

    got: list[int] = []
    res = follow(str(d), lambda es: got.extend(e.sequence for _, e in es), interval=0.1, to=n, timeout=30,
                 install_signals=False, clock=lambda: clock[0], sleep=sleep)
    assert got == list(range(1, n + 1)) and res.ended_by == "to" and res.exit_code == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    clock[0] = 0.0
    res = follow(str(empty), lambda es: None, interval=0.1, timeout=2, install_signals=False,
                 clock=lambda: clock[0], sleep=lambda s: clock.__setitem__(0, clock[0] + s))
    assert res.ended_by == "timeout" and res.events == 0 and clock[0] < 2.5  # the wait counts toward the limit


def test_a_header_only_chunk_that_a_newer_one_follows_does_not_hold_the_stream(tmp_path):
    """A writer that reopened without writing leaves a header-only chunk; once a newer chunk exists the
    follower moves on (replay without --follow streams the same records)."""
    d = write_dir(tmp_path / "w", {0: encode_file_header(), 1: make_chunk(range(1, 4))})
    got: list[int] = []
    res = follow(d, lambda recs: got.extend(r.sequence for r in recs), interval=0.01, timeout=0.5,
                 install_signals=False)
    assert got == [1, 2, 3] and (res.ended_by, res.exit_code) == ("timeout", 0)


@pytest.mark.parametrize("tail", [bytes(64), b"\xff" * 64], ids=["zero-fill", "garbage"])
def test_a_tail_waited_out_with_no_writer_ends_the_stream_torn_as_verify_says(tmp_path, tail):
    from walctl.ops.wal.verify import verify_path

    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 4)) + tail})
    got: list[int] = []
    res = follow(d, lambda recs: got.extend(r.sequence for r in recs), interval=0.001, timeout=5, settle_polls=3,
                 install_signals=False)
    assert got == [1, 2, 3] and res.ended_by == "damage" and "no live writer" in res.problem
    assert res.exit_code == verify_path(d).exit_code == 1


def test_a_segment_tail_waited_out_with_no_writer_ends_the_stream_torn_as_verify_says(tmp_path):
    from walctl.format import segment as seg
    from walctl.ops.wal.follow_segments import SegmentFollower
    from walctl.ops.wal.tail import drive
    from walctl.ops.wal.verify import verify_path

    d = tmp_path / "s"
    d.mkdir()
    frames = b"".join(seg.encode_frame(seg.seal({"sequence": i, "operation": "memory_add", "data": {"i": i},
                                                  "timestamp": 1795300000 + i})) for i in range(1, 4))
    (d / "wal_00000001.log").write_bytes(frames + b"\x00\x00\x00\x09" + b"{bad json")
    got: list[int] = []
    f = SegmentFollower(str(d), lambda es: got.extend(e.sequence for _, e in es), settle_polls=3,
                        writer_alive=lambda _: False)
    res = drive(f, 0.001, 5, time.monotonic, lambda s: time.sleep(s), type("S", (), {"signal": None})())
    assert got == [1, 2, 3] and res.ended_by == "damage" and "no live writer" in res.problem
    assert res.exit_code == verify_path(str(d)).exit_code == 1
