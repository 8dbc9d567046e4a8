"""Issue 15: `archive verify` judges what `archive restore` would do: an archived object whose bytes are
not the pushed ones is corruption before any format judgement, and sequences must continue across the
objects as restore lays them out (a copy of a chunk under another name is a repeat)."""
from __future__ import annotations

import os
import shutil

import pytest

from test_archive import make_wal
from walctl.errors import NotClean
from walctl.ops.archive.push import push
from walctl.ops.archive.restore import restore
from walctl.ops.archive.verify import verify_archive


@pytest.fixture
def archived(tmp_path):
    wal = make_wal(tmp_path / "wal", n=200, max_chunk=4000)
    url = "file://" + str(tmp_path / "archive")
    rep = push(wal, url, namespace="a")
    assert rep.exit_code == 0 and len(rep.uploaded) >= 3
    chunks = os.path.join(str(tmp_path / "archive"), "a", "chunks")
    return url, chunks, sorted(os.listdir(chunks))


def test_a_flipped_byte_in_an_archived_file_header_is_corruption_not_unsupported(cli, archived, tmp_path):
    url, chunks, names = archived
    victim = os.path.join(chunks, names[1])
    with open(victim, "r+b") as f:
        f.seek(2)  # inside the 8-byte file header: the chunk would read as "not a V2 chunk"
        b = f.read(1)
        f.seek(2)
        f.write(bytes([b[0] ^ 0x20]))
    _, findings, code = verify_archive(url)
    assert code == 3
    [f] = findings
    assert (f.cls, f.exit_code, f.file) == ("archived-sha256-mismatch", 3, f"a/chunks/{names[1]}")
    assert f.stored != f.computed and len(f.computed) == 64
    r = cli("archive", "verify", url, "--json")
    assert r.code == 3 and r.json()["findings"][0]["class"] == "archived-sha256-mismatch"
    with pytest.raises(NotClean) as err:  # restore agrees: 3
        restore(url, str(tmp_path / "out"))
    assert err.value.exit_code == 3


def test_a_copy_of_a_chunk_under_another_name_is_a_sequence_finding(cli, archived, tmp_path):
    url, chunks, names = archived
    copy = "wal-000900.bin"
    shutil.copy(os.path.join(chunks, names[0]), os.path.join(chunks, copy))
    summaries, findings, code = verify_archive(url)
    assert code == 4
    overlap = [f for f in findings if f.cls == "sequence-overlap"]
    assert len(overlap) == 1 and overlap[0].file == f"a/chunks/{copy}"
    assert overlap[0].extra["earlier_object"].startswith("a/chunks/wal-")
    first = summaries[0]["first_sequence"]
    assert overlap[0].sequence_range[0] == first  # it repeats from the very first archived sequence
    with pytest.raises(NotClean) as err:  # restore fails the same way: 4
        restore(url, str(tmp_path / "out"))
    assert err.value.exit_code == 4
    os.unlink(os.path.join(chunks, copy))
    assert verify_archive(url)[2] in (0,)  # (the manifest was rebuilt with the copy; gone again, clean)


def test_an_object_whose_name_puts_it_after_later_sequences_is_a_regression(archived, tmp_path):
    url, chunks, names = archived
    os.rename(os.path.join(chunks, names[0]), os.path.join(chunks, "wal-000900.bin"))  # renamed in the bucket
    _, findings, code = verify_archive(url)
    assert code == 4
    classes = sorted(f.cls for f in findings)
    assert classes == ["missing-object", "sequence-overlap"]
    [ov] = [f for f in findings if f.cls == "sequence-overlap"]
    assert ov.file == "a/chunks/wal-000900.bin" and ov.extra["earlier_object"] == f"a/chunks/{names[-1]}"
    assert "restore would lay out a repeat or regression" in ov.reason
    with pytest.raises(NotClean) as err:
        restore(url, str(tmp_path / "out"))
    assert err.value.exit_code == 4


def test_a_clean_archive_still_verifies_and_restores(archived, tmp_path):
    url, _, _ = archived
    summaries, findings, code = verify_archive(url)
    assert (code, findings) == (0, [])
    r = restore(url, str(tmp_path / "out"))
    assert r.last_sequence == summaries[0]["last_sequence"] and r.verdict == "clean"
