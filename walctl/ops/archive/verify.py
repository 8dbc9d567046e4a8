"""archive verify: every archived object read and checked by the local scanners, against the SHA-256 it
was pushed with; sequences no object holds; objects the manifest lists that are gone."""
from __future__ import annotations

import itertools
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_SEQUENCE, UnsupportedInput, UsageError, combine_exit_codes
from ...store.objstore import open_store, sha256_file
from ...store.scratch import Scratch
from .objects import LIVE, MANIFEST, Entry, _download, describe, object_key, with_views
from .listing import gaps, namespaces, overlaps, summary
from .pieces import contiguous_pieces, live_files
from .. import classes as K
from ..findings import Finding


def verify_archive(dest: str, *, namespace: str | None = None, jobs: int = 4, endpoint_url: str | None = None,
                   progress: Callable[[int], None] | None = None, store=None,
                   sample: Sample | None = None) -> tuple[list[dict], list[Finding], int]:
    """Every object of each namespace read (in parallel) and checked by the local scanners and against
    its manifest SHA-256; sequence continuity across the archive; objects the manifest lists but the
    store lacks. A live archive is judged on one consistent view: an object that vanishes while it is
    read (a shipper sealed its file) makes verify take a new view, keeping what it already checked.
    `sample`: read only a slice of the objects, or until a deadline (--read-data-subset, --max-duration);
    each summary's `coverage` says what was not read. Returns (per-namespace summaries, findings, exit code)."""
    store = store or open_store(dest, endpoint_url)
    nss = [namespace] if namespace else namespaces(store)
    if not nss:
        raise UnsupportedInput("no archive here: no namespaces at this destination", store.url)
    findings: list[Finding] = []
    out = []
    started = itertools.count()  # the first object is read whatever the deadline: every run reads something
    for ns in nss:
        checked: dict = {}  # (kind, name, sha256) -> its finding or None: kept across views
        summary_, found = with_views(store, ns, jobs, lambda man: _verify_view(store, ns, man, jobs, progress,
                                                                               checked, sample, started))
        findings += found
        out.append(summary_)
    return out, findings, combine_exit_codes(f.exit_code for f in findings)


class Sample(NamedTuple):
    """Which objects archive verify downloads: a slice by name (ops/wal/coverage.py, as local verify's sealed
    chunks), and a deadline after which it starts no more."""
    subset: object = None  # coverage.Subset
    deadline: object = None  # coverage.Deadline


_NOT_READ = object()


def _verify_view(store, ns: str, man, jobs: int, progress, checked: dict, sample=None,
                 started=None) -> tuple[dict, list[Finding]]:
    findings: list[Finding] = []
    if man.invalid:  # the archive's own index is damaged: its objects are judged from themselves
        findings.append(Finding(K.MANIFEST_INVALID, EXIT_CORRUPT, man.invalid, f"{ns}/{MANIFEST}"))
    for n in man.missing_objects:
        findings.append(Finding(K.MISSING_OBJECT, EXIT_SEQUENCE, "listed by the manifest, absent from the store",
                                f"{ns}/{man.entries[n].kind}/{n}"))
    present = [e for n, e in sorted(man.entries.items()) if n not in man.missing_objects]
    wanted = _wanted(present, sample)
    todo = [e for e in wanted if (e.kind, e.name, e.sha256) not in checked]
    deadline = sample.deadline if sample is not None else None

    def check(e):
        if deadline is not None and next(started) > 0 and deadline.passed():
            return _NOT_READ  # started no more: what was read is still judged
        return _check_object(store, ns, e, tmp, progress)

    with Scratch(prefix="walctl-archive-") as tmp:
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            for e, f in zip(todo, pool.map(check, todo)):
                if f is not _NOT_READ:
                    checked[(e.kind, e.name, e.sha256)] = f
    findings += [checked[k] for k in ((e.kind, e.name, e.sha256) for e in present) if checked.get(k)]
    for a, b in gaps(present):
        findings.append(Finding(K.SEQUENCE_GAP, EXIT_SEQUENCE, f"sequences {a}..{b} are in no archived object",
                                f"{ns}", sequence_range=(a, b)))
    findings.extend(overlaps(ns, present))
    for ps in live_files(present).values():  # pieces of one file: laid out from byte 0, no hole, no overlap
        findings.extend(f._replace(file=object_key(ns, LIVE, f.file)) for f in contiguous_pieces(ps)[1])
    out = summary(man)
    if sample is not None:
        out["coverage"] = _coverage(ns, present, wanted, checked, sample)
    return out, findings


def _wanted(present: list, sample) -> list:
    """The objects to read, in the circle's order (ops/wal/coverage.py): a deadline cuts the same way each run."""
    from ...format.verifyruns import point
    from ..wal.coverage import in_slice

    if sample is None:
        return present
    subset = sample.subset
    return sorted((e for e in present if subset is None or in_slice(e.name, subset)), key=lambda e: point(e.name))


def _coverage(ns: str, present: list, wanted: list, checked: dict, sample) -> dict:
    """What this run downloaded and what it did not (docs/json.md, archive verify's `coverage`)."""
    read = [e for e in wanted if (e.kind, e.name, e.sha256) in checked]
    not_read = sorted(object_key(ns, e.kind, e.name) for e in present if (e.kind, e.name, e.sha256) not in checked)
    return {"subset": sample.subset.text if sample.subset is not None else None, "objects": len(present),
            "read": len(read), "bytes_read": sum(e.size for e in read), "not_read": not_read,
            "bytes_not_read": sum(e.size for e in present if (e.kind, e.name, e.sha256) not in checked),
            "stopped": "max-duration" if len(read) < len(wanted) else "complete", "complete": not not_read}


def _check_object(store, ns: str, e: Entry, tmp, progress) -> Finding | None:
    key = object_key(ns, e.kind, e.name)
    path = _download(store, key, tmp)  # Vanished when a shipper replaced it meanwhile: a new view
    try:
        # The bytes first, as restore judges them: an object that is not what was pushed is corruption (3)
        # before any format judgement (a flipped file-header byte would otherwise read as "unsupported", 5).
        sha = sha256_file(path)
        got, f = (None, None) if sha != e.sha256 else describe(path, e.kind)
    finally:
        tmp.remove(os.path.basename(path))
    if progress:
        progress(e.size)
    if sha != e.sha256:
        return Finding(K.ARCHIVED_SHA256_MISMATCH, EXIT_CORRUPT, "the object's bytes are not the ones pushed", key,
                       stored=e.sha256, computed=sha, value_kind="sha256")
    if f is not None:
        return f._replace(file=key)
    if (got.first_sequence, got.last_sequence) != (e.first_sequence, e.last_sequence):
        return Finding(K.MANIFEST_MISMATCH, EXIT_CORRUPT, f"holds {got.first_sequence}..{got.last_sequence}, the "
                       f"manifest says {e.first_sequence}..{e.last_sequence}", key)
    return None
