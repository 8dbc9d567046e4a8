"""archive restore --to-time fetches WAL objects in order, a few at a time, and stops after the first that
holds an event stamped after the time (the first such event is the point's end): objects wholly after the
point are not downloaded. What decides is the fetched bytes, not a manifest field."""
from __future__ import annotations

from test_archive import events, make_wal
from walctl.ops.archive import restore as R
from walctl.ops.archive.push import push

T = 1795300000000 + 1000 * 111 + 500  # between events 112 and 113


def _spy(monkeypatch) -> list:
    got: list = []
    real = R._download

    def download(store, key, *a, **kw):
        got.append(key)
        return real(store, key, *a, **kw)
    monkeypatch.setattr(R, "_download", download)
    return got


def test_to_time_fetches_no_object_wholly_after_the_point(tmp_path, monkeypatch):
    wal = make_wal(tmp_path / "wal")
    url = "file://" + str(tmp_path / "archive")
    assert push(wal, url, namespace="n").exit_code == 0
    full = R.restore(url, str(tmp_path / "all"), namespace="n")
    got = _spy(monkeypatch)
    r = R.restore(url, str(tmp_path / "r"), namespace="n", to_time_ms=T, jobs=1)
    assert r.target_sequence == 112 and events(tmp_path / "r" / "wal") == events(tmp_path / "all" / "wal")[:112]
    wal_keys = [k for k in got if "/chunks/" in k]
    # jobs=1: two objects a time, so at most one past the object holding the first later event
    assert len(r.objects) <= len(wal_keys) <= len(r.objects) + 2 < len(full.objects), (wal_keys, full.objects)
    # a time after every event: everything is fetched, the whole log restored
    got.clear()
    r = R.restore(url, str(tmp_path / "r2"), namespace="n", to_time_ms=T * 2)
    assert r.objects == full.objects and len([k for k in got if "/chunks/" in k]) == len(full.objects)
    # before every event: refused as before
    import pytest
    from walctl.errors import WalctlError

    with pytest.raises(WalctlError) as e:
        R.restore(url, str(tmp_path / "r3"), namespace="n", to_time_ms=5)
    assert "no archived event is at or before that time" in e.value.reason
