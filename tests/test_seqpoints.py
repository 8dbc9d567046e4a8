"""Points of the file a writer appends to (`.walctl/points.jsonl`, format/seqpoints.py): a reader seeking in
the last, unsealed file starts at a checked point instead of its first byte (issue #27: "the active file is
scanned from its last indexed point"). Every test compares the readers' bytes with the run that has
neither index nor points: a wrong point costs time, never an answer.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import make_chunk, make_record, tree_digest, write_dir
from seek_cases import json_lines, replay_report, seq_outputs, seq_scan, write_json_lines
from simfs import SimCrash, SimFS
from walctl.format import seqpoints as P
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.replay import ReplayOptions, replay
from walctl.ops.wal.segments import SegmentWalk
from walctl.ops.wal.write import WalWriter
from walctl.store.seqpoints import points_path, read_points


def _v2(path) -> str:
    with WalWriter(str(path), max_chunk_bytes=96_000) as w:
        for i in range(2300):
            w.append(i % 16, b"mem-%d" % (i % 7), b"p%d" % i * (1 + i % 9), 1795300000000 + i)
    return str(path)


def _segments(path) -> str:
    with WalWriter(str(path), format="segments") as w:
        for i in range(11_900):
            w.append_entry("memory_add", {"k": i, "text": "x" * (i % 13)}, 1795300000 + i)
    return str(path)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    base = tmp_path_factory.mktemp("seqpoints")
    return _v2(base / "v2"), _segments(base / "seg")


def _copy(src: str, tmp_path) -> str:
    """A copy whose points name the copy's inodes (a copy is other files: points name the original's)."""
    d = str(tmp_path / "log")
    shutil.copytree(src, d)
    objs = _line_objs(d)
    for o in objs:
        o["ino"] = os.stat(os.path.join(d, o["file"])).st_ino
    _write_objs(d, objs)
    return d


def _files(d: str) -> list[str]:
    return sorted(n for n in os.listdir(d) if n.startswith("wal"))


def _records(d: str) -> list[tuple[str, int, int]]:
    """(file, offset, sequence) of every record, by the plain walk."""
    if _files(d)[0].endswith(".bin"):
        return [(r.file, r.offset, r.sequence) for r in RecordWalk(d) if isinstance(r, Record)]
    return [(os.path.basename(f), e.offset, e.sequence) for f, e in SegmentWalk(d)]


def _line_objs(d: str) -> list[dict]:
    return json_lines(points_path(d))


def _write_objs(d: str, objs: list[dict]) -> None:
    write_json_lines(points_path(d), objs)


_outputs, _scan = seq_outputs, seq_scan


def _targets(d: str) -> list[int]:
    last = _line_objs(d)[-1]
    m = last["marks"]
    return [m[1][0], m[1][0] + 1, m[-1][0] + 3, last["last_seq"], last["last_seq"] + 1, last["first_seq"] + 1]


def _start(d: str, after: int):
    rep = replay(d, lambda _: None, ReplayOptions(after=after))
    return rep.index


@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_the_writer_keeps_points_of_the_last_file_only_at_the_records_the_walk_finds(logs, which):
    d = logs[which]
    last = _files(d)[-1]
    objs = [o for o in _line_objs(d) if o["file"] == last]  # (lines of sealed files go when the writer opens)
    recs = [(off, seq) for f, off, seq in _records(d) if f == last]
    expected = [list(r[::-1]) for i, r in enumerate(recs) if i % P.MARK_RECORDS == 0]
    assert objs[-1]["marks"] == expected and len(expected) >= 3
    # a line is written when a mark is added: last_seq says how far the file was durable then
    first, upto = objs[-1]["first_seq"], objs[-1]["last_seq"]
    assert first == recs[0][1] and expected[-1][0] <= upto <= recs[-1][1]
    assert objs[-1]["ino"] == os.stat(os.path.join(d, last)).st_ino


@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_points_give_the_scans_bytes_and_start_inside_the_last_file(logs, tmp_path, cli, which):
    d = _copy(logs[which], tmp_path)
    before = tree_digest(d)
    for seq in _targets(d):
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq), seq
    assert tree_digest(d) == before  # read-only: index and points included
    mark = _line_objs(d)[-1]["marks"][-1]
    sk = _start(d, mark[0] + 2)
    assert sk.state == "used" and sk.findings == ()
    assert (sk.start.file, sk.start.offset, sk.start.sequence) == (len(_files(d)) - 1, mark[1], mark[0])


def _edit_last(fn):
    def damage(d):
        objs = _line_objs(d)
        fn(objs[-1])
        _write_objs(d, objs)
    return damage


def _edit_every(fn):
    def damage(d):
        objs = _line_objs(d)
        for o in objs:
            fn(o)
        _write_objs(d, objs)
    return damage


def _append(raw: bytes):
    def damage(d):
        with open(points_path(d), "ab") as f:
            f.write(raw)
    return damage


def _other_inode(d):  # the last file copied over itself: the same bytes under another inode
    p = os.path.join(d, _files(d)[-1])
    shutil.copy2(p, p + ".new")
    os.replace(p + ".new", p)


def _truncated(d):  # the last file cut (in place) between its first two marks
    p = os.path.join(d, _files(d)[-1])
    os.truncate(p, _line_objs(d)[-1]["marks"][1][1] - 3)


def _bump_mark_offset(o):
    o["marks"][1][1] += 1


def _bump_mark_sequence(o):
    o["marks"][1][0] += 1


def _bump_every_mark(o):  # every mark but the first past where it claims: the reader enters at one
    o["marks"] = [o["marks"][0]] + [[s, off + 1] for s, off in o["marks"][1:]]


STALE = {
    "bad-crc": _append(b'{"crc32c":"00000000","event":"points","v":1}\n'),
    "mark-inside-a-record": _edit_last(_bump_every_mark),
    "mark-names-another-sequence": _edit_last(lambda o: o["marks"].__setitem__(
        slice(1, None), [[s + 1, off] for s, off in o["marks"][1:]])),
    "not-json": _append(b"\x00\x01 not a line\n"),
}
QUIET = {
    "torn-tail": _append(b'{"crc32c":"12345678","end":9'),
    "other-inode": _other_inode,
    "cut-below-the-marks": _truncated,
    "points-of-a-file-not-there": _edit_every(lambda o: o.__setitem__(
        "file", "wal-999998.bin" if o["file"].endswith(".bin") else "wal_99999998.log")),
}


@pytest.mark.parametrize("damage", sorted(STALE))
@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_every_wrong_point_falls_back_to_the_scan_with_a_finding(logs, tmp_path, cli, which, damage):
    d = _copy(logs[which], tmp_path)
    targets = _targets(d)
    STALE[damage](d)
    before = tree_digest(d)
    for seq in targets:
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq), seq
    assert tree_digest(d) == before  # a read-only command never mends the points
    doc, r = replay_report(cli, d, targets[2] - 1)
    stale = [f for f in doc["findings"] if f["class"] == "index-stale"]
    assert doc["index"]["state"] == "stale" and len(stale) == 1 and stale[0]["exit_code"] == 0, doc["index"]
    assert P.POINTS_NAME in stale[0]["reason"] and r.code == 0


@pytest.mark.parametrize("damage", sorted(QUIET))
@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_points_of_another_file_or_a_torn_line_are_no_finding(logs, tmp_path, cli, which, damage):
    d = _copy(logs[which], tmp_path)
    targets = _targets(d)
    QUIET[damage](d)
    for seq in targets:
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq), seq
    doc, _ = replay_report(cli, d, targets[2] - 1)
    assert not [f for f in doc["findings"] if f["class"] == "index-stale"], doc["findings"]
    sk = _start(d, targets[2] - 1)
    if damage == "torn-tail":  # the whole lines before it still count
        assert sk.start.offset == _line_objs_whole(d)[-1]["marks"][-1][1]
    else:  # the last file is read from its start
        assert sk.start is not None and sk.start.file == len(_files(d)) - 1 and sk.start.offset == 0


def _line_objs_whole(d: str) -> list[dict]:
    with open(points_path(d), "rb") as f:
        return [json.loads(x) for x in f.read().split(b"\n")[:-1] if x.strip()]


def test_a_writer_drops_points_of_files_sealed_or_gone_and_a_torn_tail_when_it_opens(logs, tmp_path):
    d = _copy(logs[0], tmp_path)
    objs = _line_objs(d)
    ghost = dict(objs[-1], file="wal-999998.bin")
    _write_objs(d, [ghost] + objs)
    _append(b'{"torn')(d)
    with WalWriter(d) as w:
        w.append(1, b"m", b"one more")
    read = read_points(d)
    assert read.bad == () and read.torn_offset is None
    assert {ln.get("file") for ln in read.lines} == {_files(d)[-1]}  # the ghost went; the last file's stayed


@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_a_writer_continuing_a_file_keeps_the_marks_before_its_own(logs, tmp_path, cli, which):
    d = _copy(logs[which], tmp_path)
    last = _files(d)[-1]
    before = _line_objs(d)[-1]["marks"]
    with WalWriter(d, format="v2" if which == 0 else "segments") as w:
        for i in range(600):
            if which == 0:
                w.append(3, b"again", b"q%d" % i, 1795400000000 + i)
            else:
                w.append_entry("memory_add", {"again": i}, 1795400000 + i)
    assert _files(d)[-1] == last  # the same file, continued
    marks = _line_objs(d)[-1]["marks"]
    recs = {seq: off for f, off, seq in _records(d) if f == last}
    assert marks[:len(before)] == before  # what the first writer's records had, hopped again
    assert all(recs[s] == off for s, off in marks) and len(marks) > len(before)
    for seq in (marks[-1][0] + 1, marks[len(before)][0], before[-1][0] + 5):
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq), seq
    sk = _start(d, marks[-1][0] + 1)
    assert (sk.start.offset, sk.start.sequence) == (marks[-1][1], marks[-1][0])


def test_seal_records_points_of_the_last_file_once_and_only_when_it_reads_clean(tmp_path, cli):
    d = write_dir(tmp_path / "java", {0: make_chunk(range(1, 301)), 1: make_chunk(range(301, 1101))})
    assert not os.path.exists(points_path(d))
    assert cli("seal", d, "--apply").code == 0
    objs = _line_objs(d)
    recs = [(off, seq) for f, off, seq in _records(d) if f == "wal-000001.bin"]
    assert [o["file"] for o in objs] == ["wal-000001.bin"]
    assert objs[0]["marks"] == [list(r[::-1]) for i, r in enumerate(recs) if i % P.MARK_RECORDS == 0]
    assert cli("seal", d, "--apply").code == 0 and len(_line_objs(d)) == 1  # nothing new to say
    # a torn tail: the points stop at the last whole record, and the readers agree with the scan
    with open(os.path.join(d, "wal-000001.bin"), "ab") as f:
        f.write(make_chunk([1101])[8:40])
    for seq in (900, 1000, 1100):
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq)
    # rot in the last file: verify does not read it clean, so seal drops its points
    p = os.path.join(d, "wal-000001.bin")
    data = bytearray(open(p, "rb").read())
    data[recs[400][0] + 60] ^= 0xFF
    open(p, "wb").write(bytes(data))
    cli("seal", d, "--apply")
    assert _line_objs(d) == []
    for seq in (700, 1000):
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq)


def _simfs_session(fs) -> list:
    """A writer of 60 records in chunks of ~20, points every 4 durable records with a mark every 3."""
    attempted = []
    w = WalWriter("/data/wal", fs=fs, sync="batch", batch_records=2, max_chunk_bytes=1500)
    for i in range(60):
        attempted.append(w.append(i % 16, b"m%d" % (i % 3), b"x" * (i % 40), 1795300000000 + i))
    w.close()
    return attempted


def test_a_crash_at_every_step_leaves_points_a_reader_can_trust(monkeypatch):
    monkeypatch.setattr("walctl.store.appender.POINTS_EVERY", 4)
    monkeypatch.setattr("walctl.format.seqpoints.MARK_RECORDS", 3)
    monkeypatch.setattr("walctl.store.appender.MARK_RECORDS", 3)
    probe = SimFS(0)
    probe.makedirs_durable("/data")
    _simfs_session(probe)
    assert P.latest(read_points("/data/wal", probe).lines)  # the session wrote points
    total = probe.ops
    checked = 0
    for n in range(1, total + 1):
        fs = SimFS(n, crash_at=n)
        fs.makedirs_durable("/data")
        with pytest.raises(SimCrash):
            _simfs_session(fs)
        fs.crash()
        WalWriter("/data/wal", fs=fs).close()  # the next writer: cuts a torn tail, trims the points
        every = [r.sequence for r in RecordWalk("/data/wal", fs=fs) if isinstance(r, Record)]
        for after in range(0, len(every), 5):
            got: list[bytes] = []
            rep = replay("/data/wal", got.extend, ReplayOptions(after=after), fs=fs)
            seqs = [json.loads(x)["sequence"] for x in b"".join(got).splitlines()]
            assert seqs == every[after:], (n, after)
            assert rep.index.findings == () and rep.index.state != "stale", (n, after, fs.log[-8:])
            checked += rep.index is not None and rep.index.start is not None and rep.index.start.offset > 0
    assert checked  # some of those replays entered a file at a point


def test_a_line_stays_under_the_line_bound_however_many_records_the_file_holds():
    """A chunk far above the default size of tiny records: marks stop at MAX_MARKS, the line stays a line."""
    from walctl.format import ledger as L

    chunk = make_chunk(range(1, 1 + 300_000), payload_for=lambda s: b"")
    pts, end = P.scan(chunk, True, "wal-000000.bin", 1, 10**9)
    size = len(make_record(1, b""))  # every record of this chunk has this size
    assert pts.last_seq == P.MAX_MARKS * P.MARK_RECORDS and end == pts.marks[-1][1] + P.MARK_RECORDS * size
    assert len(pts.marks) == P.MAX_MARKS and pts.marks[-1][0] == 1 + (P.MAX_MARKS - 1) * P.MARK_RECORDS
    line = L.encode_line(P.POINTS, "2026-11-27T00:00:00Z", P.check_points,
                         **pts._replace(marks=tuple((s + 10**15, o + 10**10) for s, o in pts.marks),
                                        first_seq=1 + 10**15, last_seq=pts.last_seq + 10**15).fields())
    assert len(line) < L.MAX_LINE_BYTES
    assert isinstance(L.decode_line(line.rstrip(b"\n"), check=P.check_points), L.Line)


def test_seal_seals_even_when_its_points_cannot_be_written(tmp_path, cli):
    """Points are a hint: a `.walctl/points.jsonl` that is a directory stops them, not the seal."""
    d = write_dir(tmp_path / "java", {0: make_chunk(range(1, 301)), 1: make_chunk(range(301, 601))})
    os.makedirs(points_path(d))
    r = cli("seal", d, "--apply")
    assert r.code == 0 and "wal-000000.bin" in r.out, (r.out, r.err)
    assert cli("verify", d).code == 0 and os.path.isdir(points_path(d))
    for seq in (100, 450):
        assert _outputs(cli, d, seq)[2][1] == 0


def test_cut_and_repair_drop_the_points_of_the_file_they_cut(logs, tmp_path, cli):
    """A file cut in place keeps its inode: its points past the cut would name records a later writer puts
    elsewhere, so the cut drops them first (a review found one index-stale warning per read after a cut)."""
    d = _copy(logs[0], tmp_path)
    last = _files(d)[-1]
    marks = _line_objs(d)[-1]["marks"]
    assert cli("cut", d, "--after", marks[-1][0] - 5, "--apply").code == 0
    assert all(o["file"] != last for o in _line_objs(d))
    # repair of a torn tail: the same
    e = _copy(logs[0], tmp_path / "two")
    with open(os.path.join(e, last), "ab") as f:
        f.write(make_record(10**6, b"torn")[:30])
    assert cli("repair", e, "--apply").code == 0
    assert all(o["file"] != last for o in _line_objs(e))
    with WalWriter(e) as w:  # the next writer gives the file points again
        for i in range(600):
            w.append(2, b"n", b"again %d" % i)
    assert [o["file"] for o in _line_objs(e)][-1] == last
    for seq in (_line_objs(e)[-1]["marks"][-1][0] + 1,):
        assert _outputs(cli, e, seq) == _scan(cli, e, tmp_path, seq)
