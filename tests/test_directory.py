"""Directory rules: chunk order, continuity across chunks, torn vs corrupt across a restart, foreign
files, the live writer's lock, --jobs, and read-only-ness."""
from __future__ import annotations

import fcntl
import os

import pytest

from conftest import case_dir, flip_bit, make_chunk, record_offsets, tree_digest, truncate_to, write_dir
from walctl.format.v2 import encode_file_header
from walctl.ops.wal.verify import verify_path
from walctl.store.lock import LOCK_NAME

HEADER = encode_file_header()


def codes(report):
    return [(f.cls, f.exit_code) for f in report.findings]


def test_chunks_are_ordered_by_number_not_string(tmp_path):
    d = write_dir(tmp_path / "w", {"wal-999999.bin": make_chunk(range(1, 4)),
                                   "wal-1000000.bin": make_chunk(range(4, 7))})
    report = verify_path(d)
    assert [c.file for c in report.chunks] == ["wal-999999.bin", "wal-1000000.bin"]
    assert report.exit_code == 0 and report.last_sequence == 6


def test_gap_between_chunks_names_exact_missing_range(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 6)), 2: make_chunk(range(9, 12))})
    report = verify_path(d)
    assert report.exit_code == 4
    (f,) = report.findings
    assert f.cls == "sequence-gap" and f.sequence_range == (6, 8) and f.missing == (6, 8)
    assert (f.file, f.offset) == ("wal-000002.bin", 8)
    assert "chunk index 1..1 absent" in f.reason


def test_missing_chunk_index_with_contiguous_sequences_is_not_a_finding(tmp_path):
    d = write_dir(tmp_path / "w", {3: make_chunk(range(40, 45)), 7: make_chunk(range(45, 50))})
    report = verify_path(d)
    assert report.exit_code == 0 and report.findings == ()
    assert (report.first_sequence, report.last_sequence) == (40, 49)


def test_repeat_and_regression_with_ranges(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 6)), 1: make_chunk(range(5, 8))})
    (f,) = verify_path(d).findings
    assert (f.cls, f.sequence_range) == ("sequence-repeat", (5, 5))
    d = write_dir(tmp_path / "v", {0: make_chunk(range(1, 11)), 1: make_chunk(range(3, 6))})
    report = verify_path(d)
    (f,) = report.findings
    assert (f.cls, f.sequence_range, report.exit_code) == ("sequence-regression", (3, 5), 4)


def test_gap_inside_one_chunk(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk([1, 2, 3, 7, 8])})
    (f,) = verify_path(d).findings
    assert (f.cls, f.sequence_range, f.offset) == ("sequence-gap", (4, 6), record_offsets(make_chunk([1, 2, 3, 7, 8]))[3])


def test_torn_tail_of_closed_chunk_continued_by_next_sequence_is_torn(tmp_path):
    c0 = make_chunk(range(1, 6))
    cut = record_offsets(c0)[4] + 13  # record 5 torn: the writer died; on restart it went on at 5
    d = write_dir(tmp_path / "w", {0: truncate_to(c0, cut), 1: HEADER, 2: make_chunk(range(5, 9))})
    report = verify_path(d)
    assert report.exit_code == 1, codes(report)
    (f,) = report.findings
    assert f.cls == "tail-damage" and f.torn and f.file == "wal-000000.bin"
    assert "writer restarted" in f.reason
    assert report.records == 8


def test_torn_tail_of_closed_chunk_not_continued_is_corruption(tmp_path):
    c0 = make_chunk(range(1, 6))
    cut = record_offsets(c0)[4] + 13
    d = write_dir(tmp_path / "w", {0: truncate_to(c0, cut), 1: make_chunk(range(6, 9))})
    report = verify_path(d)
    assert report.exit_code == 3
    (f,) = report.findings
    assert f.cls == "tail-damage" and not f.torn
    assert f.lost_sequence_range == (5, 5)  # attributed to the damage, no separate gap finding


def test_torn_tail_followed_only_by_header_only_chunks_is_torn(tmp_path):
    c0 = make_chunk(range(1, 6))
    d = write_dir(tmp_path / "w", {0: truncate_to(c0, len(c0) - 5), 1: HEADER, 2: HEADER})
    report = verify_path(d)
    assert report.exit_code == 1
    assert [c.verdict for c in report.chunks] == ["torn", "header-only", "header-only"]


def test_short_chunk_last_is_torn_elsewhere_corruption(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 4)), 1: b"SPE"})
    report = verify_path(d)
    assert codes(report) == [("short-chunk", 1)]
    d = write_dir(tmp_path / "v", {0: make_chunk(range(1, 4)), 1: b"", 2: make_chunk(range(4, 6))})
    report = verify_path(d)
    assert codes(report) == [("short-chunk", 3)]


def test_unsupported_chunk_in_the_middle_creates_no_sequence_finding(tmp_path):
    v1 = b"SPEC\x00\x00\x00\x01" + b"\x00" * 30
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 4)), 1: v1, 2: make_chunk(range(10, 12))})
    report = verify_path(d)
    assert report.exit_code == 5
    (f,) = report.findings
    assert f.cls == "unsupported" and "V1" in f.reason and f.lost_sequence_range == (4, 9)


def test_unknown_version_and_bad_magic_are_unsupported(tmp_path):
    d = write_dir(tmp_path / "w", {0: b"SPEC\x00\x00\x00\x07", 1: b"GARBAGE!" * 4})
    report = verify_path(d)
    assert [(f.cls, f.exit_code) for f in report.findings] == [("unsupported", 5), ("unsupported", 5)]
    assert "version 7" in report.findings[0].reason


def test_foreign_files_are_reported_and_ignored_files_are_not(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 3)), "notes.txt": b"hi", "wal-000001.bin.tmp": b"x",
                                   LOCK_NAME: b""})
    os.mkdir(os.path.join(d, ".quarantine"))
    report = verify_path(d)
    assert report.exit_code == 0
    assert [(f.cls, f.file) for f in report.findings] == [("foreign-file", "notes.txt")]


def test_exit_code_precedence_corruption_over_sequence_over_torn(tmp_path):
    c1 = make_chunk(range(1, 6))
    d = write_dir(tmp_path / "w", {0: flip_bit(c1, record_offsets(c1)[1] + 12), 1: make_chunk(range(20, 22)),
                                   2: truncate_to(make_chunk(range(22, 24)), 60)})
    report = verify_path(d)
    assert {f.exit_code for f in report.findings} == {1, 3, 4}
    assert report.exit_code == 3


def test_live_writer_makes_incomplete_tail_in_progress(tmp_path):
    c0 = make_chunk(range(1, 6))
    d = write_dir(tmp_path / "w", {0: truncate_to(c0, len(c0) - 5)})
    assert verify_path(d).exit_code == 1
    lock_path = os.path.join(d, LOCK_NAME)
    with open(lock_path, "w") as lf:
        lf.write("pid 4242 walctl write")
        lf.flush()
        fcntl.flock(lf.fileno(), fcntl.LOCK_EX)
        report = verify_path(d)
        fcntl.flock(lf.fileno(), fcntl.LOCK_UN)
    assert report.exit_code == 0
    (f,) = report.findings
    assert f.cls == "in-progress" and f.severity == "note"
    assert report.live_writer == "pid 4242 walctl write"
    # once the writer is gone it is a torn tail again
    assert verify_path(d).exit_code == 1


def test_jobs_gives_identical_findings(tmp_path):
    chunks = {i: make_chunk(range(1 + i * 50, 51 + i * 50)) for i in range(6)}
    chunks[2] = flip_bit(chunks[2], 200)
    chunks[4] = make_chunk(range(210, 251))  # 201..209 missing
    d = write_dir(tmp_path / "w", chunks)
    one, two = verify_path(d, jobs=1), verify_path(d, jobs=2)
    assert one == two
    assert one.exit_code == 3 and {f.cls for f in one.findings} == {"mid-log-damage", "sequence-gap"}
    assert [f.sequence_range for f in one.findings if f.cls == "sequence-gap"] == [(201, 209)]


def test_verify_is_read_only(tmp_path):
    c0 = make_chunk(range(1, 6))
    d = write_dir(tmp_path / "w", {0: flip_bit(c0, 100), 1: truncate_to(make_chunk(range(6, 9)), 70)})
    before = tree_digest(d)
    verify_path(d)
    verify_path(d, jobs=2)
    assert tree_digest(d) == before


def test_fifo_named_like_a_chunk_does_not_hang(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 3))})
    os.mkfifo(os.path.join(d, "wal-000001.bin"))
    report = verify_path(d)
    assert report.exit_code == 5
    assert [(f.cls, f.file) for f in report.findings] == [("unsupported", "wal-000001.bin")]


def test_directory_named_like_a_chunk_and_dangling_link(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 3))})
    os.mkdir(os.path.join(d, "wal-000001.bin"))
    os.symlink("/nonexistent/target", os.path.join(d, "wal-000002.bin"))
    report = verify_path(d)
    assert report.exit_code == 5
    assert {f.file for f in report.findings} == {"wal-000001.bin", "wal-000002.bin"}


def test_empty_directory_and_missing_path(tmp_path):
    os.mkdir(tmp_path / "empty")
    report = verify_path(str(tmp_path / "empty"))
    assert report.exit_code == 5 and "no known artifact here" in report.findings[0].reason
    report = verify_path(str(tmp_path / "absent"))
    assert report.exit_code == 6 and report.findings[0].reason == "no such file or directory"


def test_single_chunk_file_path(tmp_path):
    report = verify_path(os.path.join(case_dir("basic"), "wal-000000.bin"))
    assert report.exit_code == 0 and report.records == 49 and report.kind == "spector-v2-chunk"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_chunk_is_environment(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 3))})
    os.chmod(os.path.join(d, "wal-000000.bin"), 0)
    report = verify_path(d)
    assert report.exit_code == 6 and report.findings[0].cls == "unreadable"


class _DenyingFS:
    """The real file system, except that one chunk cannot be read (root ignores chmod)."""

    def __init__(self, deny: str):
        from walctl.store.fs import DEFAULT_FS

        self.real, self.deny = DEFAULT_FS, deny

    def __getattr__(self, name):
        return getattr(self.real, name)

    def map_read(self, path):
        from walctl.errors import EnvironmentProblem

        if os.path.basename(path) == self.deny:
            raise EnvironmentProblem("permission denied", path)
        return self.real.map_read(path)


def test_unreadable_chunk_through_the_seam_is_environment_and_the_rest_is_read(tmp_path):
    d = write_dir(tmp_path / "w", {0: make_chunk(range(1, 4)), 1: make_chunk(range(4, 8)), 2: make_chunk(range(8, 9))})
    report = verify_path(d, fs=_DenyingFS("wal-000001.bin"))
    assert report.exit_code == 6
    (f,) = report.findings
    assert (f.cls, f.file, f.reason) == ("unreadable", "wal-000001.bin", "permission denied")
    assert f.lost_sequence_range == (4, 7)  # no separate sequence finding
    assert report.records == 4 and [c.state for c in report.chunks] == ["ok", "unreadable", "ok"]


@pytest.mark.parametrize("step", [pytest.param(1, marks=pytest.mark.slow), 13])
def test_truncating_a_java_chunk_at_every_offset(tmp_path, step):
    """rolled/: chunk 5 is followed only by a header-only chunk, so any cut of it is a torn tail whose
    last valid record is the last one wholly before the cut."""
    import shutil

    from conftest import load_expected

    src = case_dir("rolled")
    recs = [r for r in load_expected("rolled")["appended"] if r["chunk"] == "wal-000005.bin"]
    with open(os.path.join(src, "wal-000005.bin"), "rb") as f:
        data = f.read()
    d = str(tmp_path / "w")
    shutil.copytree(src, d)
    for size in range(0, len(data) + 1, step):
        with open(os.path.join(d, "wal-000005.bin"), "wb") as f:
            f.write(data[:size])
        report = verify_path(d)
        whole = [r for r in recs if r["record_offset"] + r["record_size"] <= size]
        last = whole[-1]["sequence"] if whole else recs[0]["sequence"] - 1
        assert report.last_sequence == last, size
        boundary = size in (8, *(r["record_offset"] + r["record_size"] for r in recs))
        if size < 8:
            assert report.exit_code == 3  # a short chunk that is not the last one
        else:
            assert report.exit_code == (0 if boundary else 1), size
