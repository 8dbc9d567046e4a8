"""archive: ship sealed WAL files and checkpoints to object storage; list, verify, restore to a point,
prune. Layout and rules: docs/format.md section 13.

Under a destination, one namespace per WAL: `<ns>/chunks/wal-NNNNNN.bin`, `<ns>/segments/wal_N.log`,
`<ns>/checkpoints/<uuid>.ckpt` and `<ns>/MANIFEST.json`, which lists every object with its size,
SHA-256, sequence range and upload time. The manifest is written last, in one whole-object put, after
every upload it lists was verified; objects are never overwritten. A manifest that is missing or does
not list every object is rebuilt from a listing (each unlisted object is read and scanned), with a
warning.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple

from .. import __version__
from ..errors import (
    EXIT_CORRUPT, EXIT_OK, EXIT_REFUSED, EXIT_SEQUENCE, EXIT_UNSUPPORTED, NotClean, Refused, UsageError,
    combine_exit_codes,
)
from ..format.names import parse_chunk_name, parse_segment_name
from ..store import durable
from ..store.objstore import ObjectInfo, open_store, sha256_file
from .clock import utc_now
from .findings import Finding

MANIFEST = "MANIFEST.json"
MANIFEST_SCHEMA = "walctl.archive-manifest/1"
CHUNKS, SEGMENTS, CHECKPOINTS = "chunks", "segments", "checkpoints"
WAL_KINDS = (CHUNKS, SEGMENTS)


class Entry(NamedTuple):
    """One archived object as the manifest records it."""
    name: str
    kind: str  # chunks | segments | checkpoints
    size: int
    sha256: str
    first_sequence: int | None
    last_sequence: int | None
    uploaded_at: str
    wal_sequence: int | None = None  # checkpoints
    checkpoint_time: int | None = None  # checkpoints: header timestamp (ms)

    def to_json(self) -> dict:
        return {k: v for k, v in self._asdict().items() if v is not None or k in ("first_sequence", "last_sequence")}

    @classmethod
    def from_json(cls, obj: dict) -> "Entry":
        return cls(**{k: obj.get(k) for k in cls._fields})


def object_key(ns: str, kind: str, name: str) -> str:
    return f"{ns}/{kind}/{name}"


def _order(e: Entry):
    n = parse_chunk_name(e.name) if e.kind == CHUNKS else parse_segment_name(e.name)
    return (e.first_sequence if e.first_sequence is not None else -1, n if n is not None else -1, e.name)


# ---- describing files (local or downloaded) ------------------------------------------------------------

def describe(path: str, kind: str) -> tuple[Entry | None, Finding | None]:
    """Sha256, sequence range and verdict of one file as the archive sees it: sealed, so any damage is
    corruption (a torn tail is only torn in a live log)."""
    name = os.path.basename(path)
    sha = sha256_file(path)
    size = os.path.getsize(path)
    now = utc_now()
    if kind == CHECKPOINTS:
        from .checkpoint import check_path

        rep = check_path(path, check_canonical=False)
        if not rep.checked.ok:
            f = rep.findings[0]
            return None, f._replace(file=name)
        h = rep.header
        return Entry(name, kind, size, sha, None, None, now, h.wal_sequence, h.timestamp), None
    if kind == CHUNKS:
        from ..store.chunkread import scan_chunk_file
        from ..format import scan as fscan

        o = scan_chunk_file(path)
        if o.scan is None:
            return None, Finding("unreadable", o.error.exit_code, o.error.reason, name)
        s = o.scan
        if s.header != fscan.HEADER_OK:
            return None, Finding("unsupported", EXIT_UNSUPPORTED, f"not a V2 chunk (file header {s.header})", name)
        if s.damage:
            d = s.damage[0]
            return None, Finding("archived-damage", EXIT_CORRUPT, f"{d.kind} damage at offset {d.offset}: {d.reason}",
                                 name, d.offset, d.end)
        if len(s.runs) > 1:
            return None, Finding("sequence-gap", EXIT_SEQUENCE, "sequences inside the chunk do not rise by one", name)
        return Entry(name, kind, size, sha, s.first_seq, s.last_seq, now), None
    from .segments import verify_segments

    rep = verify_segments(path)
    bad = [f for f in rep.findings if f.exit_code not in (EXIT_OK,)]
    if bad:
        f = bad[0]
        return None, f._replace(exit_code=max(f.exit_code, EXIT_CORRUPT) if f.exit_code == 1 else f.exit_code)
    return Entry(name, kind, size, sha, rep.first_sequence, rep.last_sequence, now), None


class LocalFile(NamedTuple):
    path: str
    entry: Entry


def sealed_files(wal_dir: str, checkpoints: str | None) -> tuple[list[LocalFile], list[Finding], str]:
    """What may be pushed: every chunk or segment but the last that verifies clean, and every checkpoint
    that verifies. Returns (files, findings about what is held back, WAL kind)."""
    from .verify import KIND_DIR, KIND_SEGMENTS, detect_kind

    kind = detect_kind(wal_dir)
    if kind == KIND_DIR:
        from ..store.chunkdir import list_chunks

        names = [c.name for c in list_chunks(wal_dir).chunks]
        wal_kind = CHUNKS
    elif kind == KIND_SEGMENTS:
        from .segments import list_segments

        names = [s.name for s in list_segments(wal_dir)[0]]
        wal_kind = SEGMENTS
    else:
        raise UsageError(f"archive push takes a V2 chunk or ADR-003 segment directory; this is {kind}", wal_dir)
    files, held = [], []
    for name in names[:-1]:  # the last one is still being written
        e, f = describe(os.path.join(wal_dir, name), wal_kind)
        if f is not None:
            held.append(f._replace(reason=f"not pushed: {f.reason}"))
        elif e.first_sequence is not None:  # a header-only chunk holds no events
            files.append(LocalFile(os.path.join(wal_dir, name), e))
    if checkpoints:
        from .checkpoint import SUFFIX

        for name in sorted(os.listdir(checkpoints)):
            if name.endswith(SUFFIX):
                e, f = describe(os.path.join(checkpoints, name), CHECKPOINTS)
                if f is not None:
                    held.append(f._replace(reason=f"not pushed: {f.reason}"))
                else:
                    files.append(LocalFile(os.path.join(checkpoints, name), e))
    return files, held, wal_kind


# ---- the manifest ------------------------------------------------------------------------------------

class Manifest(NamedTuple):
    namespace: str
    entries: dict  # name -> Entry
    warnings: tuple[str, ...]
    missing_objects: tuple[str, ...]  # listed by the manifest, absent from the store


def _download(store, key: str, directory: str) -> str:
    path = os.path.join(directory, key.rsplit("/", 1)[-1])
    with open(path, "wb") as f:
        store.get_to(key, f)
    return path


def read_manifest(store, ns: str, jobs: int = 4) -> Manifest:
    """The namespace's manifest, checked against a listing: objects it does not list are read, scanned
    and added (with a warning); entries whose object is gone are reported."""
    warnings = []
    raw = store.get_bytes(f"{ns}/{MANIFEST}")
    entries: dict = {}
    listed = {o.key: o for o in store.list(f"{ns}/") if o.key.count("/") == 2}
    if raw is None:
        if listed:  # a new namespace has neither: nothing to say
            warnings.append(f"{ns}: no {MANIFEST}: rebuilt from a listing")
    else:
        try:
            doc = json.loads(raw)
            if doc.get("schema") != MANIFEST_SCHEMA:
                raise ValueError(f"schema {doc.get('schema')!r}")
            entries = {o["name"]: Entry.from_json(o) for o in doc["objects"]}
        except (ValueError, KeyError, TypeError) as e:
            warnings.append(f"{ns}: {MANIFEST} does not parse ({e}): rebuilt from a listing")
            entries = {}
    missing = tuple(sorted(n for n, e in entries.items() if object_key(ns, e.kind, n) not in listed))
    unlisted = [k for k in listed if k.split("/")[1] in (CHUNKS, SEGMENTS, CHECKPOINTS)
                and k.rsplit("/", 1)[-1] not in entries]
    if unlisted:
        if raw is not None and entries:
            warnings.append(f"{ns}: {MANIFEST} is stale ({len(unlisted)} objects it does not list): rebuilt them "
                            "from the objects")
        with tempfile.TemporaryDirectory(prefix="walctl-archive-") as tmp:
            def one(key):
                path = _download(store, key, tmp)
                try:
                    return key, describe(path, key.split("/")[1])
                finally:
                    os.unlink(path)

            with ThreadPoolExecutor(max(1, jobs)) as pool:
                for key, (e, f) in pool.map(one, unlisted):
                    if e is not None:
                        entries[e.name] = e._replace(uploaded_at=_iso(listed[key].modified))
                    else:
                        warnings.append(f"{key}: not added to the manifest: {f.reason}")
    return Manifest(ns, entries, tuple(warnings), missing)


def _iso(ts: float | None) -> str:
    import datetime

    if ts is None:
        return utc_now()
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).isoformat(timespec="seconds").replace(
        "+00:00", "Z")


def write_manifest(store, ns: str, entries: dict) -> None:
    doc = {"schema": MANIFEST_SCHEMA, "walctl_version": __version__, "namespace": ns, "updated_at": utc_now(),
           "objects": [e.to_json() for e in sorted(entries.values(), key=lambda e: (e.kind, _order(e)))]}
    store.put_bytes(f"{ns}/{MANIFEST}", (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())


# ---- push ------------------------------------------------------------------------------------------------

class PushReport(NamedTuple):
    destination: str
    namespace: str
    uploaded: tuple[str, ...]
    already_archived: tuple[str, ...]
    conflicts: tuple[str, ...]  # an archived object of that name holds other bytes: never overwritten
    failed: tuple[str, ...]
    held_back: tuple[Finding, ...]
    deleted_local: tuple[str, ...]
    would_delete_local: tuple[str, ...]
    bytes_uploaded: int
    seconds: float
    warnings: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        code = combine_exit_codes([f.exit_code for f in self.held_back] + ([6] if self.failed else []))
        return EXIT_REFUSED if code == EXIT_OK and self.conflicts else code

    def to_json(self) -> dict:
        d = self._asdict()
        d["held_back"] = [f.to_json() for f in self.held_back]
        d["exit_code"] = self.exit_code
        return d


def verify_upload(store, key: str, local: Entry, info: ObjectInfo | None) -> str | None:
    """None when the store holds exactly the local bytes; else why not. The store's own SHA-256 when it
    vouches for one, else the object is read back and hashed."""
    if info is None:
        return "the object is not there after the upload"
    if info.size != local.size:
        return f"the object has {info.size} bytes, the file {local.size}"
    sha = info.sha256
    if sha is None:
        h = hashlib.sha256()

        class _Hasher:
            def write(self, b):
                h.update(b)

        store.get_to(key, _Hasher())
        sha = h.hexdigest()
    if sha != local.sha256:
        return f"the object's sha256 {sha} differs from the file's {local.sha256}"
    return None


def push(wal_dir: str, dest: str, *, namespace: str | None = None, checkpoints: str | None = None, jobs: int = 4,
         delete_local: bool = False, hwm_before: int | None = None, checkpoint_meta: str | None = None,
         apply: bool = False, endpoint_url: str | None = None,
         progress: Callable[[int], None] | None = None) -> PushReport:
    t0 = time.perf_counter()
    store = open_store(dest, endpoint_url)
    ns = namespace or os.path.basename(os.path.abspath(wal_dir))
    _check_namespace(ns)
    files, held, _ = sealed_files(wal_dir, checkpoints)
    man = read_manifest(store, ns, jobs)
    entries = dict(man.entries)
    todo, already, conflicts = [], [], []
    for lf in files:
        e = entries.get(lf.entry.name)
        if e is not None and e.name not in man.missing_objects:
            (already if e.sha256 == lf.entry.sha256 else conflicts).append(lf.entry.name)
        else:
            todo.append(lf)
    uploaded, failed = [], []
    sent = 0

    def upload(lf: LocalFile):
        e = lf.entry
        key = object_key(ns, e.kind, e.name)
        existing = store.head(key)
        if existing is not None:  # uploaded by a push that stopped before its manifest: adopt or refuse
            why = verify_upload(store, key, e, store.head(key, want_sha=True) if existing.sha256 is None else existing)
            return lf, ("conflict" if why else "adopted"), why
        info = store.put_file(key, lf.path, e.sha256, {"first-sequence": str(e.first_sequence),
                                                       "last-sequence": str(e.last_sequence)})
        why = verify_upload(store, key, e, info)
        return lf, ("failed" if why else "uploaded"), why

    errors: list[str] = []
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(upload, lf) for lf in todo]
        for fut in futures:
            try:
                lf, what, why = fut.result()
            except Exception as ex:  # noqa: BLE001 - each file's failure is reported; the rest go on
                errors.append(str(ex))
                failed.append(todo[futures.index(fut)].entry.name)
                continue
            name = lf.entry.name
            if what in ("uploaded", "adopted"):
                entries[name] = lf.entry._replace(uploaded_at=utc_now())
                uploaded.append(name)
                sent += lf.entry.size if what == "uploaded" else 0
                if progress:
                    progress(lf.entry.size)
            elif what == "conflict":
                conflicts.append(name)
                errors.append(f"{name}: {why}")
            else:
                failed.append(name)
                errors.append(f"{name}: upload not verified: {why}")
    if uploaded or man.warnings:
        write_manifest(store, ns, entries)  # last: it lists only what was verified
    deleted, would = _delete_local(wal_dir, store, ns, entries, files, delete_local, hwm_before, checkpoint_meta,
                                   checkpoints, apply)
    return PushReport(store.url, ns, tuple(uploaded), tuple(already), tuple(conflicts), tuple(failed), tuple(held),
                      tuple(deleted), tuple(would), sent, time.perf_counter() - t0,
                      tuple(man.warnings) + tuple(errors))


def _check_namespace(ns: str) -> None:
    if not ns or "/" in ns or ns in (".", ".."):
        raise UsageError(f"bad namespace {ns!r} (one path component)")


def _delete_local(wal_dir, store, ns, entries, files, delete_local, before, checkpoint_meta, checkpoints, apply):
    """--delete-local: chunks the archive holds (verified, same sha256) that compaction would also remove
    (closed, contiguous, at or below the HWM). Each is recorded in .quarantine/MANIFEST.jsonl with where
    its archived copy is before it is removed."""
    if not delete_local:
        return [], []
    from ..store import quarantine
    from ..store.fs import DEFAULT_FS
    from ..store.lock import DirectoryLock, holder_text
    from .compact import plan

    if before is None and checkpoint_meta is None and checkpoints is None:
        raise UsageError("--delete-local needs a compaction HWM: --before N, --checkpoint-meta or --checkpoints")
    hwm, source = _hwm(before, checkpoint_meta, None if before is not None or checkpoint_meta else checkpoints)
    local = {lf.entry.name: lf for lf in files if lf.entry.kind == CHUNKS}

    def eligible(removals):
        return [r for r in removals if r.file in local and r.file in entries
                and entries[r.file].sha256 == local[r.file].entry.sha256]

    if not apply:
        return [], [r.file for r in eligible(plan(wal_dir, hwm)[0])]
    deleted = []
    with DirectoryLock(wal_dir, holder_text("archive push --delete-local"), DEFAULT_FS):
        now = utc_now()
        for r in eligible(plan(wal_dir, hwm)[0]):
            lf = local[r.file]
            if sha256_file(lf.path) != lf.entry.sha256:
                continue  # changed since it was pushed: not what the archive holds
            quarantine.record(wal_dir, quarantine.entry(now, "archive-delete", r.file, 0, lf.entry.size, lf.entry.sha256,
                                                        f"{store.url}/{object_key(ns, CHUNKS, r.file)}",
                                                        f"archived and verified; sequences up to {r.last_sequence} "
                                                        f"are covered by {source}", __version__))
            durable.remove(lf.path)
            deleted.append(r.file)
    return deleted, []


def _hwm(before, checkpoint_meta, checkpoints):
    from ..store.fs import DEFAULT_FS
    from .compact import read_hwm

    return read_hwm(before, checkpoint_meta, DEFAULT_FS, checkpoints)


# ---- list ------------------------------------------------------------------------------------------------

def namespaces(store) -> list[str]:
    seen = set()
    for o in store.list(""):
        parts = o.key.split("/")
        if len(parts) >= 2 and (parts[1] == MANIFEST or parts[1] in (CHUNKS, SEGMENTS, CHECKPOINTS)):
            seen.add(parts[0])
    return sorted(seen)


def gaps(entries) -> list[tuple[int, int]]:
    wal = sorted((e for e in entries if e.kind in WAL_KINDS and e.first_sequence is not None), key=_order)
    out = []
    for a, b in zip(wal, wal[1:]):
        if b.first_sequence > a.last_sequence + 1:
            out.append((a.last_sequence + 1, b.first_sequence - 1))
    return out


def summary(man: Manifest) -> dict:
    es = list(man.entries.values())
    wal = sorted((e for e in es if e.kind in WAL_KINDS), key=_order)
    cks = sorted((e for e in es if e.kind == CHECKPOINTS), key=lambda e: (e.wal_sequence, e.checkpoint_time or 0))
    return {"namespace": man.namespace, "objects": len(es), "bytes": sum(e.size for e in es),
            "wal_objects": len(wal), "first_sequence": wal[0].first_sequence if wal else None,
            "last_sequence": wal[-1].last_sequence if wal else None,
            "gaps": [list(g) for g in gaps(e for e in es if e.name not in man.missing_objects)],
            "checkpoints": [{"name": e.name, "wal_sequence": e.wal_sequence} for e in cks],
            "missing_objects": list(man.missing_objects), "warnings": list(man.warnings),
            "entries": [e.to_json() for e in wal + cks]}


# ---- verify ----------------------------------------------------------------------------------------------

def verify_archive(dest: str, *, namespace: str | None = None, jobs: int = 4, endpoint_url: str | None = None,
                   progress: Callable[[int], None] | None = None) -> tuple[list[dict], list[Finding], int]:
    """Every object of each namespace read (in parallel) and checked by the local scanners and against
    its manifest SHA-256; sequence continuity across the archive; objects the manifest lists but the
    store lacks. Returns (per-namespace summaries, findings, exit code)."""
    store = open_store(dest, endpoint_url)
    nss = [namespace] if namespace else namespaces(store)
    if not nss:
        raise UsageError("no namespaces at this destination", store.url)
    findings: list[Finding] = []
    out = []
    for ns in nss:
        man = read_manifest(store, ns, jobs)
        for n in man.missing_objects:
            findings.append(Finding("missing-object", EXIT_SEQUENCE, "listed by the manifest, absent from the store",
                                    f"{ns}/{man.entries[n].kind}/{n}"))
        with tempfile.TemporaryDirectory(prefix="walctl-archive-") as tmp:
            def one(e: Entry):
                key = object_key(ns, e.kind, e.name)
                path = _download(store, key, tmp)
                try:
                    got, f = describe(path, e.kind)
                finally:
                    os.unlink(path)
                if progress:
                    progress(e.size)
                if f is not None:
                    return f._replace(file=key)
                if got.sha256 != e.sha256:
                    return Finding("archived-sha256-mismatch", EXIT_CORRUPT, "the object's bytes are not the ones "
                                   "pushed", key, stored=e.sha256, computed=got.sha256)
                if (got.first_sequence, got.last_sequence) != (e.first_sequence, e.last_sequence):
                    return Finding("manifest-mismatch", EXIT_CORRUPT, f"holds {got.first_sequence}.."
                                   f"{got.last_sequence}, the manifest says {e.first_sequence}..{e.last_sequence}", key)
                return None

            present = [e for n, e in sorted(man.entries.items()) if n not in man.missing_objects]
            with ThreadPoolExecutor(max(1, jobs)) as pool:
                findings.extend(f for f in pool.map(one, present) if f is not None)
        for a, b in gaps(e for n, e in man.entries.items() if n not in man.missing_objects):
            findings.append(Finding("sequence-gap", EXIT_SEQUENCE, f"sequences {a}..{b} are in no archived object",
                                    f"{ns}", sequence_range=(a, b)))
        out.append(summary(man))
    return out, findings, combine_exit_codes(f.exit_code for f in findings)


# ---- restore ---------------------------------------------------------------------------------------------

class RestoreReport(NamedTuple):
    destination: str
    namespace: str
    out: str
    target_sequence: int
    events: int
    first_sequence: int | None
    last_sequence: int | None
    objects: tuple[str, ...]
    checkpoint: str | None
    checkpoint_wal_sequence: int | None
    fallbacks: tuple[str, ...]
    verdict: str

    def to_json(self) -> dict:
        return dict(self._asdict(), exit_code=0)


def restore(dest: str, out_dir: str, *, namespace: str | None = None, to_seq: int | None = None,
            to_time_ms: int | None = None, jobs: int = 4, endpoint_url: str | None = None) -> RestoreReport:
    """Writes OUT/wal (the events up to the point, exactly) and OUT/checkpoints (the newest archived
    checkpoint at or below it that verifies), then verifies OUT/wal."""
    from .importer import import_stream, read_stream
    from .replay import ReplayOptions, replay
    from .verify import verify_path

    store = open_store(dest, endpoint_url)
    if namespace is None:
        nss = namespaces(store)
        if len(nss) != 1:
            raise UsageError(f"give --namespace: this destination holds {len(nss)} namespaces ({', '.join(nss)})")
        namespace = nss[0]
    if os.path.exists(out_dir) and os.listdir(out_dir):
        raise Refused(f"{out_dir} is not empty; restore writes a new directory", out_dir)
    man = read_manifest(store, namespace, jobs)
    wal = sorted((e for e in man.entries.values() if e.kind in WAL_KINDS and e.name not in man.missing_objects),
                 key=_order)
    if not wal:
        raise NotClean(f"no WAL objects archived under {namespace}", store.url, code=EXIT_SEQUENCE)
    target = to_seq if to_seq is not None else wal[-1].last_sequence
    if to_time_ms is None and target > wal[-1].last_sequence:
        raise NotClean(f"--to-seq {target}: the archive holds sequences up to {wal[-1].last_sequence}", store.url,
                       code=EXIT_SEQUENCE)
    needed = [e for e in wal if e.first_sequence <= target]
    if not needed:
        raise NotClean(f"the archive starts at {wal[0].first_sequence}, after {target}", store.url, code=EXIT_SEQUENCE)
    for a, b in gaps(needed):
        raise NotClean(f"sequences {a}..{b} are in no archived object: restorable up to {a - 1} (--to-seq {a - 1})",
                       store.url, code=EXIT_SEQUENCE)
    parent = os.path.dirname(os.path.abspath(out_dir)) or "."
    staging = tempfile.mkdtemp(prefix=".walctl-restore-", dir=parent)
    try:
        def fetch(e: Entry):
            path = _download(store, object_key(namespace, e.kind, e.name), staging)
            return e, sha256_file(path)

        with ThreadPoolExecutor(max(1, jobs)) as pool:
            for e, sha in pool.map(fetch, needed):
                if sha != e.sha256:
                    ok_to = e.first_sequence - 1
                    raise NotClean(f"{namespace}/{e.kind}/{e.name} is corrupt in the archive (sha256 {sha}, pushed as "
                                   f"{e.sha256}); restorable up to {ok_to} (--to-seq {ok_to})", store.url,
                                   code=EXIT_CORRUPT)
        if to_time_ms is not None:
            target = _last_before(staging, to_time_ms)
            if target is None:
                raise NotClean("no archived event is at or before that time", store.url, code=EXIT_SEQUENCE)
        wal_out = os.path.join(out_dir, "wal")
        os.makedirs(out_dir, exist_ok=True)
        pieces: list[bytes] = []
        rep = replay(staging, pieces.extend, ReplayOptions(to=target, form="msgpack"))
        if rep.stopped is not None or rep.last_sequence != target:
            raise NotClean(f"the archived objects do not replay up to {target} (stopped at {rep.last_sequence}): "
                           "run `walctl archive verify`", store.url, code=EXIT_CORRUPT)
        import io

        form, items = read_stream(io.BufferedReader(io.BytesIO(b"".join(pieces))), "msgpack")
        del pieces
        imp = import_stream(wal_out, items, form, allow_initial_gap=True)
        ck_name, ck_seq, fallbacks = _restore_checkpoint(store, namespace, man, target, os.path.join(out_dir,
                                                                                                       "checkpoints"))
        check = verify_path(wal_out)
        if check.exit_code != EXIT_OK or check.last_sequence != target:
            raise NotClean(f"the restored log does not verify ({check.verdict}, last sequence {check.last_sequence})",
                           wal_out, code=check.exit_code or EXIT_CORRUPT)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return RestoreReport(store.url, namespace, out_dir, target, imp.applied, imp.first_applied, imp.last_applied,
                         tuple(e.name for e in needed), ck_name, ck_seq, tuple(fallbacks), check.verdict)


def _last_before(staging: str, to_time_ms: int) -> int | None:
    """The last sequence before the first event stamped after the time (V2: ms; segments: seconds)."""
    from .verify import KIND_DIR, detect_kind

    last = None
    if detect_kind(staging) == KIND_DIR:
        from .records import Record, RecordWalk

        for item in RecordWalk(staging):
            if isinstance(item, Record):
                if item.timestamp_ms > to_time_ms:
                    break
                last = item.sequence
        return last
    from .segments import iter_entries

    for _, e in iter_entries(staging):
        if float(e.value.get("timestamp", 0)) * 1000 > to_time_ms:
            break
        last = e.sequence
    return last


def _restore_checkpoint(store, ns, man: Manifest, target: int, out: str):
    from ..store.fs import DEFAULT_FS
    from .checkpoint import check_path

    cands = sorted((e for e in man.entries.values() if e.kind == CHECKPOINTS and e.wal_sequence is not None
                    and e.wal_sequence <= target and e.name not in man.missing_objects),
                   key=lambda e: (e.wal_sequence, e.checkpoint_time or 0), reverse=True)
    fallbacks = []
    for e in cands:
        os.makedirs(out, exist_ok=True)
        tmp = os.path.join(out, e.name + durable.TMP_SUFFIX)
        with open(tmp, "wb") as f:
            store.get_to(object_key(ns, CHECKPOINTS, e.name), f)
            f.flush()
            os.fsync(f.fileno())
        rep = check_path(tmp)
        if sha256_file(tmp) != e.sha256 or not rep.checked.ok:
            why = rep.findings[0].reason if rep.findings else "sha256 differs from the manifest"
            fallbacks.append(f"{e.name}: {why}")
            os.unlink(tmp)
            continue
        os.replace(tmp, os.path.join(out, e.name))
        DEFAULT_FS.fsync_dir(out)
        return e.name, e.wal_sequence, fallbacks
    return None, None, fallbacks


# ---- prune -----------------------------------------------------------------------------------------------

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
    import datetime

    from .checkpoint import check_path

    store = open_store(dest, endpoint_url)
    _check_namespace(namespace)
    man = read_manifest(store, namespace, jobs)
    now = time.time() if now is None else now

    def age(e: Entry) -> float:
        t = datetime.datetime.fromisoformat(e.uploaded_at.replace("Z", "+00:00")).timestamp()
        return now - t

    cks = sorted((e for e in man.entries.values() if e.kind == CHECKPOINTS and e.name not in man.missing_objects),
                 key=lambda e: (e.wal_sequence, e.checkpoint_time or 0), reverse=True)
    kept, reasons = [], {}
    with tempfile.TemporaryDirectory(prefix="walctl-archive-") as tmp:
        for e in cks:
            if len(kept) == keep:
                break
            path = _download(store, object_key(namespace, CHECKPOINTS, e.name), tmp)
            ok = sha256_file(path) == e.sha256 and check_path(path).checked.ok
            os.unlink(path)
            if ok:
                kept.append(e)
                reasons[e.name] = f"one of the newest {keep} valid checkpoints"
            else:
                reasons[e.name] = "does not verify: not counted among the kept checkpoints"
    horizon = min(e.wal_sequence for e in kept) if len(kept) == keep and keep > 0 else None
    delete = []
    for e in sorted(man.entries.values(), key=lambda e: (e.kind, _order(e))):
        if e.name in reasons and e in kept:
            continue
        if age(e) < max_age_s:
            reasons.setdefault(e.name, f"younger than {max_age_s:.0f} s")
            continue
        if horizon is None:
            reasons.setdefault(e.name, f"fewer than {keep} valid checkpoints: nothing is prunable")
            continue
        if e.kind in WAL_KINDS and (e.last_sequence is None or e.last_sequence > horizon):
            reasons.setdefault(e.name, f"holds sequences after {horizon}, needed to replay from the kept checkpoints")
            continue
        if e.kind == CHECKPOINTS and e.wal_sequence is not None and e.wal_sequence > horizon:
            reasons.setdefault(e.name, "newer than the oldest kept checkpoint")
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


# ---- library API (Spector's StorageAdapter shape) ---------------------------------------------------------

class StorageAdapter:
    """upload / download / list_chunks / list_namespaces / is_available over a walctl destination, so a
    runtime can plug the archive into its own loop. Uploads go under `<namespace>/chunks/` and are
    verified like `archive push` does; the manifest is left to `archive push` (and rebuilt from the
    listing by every reader)."""

    def __init__(self, dest: str, endpoint_url: str | None = None):
        self.store = open_store(dest, endpoint_url)

    def upload(self, namespace: str, chunk_name: str, data: bytes) -> None:
        _check_namespace(namespace)
        with tempfile.NamedTemporaryFile(prefix="walctl-up-") as f:
            f.write(data)
            f.flush()
            key = object_key(namespace, CHUNKS, chunk_name)
            sha = hashlib.sha256(data).hexdigest()
            if self.store.head(key) is not None:
                raise Refused(f"{key} exists; archived objects are never overwritten", self.store.url)
            info = self.store.put_file(key, f.name, sha)
            why = verify_upload(self.store, key, Entry(chunk_name, CHUNKS, len(data), sha, None, None, ""), info)
            if why:
                raise NotClean(f"{key}: upload not verified: {why}", self.store.url, code=EXIT_CORRUPT)

    def download(self, namespace: str, chunk_name: str) -> bytes | None:
        return self.store.get_bytes(object_key(namespace, CHUNKS, chunk_name))

    def list_chunks(self, namespace: str) -> list[str]:
        names = [o.key.rsplit("/", 1)[-1] for o in self.store.list(f"{namespace}/{CHUNKS}/")]
        return sorted(names, key=lambda n: (parse_chunk_name(n) if parse_chunk_name(n) is not None else -1, n))

    def list_namespaces(self) -> list[str]:
        return namespaces(self.store)

    def is_available(self) -> bool:
        return self.store.available()
