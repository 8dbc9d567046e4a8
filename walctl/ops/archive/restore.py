"""archive restore: a clean directory holding exactly the archived events up to a point, and the newest
archived checkpoint at or below it that verifies."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_OK, EXIT_SEQUENCE, NotClean, Refused, UnsupportedInput, UsageError, \
    WalctlError
from ...store import durable
from ...store.fs import DEFAULT_FS
from ...store.objstore import open_store, sha256_file
from ...store.scratch import Scratch
from .objects import CHECKPOINTS, LIVE, Entry, HashingSink, Manifest, _download, _order, fetch_to, \
    object_key, with_views
from .listing import gaps, namespaces
from .pieces import contiguous_pieces, live_files, wal_units
from ..advice import cmd as _cmd
from .restore_undo import Made


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
    warnings: tuple[str, ...] = ()  # the manifest's: rebuilt from a listing, stale...

    def to_json(self) -> dict:
        return dict(self._asdict(), exit_code=0)


def restore(dest: str, out_dir: str, *, namespace: str | None = None, to_seq: int | None = None,
            to_time_ms: int | None = None, jobs: int = 4, endpoint_url: str | None = None,
            progress=None, undone=None, store=None, fs=DEFAULT_FS) -> RestoreReport:
    """Writes OUT/wal (the events up to the point, exactly) and OUT/checkpoints (the newest archived
    checkpoint at or below it that verifies), then verifies OUT/wal.

    A restore that fails or is interrupted (Ctrl-C) removes what it created in OUT, and only that (OUT
    itself when it made it), and its staging directory; `undone(Undo)` is then told what was removed and
    what is left, before the error goes on (a failure's message says it too)."""
    store = store or open_store(dest, endpoint_url)
    namespace = _only_namespace(store) if namespace is None else namespace
    out_fs = fs.beneath(out_dir)  # OUT opened (or, missing, its parent) once: store/root.py
    if out_fs.exists(out_dir) and out_fs.listdir(out_dir):
        raise Refused(f"{out_dir} is not empty; restore writes a new directory", out_dir)
    parent = os.path.dirname(os.path.abspath(out_dir)) or "."
    scratch = Scratch(parent, prefix=".walctl-restore-")  # beside OUT: adopting its files is a rename
    made = Made(out_fs.beneath_too(scratch.dir), out_dir, scratch)  # OUT as opened above, and the staging dir
    try:
        return _restore(store, dest, namespace, out_dir, to_seq, to_time_ms, jobs, progress, scratch, made,
                        endpoint_url)
    except BaseException as e:  # an error, or Ctrl-C (KeyboardInterrupt): take back what this run made
        undo = made.undo()
        if isinstance(e, WalctlError) and (e.path or "").startswith(scratch.dir + os.sep):
            e.reason += (f" (a download staged beside {out_dir}; the staging directory is "
                         f"{'left' if undo.staging_left else 'removed'})")
        if isinstance(e, WalctlError) and not undo.untouched:  # (a refusal before any write says only itself)
            e.reason = f"{e.reason}; {undo.summary()}"
        if undone is not None:
            undone(undo)
        raise
    finally:
        scratch.close()


def _restore(store, dest, namespace, out_dir, to_seq, to_time_ms, jobs, progress, scratch, made,
             endpoint_url=None) -> RestoreReport:
    from ..wal.verify import verify_path

    fetch = _Fetch(store, namespace, to_seq, to_time_ms, jobs, progress, scratch)
    man, target, needed = with_views(store, namespace, jobs, fetch)
    if fetch.files is not None:  # task logs or an agent root: file versions (ops/archive/files_restore.py)
        return fetch.files.load("restore")(store, namespace, man, out_dir, to_seq, to_time_ms, scratch, made)
    staging = scratch.dir
    if to_time_ms is not None:
        target = last_before(staging, to_time_ms)
        if target is None:
            raise NotClean("no archived event is at or before that time", store.url, code=EXIT_SEQUENCE)
    keep = [e for e in needed if e.first_sequence <= target]
    last_path = os.path.join(staging, keep[-1].name)
    end = _end_of_event(last_path, keep[-1].kind, target)
    if end is None:
        again = _cmd('archive', 'verify', dest, '--namespace', namespace,
                     *(("--endpoint-url", endpoint_url) if endpoint_url else ()))  # pastes as printed
        raise NotClean(f"{keep[-1].name} does not hold event {target}: run `{again}`", store.url,
                       code=EXIT_CORRUPT)
    # The archived bytes themselves, cut right after event `target`: a restore is byte for byte what
    # was pushed (Java reads it as it read the original), and copying is what makes it fast.
    scratch.truncate(keep[-1].name, end)
    wal_out = os.path.join(out_dir, "wal")
    made.dir(out_dir)
    made.dir(wal_out)
    for e in keep:
        made.adopt(scratch.path(e.name), os.path.join(wal_out, e.name))
    ck_name, ck_seq, fallbacks = _restore_checkpoint(store, namespace, man, target,
                                                     os.path.join(out_dir, "checkpoints"), scratch, made)
    check = verify_path(wal_out, jobs=max(1, min(jobs, os.cpu_count() or 1)), fs=made.fs)  # what was written
    if check.exit_code != EXIT_OK or check.last_sequence != target:
        raise NotClean(f"the restored log does not verify ({check.verdict}, last sequence {check.last_sequence})",
                       wal_out, code=check.exit_code or EXIT_CORRUPT)
    return RestoreReport(store.url, namespace, out_dir, target, check.records, check.first_sequence,
                         check.last_sequence, tuple(e.name for e in keep), ck_name, ck_seq, tuple(fallbacks),
                         check.verdict, man.warnings)


class _Fetch:
    """One view's plan, fetched: the WAL objects up to the target into the scratch directory beside OUT
    (emptied first). Called again on a new view when a live piece vanished (sealed meanwhile: the new view
    has the sealed object instead), for the same target: a restore is of the point the first view found."""

    def __init__(self, store, namespace, to_seq, to_time_ms, jobs, progress, scratch):
        self.store, self.ns, self.to_seq, self.to_time_ms = store, namespace, to_seq, to_time_ms
        self.jobs, self.progress, self.scratch = jobs, progress, scratch
        self.files = None  # the kind whose file versions the namespace holds, if it holds them

    def __call__(self, man: Manifest):
        from .files_restore import files_kind

        self.files = files_kind(man)
        if self.files is not None:
            return man, None, None
        present = [e for e in man.entries.values() if e.name not in man.missing_objects]
        # Sealed objects, and the file still being written reassembled from its live pieces (byte for
        # byte, each piece checked against its SHA-256 as it arrives).
        wal = sorted(wal_units(present), key=_order)
        pieces = {f: contiguous_pieces(ps)[0] for f, ps in live_files(present).items()}
        target, needed = _needed(wal, self.ns, self.to_seq, self.to_time_ms, self.store.url)
        if self.to_time_ms is None:
            self.to_seq = target  # a later view restores the same point
        self.scratch.clear()  # what an earlier view fetched
        stop = None
        if self.to_time_ms is not None:  # objects after the first holding an event stamped later are not needed
            stop = lambda e: _stamped_after(self.scratch.path(e.name), e, self.to_time_ms, self.scratch.fs)  # noqa: E731
        needed = _fetch_all(self.store, self.ns, needed, pieces, self.scratch, self.jobs, self.progress, stop)
        return man, target, needed


def _only_namespace(store) -> str:
    nss = namespaces(store)
    if not nss:  # nothing recognised: unsupported, as verify says of an empty directory
        raise UnsupportedInput("no archive here: no namespaces at this destination", store.url)
    if len(nss) != 1:
        raise UsageError(f"give --namespace: this destination holds {len(nss)} namespaces ({', '.join(nss)})")
    return nss[0]


def _needed(wal: list[Entry], namespace: str, to_seq: int | None, to_time_ms: int | None, url: str):
    """(the target sequence, the WAL objects up to it): refused when the archive cannot hold it whole."""
    if not wal:
        raise NotClean(f"no WAL objects archived under {namespace}", url, code=EXIT_SEQUENCE)
    target = to_seq if to_seq is not None else wal[-1].last_sequence
    if to_time_ms is None and target > wal[-1].last_sequence:
        raise NotClean(f"--to {target}: the archive holds sequences up to {wal[-1].last_sequence}", url,
                       code=EXIT_SEQUENCE)
    needed = [e for e in wal if e.first_sequence <= target]
    if not needed:
        raise NotClean(f"the archive starts at {wal[0].first_sequence}, after {target}", url, code=EXIT_SEQUENCE)
    for a, b in gaps(needed):
        raise NotClean(f"sequences {a}..{b} are in no archived object: restorable up to {a - 1} (--to {a - 1})",
                       url, code=EXIT_SEQUENCE)
    return target, needed


def _fetch_all(store, namespace: str, needed: list[Entry], pieces: dict, scratch, jobs: int, progress,
               stop=None) -> list[Entry]:
    """Every needed object into the scratch directory (a live file reassembled from its pieces), each
    checked against its SHA-256; the first that differs refuses the restore (corruption). `stop(entry)`,
    asked in order of each object fetched: True when no later object is needed (--until: it holds an
    event stamped after the time); objects are then fetched `2 * jobs` at a time, and those fetched up to
    it are returned."""
    def fetch(e: Entry):
        if e.sha256 == "":  # reassembled from live pieces
            with scratch.open_write(e.name) as f:
                for pe in pieces[e.name]:
                    sink = HashingSink(f)
                    fetch_to(store, object_key(namespace, LIVE, pe.name), sink)  # Vanished: a new view
                    if sink.hexdigest() != pe.sha256:
                        return pe, sink.hexdigest()
            return e, ""
        return e, _download(store, object_key(namespace, e.kind, e.name), scratch, hashed=True)

    if progress:
        progress(0, total=sum(e.size for e in needed))
    batch = len(needed) if stop is None else 2 * max(1, jobs)
    done = 0
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for start in range(0, len(needed), max(1, batch)):
            for e, sha in pool.map(fetch, needed[start:start + batch]):
                if progress:
                    progress(e.size)
                if sha != e.sha256:
                    ok_to = e.first_sequence - 1
                    raise NotClean(f"{namespace}/{e.kind}/{e.name} is corrupt in the archive (sha256 {sha}, pushed "
                                   f"as {e.sha256}); restorable up to {ok_to} (--to {ok_to})", store.url,
                                   code=EXIT_CORRUPT)
                done += 1
                if stop is not None and stop(e):
                    return needed[:done]
    return needed


def _stamped_after(path: str, e: Entry, to_time_ms: int, fs) -> bool:
    """Whether the fetched object `e` at `path` (read through `fs`, the scratch's) holds an event stamped after
    the time: the kind's `until` (the last event before the first stamped later) stops short of its last event."""
    from ..kinds import ARCHIVED

    k = ARCHIVED.get(e.kind)
    if k is None or k.until is None:
        return False
    return k.load("until")(path, to_time_ms, fs) != e.last_sequence


def _end_of_event(path: str, kind: str, seq: int) -> int | None:
    """The offset right after event `seq` in one archived file of object kind `kind`, or None if it is not there."""
    from ..kinds import ARCHIVED

    k = ARCHIVED.get(kind)
    return k.load("cut")(path, seq) if k is not None and k.cut is not None else None


def last_before(staging: str, to_time_ms: int, fs=DEFAULT_FS) -> int | None:
    """The last sequence before the first event stamped after the time (V2: ms; segments: seconds). The one
    rule for a point given as a time (archive restore --until, cut --until)."""
    from ..kinds import KINDS
    from ..wal.verify import detect_kind

    return KINDS[detect_kind(staging, fs)].load("until")(staging, to_time_ms, fs)


def _restore_checkpoint(store, ns, man: Manifest, target: int, out: str, staging: Scratch, made: "Made"):
    from ..checkpoints.checkpoint import check_path

    cands = sorted((e for e in man.entries.values() if e.kind == CHECKPOINTS and e.wal_sequence is not None
                    and e.wal_sequence <= target and e.name not in man.missing_objects),
                   key=lambda e: (e.wal_sequence, e.checkpoint_time or 0), reverse=True)
    fallbacks = []
    for e in cands:
        fetched = _download(store, object_key(ns, CHECKPOINTS, e.name), staging)
        try:
            rep = check_path(fetched)
            if sha256_file(fetched) != e.sha256 or not rep.checked.ok:
                why = rep.findings[0].reason if rep.findings else "sha256 differs from the manifest"
                fallbacks.append(f"{e.name}: {why}")
                continue
            made.dir(out)
            made.create(os.path.join(out, e.name), durable.file_blocks(fetched))
            return e.name, e.wal_sequence, fallbacks
        finally:
            staging.remove(e.name)
    return None, None, fallbacks
