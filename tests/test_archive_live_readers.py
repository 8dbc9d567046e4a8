"""Issue #24, "Readers of a live archive": `archive restore` and `archive verify` run while a shipper seals
the file they are reading as live pieces. The seal deletes the pieces between the reader's listing and its
download; the reader takes a new view (the sealed object that replaced them) and never fails because the
shipper made progress. Deterministic: a wrapping store runs the shipper's seal right before the reader's
first download of a live piece (no timing). And `archive list --dir --json` never gives a null lag
without saying why."""
from __future__ import annotations

import json
import os
import socket

import pytest

from test_archive import dest, s3_server  # noqa: F401  (the archive fixtures: file:// and moto's S3)
from test_archive_follow import Clock, append, events
from walctl.ops.archive.follow import Shipper
from walctl.ops.archive.restore import restore
from walctl.ops.archive.verify import verify_archive
from walctl.ops.wal.write import WalWriter
from walctl.store.objstore import open_store

NS = "agent"


class SealBeforeFirstPieceRead:
    """The destination's store, except that the first download of a live piece first lets the shipper
    make progress (`progress()`: the writer rolls, the shipper seals the file and deletes its pieces).
    Counts the downloads that found their object gone."""

    def __init__(self, store, progress):
        self.store, self.progress, self.fired, self.vanished = store, progress, False, []

    def __getattr__(self, name):
        return getattr(self.store, name)

    def get_to(self, key, f):
        if "/live/" in key and not self.fired:
            self.fired = True
            self.progress()
        try:
            return self.store.get_to(key, f)
        except Exception:
            self.vanished.append(key)
            raise


def live_archive(tmp_path, d):
    """A writer mid-chunk whose records are archived as live pieces only; returns (wal dir, the writer, the
    shipper, a progress() that fills the chunk so the writer rolls and lets the shipper seal it)."""
    wal = tmp_path / "wal"
    os.makedirs(wal)
    clock = Clock()
    sh = Shipper(str(wal), d["url"], namespace=NS, endpoint_url=d["endpoint"], clock=clock, manifest_interval=0,
                 lock_identity=(socket.gethostname(), (1 << 22) + 11))
    w = WalWriter(str(wal), sync="none", max_chunk_bytes=6000)
    for lo in (0, 10, 20):
        append(w, lo, lo + 10)
        sh.poll()
        clock.t += 2
    store = open_store(d["url"], d["endpoint"])
    kinds = [o.key.split("/")[1] for o in store.list(f"{NS}/")]
    assert "chunks" not in kinds and kinds.count("live") >= 3  # the chunk is archived as live pieces only

    def progress():
        append(w, 30, 150)  # past max_chunk_bytes: the writer rolls (wal-000001.bin, ...
        for _ in range(3):
            sh.poll()
            clock.t += 2
        assert sh.sealed_uploaded[0] == "wal-000000.bin" and len(sh.pieces_deleted) >= 3

    return wal, w, sh, progress


def test_restore_while_a_seal_deletes_the_pieces_takes_the_sealed_object(tmp_path, dest):
    wal, w, sh, progress = live_archive(tmp_path, dest)
    store = SealBeforeFirstPieceRead(open_store(dest["url"], dest["endpoint"]), progress)
    rep = restore(dest["url"], str(tmp_path / "r"), namespace=NS, endpoint_url=dest["endpoint"], store=store)
    assert store.fired and len(store.vanished) == 1 and "/live/" in store.vanished[0]  # the race happened
    assert rep.verdict == "clean" and (rep.first_sequence, rep.last_sequence) == (1, 30)  # the first view's point
    assert rep.objects == ("wal-000000.bin",)  # from the sealed object that replaced the pieces
    assert events(tmp_path / "r" / "wal") == events(wal)[:30]
    w.close()
    sh.close()


def test_verify_while_a_seal_deletes_the_pieces_is_clean(tmp_path, dest):
    wal, w, sh, progress = live_archive(tmp_path, dest)
    store = SealBeforeFirstPieceRead(open_store(dest["url"], dest["endpoint"]), progress)
    summaries, findings, code = verify_archive(dest["url"], namespace=NS, endpoint_url=dest["endpoint"],
                                               store=store, jobs=1)
    assert store.fired and store.vanished and all("/live/" in k for k in store.vanished)  # the race happened
    assert (code, findings) == (0, [])
    names = [e["name"] for e in summaries[0]["entries"]]
    assert names[0] == "wal-000000.bin" and not [n for n in names if n.startswith("wal-000000.bin.")]
    assert summaries[0]["last_sequence"] == 150  # the new view: the sealed chunk and the next file's pieces
    w.close()
    sh.close()


def test_a_reader_that_keeps_losing_the_race_says_so_after_bounded_views(tmp_path):
    from walctl.errors import EnvironmentProblem
    from walctl.ops.archive import objects as ar

    d = {"url": "file://" + str(tmp_path / "archive"), "endpoint": None}
    wal, w, sh, _ = live_archive(tmp_path, d)

    class AlwaysGone(SealBeforeFirstPieceRead):
        def get_to(self, key, f):
            if "/live/" in key:
                raise EnvironmentProblem("no such object", key, kind="not-found")
            return self.store.get_to(key, f)

    store = AlwaysGone(open_store(d["url"]), None)
    with pytest.raises(EnvironmentProblem, match=f"objects vanished under this reader {ar.MAX_VIEWS} times in a row"):
        restore(d["url"], str(tmp_path / "r"), namespace=NS, store=store)
    assert not os.path.exists(tmp_path / "r") and not [n for n in os.listdir(tmp_path) if n.startswith(".walctl")]
    w.close()
    sh.close()


def test_archive_list_lag_is_a_number_or_says_why(tmp_path, cli):
    """A sealed chunk uploaded but not yet in the manifest (the manifest lists its pieces): the listing
    adopts it with its last record's time, so the lag has seconds; without any record time, `seconds`
    is null and `seconds_unknown` says why."""
    d = {"url": "file://" + str(tmp_path / "archive"), "endpoint": None}
    wal, w, sh, _ = live_archive(tmp_path, d)
    sh.manifest_interval = sh.interval = 1e9  # the rolls push the closed files sealed; no piece of the new one
    store = open_store(d["url"])
    stale_manifest = store.get_bytes(f"{NS}/MANIFEST.json")
    append(w, 30, 150)
    for _ in range(3):
        sh.poll()
    store.put_bytes(f"{NS}/MANIFEST.json", stale_manifest)  # the seal's manifest not written yet: the old one
    w.flush()
    r = cli("archive", "list", d["url"], "--namespace", NS, "--dir", wal, "--json")
    assert r.code == 0, r.err
    lag = json.loads(r.out)["namespaces"][0]["lag"]
    assert lag["sequences"] > 0 and isinstance(lag["seconds"], float) and "seconds_unknown" not in lag
    assert lag["archived_time_ms"] is not None
    # pushed without record times (archive push from ledger seals): the absence is explained
    from walctl.ops.archive.listing import lag as lag_of

    got = lag_of({"last_sequence": 5, "entries": [{"kind": "chunks", "last_sequence": 5}],
                  "newest_uploaded_at": None}, str(wal), 0)
    assert got["seconds"] is None and got["sequences"] > 0
    assert got["seconds_unknown"] == "the newest archived object records no record time (pushed from a ledger " \
                                    "seal or by an older walctl)"
    w.close()
    sh.close()


class SealDuringListing(SealBeforeFirstPieceRead):
    """The destination's store, except that its first listing lets the shipper seal the file after the
    listing has passed `chunks/` and before it reaches `live/` (a listing is not a snapshot: the sealed
    object is not in it, and the pieces it replaced are already gone)."""

    def list(self, prefix=""):
        for o in self.store.list(prefix):
            if not self.fired and "/live/" in o.key:
                self.fired = True
                self.progress()
            if self.fired and "/live/" in o.key and self.store.head(o.key) is None:
                continue  # deleted by the seal: this listing no longer sees it
            yield o


def test_verify_whose_listing_straddles_a_seal_reports_no_missing_piece(tmp_path, dest):
    wal, w, sh, progress = live_archive(tmp_path, dest)
    store = SealDuringListing(open_store(dest["url"], dest["endpoint"]), progress)
    summaries, findings, code = verify_archive(dest["url"], namespace=NS, endpoint_url=dest["endpoint"],
                                               store=store, jobs=1)
    assert store.fired  # the seal ran inside the listing
    assert (code, findings) == (0, [])
    rep = restore(dest["url"], str(tmp_path / "r"), namespace=NS, endpoint_url=dest["endpoint"])
    assert rep.verdict == "clean" and events(tmp_path / "r" / "wal") == events(wal)[:rep.last_sequence]
    w.close()
    sh.close()
