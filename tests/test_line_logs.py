"""One rule for the line logs (format/lines.py, docs/format.md "Line logs"): the ledger, task logs, Substrat
event logs and the quarantine manifest split their bytes alike. A last line without its newline is torn
(never used, even when its JSON is whole); an unterminated tail longer than the format's bound is damage;
a tail of exactly the bound is still torn; `\\r\\n` lines are read as each format's decoder reads a `\\r`.

Each reader is asked through a small adapter returning (used entries, the tail's verdict, problems): the
same table of damage then runs through all four.
"""
from __future__ import annotations

import json
import os

import pytest

from walctl.format import ledger as L
from walctl.format.lines import line_spans, tail_of
from walctl.format.tasklog import read_log
from walctl.format.tasklog_entry import encode_entry
from walctl.ops.agents.roots import read_session
from walctl.store import quarantine as Q

TS = "2026-11-21T10:00:00Z"
TID = "3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77"
SID = "1860aabdf4444c9ca26cda431ac886de"


def _ledger_line(i: int) -> bytes:
    return L.encode_line(L.HWM, TS, seq=i)[:-1]


def _task_line(i: int) -> bytes:
    e = {"v": 1, "ts": f"2026-11-21T10:00:{i:02d}Z", "type": "InstructionStart" if i == 1 else "ShutdownMarker",
         "task_id": TID}
    if i == 1:
        e["instruction"] = "x"
    return encode_entry(e)[:-1]


def _event_line(i: int) -> bytes:
    return json.dumps({"session_id": SID, "ts": TS, "event": "metadata.updated", "data": {"key": f"k{i}"}},
                      separators=(",", ":")).encode()


def _manifest_line(i: int) -> bytes:
    e = Q.entry("2026-11-21T10:00:00.000Z", "move", f"wal-{i:06d}.bin", 0, 8, "0" * 64,
                f".quarantine/wal-{i:06d}.bin", "test", "0")
    return json.dumps(e, sort_keys=True).encode()


def _ledger(data: bytes, tmp_path):
    r = L.decode_ledger(data)
    over = [b for b in r.bad if "not a torn append" in b.reason]
    tail = "damage" if over else "torn" if r.torn_offset is not None else None
    return len(r.lines), tail, len(r.bad) - len(over)


def _tasklog(data: bytes, tmp_path):
    r = read_log(data, TID)
    return r.state.valid_entries, "torn" if r.torn is not None else None, len(r.problems)


def _substrat(data: bytes, tmp_path):
    d = tmp_path / SID
    d.mkdir(exist_ok=True)
    (d / "events.jsonl").write_bytes(data)
    s = read_session(str(d))
    return (sum(1 for ln in s.lines if ln.event is not None), "torn" if s.tail is not None else None,
            sum(1 for ln in s.lines if ln.problem))


def _manifest(data: bytes, tmp_path):
    q = tmp_path / ".quarantine"
    q.mkdir(exist_ok=True)
    (q / Q.MANIFEST).write_bytes(data)
    entries, problems = Q.read_manifest(str(tmp_path))
    tail = [p for p in problems if "torn last line" in p or "not a torn append" in p]
    verdict = None if not tail else "damage" if "not a torn append" in tail[0] else "torn"
    return len(entries), verdict, len(problems) - len(tail)


# reader, a valid line, its bound (None: every tail is torn), what a blank line is (a problem or skipped)
READERS = {
    "ledger": (_ledger, _ledger_line, L.MAX_LINE_BYTES, 0),
    "tasklog": (_tasklog, _task_line, None, 1),
    "substrat": (_substrat, _event_line, None, 1),
    "manifest": (_manifest, _manifest_line, Q.MAX_LINE_BYTES, 0),
}


@pytest.fixture(params=sorted(READERS))
def reader(request, tmp_path):
    read, line, bound, blank = READERS[request.param]
    return (lambda data: read(data, tmp_path)), line, bound, blank


def test_empty_file_has_no_lines_and_no_tail(reader):
    read, _, _, _ = reader
    assert read(b"") == (0, None, 0)


def test_a_file_of_one_newline_has_one_blank_line_and_no_tail(reader):
    read, _, _, blank = reader
    assert read(b"\n") == (0, None, blank)  # blank lines: corrupt in task and Substrat logs (their specs)


def test_a_whole_last_line_without_its_newline_is_torn_never_used(reader):
    read, line, _, _ = reader
    assert read(line(1) + b"\n" + line(2)) == (1, "torn", 0)
    assert read(line(1) + b"\n" + line(2) + b"\n") == (2, None, 0)
    assert read(line(1)) == (0, "torn", 0)


def test_a_nul_filled_tail_is_torn_within_the_bound(reader):
    read, line, _, _ = reader
    assert read(line(1) + b"\n" + bytes(100)) == (1, "torn", 0)


def test_a_tail_of_exactly_the_bound_is_torn_one_byte_more_is_damage(reader):
    read, line, bound, _ = reader
    size = bound if bound is not None else L.MAX_LINE_BYTES
    assert read(line(1) + b"\n" + bytes(size)) == (1, "torn", 0)
    assert read(line(1) + b"\n" + bytes(size + 1)) == (1, "torn" if bound is None else "damage", 0)


def test_a_complete_line_of_exactly_the_bound_is_used(reader):
    read, line, bound, _ = reader
    if bound is None:
        pytest.skip("no bound: lines of any length")
    raw = line(1)
    padded = raw + b" " * (bound - len(raw))  # JSON whitespace: the same entry, exactly `bound` bytes
    assert len(padded) == bound and read(padded + b"\n") == (1, None, 0)


def test_crlf_lines_are_read_as_the_decoder_reads_a_cr(reader):
    read, line, _, _ = reader
    assert read(line(1) + b"\r\n" + line(2) + b"\r\n") == (2, None, 0)
    assert read(line(1) + b"\r\n" + line(2) + b"\r") == (1, "torn", 0)  # a CR is not a line's end


def test_tail_of_and_line_spans_split_at_every_newline():
    data = b"a\n\nbc\r\nd"
    assert list(line_spans(data)) == [(0, 1), (2, 2), (3, 6)]
    t = tail_of(data, 1)
    assert (t.offset, t.length, t.torn) == (7, 1, True)
    assert tail_of(data, 0).overlong and tail_of(b"", 0) is None and tail_of(b"x\n", 0) is None
    assert list(line_spans(data, t.offset)) == list(line_spans(data))


def test_the_ledger_writer_cuts_a_torn_tail_and_refuses_an_overlong_one(tmp_path):
    from walctl.errors import NotClean
    from walctl.store.ledger import append_lines, ledger_path

    from walctl.store.fs import DEFAULT_FS

    d = str(tmp_path)
    fs = DEFAULT_FS.beneath(d)
    os.makedirs(os.path.dirname(ledger_path(d)))
    path = ledger_path(d)
    with open(path, "wb") as f:
        f.write(_ledger_line(1) + b"\n" + bytes(L.MAX_LINE_BYTES))
    append_lines(d, [_ledger_line(2) + b"\n"], fs)
    assert open(path, "rb").read() == _ledger_line(1) + b"\n" + _ledger_line(2) + b"\n"
    with open(path, "ab") as f:
        f.write(bytes(L.MAX_LINE_BYTES + 1))
    with pytest.raises(NotClean):
        append_lines(d, [_ledger_line(3) + b"\n"], fs)
    assert os.path.getsize(path) == 2 * (len(_ledger_line(1)) + 1) + L.MAX_LINE_BYTES + 1
