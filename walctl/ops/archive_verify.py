"""archive verify: every archived object read and checked by the local scanners, against the SHA-256 it
was pushed with; sequences no object holds; objects the manifest lists that are gone."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from ..errors import EXIT_CORRUPT, EXIT_SEQUENCE, UnsupportedInput, UsageError, combine_exit_codes
from ..store.objstore import open_store, sha256_file
from ..store.scratch import Scratch
from .archive import LIVE, MANIFEST, Entry, _download, describe, object_key, with_views
from .archive_list import gaps, namespaces, overlaps, summary
from .archive_pieces import contiguous_pieces, live_files
from . import classes as K
from .findings import Finding


def verify_archive(dest: str, *, namespace: str | None = None, jobs: int = 4, endpoint_url: str | None = None,
                   progress: Callable[[int], None] | None = None, store=None) -> tuple[list[dict], list[Finding], int]:
    """Every object of each namespace read (in parallel) and checked by the local scanners and against
    its manifest SHA-256; sequence continuity across the archive; objects the manifest lists but the
    store lacks. A live archive is judged on one consistent view: an object that vanishes while it is
    read (a shipper sealed its file) makes verify take a new view, keeping what it already checked.
    Returns (per-namespace summaries, findings, exit code)."""
    store = store or open_store(dest, endpoint_url)
    nss = [namespace] if namespace else namespaces(store)
    if not nss:
        raise UnsupportedInput("no archive here: no namespaces at this destination", store.url)
    findings: list[Finding] = []
    out = []
    for ns in nss:
        checked: dict = {}  # (kind, name, sha256) -> its finding or None: kept across views
        summary_, found = with_views(store, ns, jobs, lambda man: _verify_view(store, ns, man, jobs, progress,
                                                                               checked))
        findings += found
        out.append(summary_)
    return out, findings, combine_exit_codes(f.exit_code for f in findings)


def _verify_view(store, ns: str, man, jobs: int, progress, checked: dict) -> tuple[dict, list[Finding]]:
    findings: list[Finding] = []
    if man.invalid:  # the archive's own index is damaged: its objects are judged from themselves
        findings.append(Finding(K.MANIFEST_INVALID, EXIT_CORRUPT, man.invalid, f"{ns}/{MANIFEST}"))
    for n in man.missing_objects:
        findings.append(Finding(K.MISSING_OBJECT, EXIT_SEQUENCE, "listed by the manifest, absent from the store",
                                f"{ns}/{man.entries[n].kind}/{n}"))
    present = [e for n, e in sorted(man.entries.items()) if n not in man.missing_objects]
    todo = [e for e in present if (e.kind, e.name, e.sha256) not in checked]
    with Scratch(prefix="walctl-archive-") as tmp:
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            for e, f in zip(todo, pool.map(lambda e: _check_object(store, ns, e, tmp, progress), todo)):
                checked[(e.kind, e.name, e.sha256)] = f
    findings += [checked[(e.kind, e.name, e.sha256)] for e in present if checked[(e.kind, e.name, e.sha256)]]
    for a, b in gaps(present):
        findings.append(Finding(K.SEQUENCE_GAP, EXIT_SEQUENCE, f"sequences {a}..{b} are in no archived object",
                                f"{ns}", sequence_range=(a, b)))
    findings.extend(overlaps(ns, present))
    for ps in live_files(present).values():  # pieces of one file: laid out from byte 0, no hole, no overlap
        findings.extend(f._replace(file=object_key(ns, LIVE, f.file)) for f in contiguous_pieces(ps)[1])
    return summary(man), findings


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
                       stored=e.sha256, computed=sha)
    if f is not None:
        return f._replace(file=key)
    if (got.first_sequence, got.last_sequence) != (e.first_sequence, e.last_sequence):
        return Finding(K.MANIFEST_MISMATCH, EXIT_CORRUPT, f"holds {got.first_sequence}..{got.last_sequence}, the "
                       f"manifest says {e.first_sequence}..{e.last_sequence}", key)
    return None
