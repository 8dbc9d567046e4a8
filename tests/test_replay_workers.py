"""replay's workers (ops/wal/replay_workers.py): a consumer that does not keep up stalls them, it does not make
them buffer. Each worker holds one encoded chunk at a time, so at any moment at most `jobs` chunks are
encoded and not yet written, however slowly the output is read. Counted, not timed: the workers log each
chunk they encode ("E") and each write they finish ("W") into one pipe (1-byte writes are atomic, so the
log is one order of events); the in-flight count is E - W along that log."""
from __future__ import annotations

import os
import threading

import pytest

from conftest import make_chunk, write_dir
from walctl.ops.wal import fdwrite, replay as R
from walctl.ops.wal.replay import ReplayOptions, replay

CHUNKS, RECORDS, PAYLOAD = 12, 60, 1500  # ~90 KB a chunk, ~180 KB of JSON lines: more than a pipe holds


def _logged(monkeypatch, trace: int) -> None:
    scan, writer = R.scan_chunk_file, fdwrite.write_pieces_to_fd

    def scan_logged(*a, **k):
        out = scan(*a, **k)
        os.write(trace, b"E")
        return out

    def writer_logged(fd):
        write = writer(fd)

        def w(pieces):
            write(pieces)
            os.write(trace, b"W")
        return w

    monkeypatch.setattr(R, "scan_chunk_file", scan_logged)
    monkeypatch.setattr(fdwrite, "write_pieces_to_fd", writer_logged)


def _read_all(fd: int, step: int) -> bytes:
    out = []
    while True:
        got = os.read(fd, step)
        if not got:
            return b"".join(out)
        out.append(got)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="replay's workers fork")
@pytest.mark.parametrize("jobs", [2, 3])
def test_a_stalled_stdout_keeps_each_worker_to_one_encoded_chunk(tmp_path, monkeypatch, jobs):
    d = write_dir(tmp_path / "w", {i: make_chunk(range(1 + RECORDS * i, 1 + RECORDS * (i + 1)),
                                                 lambda s: bytes([s % 251]) * PAYLOAD) for i in range(CHUNKS)})
    one: list[bytes] = []
    want = replay(d, one.extend, ReplayOptions()).to_json()
    r_trace, w_trace = os.pipe()
    r_out, w_out = os.pipe()
    _logged(monkeypatch, w_trace)
    got = {}

    def run():
        try:
            got["report"] = replay(d, fdwrite.write_pieces_to_fd(w_out), ReplayOptions(jobs=jobs), out_fd=w_out)
        finally:
            os.close(w_out)
            os.close(w_trace)

    t = threading.Thread(target=run)
    t.start()
    # stdout stalls: nothing is read until every worker has encoded its first chunk (each then blocks
    # on the full pipe or waits for its turn)
    head = b""
    while head.count(b"E") < jobs:
        head += os.read(r_trace, 1)
    data = _read_all(r_out, 4096)  # then a slow reader: small reads
    t.join()
    log = head + _read_all(r_trace, 1 << 16)
    os.close(r_out)
    os.close(r_trace)
    assert data == b"".join(one) and got["report"].to_json() == want  # the same stream, in order
    assert log.count(b"E") == CHUNKS and log.count(b"W") == CHUNKS  # every chunk encoded and written once
    in_flight = peak = 0
    for ev in log:
        in_flight += 1 if ev == ord("E") else -1
        peak = max(peak, in_flight)
    assert peak <= jobs  # never more encoded chunks than workers, whatever the reader's pace
