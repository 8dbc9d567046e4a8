"""archive list: each namespace's manifest summarised (objects, sequences, gaps, missing objects, live
pieces) with its lag against the local log or the clock."""
from __future__ import annotations

from typing import NamedTuple


class ArchiveListing(NamedTuple):
    destination: str
    namespaces: list  # one summary dict per namespace (ops/archive.summary) with its "lag"
    warnings: tuple[str, ...]  # manifests rebuilt from a listing, stale ones...

    def to_json(self) -> dict:
        return {"destination": self.destination, "namespaces": self.namespaces}


def list_archive(dest: str, namespace: str | None = None, wal_dir: str | None = None,
                 endpoint_url: str | None = None, now_ms: int | None = None,
                 on_warning=None) -> ArchiveListing:
    """on_warning(text) hears each manifest's warnings as it is read (before a later namespace can fail)."""
    import time

    from ..store.objstore import open_store
    from .archive import lag, namespaces, read_manifest, summary

    store = open_store(dest, endpoint_url)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    out, warnings = [], []
    for ns in [namespace] if namespace else namespaces(store):
        man = read_manifest(store, ns)
        warnings.extend(man.warnings)
        for w in man.warnings if on_warning else ():
            on_warning(w)
        s = summary(man)
        s["lag"] = lag(s, wal_dir, now_ms)
        out.append(s)
    return ArchiveListing(store.url, out, tuple(warnings))
