"""`inspect --since/--until` on ADR-003 segments (docs/format.md sections 6 and 16): entries stamp Unix
seconds (an integer or a fraction), compared with T in ms as seconds x 1000 exactly (1.001 s is 1001 ms);
the sequence index gives sealed segments their floor and ceiling in ms, and inspect starts past the
leading segments wholly outside the window.

The time filter gives what a brute-force filter over every entry gives, for many windows (timestamps out of
order, equal, fractional; windows before and after everything, empty ones). Every wrong time range in the
index gives exactly the bytes and exit code of the same command without an index, with one `index-stale`
warning; a good index gives them too, reading less; a segment line without times is no finding."""
from __future__ import annotations

import json
import os
import random
import shutil
from fractions import Fraction

import pytest

from seek_cases import edit_index_line, json_lines, spoil_max_ts, touch, write_json_lines
from conftest import tree_digest
from walctl.format import seqindex as X
from walctl.format.segment import encode_frame, seal
from walctl.ops.wal.segments import SegmentWalk, select_entries
from walctl.store.seqindex import index_path, read_index

PER = 600  # entries a segment: marks at 0, 256 and 512
SEGS = 4
T0 = 1795300000  # seconds
LATE = 300  # sequence 300 (segment 0, between marks) is stamped among segment 2's entries
EARLY = 1500  # sequence 1500 (segment 2) is stamped among segment 0's


def _ts(s: int):
    if s == LATE:
        return T0 + (2 * PER + 40) // 3 + 0.001  # a fraction: exactly 1 ms after a second
    if s == EARLY:
        return T0 + 10
    if s % 7 == 0:
        return T0 + s // 3 + 0.25
    return T0 + s // 3  # three entries a second: equal timestamps


def _exact_ms(ts) -> Fraction:
    """The reference: the decimal value the entry says, in ms, with no float arithmetic."""
    return Fraction(str(ts)) * 1000


def _segment(seqs, encoding="msgpack") -> bytes:
    return b"".join(encode_frame(seal({"sequence": s, "timestamp": _ts(s), "operation": "memory_add",
                                       "data": {"k": s, "text": "x" * (s % 11)}}), encoding) for s in seqs)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    from walctl.cli import run

    d = tmp_path_factory.mktemp("segtime") / "seg"
    d.mkdir()
    for n in range(SEGS):
        enc = "json" if n == 1 else "msgpack"  # a JSON body's timestamp is indexed as well
        (d / f"wal_{n + 1:08d}.log").write_bytes(_segment(range(1 + n * PER, 1 + (n + 1) * PER), enc))
    assert run(["seal", str(d), "--apply"]) == 0
    return str(d)


def _copy(src, tmp_path, name="seg") -> str:
    dst = str(tmp_path / name)
    shutil.copytree(src, dst)
    return dst


def _lines(d):
    return json_lines(index_path(d))


def _write(d, objs):
    write_json_lines(index_path(d), objs)


def _ms(s: int) -> int:
    return int(_exact_ms(_ts(s)))


ALL = range(1, SEGS * PER + 1)
LO, HI = min(_exact_ms(_ts(s)) for s in ALL), max(_exact_ms(_ts(s)) for s in ALL)


def _windows() -> list:
    edge = [(None, None), (None, int(LO) - 1), (int(HI) + 1, None), (None, int(LO)), (int(HI), None),
            (_ms(LATE), _ms(LATE)), (_ms(LATE) - 1, _ms(LATE) - 1), (_ms(LATE) + 1, None),
            (_ms(3 * PER), None), (_ms(3 * PER) + 1, None), (None, _ms(PER)), (_ms(EARLY), _ms(EARLY)),
            (_ms(7) + 250, _ms(7) + 250), (_ms(7) + 249, _ms(7) + 249), (_ms(9), _ms(9)),  # equal stamps
            (_ms(2000), _ms(1000)), (_ms(2 * PER + 1), _ms(3 * PER)), (-(1 << 63), (1 << 63) - 1)]
    rnd = random.Random(27)
    for _ in range(60):
        a, b = sorted(rnd.randint(int(LO) - 2000, int(HI) + 2000) for _ in range(2))
        edge.append((None if rnd.random() < 0.1 else a, None if rnd.random() < 0.1 else b))
    return edge


WINDOWS = _windows()


def _brute(since, until) -> list:
    return [s for s in ALL if (since is None or _exact_ms(_ts(s)) >= since)
            and (until is None or _exact_ms(_ts(s)) <= until)]


def _walk(d, since, until):
    walk = SegmentWalk(d, seek_window=(since, until))
    return walk, [e.sequence for _, e in select_entries(walk, since_ms=since, until_ms=until)]


def test_the_index_holds_each_segments_floor_and_ceiling_in_ms(log):
    idx = read_index(log).entries
    assert "wal_00000004.log" not in idx  # the last segment is never sealed
    for n in range(SEGS - 1):
        e = idx[f"wal_{n + 1:08d}.log"]
        times = [_exact_ms(_ts(s)) for s in range(1 + n * PER, 1 + (n + 1) * PER)]
        import math
        assert (e.min_ts, e.max_ts) == (math.floor(min(times)), math.ceil(max(times))), n
    assert idx["wal_00000001.log"].max_ts == _ms(LATE)  # the fraction's decimal value, not 1000.99...
    assert idx["wal_00000003.log"].min_ts == _ms(EARLY)


def test_the_time_filter_is_the_brute_force_filter_for_every_window(log):
    for since, until in WINDOWS:
        walk, seqs = _walk(log, since, until)
        assert seqs == _brute(since, until), (since, until)
        assert walk.report is not None and walk.report.exit_code == 0
        assert walk.seek is None or not walk.seek.findings


def test_leading_segments_wholly_outside_are_skipped(log):
    walk, seqs = _walk(log, _ms(3 * PER) + 1, None)  # in the last segment: the three before are skipped
    assert walk.seek.state == "used" and walk.seek.start.file == 3 and seqs == _brute(_ms(3 * PER) + 1, None)
    walk, seqs = _walk(log, int(HI) + 1, None)  # after everything: the last segment is still read
    assert walk.seek.start.file == 3 and seqs == []
    # the late entry of segment 0 keeps segment 0 in a window that holds its time, and the early entry
    # of segment 2 keeps segment 2 in one before segment 1
    walk, seqs = _walk(log, _ms(LATE), _ms(LATE))
    assert walk.seek.start is None and seqs == [LATE]
    walk, seqs = _walk(log, _ms(EARLY), _ms(EARLY))
    assert walk.seek.start is None and EARLY in seqs
    walk, seqs = _walk(log, _ms(2 * PER + 60), _ms(2 * PER + 90))  # after LATE's time: 0, 1 skipped
    assert walk.seek.start.file == 2 and seqs == _brute(_ms(2 * PER + 60), _ms(2 * PER + 90))


def _args(w) -> list:
    return [*(("--since", str(w[0])) if w[0] is not None else ()),
            *(("--until", str(w[1])) if w[1] is not None else ())]


CLI_WINDOWS = [w for w in WINDOWS[:18] if w != (None, None)]


def _outputs(cli, d, windows=CLI_WINDOWS):
    out = []
    for w in windows:
        for fmt in ("--jsonl", "--limit=5"):
            r = cli("inspect", d, fmt, *_args(w))
            out.append((w, fmt, r.code, r.out, r.err))
    return out


def _scan(cli, d, tmp_path, windows=CLI_WINDOWS):
    plain = _copy(d, tmp_path, "plain")
    os.unlink(index_path(plain))
    got = _outputs(cli, plain, windows)
    shutil.rmtree(plain)
    return [(w, f, c, o.replace(plain, d), e.replace(plain, d)) for w, f, c, o, e in got]


def test_a_good_index_gives_the_scans_bytes(log, tmp_path, cli):
    d = _copy(log, tmp_path)
    before = tree_digest(d)
    got = _outputs(cli, d)
    assert got == _scan(cli, d, tmp_path)
    assert tree_digest(d) == before
    for (w, fmt, code, out, err) in got:
        if fmt == "--jsonl":
            assert [json.loads(x)["sequence"] for x in out.splitlines()] == _brute(*w), w


_edit = edit_index_line


def _touch(d):
    touch(os.path.join(d, "wal_00000001.log"))


_bad_crc = spoil_max_ts


def _seconds(d):  # the line in seconds, as the entries stamp them: every mark is outside
    objs = _lines(d)
    for o in objs:
        o["min_ts"], o["max_ts"] = o["min_ts"] // 1000, o["max_ts"] // 1000
    _write(d, objs)


CORRUPTIONS = {
    "narrowed-below-a-mark": _edit(0, max_ts=_ms(200)),  # the mark at 513 is stamped later
    "narrowed-above-the-first": _edit(1, min_ts=_ms(PER + 1) + 1),
    "shifted-past-the-marks": _edit(0, min_ts=_ms(PER) + 5000, max_ts=_ms(PER) + 9000),
    "reversed": _edit(0, min_ts=_ms(9), max_ts=_ms(1)),
    "half-null": _edit(0, max_ts=None),
    "beyond-i64": _edit(0, max_ts=1 << 70),
    "float-time": _edit(0, min_ts=float(_ms(1))),
    "string-time": _edit(0, min_ts=str(_ms(1))),
    "times-on-an-empty-range": _edit(1, records=0),
    "bad-crc": _bad_crc,
    "in-seconds": _seconds,
    "touched-segment": _touch,
}
WINDOW = (_ms(3 * PER) + 1, None)  # a good index skips segments 0..2


@pytest.mark.parametrize("damage", sorted(CORRUPTIONS))
def test_every_wrong_time_range_gives_the_scans_bytes_with_a_finding(log, tmp_path, cli, damage):
    d = _copy(log, tmp_path)
    CORRUPTIONS[damage](d)
    before = tree_digest(d)
    windows = [WINDOW, (_ms(2 * PER + 60), _ms(2 * PER + 90)), (None, int(LO) - 1)]
    got, want = _outputs(cli, d, windows), _scan(cli, d, tmp_path, windows)
    for g, w in zip(got, want):
        assert g[:4] == w[:4], g[:2]  # stdout and exit code: the scan's
        extra = [x for x in g[4].splitlines() if x not in w[4].splitlines()]
        if g[1] == "--jsonl" and g[0] == WINDOW:
            assert len(extra) == 1, extra
        assert all("index-stale" in x and "sequence index" in x for x in extra), extra
    assert tree_digest(d) == before  # read-only: a reader does not mend the index
    walk, seqs = _walk(d, *WINDOW)
    assert seqs == _brute(*WINDOW)
    assert walk.seek.state == "stale" and walk.seek.findings[0].cls == "index-stale", walk.seek


def _untimed(d):
    objs = _lines(d)
    for o in objs:
        o["min_ts"] = o["max_ts"] = None
    _write(d, objs)


def test_a_segment_line_without_times_is_read_without_a_finding_and_seal_gives_it_times(log, tmp_path, cli):
    d = _copy(log, tmp_path)
    good = open(index_path(d), "rb").read()
    _untimed(d)
    assert _outputs(cli, d, [WINDOW]) == _scan(cli, d, tmp_path, [WINDOW])
    walk, seqs = _walk(d, *WINDOW)
    assert walk.seek.state == "not-needed" and not walk.seek.findings and seqs == _brute(*WINDOW)
    assert cli("seal", d, "--apply").code == 0
    assert open(index_path(d), "rb").read() == good
    assert _walk(d, *WINDOW)[0].seek.start.file == 3


def test_times_no_line_can_hold_leave_a_segment_untimed(tmp_path, cli):
    """NaN and Infinity (a JSON body may say them) and times beyond 64 bits of ms: no range, no skip;
    `seal --apply` run again does not write the index again for them."""
    d = tmp_path / "odd"
    d.mkdir()
    odd = {2: float("nan"), 3: float("inf"), 4: 10**17}
    for n, ts in odd.items():
        frame = encode_frame(seal({"sequence": n, "timestamp": ts, "operation": "memory_add", "data": {}}), "json")
        (d / f"wal_{n:08d}.log").write_bytes(frame)
    (d / "wal_00000001.log").write_bytes(encode_frame(seal({"sequence": 1, "timestamp": 5, "operation": "x",
                                                             "data": {}})))
    (d / "wal_00000009.log").write_bytes(encode_frame(seal({"sequence": 5, "timestamp": 6, "operation": "x",
                                                             "data": {}})))
    assert cli("seal", str(d), "--apply").code == 0
    idx = read_index(str(d)).entries
    assert [(idx[f"wal_{n:08d}.log"].min_ts, idx[f"wal_{n:08d}.log"].max_ts) for n in odd] == [(None, None)] * 3
    assert (idx["wal_00000001.log"].min_ts, idx["wal_00000001.log"].max_ts) == (5000, 5000)
    stat = os.stat(index_path(str(d)))
    assert cli("seal", str(d), "--apply").code == 0
    assert os.stat(index_path(str(d))).st_mtime_ns == stat.st_mtime_ns  # nothing new: not written again
    # NaN is in no window; +Infinity is after every time
    r = cli("inspect", str(d), "--jsonl", "--since", "5500")
    assert [json.loads(x)["sequence"] for x in r.out.splitlines()] == [3, 4, 5]
    r = cli("inspect", str(d), "--jsonl", "--until", "5000")
    assert [json.loads(x)["sequence"] for x in r.out.splitlines()] == [1]
    r = cli("inspect", str(d), "--jsonl")
    assert [json.loads(x)["sequence"] for x in r.out.splitlines()] == [1, 2, 3, 4, 5]


def test_the_writers_sealer_gives_segments_their_times(tmp_path):
    from walctl.ops.wal.write import WalWriter

    d = str(tmp_path / "w")
    w = WalWriter(d, format="segments", sync="none")
    for i in range(10_050):  # one full segment rolls and is sealed
        w.append_entry("memory_add", {"i": i}, T0 + i // 2)
    w.close()
    e = read_index(d).entries["wal_00000001.log"]
    assert (e.records, e.min_ts, e.max_ts) == (10_000, T0 * 1000, (T0 + 4999) * 1000)
    walk, seqs = _walk(d, (T0 + 5000) * 1000, None)
    assert walk.seek.start.file == 1 and seqs == list(range(10_001, 10_051))


def test_build_entry_times_of_a_segment():
    body = _segment(range(1, 40))
    seal_fields = {"file": "wal_00000001.log", "size": len(body), "records": 39, "first_seq": 1, "last_seq": 39,
                   "sha256": "0" * 64}
    e = X.build_entry(body, False, seal_fields, 0)
    assert (e.min_ts, e.max_ts) == (_ms(1), _ms(39))
    frames = [encode_frame(seal({"sequence": s, "timestamp": ts, "operation": "x", "data": {}}))
              for s, ts in ((1, 7.0004), (2, 1.5), (3, -2.0006))]  # sub-ms fractions: floor and ceiling
    body = b"".join(frames)
    e = X.build_entry(body, False, dict(seal_fields, size=len(body), records=3, last_seq=3), 0)
    assert (e.min_ts, e.max_ts) == (-2001, 7001)


def _frames(entries, encoding="msgpack"):
    body = b"".join(encode_frame(seal(e), encoding) for e in entries)
    from walctl.format.seqindex import segment_offsets
    return body, segment_offsets(body)


def _entry(s, ts, data=None):
    return {"sequence": s, "timestamp": ts, "operation": "memory_add", "data": data if data is not None else {"s": s}}


RANGES = {  # timestamps (and data) -> the range, through the fast path or by decoding every body
    "uint32": [_entry(s, T0 + (s * 7919) % 500) for s in range(1, 300)],
    "float64": [_entry(s, T0 + ((s * 7919) % 500) / 1000) for s in range(1, 300)],
    "mixed": [_entry(s, T0 + s if s % 2 else T0 - s + 0.5) for s in range(1, 300)],
    "small-ints": [_entry(s, s % 130 - 30) for s in range(1, 300)],  # fixints, int8, uint8
    "negative-floats": [_entry(s, -1.5 * s) for s in range(1, 50)],
    "nested-timestamp": [_entry(s, T0 + s, {"timestamp": 1.0 if s == 7 else T0}) for s in range(1, 50)],
    "the-key-in-a-value": [_entry(s, T0 + s, "timestamp\xcb" if s == 3 else "x") for s in range(1, 50)],
    "one": [_entry(1, 2**32 + 5)],
}


@pytest.mark.parametrize("case", sorted(RANGES))
@pytest.mark.parametrize("encoding", ["msgpack", "json"])
def test_timestamp_range_is_the_decoded_range(case, encoding, monkeypatch):
    from walctl.format import segment
    from walctl.format.segment import timestamp_range

    if encoding == "msgpack" and case in ("uint32", "float64"):  # what the writer stamps: no body decoded
        monkeypatch.setattr(segment, "body_timestamp", lambda body: pytest.fail("decoded"))
    entries = RANGES[case]
    body, offs = _frames(entries, encoding)
    stamps = [e["timestamp"] for e in entries]
    assert timestamp_range(body, offs, len(body)) == (min(stamps), max(stamps))
    assert timestamp_range(body, [], 0) is None
