"""Reading and rewriting `.walctl/index.jsonl` (format in walctl/format/seqindex.py).

  read:    no lock, no writes: a read-only command that finds no index (or a damaged one) scans instead
  rewrite: the caller holds the directory's lock (seal, the writer's sealer): the whole index is written
           again as NAME.tmp, synced and renamed over the old one (durable.create_file), so a crash leaves
           the old index or the new one, never a torn line
  index:   the entries of sealed files not yet indexed, built from their bytes and their seal lines
"""
from __future__ import annotations

import os

from ..format import ledger as L
from ..format import seqindex as X
from ..format.names import parse_chunk_name
from ..errors import WalctlError
from . import durable
from .fs import DEFAULT_FS


def index_path(directory: str) -> str:
    return os.path.join(directory, L.LEDGER_DIR, X.INDEX_NAME)


def read_index(directory: str, fs=DEFAULT_FS) -> X.IndexRead | None:
    """The decoded index, or None when the directory has none."""
    path = index_path(directory)
    if not fs.exists(path):
        return None
    with fs.map_read(path) as buf:
        return X.decode_index(buf)


def refresh_index(directory: str, fs=DEFAULT_FS, *, only=None, skip=(), hints=None) -> list[str]:
    """Indexes every file the ledger seals that the index lacks or describes otherwise (another hash or
    size, another mtime: a copy, a rewrite; the caller has verified the sealed files or just wrote them),
    drops entries of files no longer sealed, writes lines of an older version again, and rewrites the index
    when that changed anything.
    Returns the names newly indexed. The caller holds the directory's lock. `only`: (re)build no other
    entries (a writer's sealer: the chunks it just closed); `skip`: files not to index (verify found them
    damaged or unlike their seal); `hints`: file -> the writer's (marks, last record's offset, least and
    greatest time) of a V2 chunk it wrote whole, so that its line is built from a few checked records
    instead of a walk over all of them (the walk cost a sealing writer 76% of its throughput)."""
    sealed = _sealed(directory, fs)
    old = read_index(directory, fs)
    have = old.entries if old is not None else {}
    keep = {f: e for f, e in have.items() if f in sealed and _describes(e, sealed[f].fields)
            and (only is not None and f not in only or _mtime(os.path.join(directory, f), fs) == e.mtime_ns
                 and e.version == X.INDEX_VERSION and not _untimed_segment(e))}  # seal --apply: built again
    added = []
    for name in sorted(set(sealed) - set(keep) - set(skip)):
        if only is not None and name not in only:
            continue
        path = os.path.join(directory, name)
        if not fs.exists(path) or fs.stat(path).kind != "file":
            continue
        is_v2, hint = parse_chunk_name(name) is not None, (hints or {}).get(name)
        with fs.map_read(path) as buf:
            e = X.entry_from_hint(buf, sealed[name].fields, _mtime(path, fs), *hint) if hint and is_v2 else None
            if e is None:
                e = X.build_entry(buf, is_v2, sealed[name].fields, _mtime(path, fs))
        if e is not None:
            keep[name] = e
            if e != have.get(name):  # (a segment whose times cannot be given is built again the same)
                added.append(name)
    dropped = old is not None and (len(keep) - len(added) != len(have) or old.bad)
    if added or dropped or (old is None and keep):
        durable.make_dir(os.path.join(directory, L.LEDGER_DIR), fs)
        durable.create_file(index_path(directory), b"".join(X.encode_entry(keep[f]) for f in sorted(keep)), fs,
                            replace=True)
    return added


def _untimed_segment(e: X.IndexEntry) -> bool:
    """A segment line without times that has entries: written before segments had them (or, built again
    the same, one holding a time no line can: NaN, beyond 64 bits)."""
    return e.min_ts is None and e.records > 0 and parse_chunk_name(e.file) is None


def _mtime(path: str, fs) -> int | None:
    ident = getattr(fs, "identity", None)
    try:
        return ident(path)[1] if ident is not None else 0
    except WalctlError:
        return None  # gone: not kept


def _sealed(directory: str, fs) -> dict:
    """file -> its seal line, read here (store/ledger.py calls this module: the arrow points one way)."""
    path = os.path.join(directory, L.LEDGER_DIR, L.LEDGER_NAME)
    if not fs.exists(path):
        return {}
    with fs.map_read(path) as buf:
        return L.fold(L.decode_ledger(buf).lines).sealed


def _describes(e: X.IndexEntry, seal: dict) -> bool:
    return (e.size, e.sha256, e.records, e.first_seq, e.last_seq) == (
        seal.get("size"), seal.get("sha256"), seal.get("records"), seal.get("first_seq"), seal.get("last_seq"))
