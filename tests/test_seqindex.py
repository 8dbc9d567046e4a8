"""The sequence index (`.walctl/index.jsonl`): a hint, never an answer.

Every way the index can be wrong (wrong offsets, wrong sequences, truncated, a bad CRC, stale after an
append, a repair's cut or a rewrite, pointing past the end, huge numbers, another file's hash, no ledger)
gives exactly the bytes and exit code the scan gives (the same command with the index removed), with an
`index-stale` warning; a good index gives the scan's bytes too, reading less. Read-only commands never
write it."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import make_chunk, tree_digest, write_dir
from seek_cases import json_lines, replay_report, seq_outputs, seq_scan, write_json_lines
from walctl.format import seqindex as X
from walctl.format.ledger import crc32c
from walctl.ops.wal.replay import ReplayOptions, replay
from walctl.store.seqindex import index_path, read_index

PER_CHUNK = 600  # records per chunk: marks every 256 records, so three marks a chunk
CHUNKS = 4


def v2_log(tmp_path, cli) -> str:
    d = write_dir(tmp_path / "wal", {i: make_chunk(range(1 + i * PER_CHUNK, 1 + (i + 1) * PER_CHUNK),
                                                   payload_for=lambda s: b"p%d" % s * (1 + s % 7))
                                     for i in range(CHUNKS)})
    assert cli("seal", d, "--apply").code == 0
    return d


def segment_log(tmp_path, cli) -> str:
    from walctl.format.segment import encode_frame, seal

    d = tmp_path / "seg"
    d.mkdir()
    for n in range(CHUNKS):
        body = b"".join(encode_frame(seal({"sequence": s, "timestamp": 1795300000 + s, "operation": "memory_add",
                                           "data": {"k": s, "text": "x" * (s % 13)}}))
                        for s in range(1 + n * PER_CHUNK, 1 + (n + 1) * PER_CHUNK))
        (d / f"wal_{n + 1:08d}.log").write_bytes(body)
    assert cli("seal", str(d), "--apply").code == 0
    return str(d)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """(V2 directory, segment directory), each sealed and indexed; tests copy them."""
    from walctl.cli import run

    base = tmp_path_factory.mktemp("seqindex")

    def cli(*args):
        class R:
            code = run([str(a) for a in args])
        return R

    return v2_log(base, cli), segment_log(base, cli)


def _copy(src: str, tmp_path) -> str:
    dst = str(tmp_path / os.path.basename(src))
    shutil.copytree(src, dst)
    return dst


def _lines(d: str) -> list[dict]:
    return json_lines(index_path(d))


def _write_lines(d: str, objs: list[dict], fix_crc: bool = True) -> None:
    write_json_lines(index_path(d), objs, fix_crc)


def _edit_marks(fn):
    def corrupt(d):
        objs = _lines(d)
        objs[-1]["marks"] = fn(objs[-1]["marks"], objs[-1])
        _write_lines(d, objs)
    return corrupt


def _raw(fn):
    def corrupt(d):
        with open(index_path(d), "rb") as f:
            data = f.read()
        with open(index_path(d), "wb") as f:
            f.write(fn(data))
    return corrupt


def _sealed_file(d: str) -> str:
    return os.path.join(d, _lines(d)[-1]["file"])


def _append_to_sealed(d):
    with open(_sealed_file(d), "ab") as f:
        f.write(b"\0" * 16)


def _cut_sealed(d):  # what a repair's cut leaves: the file shorter than its seal
    p = _sealed_file(d)
    os.truncate(p, os.path.getsize(p) - 5)


def _rewrite_marks_keeping_stat(d):  # the same size, inode and mtime, other bytes at every mark
    p = _sealed_file(d)
    st = os.stat(p)
    with open(p, "r+b") as f:
        for _, off in _lines(d)[-1]["marks"]:
            f.seek(off + 5)
            b = f.read(1)
            f.seek(off + 5)
            f.write(bytes([b[0] ^ 0xFF]))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))


def _other_hash(d):
    objs = _lines(d)
    objs[0]["sha256"] = "0" * 64
    _write_lines(d, objs)


def _no_ledger(d):
    os.unlink(os.path.join(d, ".walctl", "ledger.jsonl"))


CORRUPTIONS = {
    "offset-shifted": _edit_marks(lambda m, o: [[s, off + 8] for s, off in m]),
    "offset-of-the-next-mark": _edit_marks(lambda m, o: [[s, off] for (s, _), (_, off) in zip(m, m[1:])]),
    "sequence-plus-one": _edit_marks(lambda m, o: [[s + 1, off] for s, off in m]),
    "sequence-minus-one": _edit_marks(lambda m, o: [[m[0][0], m[0][1]]] + [[s - 1, off] for s, off in m[1:]]),
    "past-eof": _edit_marks(lambda m, o: m + [[o["last_seq"], o["size"] + 100]]),
    "huge-offset": _edit_marks(lambda m, o: m[:1] + [[m[1][0], 1 << 62]]),
    "huge-sequence": _edit_marks(lambda m, o: m[:1] + [[1 << 62, m[1][1]]]),
    "beyond-i64": _edit_marks(lambda m, o: m[:1] + [[1 << 70, m[1][1]]]),
    "truncated": _raw(lambda b: b[:len(b) // 2]),
    "truncated-to-nothing-but-a-brace": _raw(lambda b: b"{"),
    "bad-crc": _raw(lambda b: b.replace(b'"crc32c":"', b'"crc32c":"f', 1)),
    "garbage": _raw(lambda b: bytes(range(256)) * 3),
    "stale-after-append": _append_to_sealed,
    "stale-after-repair-cut": _cut_sealed,
    "another-files-hash": _other_hash,
    "no-ledger": _no_ledger,
}


_outputs, _scan = seq_outputs, seq_scan


def _targets(d: str) -> list[int]:
    objs = _lines(d)
    last = objs[-1]
    m = last["marks"]
    return [m[1][0], m[1][0] + 1, m[-1][0] + 3, last["last_seq"], last["last_seq"] + 1, objs[0]["first_seq"] + 1]


@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_a_good_index_gives_the_scans_bytes_and_reads_less(logs, tmp_path, cli, which):
    d = _copy(logs[which], tmp_path)
    assert read_index(d).bad == () and len(read_index(d).entries) >= 2
    before = tree_digest(d)
    for seq in _targets(d):
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq)
    assert tree_digest(d) == before  # read-only: the index included
    after = _lines(d)[-1]["marks"][1][0]
    got: list[bytes] = []
    rep = replay(d, got.extend, ReplayOptions(after=after))
    assert rep.index.state == "used" and rep.index.findings == () and rep.index.start.offset > 0
    assert json.loads(got[0].split(b"\n")[0])["sequence"] == after + 1


@pytest.mark.parametrize("damage", sorted(CORRUPTIONS))
@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_every_wrong_index_falls_back_to_the_scan_with_a_finding(logs, tmp_path, cli, which, damage):
    d = _copy(logs[which], tmp_path)
    targets = _targets(d)
    CORRUPTIONS[damage](d)
    before = tree_digest(d)
    for seq in targets:
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq), seq
    assert tree_digest(d) == before  # a read-only command never repairs the index
    # the finding: replay's report names what was wrong, as a warning
    doc, r = replay_report(cli, d, targets[0] - 1)
    stale = [f for f in doc["findings"] if f["class"] == "index-stale"]
    assert doc["index"]["state"] == "stale" and len(stale) == 1 and stale[0]["exit_code"] == 0, doc["index"]
    assert "sequence index" in r.err.splitlines()[0]


@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_a_rewrite_keeping_size_and_mtime_is_caught_at_the_mark_a_reader_enters(logs, tmp_path, cli, which):
    """What the index trusts (size and mtime unchanged: the bytes are those it indexed) ends at the record
    it points to, which is always checked: bytes rewritten there are found. Bytes it lets a reader skip are
    verify's to check against the seal's SHA-256, as replay's covered prefix always skipped whole chunks."""
    d = _copy(logs[which], tmp_path)
    targets = [t for t in _targets(d) if t <= _lines(d)[-1]["last_seq"]]
    _rewrite_marks_keeping_stat(d)
    for seq in targets:
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq), seq
    r = cli("replay", d, "--after", targets[0] - 1, "--report", "-", "--quiet")
    doc = json.loads(r.err[r.err.index("{"):])
    assert doc["index"]["state"] == "stale" and "no intact record" in doc["findings"][-1]["reason"]


@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_no_index_is_no_finding_and_seal_rebuilds_it(logs, tmp_path, cli, which):
    d = _copy(logs[which], tmp_path)
    good = open(index_path(d), "rb").read()
    os.unlink(index_path(d))
    r = cli("replay", d, "--after", 10, "--to", 11, "--report", "-", "--quiet")
    doc = json.loads(r.err[r.err.index("{"):])
    assert doc["index"]["state"] == "absent" and not [f for f in doc["findings"] if f["class"] == "index-stale"]
    assert not os.path.exists(index_path(d))  # read-only commands do not write it
    assert cli("seal", d, "--apply").code == 0
    assert open(index_path(d), "rb").read() == good  # the same bytes: built from the files and their seals
    # a damaged index is written again by seal, whole
    with open(index_path(d), "ab") as f:
        f.write(b"{torn")
    assert cli("seal", d, "--apply").code == 0
    assert open(index_path(d), "rb").read() == good


def test_decoder_refuses_every_shape_a_writer_never_writes():
    e = X.IndexEntry("wal-000000.bin", 1000, "a" * 64, 123, 10, 1, 10, ((1, 8), (5, 400)))
    line = X.encode_entry(e)
    assert X.decode_index(line).entries == {"wal-000000.bin": e}
    obj = json.loads(line)
    for key, bad in (("file", "../x"), ("size", -1), ("size", 1 << 63), ("records", True), ("first_seq", 11),
                     ("marks", [[1, 8], [1, 400]]), ("marks", [[1, 8], [5, 8]]), ("marks", [[0, 8]]),
                     ("marks", [[1, 1000]]), ("marks", [[1, 8, 3]]), ("marks", "x"), ("v", 3),
                     ("marks", [[1, 8]] * (X.MAX_MARKS + 1)), ("mtime_ns", -5)):
        o = dict(obj, **{key: bad})
        o.pop("crc32c")
        o["crc32c"] = f"{crc32c(json.dumps(o, sort_keys=True, separators=(',', ':')).encode()):08x}"
        got = X.decode_index(json.dumps(o).encode() + b"\n")
        assert got.entries == {} and len(got.bad) == 1, (key, bad)
    # a line as walctl writes it (compact, its CRC good) is decoded but for its marks, which are parsed and
    # checked when a reader uses them: the same rule, and a problem a reader reports as index-stale
    for bad in ([[1, 8], [1, 400]], [[1, 8], [5, 8]], [[0, 8]], [[1, 1000]], [[1, 8, 3]], "x", [[1, True]]):
        o = dict(obj, marks=bad)
        o.pop("crc32c")
        o["crc32c"] = f"{crc32c(json.dumps(o, sort_keys=True, separators=(',', ':')).encode()):08x}"
        got = X.decode_index(json.dumps(o, sort_keys=True, separators=(",", ":")).encode() + b"\n")
        assert got.bad == () and X.marks_problem(got.entries["wal-000000.bin"]), bad
        assert tuple(got.entries["wal-000000.bin"].marks) == ()
    good = X.decode_index(line).entries["wal-000000.bin"]
    assert X.marks_problem(good) is None and good.marks == ((1, 8), (5, 400)) and good.mark_at_or_before(6) == (5, 400)
    assert len(X.decode_index(line[:-1]).bad) == 1  # torn
    assert len(X.decode_index(b"[" * 100_000 + b"\n").bad) == 1  # deep nesting is a bad line, not a crash


def _marks_problem_by_loop(marks, first, last, size):
    """The rule as one loop over the marks (the reference the whole-list passes must agree with)."""
    prev = (-1, -1)
    for m in marks:
        if not (type(m) is list and len(m) == 2 and all(type(x) is int and 0 <= x < 1 << 63 for x in m)):
            return "shape"
        if not (m[0] > prev[0] and m[1] > prev[1] and first <= m[0] <= last and m[1] < size):
            return "order"
        prev = (m[0], m[1])
    return None


def test_the_marks_rule_in_whole_list_passes_is_the_loops():
    import random

    rng = random.Random(27)
    atoms = [0, 1, 2, 5, 8, 9, 400, 999, 1000, -1, 1 << 63, True, 1.0, "1", None, [1], [1, 2, 3]]
    for _ in range(4000):
        n = rng.randrange(0, 5)
        marks = [[rng.choice(atoms), rng.choice(atoms)] if rng.random() < 0.9 else rng.choice(atoms)
                 for _ in range(n)]
        if rng.random() < 0.5:  # mostly well-formed rising lists, to reach the order checks
            seqs = sorted(rng.sample(range(0, 12), n))
            marks = [[s, 8 + 40 * i + rng.choice((0, 0, -40))] for i, s in enumerate(seqs)]
        ref = _marks_problem_by_loop(marks, 1, 10, 1000)
        got = X.marks_shape_problem(marks, 1, 10, 1000)
        assert (ref is None) == (got is None), (marks, ref, got)
        if ref == "shape":
            assert got == "a mark is not [sequence, offset]", (marks, got)


def test_the_writers_sealer_indexes_each_chunk_it_closes(tmp_path, cli):
    d = str(tmp_path / "w")
    import io
    import sys

    events = "".join(json.dumps({"type": "REMEMBER", "id": f"m{i}", "payload": "y" * 100}) + "\n" for i in range(400))
    old = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(events.encode()))
    try:
        assert cli("write", d, "--max-chunk-bytes", "4096", "--sync", "none").code == 0
    finally:
        sys.stdin = old
    idx = read_index(d)
    from walctl.format.ledger import fold
    from walctl.store.ledger import read_ledger

    sealed = fold(read_ledger(d).lines).sealed
    assert idx.bad == () and set(idx.entries) == set(sealed) and len(sealed) >= 10
    got: list[bytes] = []
    rep = replay(d, got.extend, ReplayOptions(after=200, to=205))
    assert rep.index.state == "used" and [json.loads(x)["sequence"] for x in b"".join(got).splitlines()] == \
        list(range(201, 206))


@pytest.mark.parametrize("which", [0, 1], ids=["v2", "segments"])
def test_a_cut_the_ledger_recorded_unindexes_the_file_without_a_warning(logs, tmp_path, cli, which):
    """walctl cut changes a sealed file on purpose and says so in the ledger (its seal no longer holds):
    readers read that file from its start, as one never indexed, and warn of nothing."""
    d = _copy(logs[which], tmp_path)
    mid = _lines(d)[0]["marks"][1][0]  # inside the first sealed file
    assert cli("cut", d, "--after", mid + 5, "--apply").code == 0
    for seq in (mid, mid + 3, mid + 5):
        assert _outputs(cli, d, seq) == _scan(cli, d, tmp_path, seq), seq
    r = cli("replay", d, "--after", mid, "--report", "-", "--quiet")
    doc = json.loads(r.err[r.err.index("{"):])
    assert doc["index"]["state"] in ("used", "not-needed") and doc["events"] == 5
    assert not [f for f in doc["findings"] if f["class"] == "index-stale"]


@pytest.mark.parametrize("wrong", [None, "last_off", "mark", "times"])
def test_the_sealers_line_from_the_writers_notes_is_the_line_built_from_the_bytes(tmp_path, monkeypatch, wrong):
    """The writer's sealer indexes a chunk it wrote from what it noted while appending (marks, the last
    record's offset, times), checked at a few records; a note that does not check is not used. Either way
    the line is the one built from every record of the file."""
    from walctl.ops.wal.write import WalWriter
    from walctl.store import appender as A

    if wrong is not None:
        real = A.ChunkAppender._index_hint

        def hint(self):
            got = real(self)
            if got is None:
                return got
            marks, last_off, lo, hi = got
            return {"last_off": (marks, last_off + 1, lo, hi), "mark": (marks[:1] + ((marks[1][0] + 1, marks[1][1]),)
                                                                        + marks[2:], last_off, lo, hi),
                    "times": (marks, last_off, hi + 1, hi)}[wrong]
        monkeypatch.setattr(A.ChunkAppender, "_index_hint", hint)
    built = []
    real_build = X.build_entry
    monkeypatch.setattr(X, "build_entry", lambda *a, **k: built.append(1) or real_build(*a, **k))
    d = str(tmp_path / "w")
    with WalWriter(d, max_chunk_bytes=200_000) as w:
        for i in range(9000):
            w.append(i % 16, b"m%d" % (i % 5), b"x" * (i % 150), 1795300000000 + (i * 7919) % 5000)
    written = open(index_path(d), "rb").read()
    entries = read_index(d).entries
    assert len(entries) >= 3 and all(len(e.marks) >= 2 for e in entries.values())
    assert len(built) == (0 if wrong is None else len(entries))  # the notes, or (wrong) every record
    os.unlink(index_path(d))
    monkeypatch.undo()
    from walctl.store.fs import DEFAULT_FS
    from walctl.store.seqindex import refresh_index

    refresh_index(d, DEFAULT_FS.beneath(d))  # from every record of every sealed chunk
    assert open(index_path(d), "rb").read() == written
