"""The sequence index's time range (`min_ts`/`max_ts`, docs/format.md section 16): `inspect --since/--until`
starts past the leading V2 chunks whose least and greatest timestamps lie wholly outside the window.

Every wrong or stale time range (narrowed, widened past a mark, reversed, half null, beyond 64 bits, a bad
CRC, a version-1 line, a changed file) gives exactly the bytes and exit code of the same command without
an index; a good one gives them too, reading less. Timestamps need not rise: a chunk holding one late
record among early ones is never skipped for a window that holds that record."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from seek_cases import edit_index_line, json_lines, spoil_max_ts, touch, write_json_lines
from conftest import TS0, tree_digest, write_dir
from walctl.format import seqindex as X
from walctl.format.ledger import crc32c
from walctl.format.v2 import encode_file_header, encode_record
from walctl.ops.wal.records import RecordFilter, RecordWalk
from walctl.store.seqindex import index_path, read_index

PER = 600
CHUNKS = 4
LATE = 250  # sequence 250 (chunk 0) is timed among chunk 2's records


def _ts(s: int) -> int:
    return TS0 + 2 * PER + 10 if s == LATE else TS0 + s


def _chunk(seqs) -> bytes:
    out = bytearray(encode_file_header())
    for s in seqs:
        out += encode_record(s, 0, b"mem", _ts(s), b"p%d" % s * (1 + s % 5), 0)
    return bytes(out)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    from walctl.cli import run

    d = write_dir(tmp_path_factory.mktemp("seqtime") / "wal",
                  {i: _chunk(range(1 + i * PER, 1 + (i + 1) * PER)) for i in range(CHUNKS)})
    assert run(["seal", d, "--apply"]) == 0
    return d


def _copy(src, tmp_path) -> str:
    dst = str(tmp_path / "wal")
    shutil.copytree(src, dst)
    return dst


def _lines(d):
    return json_lines(index_path(d))


def _write(d, objs, fix_crc=True):
    write_json_lines(index_path(d), objs, fix_crc)


WINDOWS = [(TS0 + 2 * PER + 5, None), (TS0 + 2 * PER + 5, TS0 + 2 * PER + 20), (TS0 + 3 * PER + 1, None),
           (None, TS0 + 3), (TS0 + PER + 1, TS0 + PER + 1), (TS0 + 99 * PER, None)]


def _args(w) -> list:
    return [*(("--since", w[0]) if w[0] is not None else ()), *(("--until", w[1]) if w[1] is not None else ())]


def _outputs(cli, d):
    out = []
    for w in WINDOWS:
        for fmt in ("--jsonl", "--payload=none"):
            r = cli("inspect", d, fmt, *_args(w))
            out.append((w, fmt, r.code, r.out, r.err))
    return out


def _scan(cli, d, tmp_path):
    plain = str(tmp_path / "plain")
    shutil.copytree(d, plain)
    if os.path.exists(index_path(plain)):
        os.unlink(index_path(plain))
    got = _outputs(cli, plain)
    shutil.rmtree(plain)
    return [(w, f, c, o.replace(plain, d), e.replace(plain, d)) for w, f, c, o, e in got]


def _walk(d, since, until):
    walk = RecordWalk(d, RecordFilter(since_ms=since, until_ms=until), seek_times=True)
    seqs = [r.sequence for r in walk]
    return walk, seqs


def test_the_index_holds_least_and_greatest_time_not_first_and_last(log):
    e = read_index(log).entries["wal-000000.bin"]
    assert (e.min_ts, e.max_ts, e.version) == (TS0 + 1, _ts(LATE), 2)
    assert read_index(log).entries["wal-000002.bin"].min_ts == TS0 + 2 * PER + 1


def test_a_good_index_gives_the_scans_bytes_and_skips_chunks_wholly_outside(log, tmp_path, cli):
    d = _copy(log, tmp_path)
    before = tree_digest(d)
    assert _outputs(cli, d) == _scan(cli, d, tmp_path)
    assert tree_digest(d) == before
    walk, seqs = _walk(d, TS0 + 3 * PER + 1, None)  # in the last chunk: the three before are skipped
    assert walk.seek.state == "used" and walk.seek.start.file == 3 and seqs == list(range(3 * PER + 1, 4 * PER + 1))
    # the late record of chunk 0 keeps chunk 0 in a window that holds its time
    walk, seqs = _walk(d, TS0 + 2 * PER + 5, TS0 + 2 * PER + 20)
    assert walk.seek.state == "not-needed" and seqs[0] == LATE and len(seqs) == 17
    walk, seqs = _walk(d, TS0 + PER + 1, TS0 + PER + 1)  # chunk 0 ends at the late time: kept as well
    assert walk.seek.start is None and seqs == [PER + 1]


_edit = edit_index_line


def _v1(d):
    objs = _lines(d)
    for o in objs:
        o["v"] = 1
        del o["min_ts"], o["max_ts"]
    _write(d, objs)


def _touch(d):
    touch(os.path.join(d, "wal-000000.bin"))


_bad_crc = spoil_max_ts


CORRUPTIONS = {
    "narrowed-below-a-mark": _edit(0, max_ts=TS0 + 200),  # the mark at 257 is timed later
    "narrowed-above-the-first": _edit(1, min_ts=TS0 + PER + 2),
    "reversed": _edit(0, min_ts=TS0 + 9, max_ts=TS0 + 1),
    "half-null": _edit(0, max_ts=None),
    "beyond-i64": _edit(0, max_ts=1 << 70),
    "times-on-an-empty-range": _edit(1, records=0),
    "string-time": _edit(0, min_ts="1"),
    "bad-crc": _bad_crc,
    "version-1-lines": _v1,
    "version-1-keys-with-v2": _edit(0, v=3),
    "touched-chunk": _touch,
}


@pytest.mark.parametrize("damage", sorted(CORRUPTIONS))
def test_every_wrong_time_range_gives_the_scans_bytes(log, tmp_path, cli, damage):
    d = _copy(log, tmp_path)
    CORRUPTIONS[damage](d)
    before = tree_digest(d)
    got, want = _outputs(cli, d), _scan(cli, d, tmp_path)
    for g, w in zip(got, want):
        assert g[:4] == w[:4], g[:2]  # stdout and exit code: the scan's
        extra = [x for x in g[4].splitlines() if x not in w[4].splitlines()]
        assert all("index-stale" in x and "sequence index" in x for x in extra), extra
    assert tree_digest(d) == before  # read-only: the index is not repaired by a reader
    walk, seqs = _walk(d, TS0 + 3 * PER + 1, None)
    assert seqs == list(range(3 * PER + 1, 4 * PER + 1))
    if damage != "version-1-lines":  # a version-1 line is no finding: it has no times, the chunk is read
        assert walk.seek.state == "stale" and walk.seek.findings[0].cls == "index-stale", walk.seek


def test_seal_writes_version_1_lines_again_with_times(log, tmp_path, cli):
    d = _copy(log, tmp_path)
    good = open(index_path(d), "rb").read()
    _v1(d)
    assert all(e.version == 1 and e.min_ts is None for e in read_index(d).entries.values())
    assert cli("seal", d, "--apply").code == 0
    assert open(index_path(d), "rb").read() == good


def test_decoder_takes_both_versions_and_refuses_bad_times():
    e = X.IndexEntry("wal-000000.bin", 1000, "a" * 64, 123, 10, 1, 10, ((1, 8), (5, 400)), -5, 7)
    line = X.encode_entry(e)
    assert X.decode_index(line).entries == {"wal-000000.bin": e}
    old = e._replace(min_ts=None, max_ts=None, version=1)
    assert b"min_ts" not in X.encode_entry(old) and X.decode_index(X.encode_entry(old)).entries[e.file] == old
    obj = json.loads(line)
    for bad in ({"min_ts": 8}, {"max_ts": None}, {"min_ts": -(1 << 63) - 1}, {"max_ts": 1.5}, {"v": 1},
                {"records": 0, "first_seq": None, "last_seq": None, "marks": []}):
        o = dict(obj, **bad)
        o.pop("crc32c")
        o["crc32c"] = f"{crc32c(json.dumps(o, sort_keys=True, separators=(',', ':')).encode()):08x}"
        got = X.decode_index(json.dumps(o).encode() + b"\n")
        assert got.entries == {} and len(got.bad) == 1, bad
