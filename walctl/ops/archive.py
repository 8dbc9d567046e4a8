"""archive: what push, verify, restore and prune (archive_*.py) share: the manifest, describing a file as
the archive sees it, the listing, and the StorageAdapter API. Rules: docs/format.md section 13.

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
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from .. import __version__
from ..errors import EXIT_CORRUPT, EXIT_OK, EXIT_SEQUENCE, EXIT_UNSUPPORTED, NotClean, Refused, UsageError
from ..format.jsonload import loads
from ..format.names import parse_chunk_name, parse_segment_name
from ..format.names import CHECKPOINT_SUFFIX, is_plain_name
from ..store.objstore import ObjectInfo, open_store
from ..store.scratch import Scratch
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
        """ValueError when the object is not a manifest entry (the manifest is then rebuilt)."""
        if not isinstance(obj, dict):
            raise ValueError(f"not a manifest entry: {str(obj)[:120]}")
        e = cls(**{k: obj.get(k) for k in cls._fields})
        ints = (e.size, e.first_sequence, e.last_sequence, e.wal_sequence, e.checkpoint_time)
        if (not valid_object(e.kind, e.name)
                or not isinstance(e.sha256, str) or len(e.sha256) != 64 or not isinstance(e.uploaded_at, str)
                or any(v is not None and (isinstance(v, bool) or not isinstance(v, int)) for v in ints)
                or e.size is None):
            raise ValueError(f"not a manifest entry: {str(obj)[:120]}")
        return e


def valid_object(kind, name) -> bool:
    """Whether `name` is an object name of `kind`'s own shape: object keys and manifest lines are
    untrusted, and these names become local file names on download and restore."""
    if not is_plain_name(name):
        return False
    if kind == CHUNKS:
        return parse_chunk_name(name) is not None
    if kind == SEGMENTS:
        return parse_segment_name(name) is not None
    return kind == CHECKPOINTS and name.endswith(CHECKPOINT_SUFFIX) and len(name) > len(CHECKPOINT_SUFFIX)


def valid_namespace(ns) -> bool:
    return is_plain_name(ns)


def object_key(ns: str, kind: str, name: str) -> str:
    return f"{ns}/{kind}/{name}"


def _order(e: Entry):
    n = parse_chunk_name(e.name) if e.kind == CHUNKS else parse_segment_name(e.name)
    return (e.first_sequence if e.first_sequence is not None else -1, n if n is not None else -1, e.name)


# ---- describing files (local or downloaded) ------------------------------------------------------------

def describe(path: str, kind: str, md5: list | None = None) -> tuple[Entry | None, Finding | None]:
    """Sha256, sequence range and verdict of one file as the archive sees it: sealed, so any damage is
    corruption (a torn tail is only torn in a live log). With `md5` (a list), its MD5 is appended to it."""
    from ..store.objstore import file_hashes

    name = os.path.basename(path)
    size = os.path.getsize(path)
    now = utc_now()
    if kind == CHUNKS:  # one mapping for the hashes and the scan
        from ..errors import WalctlError
        from ..format import scan as fscan
        from ..store.fs import DEFAULT_FS

        try:
            with DEFAULT_FS.map_read(path) as buf:
                sha = hashlib.sha256(buf).hexdigest()
                if md5 is not None:
                    md5.append(hashlib.md5(buf).hexdigest())
                s = fscan.scan_chunk(buf)
        except WalctlError as e:
            return None, Finding("unreadable", e.exit_code, e.reason, name)
        if s.header != fscan.HEADER_OK:
            return None, Finding("unsupported", EXIT_UNSUPPORTED, f"not a V2 chunk (file header {s.header})", name)
        if s.damage:
            d = s.damage[0]
            return None, Finding("archived-damage", EXIT_CORRUPT, f"{d.kind} damage at offset {d.offset}: {d.reason}",
                                 name, d.offset, d.end)
        if len(s.runs) > 1:
            return None, Finding("sequence-gap", EXIT_SEQUENCE, "sequences inside the chunk do not rise by one", name)
        return Entry(name, kind, size, sha, s.first_seq, s.last_seq, now), None
    sha, m = file_hashes(path, md5=md5 is not None)
    if md5 is not None:
        md5.append(m)
    if kind == CHECKPOINTS:
        from .checkpoint import check_path

        rep = check_path(path, check_canonical=False)
        if not rep.checked.ok:
            f = rep.findings[0]
            return None, f._replace(file=name)
        h = rep.header
        return Entry(name, kind, size, sha, None, None, now, h.wal_sequence, h.timestamp), None
    from .segments import verify_segments

    rep = verify_segments(path)
    bad = [f for f in rep.findings if f.exit_code not in (EXIT_OK,)]
    if bad:
        f = bad[0]
        return None, f._replace(exit_code=max(f.exit_code, EXIT_CORRUPT) if f.exit_code == 1 else f.exit_code)
    return Entry(name, kind, size, sha, rep.first_sequence, rep.last_sequence, now), None


def sealed_candidates(wal_dir: str, checkpoints: str | None) -> tuple[list[tuple[str, str]], str]:
    """(path, kind) of what push considers: every chunk or segment but the last (the writer may still
    append to it), and the checkpoint files; each is then described (verified) by the push itself."""
    from .kinds import KIND_DIR, KIND_SEGMENTS
    from .verify import detect_kind

    kind = detect_kind(wal_dir)
    if kind == KIND_DIR:
        from ..store.chunkdir import list_chunks

        names, wal_kind = [c.name for c in list_chunks(wal_dir).chunks], CHUNKS
    elif kind == KIND_SEGMENTS:
        from .segments import list_segments

        names, wal_kind = [s.name for s in list_segments(wal_dir)[0]], SEGMENTS
    else:
        raise UsageError(f"archive push takes a V2 chunk or ADR-003 segment directory; this is {kind}", wal_dir)
    out = [(os.path.join(wal_dir, n), wal_kind) for n in names[:-1]]
    if checkpoints:
        from .checkpoint import SUFFIX

        out += [(os.path.join(checkpoints, n), CHECKPOINTS) for n in sorted(os.listdir(checkpoints))
                if n.endswith(SUFFIX)]
    return out, wal_kind


# ---- the manifest ------------------------------------------------------------------------------------

class Manifest(NamedTuple):
    namespace: str
    entries: dict  # name -> Entry
    warnings: tuple[str, ...]
    missing_objects: tuple[str, ...]  # listed by the manifest, absent from the store


class HashingSink:
    """A file-like target for store.get_to: SHA-256 of what arrives, passed on to `f` when given."""

    def __init__(self, f=None):
        self.h, self.f = hashlib.sha256(), f

    def write(self, b) -> None:
        self.h.update(b)
        if self.f is not None:
            self.f.write(b)

    def hexdigest(self) -> str:
        return self.h.hexdigest()


def _download(store, key: str, scratch, hashed: bool = False):
    """Fetches an object into a scratch directory (no syncs: callers adopt what they keep). With
    `hashed`, returns its SHA-256, computed as the bytes arrive, instead of its path. The file is named
    after the key's last part, which callers have checked (valid_object); Scratch checks it again."""
    name = key.rsplit("/", 1)[-1]
    path = scratch.path(name)
    with scratch.open_write(name) as f:
        if not hashed:
            store.get_to(key, f)
            return path
        sink = HashingSink(f)
        store.get_to(key, sink)
    return sink.hexdigest()


def read_manifest(store, ns: str, jobs: int = 4) -> Manifest:
    """The namespace's manifest, checked against a listing: objects it does not list are read, scanned
    and added (with a warning); entries whose object is gone are reported."""
    warnings = []
    raw = store.get_bytes(f"{ns}/{MANIFEST}")
    entries: dict = {}
    listed, foreign = {}, []
    for o in store.list(f"{ns}/"):
        parts = o.key.split("/")
        if o.key == f"{ns}/{MANIFEST}":
            continue
        if len(parts) == 3 and valid_object(parts[1], parts[2]):
            listed[o.key] = o
        else:  # a folder marker, a nested prefix, an unexpected name: never downloaded, never a path
            foreign.append(o.key)
    if foreign:
        shown = ", ".join(repr(k) for k in foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        warnings.append(f"{ns}: {len(foreign)} foreign object(s) skipped (not walctl's names): {shown}")
    if raw is None:
        if listed:  # a new namespace has neither: nothing to say
            warnings.append(f"{ns}: no {MANIFEST}: rebuilt from a listing")
    else:
        try:
            doc = loads(raw)
            if not isinstance(doc, dict) or not isinstance(doc.get("objects"), list):
                raise ValueError("not a manifest object with an objects list")
            if doc.get("schema") != MANIFEST_SCHEMA:
                raise ValueError(f"schema {doc.get('schema')!r}")
            entries = {o["name"]: Entry.from_json(o) for o in doc["objects"]}
        except (ValueError, KeyError, TypeError) as e:
            warnings.append(f"{ns}: {MANIFEST} does not parse ({e}): rebuilt from a listing")
            entries = {}
    missing = tuple(sorted(n for n, e in entries.items() if object_key(ns, e.kind, n) not in listed))
    unlisted = [k for k in listed if k.rsplit("/", 1)[-1] not in entries]
    if unlisted:
        if raw is not None and entries:
            warnings.append(f"{ns}: {MANIFEST} is stale ({len(unlisted)} objects it does not list): rebuilt them "
                            "from the objects")
        with Scratch(prefix="walctl-archive-") as tmp:
            def one(key):
                path = _download(store, key, tmp)
                try:
                    return key, describe(path, key.split("/")[1])
                finally:
                    tmp.remove(os.path.basename(path))

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


# ---- shared by push and the adapter ---

def verify_upload(store, key: str, local: Entry, info: ObjectInfo | None, md5: str | None = None) -> str | None:
    """None when the store holds exactly the local bytes; else why not. The SHA-256 the service computed
    and checked, else the MD5 it reports for a single-part upload (S3's ETag), else the object is read
    back and hashed."""
    if info is None:
        return "the object is not there after the upload"
    if info.size != local.size:
        return f"the object has {info.size} bytes, the file {local.size}"
    if info.sha256 is None and md5 is not None and info.md5 is not None:
        return None if info.md5 == md5 else f"the service's MD5 {info.md5} differs from the file's {md5}"
    sha = info.sha256
    if sha is None:
        sink = HashingSink()
        store.get_to(key, sink)
        sha = sink.hexdigest()
    if sha != local.sha256:
        return f"the object's sha256 {sha} differs from the file's {local.sha256}"
    return None


def check_namespace(ns: str) -> None:
    if not valid_namespace(ns):
        raise UsageError(f"bad namespace {ns!r} (one path component)")


# ---- list ------------------------------------------------------------------------------------------------

def namespaces(store) -> list[str]:
    seen = set()
    for o in store.list(""):
        parts = o.key.split("/")
        if len(parts) >= 2 and (parts[1] == MANIFEST or parts[1] in (CHUNKS, SEGMENTS, CHECKPOINTS)) \
                and valid_namespace(parts[0]):
            seen.add(parts[0])
    return sorted(seen)


def gaps(entries) -> list[tuple[int, int]]:
    wal = sorted((e for e in entries if e.kind in WAL_KINDS and e.first_sequence is not None), key=_order)
    out = []
    for a, b in zip(wal, wal[1:]):
        if b.first_sequence > a.last_sequence + 1:
            out.append((a.last_sequence + 1, b.first_sequence - 1))
    return out


def overlaps(ns: str, entries) -> list[Finding]:
    """Sequence continuity as restore lays the objects out (directory order: chunk or segment number,
    then name) and then verifies them: an object holding sequences an earlier one already holds (a copy
    of a chunk added under another name), or lower ones, is a sequence finding (exit 4)."""
    def number(e: Entry) -> int:
        n = parse_chunk_name(e.name) if e.kind == CHUNKS else parse_segment_name(e.name)
        return n if n is not None else -1

    out: list[Finding] = []
    for kind in WAL_KINDS:
        wal = sorted((e for e in entries if e.kind == kind and e.first_sequence is not None),
                     key=lambda e: (number(e), e.name))
        for a, b in zip(wal, wal[1:]):
            if b.first_sequence <= a.last_sequence:
                what = "the same sequences as" if (a.first_sequence, a.last_sequence) == (b.first_sequence,
                                                                                         b.last_sequence) else \
                    "sequences already held by"
                out.append(Finding("sequence-overlap", EXIT_SEQUENCE,
                                   f"holds {b.first_sequence}..{b.last_sequence}, {what} {a.name} "
                                   f"({a.first_sequence}..{a.last_sequence}), which comes before it: restore would "
                                   "lay out a repeat or regression", object_key(ns, kind, b.name),
                                   sequence_range=(b.first_sequence, min(b.last_sequence, a.last_sequence)),
                                   extra={"earlier_object": object_key(ns, kind, a.name)}))
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


# ---- library API (Spector's StorageAdapter shape) ---------------------------------------------------------

class StorageAdapter:
    """upload / download / list_chunks / list_namespaces / is_available over a walctl destination, so a
    runtime can plug the archive into its own loop. Uploads go under `<namespace>/chunks/` and are
    verified like `archive push` does; the manifest is left to `archive push` (and rebuilt from the
    listing by every reader)."""

    def __init__(self, dest: str, endpoint_url: str | None = None):
        self.store = open_store(dest, endpoint_url)

    def upload(self, namespace: str, chunk_name: str, data: bytes) -> None:
        check_namespace(namespace)
        if not valid_object(CHUNKS, chunk_name):
            raise UsageError(f"bad chunk name {chunk_name!r} (wal-NNNNNN.bin)")
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
        names = [o.key.rsplit("/", 1)[-1] for o in self.store.list(f"{namespace}/{CHUNKS}/")
                 if o.key.count("/") == 2 and valid_object(CHUNKS, o.key.rsplit("/", 1)[-1])]
        return sorted(names, key=lambda n: (parse_chunk_name(n) if parse_chunk_name(n) is not None else -1, n))

    def list_namespaces(self) -> list[str]:
        return namespaces(self.store)

    def is_available(self) -> bool:
        return self.store.available()
