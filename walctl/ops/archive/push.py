"""archive push: sealed files to the destination, each upload verified, the manifest written last;
--delete-local for what the archive holds and compaction would remove. Rules: docs/format.md section 13."""
from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from typing import Callable, NamedTuple

from ...version import __version__
from ...errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_REFUSED, UsageError, WalctlError, combine_exit_codes
from ...store import durable
from ...store.fs import DEFAULT_FS
from ...store.objstore import open_store
from ...store.scratch import Scratch
from .objects import CHECKPOINTS, WAL_KINDS, Entry, check_namespace, describe, object_key, read_manifest, \
    verify_upload, write_manifest
from ..clock import utc_now
from ..findings import Finding


def chunk_names(wal_dir: str) -> list[str]:
    """A V2 directory's chunk files in index order (KINDS: files)."""
    from ...store.chunkdir import list_chunks

    return [c.name for c in list_chunks(wal_dir).chunks]


def segment_names(wal_dir: str) -> list[str]:
    """An ADR-003 directory's segment files in order (KINDS: files)."""
    from ..wal.segments import list_segments

    return [s.name for s in list_segments(wal_dir)[0]]


def sealed_candidates(wal_dir: str, checkpoints: str | None, sealed_last: bool = True,
                      scratch=None) -> tuple[list[tuple[str, str]], str]:
    """(path, kind) of what push considers: every chunk or segment but the last (the writer may still
    append to it) -- the last too when the ledger seals it at its present size (a writer that sealed on
    close starts a new file when it reopens) -- and the checkpoint files; each is then described
    (verified) by the push itself."""
    from ..kinds import KINDS
    from ..wal.verify import detect_kind

    kind = detect_kind(wal_dir)
    entry = KINDS[kind]
    if entry.stage is not None and scratch is not None:  # task logs, agent roots: file versions, staged
        if checkpoints:
            raise UsageError(f"--checkpoints goes with a WAL directory; this is {kind}", wal_dir)
        return entry.load("stage")(wal_dir, scratch), entry.archive
    if entry.files is None:
        raise UsageError(f"archive push takes a V2 chunk or ADR-003 segment directory, a task-log directory or a "
                         f"Substrat root; this is {kind}", wal_dir)
    names, wal_kind = entry.load("files")(wal_dir), entry.archive
    closed = names if names and sealed_last and _sealed_as_is(wal_dir, names[-1]) else names[:-1]
    out = [(os.path.join(wal_dir, n), wal_kind) for n in closed]
    if checkpoints:
        from ..checkpoints.checkpoint import SUFFIX

        out += [(os.path.join(checkpoints, n), CHECKPOINTS) for n in sorted(os.listdir(checkpoints))
                if n.endswith(SUFFIX)]
    return out, wal_kind


def _sealed_as_is(wal_dir: str, name: str) -> bool:
    """The ledger seals `name` as it is now: its size, inode and mtime (the git-index rule of _from_seals)."""
    from ...format.ledger import fold
    from ...store.ledger import file_identity, read_ledger

    read = read_ledger(wal_dir)
    line = fold(read.lines).sealed.get(name) if read is not None else None
    path = os.path.join(wal_dir, name)
    try:
        return (line is not None and os.path.getsize(path) == line.get("size")
                and bool(line.get("stat", {}).get("ino")) and file_identity(path) == line.get("stat"))
    except (OSError, WalctlError):
        return False


class LocalFile(NamedTuple):
    path: str
    entry: "Entry"


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
        code = combine_exit_codes([f.exit_code for f in self.held_back] + ([EXIT_ENVIRONMENT] if self.failed else []))
        return EXIT_REFUSED if code == EXIT_OK and self.conflicts else code

    def to_json(self) -> dict:
        d = self._asdict()
        d["held_back"] = [f.to_json() for f in self.held_back]
        d["exit_code"] = self.exit_code
        return d


class Outcome(Enum):
    """What pushing one sealed file came to."""
    HELD = "held"            # its own findings hold it back (not pushed)
    EMPTY = "empty"          # a header-only chunk: no event to archive
    ALREADY = "already"      # the manifest lists it with the same bytes
    CONFLICT = "conflict"    # an archived object of that name holds other bytes: never overwritten
    ADOPTED = "adopted"      # uploaded by a push that stopped before its manifest, and verified
    UPLOADED = "uploaded"    # uploaded now and verified
    FAILED = "failed"        # uploaded, but the upload did not verify


class _Pusher:
    """One push's shared state: the store, the namespace, the manifest read at the start and what the
    ledger's seals already describe."""

    def __init__(self, store, ns: str, man, from_seals: dict):
        self.store, self.ns, self.man, self.from_seals = store, ns, man, from_seals
        self.entries = dict(man.entries)

    def one(self, path: str, kind: str, described) -> tuple[Outcome, "Entry", object]:
        """Skip, refuse or upload a file once its description (scan and hashes) is ready."""
        if path in self.from_seals:  # the ledger's seal still describes it: no re-read (ledger rule 3)
            e, f, md5 = self.from_seals[path], None, None
        else:
            e, f, md5 = described.result() if described is not None else _describe(path, kind)
        if f is not None:
            return Outcome.HELD, e, f._replace(reason=f"not pushed: {f.reason}")
        if kind in WAL_KINDS and e.first_sequence is None:
            return Outcome.EMPTY, e, None  # a header-only chunk holds no event
        known = self.entries.get(e.name)
        if known is not None and e.name not in self.man.missing_objects:
            return (Outcome.ALREADY if known.sha256 == e.sha256 else Outcome.CONFLICT), e, "archived with other bytes"
        key = object_key(self.ns, kind, e.name)
        # read_manifest listed the namespace moments ago: every object it listed is in `entries`, or it
        # warned. So a name absent from a warning-free listing had no object; asking again per file cost
        # one request each (the same check-then-put window as before, just without the round trip).
        existing = self.store.head(key) if self.man.warnings or e.name in self.entries else None
        if existing is not None:  # uploaded by a push that stopped before its manifest: adopt or refuse
            why = verify_upload(self.store, key, e, existing, md5)
            return (Outcome.CONFLICT if why else Outcome.ADOPTED), e, why
        info = self.store.put_file(key, path, e.sha256, {"first-sequence": str(e.first_sequence),
                                                         "last-sequence": str(e.last_sequence)})
        why = verify_upload(self.store, key, e, info, md5)
        return (Outcome.FAILED if why else Outcome.UPLOADED), e, why


class _Tally:
    """The outcomes of a push, in candidate order."""

    def __init__(self):
        self.uploaded, self.already, self.conflicts, self.failed, self.held, self.pushed = [], [], [], [], [], []
        self.errors: list[str] = []
        self.sent = 0

    def add(self, pusher: _Pusher, path: str, what: Outcome, e, why, progress) -> None:
        name = os.path.basename(path)
        if what is Outcome.HELD:
            self.held.append(why)
        elif what is Outcome.ALREADY:
            self.already.append(name)
            self.pushed.append(LocalFile(path, e))
        elif what in (Outcome.UPLOADED, Outcome.ADOPTED):
            pusher.entries[name] = e._replace(uploaded_at=utc_now())
            self.uploaded.append(name)
            self.pushed.append(LocalFile(path, e))
            self.sent += e.size if what is Outcome.UPLOADED else 0
            if progress:
                progress(e.size)
        elif what is Outcome.CONFLICT:
            self.conflicts.append(name)
            self.errors.append(f"{name}: {why}; never overwritten")
        elif what is Outcome.FAILED:
            self.failed.append(name)
            self.errors.append(f"{name}: upload not verified: {why}")

    def add_error(self, path: str, ex: Exception) -> None:
        name = os.path.basename(path)
        self.errors.append(f"{name}: {ex}")
        self.failed.append(name)


def push(wal_dir: str, dest: str, *, namespace: str | None = None, checkpoints: str | None = None, jobs: int = 4,
         delete_local: bool = False, hwm_before: int | None = None, checkpoint_meta: str | None = None,
         apply: bool = False, endpoint_url: str | None = None,
         progress: Callable[[int], None] | None = None, multipart_threshold: int | None = None,
         sealed_last: bool = True, fs=DEFAULT_FS) -> PushReport:
    """multipart_threshold: files larger than this go to S3 in parts, each checked by the service
    (default store.objstore.MULTIPART_THRESHOLD_BYTES, 5 GiB). sealed_last: the last file goes too when
    the ledger seals it as it is (the follower, which ships it as pieces, closes it on its seal itself)."""
    t0 = time.perf_counter()
    # --delete-local changes WAL_DIR: opened now, once, so that the chunks it removes are the ones it read
    local_fs = fs.beneath(wal_dir) if delete_local and apply else None
    store = open_store(dest, endpoint_url)
    if multipart_threshold is not None and hasattr(store, "multipart_threshold"):
        store.multipart_threshold = multipart_threshold
    ns = namespace or os.path.basename(os.path.abspath(wal_dir))
    check_namespace(ns)
    with Scratch(prefix="walctl-push-") as scratch:  # file versions' staged copies (ops/archive/files.py)
        candidates, _ = sealed_candidates(wal_dir, checkpoints, sealed_last, scratch)
        pusher = _Pusher(store, ns, read_manifest(store, ns, jobs), _from_seals(wal_dir, candidates))
        tally = _run(pusher, candidates, jobs, progress)
    man, entries = pusher.man, pusher.entries
    if tally.uploaded or man.warnings:
        write_manifest(store, ns, entries)  # last: it lists only what was verified
    deleted, would = _delete_local(wal_dir, store, ns, entries, tally.pushed, delete_local, hwm_before,
                                   checkpoint_meta, checkpoints, apply, local_fs)
    return PushReport(store.url, ns, tuple(tally.uploaded), tuple(tally.already), tuple(tally.conflicts),
                      tuple(tally.failed), tuple(tally.held), tuple(deleted), tuple(would), tally.sent,
                      time.perf_counter() - t0, tuple(man.warnings) + tuple(tally.errors))


def _run(pusher: _Pusher, candidates, jobs: int, progress) -> _Tally:
    """Describes (in worker processes) and pushes (in threads) every candidate; outcomes in candidate order."""
    tally = _Tally()
    from_seals = pusher.from_seals
    procs = _describers([c for c in candidates if c[0] not in from_seals])
    try:
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            futures = [(path, pool.submit(pusher.one, path, kind, procs.submit(_describe, path, kind)
                                          if procs and path not in from_seals else None))
                       for path, kind in candidates]
            for path, fut in futures:
                try:
                    what, e, why = fut.result()
                except Exception as ex:  # noqa: BLE001 - each file's failure is reported; the rest go on
                    tally.add_error(path, ex)
                    continue
                tally.add(pusher, path, what, e, why, progress)
    finally:
        if procs is not None:
            procs.shutdown(cancel_futures=True)
    return tally


def _from_seals(wal_dir: str, candidates) -> dict:
    """path -> Entry for chunks and segments whose ledger seal still matches their size, inode and mtime
    (the git-index rule): the SHA-256 and sequence range come from the seal, and the service checks the
    SHA-256 of what it receives, so nothing is read twice."""
    from ...format.ledger import fold
    from ...store.chunkread import usable_seal
    from ...store.ledger import file_identity, read_ledger
    from ..kinds import archived

    read = read_ledger(wal_dir)
    if read is None:
        return {}
    sealed = fold(read.lines).sealed
    out = {}
    now = utc_now()
    for path, kind in candidates:
        line = sealed.get(os.path.basename(path))
        if not archived(kind).ledger or line is None or not usable_seal(line.fields) or line.get("first_seq") is None:
            continue
        try:
            same = (os.path.getsize(path) == line.get("size") and line.get("stat", {}).get("ino")
                    and file_identity(path) == line.get("stat"))
        except (OSError, WalctlError):
            continue
        if same:
            out[path] = Entry(line.get("file"), kind, line.get("size"), line.get("sha256"), line.get("first_seq"),
                              line.get("last_seq"), now)
    return out


def _describe(path: str, kind: str):
    md5: list = []
    e, f = describe(path, kind, md5)
    return e, f, md5[0] if md5 else None  # (a file refused before hashing has none)


SPAWN_WORTH_BYTES = 64 << 20  # a fresh interpreter costs ~0.3 s: only for pushes that scan more than this


def _describers(candidates):
    """A process that scans and hashes while this one transfers (the scan is pure Python: in this
    process it would hold the GIL the transfer threads need). A fresh interpreter, not a fork: this
    process may already run threads (a fork could inherit a held lock)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if (os.cpu_count() or 1) < 2 or sum(os.path.getsize(p) for p, _ in candidates) < SPAWN_WORTH_BYTES:
        return None
    return ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))


def _delete_local(wal_dir, store, ns, entries, files, delete_local, before, checkpoint_meta, checkpoints, apply,
                  fs=None):
    """--delete-local: chunks the archive holds (verified, same sha256) that compaction would also remove
    (closed, contiguous, at or below the HWM). Each is recorded in .quarantine/MANIFEST.jsonl with where
    its archived copy is before it is removed. `fs`: WAL_DIR opened when the push started; each chunk is
    hashed again through it before it is removed (the upload read it by its path)."""
    if not delete_local:
        return [], []
    from ...store import ledger, quarantine
    from ...store.lock import DirectoryLock, holder_text
    from ..wal.compact import plan
    from ..kinds import archived

    if before is None and checkpoint_meta is None and checkpoints is None:
        raise UsageError("--delete-local needs a compaction HWM: --to N, --checkpoint-meta or --checkpoints")
    hwm, source = _hwm(before, checkpoint_meta, None if before is not None or checkpoint_meta else checkpoints)
    local = {lf.entry.name: lf for lf in files if archived(lf.entry.kind).compact}

    def eligible(removals):
        return [r for r in removals if r.file in local and r.file in entries
                and entries[r.file].sha256 == local[r.file].entry.sha256]

    if not apply:
        return [], [r.file for r in eligible(plan(wal_dir, hwm)[0])]
    deleted = []
    from ...store.contain import refuse_links

    refuse_links(wal_dir, [r.file for r in eligible(plan(wal_dir, hwm, fs)[0])], fs, what="delete")  # before the lock
    with DirectoryLock(wal_dir, holder_text("archive push --delete-local"), fs):
        now = utc_now()
        for r in eligible(plan(wal_dir, hwm, fs, True)[0]):
            lf = local[r.file]
            if quarantine.sha256_file(lf.path, fs) != lf.entry.sha256:
                continue  # changed since it was pushed (or not what was read): not what the archive holds
            url = f"{store.url}/{object_key(ns, lf.entry.kind, r.file)}"
            ledger.record_moved(wal_dir, r.file, url, "archive", now, fs, (r.first_sequence, r.last_sequence))
            quarantine.record(wal_dir, quarantine.entry(now, "archive-delete", r.file, 0, lf.entry.size, lf.entry.sha256,
                                                        url,
                                                        f"archived and verified; sequences up to {r.last_sequence} "
                                                        f"are covered by {source}", __version__), fs)
            durable.remove(lf.path, fs)
            deleted.append(r.file)
    return deleted, []


def _hwm(before, checkpoint_meta, checkpoints, fs=DEFAULT_FS):
    from ..wal.compact import read_hwm

    return read_hwm(before, checkpoint_meta, fs, checkpoints)
