"""archive verify --read-data-subset K/N|P% and --max-duration (issue #27): only the slice's objects are
downloaded (counted in the object store), N runs read every object exactly once, damage is found by the run
whose slice holds it, and a deadline stops the downloads while the manifest's own checks still cover all."""
from __future__ import annotations

import os
import threading

import pytest

from test_archive import make_checkpoints, make_wal
from test_verify_subset import Ticks
from walctl.ops.archive.push import push
from walctl.ops.archive.verify import Sample, verify_archive
from walctl.ops.wal.coverage import Deadline, in_slice, parse_subset
from walctl.store.objstore import FileStore


class CountingStore(FileStore):
    """A file:// store that counts every object download (get_to), by key."""

    def __init__(self, root):
        super().__init__(root)
        self.reads: list[str] = []
        self._lock = threading.Lock()

    def get_to(self, key, f):
        with self._lock:
            self.reads.append(key)
        return super().get_to(key, f)


@pytest.fixture
def archive(tmp_path):
    wal = make_wal(tmp_path / "wal", n=600, max_chunk=3000)
    ck = make_checkpoints(tmp_path / "ck", [100, 250])
    root = str(tmp_path / "archive")
    rep = push(wal, "file://" + root, namespace="n", checkpoints=ck)
    assert rep.exit_code == 0 and len(rep.uploaded) >= 20
    objects = sorted(f"n/{k}/{name}" for k in os.listdir(os.path.join(root, "n")) if k != "MANIFEST.json"
                     for name in os.listdir(os.path.join(root, "n", k)))
    return root, objects


def test_n_runs_download_each_object_exactly_once_and_only_their_slice(archive):
    root, objects = archive
    seen = []
    for k in range(1, 5):
        store = CountingStore(root)
        summaries, findings, code = verify_archive("file://" + root, store=store,
                                                   sample=Sample(parse_subset(f"{k}/4")))
        cov = summaries[0]["coverage"]
        assert (code, findings) == (0, [])
        assert sorted(store.reads) == sorted(o for o in objects if in_slice(o.rsplit("/", 1)[1], parse_subset(f"{k}/4")))
        assert cov["read"] == len(store.reads) and cov["objects"] == len(objects)
        assert sorted(cov["not_read"] + store.reads) == objects and cov["stopped"] == "complete"
        seen += store.reads
    assert sorted(seen) == objects  # every object once, none twice
    everything = CountingStore(root)
    assert verify_archive("file://" + root, store=everything)[2] == 0 and sorted(everything.reads) == objects


def test_damage_is_found_by_the_run_whose_slice_holds_it(archive):
    root, objects = archive
    victim = next(o for o in objects if "/checkpoints/" not in o)
    path = os.path.join(root, victim)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 1]))
    codes = []
    for k in range(1, 4):
        summaries, findings, code = verify_archive("file://" + root, store=CountingStore(root),
                                                   sample=Sample(parse_subset(f"{k}/3")))
        codes.append(code)
        if in_slice(victim.rsplit("/", 1)[1], parse_subset(f"{k}/3")):
            assert code == 3 and [(f.cls, f.file) for f in findings] == [("archived-sha256-mismatch", victim)]
        else:
            assert (code, findings) == (0, []) and victim in summaries[0]["coverage"]["not_read"]
    assert sorted(codes) == [0, 0, 3]


def test_max_duration_stops_the_downloads_and_says_what_was_not_read(archive):
    root, objects = archive
    store = CountingStore(root)
    summaries, findings, code = verify_archive("file://" + root, store=store, jobs=1,
                                               sample=Sample(None, Deadline(5, Ticks())))
    cov = summaries[0]["coverage"]
    assert code == 0 and cov["stopped"] == "max-duration" and not cov["complete"]
    assert 1 <= len(store.reads) < len(objects) and cov["read"] == len(store.reads)
    assert sorted(cov["not_read"] + store.reads) == objects
    os.remove(os.path.join(root, cov["not_read"][0]))  # the manifest's own checks need no download
    _, findings, code = verify_archive("file://" + root, store=CountingStore(root), jobs=1,
                                       sample=Sample(None, Deadline(0, Ticks())))
    assert code == 4 and any(f.cls == "missing-object" for f in findings)


def test_cli_flags_and_usage_errors(archive, cli):
    root, objects = archive
    r = cli("archive", "verify", "file://" + root, "--read-data-subset", "1/2", "--json")
    cov = r.json()["namespaces"][0]["coverage"]
    assert r.code == 0 and cov["subset"] == "1/2" and cov["read"] + len(cov["not_read"]) == len(objects)
    r = cli("archive", "verify", "file://" + root, "--read-data-subset", "50%", "--max-duration", "1h")
    assert r.code == 0 and "subset 50%" in r.out and "not read:" in r.out
    for args in (["--read-data-subset", "3/2"], ["--max-duration", "later"]):
        r = cli("archive", "verify", "file://" + root, *args)
        assert r.code == 2 and "Traceback" not in r.err
