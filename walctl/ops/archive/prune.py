"""archive prune: retention by age and by what the newest K valid checkpoints need."""
from __future__ import annotations

import os
import time
from typing import NamedTuple

from ...store.objstore import open_store, sha256_file
from ...store.scratch import Scratch
from .objects import CHECKPOINTS, WAL_KINDS, Entry, _download, _order, check_namespace, object_key, read_manifest, \
    write_manifest


class PruneReport(NamedTuple):
    destination: str
    namespace: str
    applied: bool
    kept_checkpoints: tuple[str, ...]
    horizon: int | None  # WAL objects wholly at or below it are not needed by the kept checkpoints
    delete: tuple[str, ...]
    keep_reasons: dict

    def to_json(self) -> dict:
        return dict(self._asdict(), exit_code=0)


def prune(dest: str, *, namespace: str, keep: int = 2, max_age_s: float = 7 * 86400, apply: bool = False,
          jobs: int = 4, endpoint_url: str | None = None, now: float | None = None) -> PruneReport:
    """Deletes objects older than max_age that the newest `keep` valid checkpoints do not need (WAL
    objects wholly at or below the oldest kept checkpoint's wal_sequence, older checkpoints). Without
    `keep` valid checkpoints nothing is deleted. The new manifest is written before any delete."""
    store = open_store(dest, endpoint_url)
    check_namespace(namespace)
    man = read_manifest(store, namespace, jobs)
    now = time.time() if now is None else now
    kept, reasons = _kept_checkpoints(store, namespace, man, keep)
    horizon = min(e.wal_sequence for e in kept) if len(kept) == keep and keep > 0 else None
    delete = []
    for e in sorted(man.entries.values(), key=lambda e: (e.kind, _order(e))):
        if e.name in reasons and e in kept:
            continue
        why = _why_kept(e, _age(e, now), max_age_s, horizon, keep) if man.invalid is None else \
            f"{man.invalid}: nothing is deleted while the manifest is damaged (archive push rewrites it)"
        if why is not None:
            reasons.setdefault(e.name, why)
            continue
        delete.append(e)
    if apply and delete:
        remaining = {n: e for n, e in man.entries.items() if e not in delete}
        write_manifest(store, namespace, remaining)  # first: a crash leaves unlisted objects, never listed-but-gone
        for e in delete:
            store.delete(object_key(namespace, e.kind, e.name))
    return PruneReport(store.url, namespace, apply, tuple(e.name for e in kept), horizon,
                       tuple(e.name for e in delete), {k: v for k, v in reasons.items()
                                                       if k not in {e.name for e in delete}})


def _age(e: Entry, now: float) -> float | None:
    """None when uploaded_at is not an ISO 8601 time: such an object is never old enough to delete."""
    import datetime

    try:
        t = datetime.datetime.fromisoformat(e.uploaded_at.replace("Z", "+00:00"))
        if t.tzinfo is None:
            t = t.replace(tzinfo=datetime.timezone.utc)
        return now - t.timestamp()
    except (ValueError, TypeError, OverflowError, OSError):
        return None


def _kept_checkpoints(store, namespace: str, man, keep: int) -> tuple[list[Entry], dict[str, str]]:
    """The newest `keep` archived checkpoints that verify (downloaded, hashed, checked), newest first, and
    why each checkpoint looked at is kept or not counted."""
    from ..checkpoints.checkpoint import check_path

    cks = sorted((e for e in man.entries.values() if e.kind == CHECKPOINTS and e.name not in man.missing_objects),
                 key=lambda e: (e.wal_sequence, e.checkpoint_time or 0), reverse=True)
    kept, reasons = [], {}
    with Scratch(prefix="walctl-archive-") as tmp:
        for e in cks:
            if len(kept) == keep:
                break
            path = _download(store, object_key(namespace, CHECKPOINTS, e.name), tmp)
            ok = sha256_file(path) == e.sha256 and check_path(path).checked.ok
            tmp.remove(os.path.basename(path))
            if ok:
                kept.append(e)
                reasons[e.name] = f"one of the newest {keep} valid checkpoints"
            else:
                reasons[e.name] = "does not verify: not counted among the kept checkpoints"
    return kept, reasons


def _why_kept(e: Entry, e_age: float | None, max_age_s: float, horizon: int | None, keep: int) -> str | None:
    """Why an object outside the kept checkpoints stays, or None: it may be deleted."""
    if e_age is None:
        return f"uploaded_at {e.uploaded_at!r} is not an ISO 8601 time: its age is unknown, so it is kept"
    if e_age < max_age_s:
        return f"younger than {max_age_s:.0f} s"
    if horizon is None:
        return f"fewer than {keep} valid checkpoints: nothing is prunable"
    if e.kind in WAL_KINDS and (e.last_sequence is None or e.last_sequence > horizon):
        return f"holds sequences after {horizon}, needed to replay from the kept checkpoints"
    if e.wal_sequence is not None and e.wal_sequence > horizon:  # (a checkpoint: only they have one)
        return "newer than the oldest kept checkpoint"
    return None
