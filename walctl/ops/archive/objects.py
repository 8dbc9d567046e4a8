"""archive: what push, verify, restore and prune (archive_*.py) share: the manifest and describing a file as
the archive sees it (the listing and lag: ops/archive/listing.py; the StorageAdapter API: ops/archive/adapter.py;
how live pieces lay out a file: ops/archive/pieces.py). Rules: docs/format.md section 13.

Under a destination, one namespace per WAL: `<ns>/chunks/wal-NNNNNN.bin`, `<ns>/segments/wal_N.log`,
`<ns>/checkpoints/<uuid>.ckpt`, `<ns>/live/<piece>` (pieces of the chunk or segment still being
written, uploaded by `push --follow`, see format/livepiece.py) and `<ns>/MANIFEST.json`, which lists every object with its size,
SHA-256, sequence range and upload time. The manifest is written last, in one whole-object put, after
every upload it lists was verified; objects are never overwritten. A manifest that is missing or does
not list every object is rebuilt from a listing (each unlisted object is read and scanned), with a
warning.
"""
from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from ...version import __version__
from ...errors import EXIT_CORRUPT, EXIT_UNSUPPORTED, REASON_NOT_FOUND, EnvironmentProblem, UsageError
from ...format.archive_manifest import CHECKPOINTS, CHUNKS, FILE_KINDS, KINDS, LIVE, SEGMENTS, WAL_KINDS, entry_problem, \
    parse_objects, valid_object
from ...format.names import is_plain_name
from ...format.livepiece import Piece, parse_piece_name
from ...store.fs import DEFAULT_FS
from ...store.objstore import ObjectInfo, open_store
from ...store.scratch import Scratch
from .. import classes as K
from ..clock import utc_now
from ..findings import Finding

MANIFEST = "MANIFEST.json"
LOCK = "LOCK.json"  # held by `archive push --follow` (ops/archive/lock.py)
MANIFEST_SCHEMA = "walctl.archive-manifest/1"


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
    last_time_ms: int | None = None  # WAL objects pushed by --follow, task logs: the last record's timestamp (ms)
    as_of_ms: int | None = None  # an agent root's file version: when its bytes stood (its mtime when read, ms)

    def to_json(self) -> dict:
        d = {k: v for k, v in self._asdict().items() if v is not None or k in ("first_sequence", "last_sequence")}
        if self.kind == LIVE:  # spelled out for readers; from_json checks them against the name
            p = parse_piece_name(self.name)
            d.update(file=p.file, start=p.start, end=p.end)
        return d

    @property
    def piece(self) -> Piece | None:
        return parse_piece_name(self.name) if self.kind == LIVE else None

    @classmethod
    def from_json(cls, obj: dict) -> "Entry":
        """ValueError (naming the field) when the object is not a manifest entry (the manifest is then
        rebuilt): ENTRY_SPEC's types, then what no push can have written (a range with one end null or
        ending before it starts, a checkpoint without its WAL sequence, a piece that differs from its name)."""
        why = entry_problem(obj)
        if why:
            name = obj.get("name") if isinstance(obj, dict) and isinstance(obj.get("name"), str) else "an entry"
            raise ValueError(f"{name}: {why}")
        e = cls(**{k: obj.get(k) for k in cls._fields})
        p = e.piece
        if p is not None and (e.size != p.size or (e.first_sequence, e.last_sequence) != (p.first_sequence,
                                                                                          p.last_sequence)):
            raise ValueError(f"{e.name}: a live piece whose size or sequences differ from its name")
        return e


def valid_namespace(ns) -> bool:
    return is_plain_name(ns)


def object_key(ns: str, kind: str, name: str) -> str:
    return f"{ns}/{kind}/{name}"


def _order(e: Entry):
    """Objects in directory order: first sequence, then the number in the file's name, then the name."""
    n = _number(e.kind, e.name)
    return (e.first_sequence if e.first_sequence is not None else -1, n if n is not None else -1, e.name)


def _number(kind: str, name: str) -> int | None:
    from ..kinds import ARCHIVED

    k = ARCHIVED.get(kind)  # (live pieces: none; they are ordered by their file, ops/archive/pieces.py)
    return k.load("number")(name) if k is not None and k.number is not None else None


# ---- describing files (local or downloaded) ------------------------------------------------------------

def piece_kind(p: Piece):
    """The kinds-table entry of the file a live piece belongs to (its name's number parses for it)."""
    from ..kinds import ARCHIVED

    return next(k for k in ARCHIVED.values() if k.piece is not None and k.load("number")(p.file) is not None)


def describe(path: str, kind: str, md5: list | None = None, fs=DEFAULT_FS) -> tuple[Entry | None, Finding | None]:
    """Sha256, sequence range and verdict of one file as the archive sees it: sealed, so any damage is
    corruption (a torn tail is only torn in a live log). With `md5` (a list), its MD5 is appended to it."""
    name = os.path.basename(path)
    if os.path.islink(path):  # its bytes live wherever the link points: never shipped off the machine
        return None, Finding(K.LINKED_FILE, EXIT_UNSUPPORTED, "a symbolic link: walctl does not archive what a "
                             "link points at", name)
    size = os.path.getsize(path)
    if kind == LIVE:  # a piece of a file (its kind's object once sealed), not an object of a kind of its own
        with fs.map_read(path) as buf:
            data = bytes(buf)
        e, f = describe_piece(name, data)
        if md5 is not None:
            md5.append(hashlib.md5(data).hexdigest())
        return e, f
    from ..kinds import archived

    return archived(kind).load("describe")(path, name, size, utc_now(), md5)


def describe_piece(name: str, data: bytes) -> tuple[Entry | None, Finding | None]:
    """A live piece judged as the bytes of its file [start, end) must be: whole valid records (frames),
    with no damage and no partial record, holding exactly the sequences its name says, one by one. How
    its records are read is its file's kind's (KINDS: piece)."""
    p = parse_piece_name(name)
    if p is None:
        return None, Finding(K.UNSUPPORTED, EXIT_UNSUPPORTED, "not a live piece name", name)
    if len(data) != p.size:
        return None, Finding(K.ARCHIVED_DAMAGE, EXIT_CORRUPT, f"{len(data)} bytes, the name says {p.size}", name)
    read = piece_kind(p).load("piece")(p, name, data)
    if isinstance(read, Finding):
        return None, read
    got, rising, last_ms = read
    if not rising or got != (p.first_sequence, p.last_sequence):
        return None, Finding(K.MANIFEST_MISMATCH, EXIT_CORRUPT, f"holds {got[0]}..{got[1]}"
                             f"{'' if rising else ' (not rising by one)'}, the name says "
                             f"{p.first_sequence}..{p.last_sequence}", name)
    return Entry(name, LIVE, len(data), hashlib.sha256(data).hexdigest(), p.first_sequence, p.last_sequence,
                 utc_now(), last_time_ms=last_ms), None


# ---- the manifest ------------------------------------------------------------------------------------

class Manifest(NamedTuple):
    namespace: str
    entries: dict  # name -> Entry
    warnings: tuple[str, ...]
    missing_objects: tuple[str, ...]  # listed by the manifest, absent from the store
    stale_pieces: tuple[str, ...] = ()  # live pieces of a file whose sealed object is archived: to delete
    invalid: str | None = None  # why MANIFEST.json was not used (it did not parse, or an entry was not one)


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
            fetch_to(store, key, f)
            return path
        sink = HashingSink(f)
        fetch_to(store, key, sink)
    return sink.hexdigest()


class Vanished(Exception):
    """An object listed moments ago is gone (a shipper sealed its file, or pruned): take a new view."""


MAX_VIEWS = 5  # new views a reader takes while the shipper keeps replacing what it was reading


def fetch_to(store, key: str, f) -> int:
    """store.get_to, with an object that is gone raised as Vanished."""
    try:
        return store.get_to(key, f)
    except EnvironmentProblem as e:
        if e.kind == REASON_NOT_FOUND:
            raise Vanished(key) from None
        raise


def with_views(store, ns: str, jobs: int, work, read=None):
    """work(manifest) on a consistent view of a live archive: when an object vanishes while it runs, the
    manifest and listing are read again and work runs on the new view (at most MAX_VIEWS times)."""
    for _ in range(MAX_VIEWS):
        try:
            return work((read or read_manifest)(store, ns, jobs))
        except Vanished:
            continue
    raise EnvironmentProblem(f"{ns}: objects vanished under this reader {MAX_VIEWS} times in a row (a shipper "
                             "replacing live pieces faster than they can be read); run it again", store.url)


def read_manifest(store, ns: str, jobs: int = 4) -> Manifest:
    """The namespace's manifest, checked against a listing: objects it does not list are read, scanned
    and added (with a warning); entries whose object is gone are reported. A piece that vanishes while
    it is read (sealed meanwhile) makes it look again, from a new listing."""
    return with_views(store, ns, jobs, lambda man: man, _read_view)


def _read_view(store, ns: str, jobs: int) -> Manifest:
    warnings, invalid = [], None
    raw = store.get_bytes(f"{ns}/{MANIFEST}")
    entries: dict = {}
    listed, foreign = {}, []
    for o in store.list(f"{ns}/"):
        parts = o.key.split("/")
        if o.key in (f"{ns}/{MANIFEST}", f"{ns}/{LOCK}"):  # the follower lock: ops/archive/lock.py
            continue
        if len(parts) == 3 and valid_object(parts[1], parts[2]):
            listed[o.key] = o
        else:  # a folder marker, a nested prefix, an unexpected name: never downloaded, never a path
            foreign.append(o.key)
    if foreign:
        shown = ", ".join(repr(k) for k in foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        warnings.append(f"{ns}: {len(foreign)} foreign object(s) skipped (not walctl's names): {shown}")
    if raw is None and listed:  # a new namespace has neither: nothing to say
        warnings.append(f"{ns}: no {MANIFEST}: rebuilt from a listing")
    elif raw is not None:
        try:
            entries = {e.name: e for e in map(Entry.from_json, parse_objects(raw, MANIFEST_SCHEMA))}
        except ValueError as e:  # (entries stays empty)
            invalid = f"{MANIFEST} does not parse ({e}): rebuilt from a listing"
            warnings.append(f"{ns}: {invalid}")
    # A live piece of a file whose sealed object is archived was replaced by it (a shipper stopped
    # between the manifest and the deletes): not read, not listed again, deleted by the next shipper.
    # A piece the manifest lists but the (newer) listing lacks, beside its file's sealed object, was
    # replaced between the two reads: not missing, just gone. A listing is no snapshot: one that passed
    # chunks/ before a seal and live/ after its deletes lacks both (the sealed object is there now): a new view.
    sealed = {k.rsplit("/", 1)[-1] for k in listed if k.split("/")[1] in WAL_KINDS}
    entries = {n: e for n, e in entries.items() if e.kind != LIVE or e.piece.file not in sealed}
    missing = tuple(sorted(n for n, e in entries.items() if object_key(ns, e.kind, n) not in listed))
    if any(store.head(object_key(ns, k, entries[n].piece.file)) for n in missing if entries[n].kind == LIVE
           for k in WAL_KINDS):
        raise Vanished(f"{ns}: a file was sealed while this reader listed it")
    stale = tuple(sorted(k.rsplit("/", 1)[-1] for k in listed if k.split("/")[1] == LIVE
                         and parse_piece_name(k.rsplit("/", 1)[-1]).file in sealed))
    unlisted = [k for k in listed if k.rsplit("/", 1)[-1] not in entries and k.rsplit("/", 1)[-1] not in stale]
    entries = {n: e for n, e in entries.items() if n not in stale}
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
    return Manifest(ns, entries, tuple(warnings), missing, stale, invalid)


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
