"""archive list: each namespace's manifest summarised (objects, sequences, gaps, missing objects, live
pieces) with its lag against the local log or the clock."""
from __future__ import annotations

import os
from typing import NamedTuple

from ...errors import EXIT_SEQUENCE
from .objects import (
    CHECKPOINTS, KINDS, LIVE, MANIFEST, WAL_KINDS, Entry, Manifest, _number, _order, object_key, valid_namespace,
)
from .pieces import wal_units
from .. import classes as K
from ..findings import Finding
from .. import judge as J


class ArchiveListing(NamedTuple):
    destination: str
    namespaces: list  # one summary dict per namespace (ops/archive/objects.summary) with its "lag"
    warnings: tuple[str, ...]  # manifests rebuilt from a listing, stale ones...

    def to_json(self) -> dict:
        return {"destination": self.destination, "namespaces": self.namespaces}


def list_archive(dest: str, namespace: str | None = None, wal_dir: str | None = None,
                 endpoint_url: str | None = None, now_ms: int | None = None,
                 on_warning=None) -> ArchiveListing:
    """on_warning(text) hears each manifest's warnings as it is read (before a later namespace can fail)."""
    import time

    from ...store.objstore import open_store
    from .objects import read_manifest

    store = open_store(dest, endpoint_url)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    out, warnings = [], []
    nss = [namespace] if namespace else namespaces(store)
    if not nss:  # never an empty "clean" listing of a destination holding no archive
        from ...errors import UnsupportedInput

        raise UnsupportedInput("no archive here: no namespaces at this destination", store.url)
    for ns in nss:
        man = read_manifest(store, ns)
        warnings.extend(man.warnings)
        for w in man.warnings if on_warning else ():
            on_warning(w)
        s = summary(man)
        s["lag"] = lag(s, wal_dir, now_ms)
        out.append(s)
    return ArchiveListing(store.url, out, tuple(warnings))


def namespaces(store) -> list[str]:
    seen = set()
    for o in store.list(""):
        parts = o.key.split("/")
        if len(parts) >= 2 and (parts[1] == MANIFEST or parts[1] in KINDS) \
                and valid_namespace(parts[0]):
            seen.add(parts[0])
    return sorted(seen)


def gaps(entries) -> list[tuple[int, int]]:
    wal = sorted((e for e in wal_units(entries) if e.first_sequence is not None), key=_order)
    out = []
    for a, b in zip(wal, wal[1:]):
        lost = J.lost_range(a.last_sequence, b.first_sequence)
        if lost is not None:
            out.append(lost)
    return out


def overlaps(ns: str, entries) -> list[Finding]:
    """Sequence continuity as restore lays the objects out (directory order: chunk or segment number,
    then name) and then verifies them: an object holding sequences an earlier one already holds (a copy
    of a chunk added under another name), or lower ones, is a sequence finding (exit 4)."""
    def number(e: Entry) -> int:
        n = _number(e.kind, e.name)
        return n if n is not None else -1

    out: list[Finding] = []
    entries = wal_units(entries)
    for kind in WAL_KINDS:
        wal = sorted((e for e in entries if e.kind == kind and e.first_sequence is not None),
                     key=lambda e: (number(e), e.name))
        for a, b in zip(wal, wal[1:]):
            if b.first_sequence <= a.last_sequence:
                what = "the same sequences as" if (a.first_sequence, a.last_sequence) == (b.first_sequence,
                                                                                         b.last_sequence) else \
                    "sequences already held by"
                out.append(Finding(K.SEQUENCE_OVERLAP, EXIT_SEQUENCE,
                                   f"holds {b.first_sequence}..{b.last_sequence}, {what} {a.name} "
                                   f"({a.first_sequence}..{a.last_sequence}), which comes before it: restore would "
                                   "lay out a repeat or regression", object_key(ns, kind, b.name),
                                   sequence_range=(b.first_sequence, min(b.last_sequence, a.last_sequence)),
                                   extra={"earlier_object": object_key(ns, kind, a.name)}))
    return out


def summary(man: Manifest) -> dict:
    es = list(man.entries.values())
    wal = sorted(wal_units(e for e in es if e.name not in man.missing_objects), key=_order)
    live = [e for e in es if e.kind == LIVE]
    cks = sorted((e for e in es if e.kind == CHECKPOINTS), key=lambda e: (e.wal_sequence, e.checkpoint_time or 0))
    return {"namespace": man.namespace, "objects": len(es), "bytes": sum(e.size for e in es),
            "wal_objects": len(wal), "first_sequence": wal[0].first_sequence if wal else None,
            "last_sequence": wal[-1].last_sequence if wal else None,
            "gaps": [list(g) for g in gaps(e for e in es if e.name not in man.missing_objects)],
            "checkpoints": [{"name": e.name, "wal_sequence": e.wal_sequence} for e in cks],
            "missing_objects": list(man.missing_objects), "warnings": list(man.warnings),
            "live_pieces": len(live), "live_bytes": sum(e.size for e in live),
            "newest_uploaded_at": max((e.uploaded_at for e in wal), default=None),
            "entries": [e.to_json() for e in sorted((e for e in es if e.kind in WAL_KINDS), key=_order)
                        + sorted(live, key=lambda e: e.name) + cks]}


def newest_local(wal_dir: str) -> tuple[int | None, int | None]:
    """(sequence, timestamp in ms) of the newest valid record of a V2 chunk or ADR-003 segment directory
    (the newest file that holds one); (None, None) when there is none. Read-only."""
    from ..wal.follow import _chunk_names
    from ..wal.follow_segments import _segments

    chunks = _chunk_names(wal_dir)
    if chunks:
        from ...store.chunkread import scan_chunk_file

        for _, name in reversed(chunks):
            found: list = []

            def visit(buf, off, h, p, q, nxt, payload):
                found[:] = [h[6], h[7]]
                return False

            scan_chunk_file(os.path.join(wal_dir, name), visit=visit)
            if found:
                return found[0], found[1]
        return None, None
    from ..wal.segments import SegmentWalk

    for _, name in reversed(_segments(wal_dir)):
        last = None
        for _, e in SegmentWalk(os.path.join(wal_dir, name)):
            last = e
        if last is not None:
            ts = last.value.get("timestamp") if isinstance(last.value, dict) else None
            return last.sequence, int(float(ts) * 1000) if isinstance(ts, (int, float)) else None
    return None, None


def lag(s: dict, wal_dir: str | None, now_ms: int) -> dict:
    """`lag` of a namespace summary: with the local directory, sequences and seconds between its newest
    record and the newest archived one; without, the newest archived record's age (its timestamp, or
    the upload time of an object pushed without one)."""
    wal = [e for e in s["entries"] if e["kind"] in WAL_KINDS or e["kind"] == LIVE]
    times = [e["last_time_ms"] for e in wal if e.get("last_time_ms") is not None and e["last_sequence"] ==
             s["last_sequence"]]
    archived_ms = max(times) if times else None
    out = {"archived_sequence": s["last_sequence"], "archived_time_ms": archived_ms}
    if wal_dir is not None:
        seq, ts = newest_local(wal_dir)
        out.update(local_sequence=seq, local_time_ms=ts,
                   sequences=None if seq is None else max(0, seq - (s["last_sequence"] or 0)),
                   seconds=None if ts is None or archived_ms is None else max(0.0, (ts - archived_ms) / 1000))
        if out["sequences"] == 0:
            out["seconds"] = 0.0
        if out["seconds"] is None:  # never a bare null: the reason is part of the answer
            out["seconds_unknown"] = ("no valid record in the local directory" if seq is None else
                                      "nothing is archived yet" if s["last_sequence"] is None else
                                      "the newest archived object records no record time (pushed from a ledger "
                                      "seal or by an older walctl)" if archived_ms is None else
                                      "the local newest record has no timestamp")
    else:
        if archived_ms is None and s.get("newest_uploaded_at"):
            import datetime

            up = datetime.datetime.fromisoformat(s["newest_uploaded_at"].replace("Z", "+00:00"))
            archived_ms = int(up.timestamp() * 1000)
        out.update(sequences=None, seconds=None if archived_ms is None else max(0.0, (now_ms - archived_ms) / 1000),
                   age_of="newest archived record" if times else "newest upload")
        if archived_ms is None:
            out["seconds_unknown"] = "nothing is archived yet"
    return out
