"""archive push --follow: ship the file a live writer appends to as it grows, so a lost machine loses
seconds, not a chunk. Rules: docs/format.md section 13 (live pieces).

What it does, and why:
- The sealed files go first, as `archive push` sends them (same code).
- Then the active file is followed by ops/wal/follow.py's followers (the judge replay --follow uses: an
  append in flight is waited for, a torn tail is never shipped, mid-log damage stops the shipper). The
  bytes they consume (whole records, never a partial one) are buffered and uploaded as one immutable
  live piece per `interval` at most (a quiet writer: nothing), each verified (size and SHA-256) before
  the manifest may list it.
- When the writer rolls to a new file, the closed one is pushed as a sealed object (verified like
  `archive push`: a torn or damaged closed file is held back and stays archived as pieces); the
  manifest then lists it instead of its pieces, and only then are the pieces deleted (a crash in
  between leaves stale pieces that readers skip and the next shipper deletes).
- A writer that shuts down without rolling seals its last file in the directory ledger. That seal line
  closes the file as a roll would (once: the later roll finds it closed), when it matches what the
  shipper consumed: same size, nothing pending past it, the same last sequence, the same SHA-256 (the
  file hashed once, at most one chunk). A seal that does not match (the file grew, or was damaged) is
  not trusted: the file stays live. The ledger is re-read only when its size changes (append-only).
- The manifest is written at each seal, at most every `manifest_interval` seconds, and on stop; pieces
  uploaded after it are found by the next read (listed, downloaded, judged and adopted), so a crash
  at any point re-sends nothing that is archived and verified, and skips nothing: the shipper resumes
  at the end of the last archived piece, after checking that the local bytes there are the archived ones.
"""
from __future__ import annotations

import hashlib
import os
import signal
import time
from types import SimpleNamespace
from typing import Callable, NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_OK, REASON_NOT_FOUND, EnvironmentProblem, NotClean, Refused
from ...format.livepiece import Piece, piece_name
from ...store.fs import DEFAULT_FS
from ...store.objstore import open_store
from .objects import LIVE, Entry, check_namespace, describe, object_key, \
    read_manifest, verify_upload, write_manifest
from .lock import MIN_HEARTBEAT_S, NamespaceLock
from .pieces import contiguous_pieces, live_files
from .seal import LedgerSeals
from ..clock import utc_now


class ShipReport(NamedTuple):
    destination: str
    namespace: str
    pieces_uploaded: int
    sealed_uploaded: tuple[str, ...]
    pieces_deleted: tuple[str, ...]  # live pieces removed after their file's sealed object was archived
    held_back: tuple[str, ...]  # closed files not pushed sealed (their pieces stay): why
    bytes_uploaded: int
    shipped_through: int | None  # the last sequence in a verified upload
    ended_by: str  # "signal" | "timeout" | "damage" | "stopped"
    problem: str | None
    exit_code: int
    warnings: tuple[str, ...]

    def to_json(self) -> dict:
        return self._asdict()


class Shipper:
    """Ships one log directory to `<namespace>/live/` and `<namespace>/chunks|segments/`. Library use:
    `poll()` after each group commit (or on a timer), `close()` at the end; `walctl archive push
    --follow` runs `run()`. Not thread-safe: one caller at a time."""

    def __init__(self, wal_dir: str, dest: str, *, namespace: str | None = None, interval: float = 1.0,
                 min_piece_bytes: int = 0, max_wait: float | None = None, manifest_interval: float = 30.0,
                 endpoint_url: str | None = None, checkpoints: str | None = None,
                 on_shipped: Callable[[int], None] | None = None, clock=time.monotonic, store=None,
                 wall=time.time, lock_identity: tuple[str, int] | None = None, fs=DEFAULT_FS):
        if not os.path.isdir(wal_dir):
            raise EnvironmentProblem("no such directory (not-found)" if not os.path.exists(wal_dir) else
                                     "not a directory: archive push --follow takes a V2 chunk or ADR-003 segment "
                                     "directory", wal_dir)
        self.wal_dir, self.dest, self.endpoint_url, self.checkpoints = wal_dir, dest, endpoint_url, checkpoints
        self.fs = fs
        self.store = store or open_store(dest, endpoint_url)
        self.ns = namespace or os.path.basename(os.path.abspath(wal_dir))
        check_namespace(self.ns)
        self.interval, self.min_piece_bytes = interval, min_piece_bytes
        self.max_wait = interval if max_wait is None else max_wait
        self.manifest_interval, self.clock, self.on_shipped = manifest_interval, clock, on_shipped
        self.follower = None
        self.cur: str | None = None  # the file being followed
        self.shipped_end: dict[str, int] = {}  # file -> end of its archived pieces
        self.buf = bytearray()
        self.buf_file: str | None = None
        self.buf_start = 0
        self.buf_first = self.buf_last = self.buf_time = None
        self.buf_since = 0.0
        self.last_upload = float("-inf")
        self.last_manifest = clock()
        self.dirty = False
        self.pieces_uploaded, self.bytes_uploaded = 0, 0
        self.sealed_uploaded: list[str] = []
        self.pieces_deleted: list[str] = []
        self.held_back: list[str] = []
        self.warnings: list[str] = []
        self.shipped_through: int | None = None
        self.entries: dict = {}
        self.ended = None
        self.closed: set[str] = set()  # files pushed sealed by this shipper: never closed twice
        self.seals = LedgerSeals(wal_dir)
        # one follower per namespace (taken at the first poll, dropped at close); lock_identity (host, pid)
        self.lock = NamespaceLock(self.store, self.ns, max(interval, MIN_HEARTBEAT_S), wall, *(lock_identity or ()))

    # ---- start: sealed files, then where the archive ends ------------------------------------------

    def _kind(self):
        """The followed kind's table entry (ops/kinds.py) once the directory holds one of its files."""
        from ..kinds import KINDS

        names = os.listdir(self.wal_dir)
        for k in KINDS.values():
            if k.follower is not None and any(k.load("number")(n) is not None for n in names):
                return k
        return None

    def _start(self) -> bool:
        """Pushes the sealed files and places the follower; False while the directory has no log file."""
        entry = self._kind()
        if entry is None:
            return False
        self.entry, self.kind = entry, entry.archive
        from .push import push

        rep = push(self.wal_dir, self.dest, namespace=self.ns, checkpoints=self.checkpoints,
                   endpoint_url=self.endpoint_url, sealed_last=False)
        self.warnings += list(rep.warnings) + [f"{f.file}: {f.reason}" for f in rep.held_back]
        if rep.conflicts or rep.failed:
            raise NotClean(f"archive push: {len(rep.conflicts)} conflicts, {len(rep.failed)} failed uploads; not "
                           "following", self.store.url, code=rep.exit_code)
        self.sealed_uploaded += list(rep.uploaded)
        self.bytes_uploaded += rep.bytes_uploaded
        man = read_manifest(self.store, self.ns)
        self.warnings += list(man.warnings)
        self.entries = {n: e for n, e in man.entries.items() if n not in man.missing_objects}
        self._delete_pieces(list(man.stale_pieces))
        start = self._resume_point()
        self.follower = self.entry.load("follower")(self.wal_dir, lambda items: None, start=start,
                                                    on_bytes=self._on_bytes, fs=self.fs)
        self.cur = self.follower.t.current
        return True

    def _number(self, name: str) -> int:
        n = self.entry.load("number")(name)
        return -1 if n is None else n

    def _resume_point(self):
        """(file, offset, last sequence) where the archive ends, or None to start at the first file.
        The local bytes of the last archived piece must be the archived ones (else the local log has
        been rewritten under the archive: refused)."""
        sealed = [e for e in self.entries.values() if e.kind == self.kind and e.last_sequence is not None]
        top = max(sealed, key=lambda e: self._number(e.name), default=None)
        live = {f: contiguous_pieces(ps)[0] for f, ps in live_files(self.entries.values()).items()}
        live = {f: ps for f, ps in live.items() if ps and (top is None or self._number(f) > self._number(top.name))}
        for f, ps in live.items():
            self.shipped_end[f] = ps[-1].piece.end
        if live:
            f = max(live, key=self._number)
            last = live[f][-1]
            self._check_local(f, last)
            self.shipped_through = last.last_sequence
            return f, last.piece.end, last.last_sequence
        if top is not None:
            self.shipped_through = top.last_sequence
            n = self._number(top.name) + 1
            nxt = sorted((self._number(x), x) for x in os.listdir(self.wal_dir) if self._number(x) >= n)
            name = nxt[0][1] if nxt else self.entry.load("file_name")(n)
            return name, 0, top.last_sequence
        return None

    def _check_local(self, file: str, e: Entry) -> None:
        p = e.piece
        try:
            data = self.fs.read_range(os.path.join(self.wal_dir, file), p.start, p.size)
        except EnvironmentProblem as err:
            if err.kind != REASON_NOT_FOUND:
                raise
            return  # moved away (compacted): the follower moves on to what is there
        if hashlib.sha256(data).hexdigest() != e.sha256:
            raise Refused(f"{file}: bytes {p.start}..{p.end} differ from the archived piece {e.name}: the local log "
                          "was rewritten under the archive; not shipping over it", self.wal_dir)

    # ---- following ------------------------------------------------------------------------------

    def _on_bytes(self, file: str, offset: int, data: bytes, recs) -> None:
        if file != self.cur:
            self._close(self.cur)
            self.cur = file
        seqs = [r.sequence if hasattr(r, "sequence") else r[1].sequence for r in recs]
        if not seqs:
            return  # nothing but a V2 file header: it goes out with the first record
        if file in self.closed:  # its sealed object is archived; a writer never appends to a sealed file
            raise NotClean(f"{file}: records {seqs[0]}..{seqs[-1]} were appended after its ledger seal (which is "
                           "archived as its sealed object); not shipping them", self.wal_dir, code=EXIT_CORRUPT)
        end = self.buf_start + len(self.buf) if self.buf else self.shipped_end.get(file, 0)
        if not self.buf and offset > end and end == 0 and self.entry.file_header is not None:
            head = self.entry.load("file_header")()
            if offset == len(head):  # the header was consumed alone by an earlier poll
                data, offset = head + data, 0
        if offset != end:
            raise NotClean(f"{file}: the follower consumed bytes from offset {offset}, the archive ends at {end}",
                           self.wal_dir, code=EXIT_CORRUPT)
        if not self.buf:
            self.buf_file, self.buf_start, self.buf_first, self.buf_since = file, offset, seqs[0], self.clock()
        self.buf += data
        self.buf_last = max(seqs[-1], self.buf_last or 0) if self.buf_last is not None and self.buf_file == file \
            else seqs[-1]
        last = recs[-1]
        self.buf_time = last.timestamp_ms if hasattr(last, "timestamp_ms") else \
            int(float(last[1].value.get("timestamp", 0)) * 1000) if isinstance(last[1].value, dict) else None

    def poll(self) -> int | None:
        """One poll: reads what the log gained, uploads a piece when one is due, pushes a closed file
        sealed. Returns the last sequence archived (verified) so far. Raises NotClean when the log is
        damaged where it is followed (what was archived before stays archived)."""
        self.warnings += self.lock.hold()  # exit 6 naming the holder when another follower ships here
        if self.follower is None and not self._start():
            return self.shipped_through
        _, end = self.follower.step()
        if self.follower.t.current != self.cur and self.follower.t.current is not None:
            self._close(self.cur)
            self.cur = self.follower.t.current
        self._close_if_sealed()
        now = self.clock()
        if self.buf and now - self.last_upload >= self.interval and \
                (len(self.buf) >= self.min_piece_bytes or now - self.buf_since >= self.max_wait):
            self._flush()
        if self.dirty and now - self.last_manifest >= self.manifest_interval:
            self._write_manifest()
        if end is not None and end.exit_code != EXIT_OK:
            self.ended = end
            self.close()
            raise NotClean(f"stopped at damage: {end.problem}", self.wal_dir, code=end.exit_code)
        return self.shipped_through

    def _flush(self) -> None:
        if not self.buf:
            return
        data = bytes(self.buf)
        p = Piece(self.buf_file, self.buf_start, self.buf_start + len(data), self.buf_first, self.buf_last)
        name = piece_name(p)
        sha = hashlib.sha256(data).hexdigest()
        key = object_key(self.ns, LIVE, name)
        e = Entry(name, LIVE, len(data), sha, p.first_sequence, p.last_sequence, utc_now(), last_time_ms=self.buf_time)
        info = self.store.head(key)
        if info is None:
            info = self.store.put_data(key, data, sha, {"first-sequence": str(p.first_sequence),
                                                        "last-sequence": str(p.last_sequence)})
            self.bytes_uploaded += len(data)
            self.pieces_uploaded += 1
        why = verify_upload(self.store, key, e, info, hashlib.md5(data).hexdigest())
        if why:
            raise NotClean(f"{key}: upload not verified: {why}", self.store.url, code=EXIT_CORRUPT)
        self.entries[name] = e
        self.shipped_end[p.file] = p.end
        self.buf = bytearray()
        self.buf_last = None
        self.last_upload = self.clock()
        self.dirty = True
        self._shipped(p.last_sequence)

    def _shipped(self, seq: int) -> None:
        if self.shipped_through is None or seq > self.shipped_through:
            self.shipped_through = seq
            if self.on_shipped is not None:
                self.on_shipped(seq)

    def _close_if_sealed(self) -> None:
        """Closes the followed file when the ledger seals it exactly where the shipper stands (a writer
        that shut down without rolling): what a roll would do, without waiting for a next file."""
        file, t = self.cur, self.follower.t
        if file is None or file in self.closed or t.current != file or t.pending:
            return  # pending bytes: the follower has not consumed (or judged) everything in the file yet
        end = self.buf_start + len(self.buf) if self.buf and self.buf_file == file else self.shipped_end.get(file)
        last = self.buf_last if self.buf and self.buf_file == file else self.shipped_through
        e = self.seals.matching(file, self.kind, consumed=t.base, shipped_end=end, last_sequence=last)
        if e is not None:
            self._close(file, e._replace(uploaded_at=utc_now()))
        elif self.seals.mismatch and self.seals.mismatch not in self.warnings:
            self.warnings.append(self.seals.mismatch)

    def _close(self, file: str | None, sealed: Entry | None = None) -> None:
        """The writer moved on from `file` (or sealed it: `sealed`, checked against what was consumed):
        push it sealed (its pieces then go), or, when it does not verify clean (a torn tail left by a
        crash), keep it as pieces. A file closed once is not closed again."""
        if file is None or file in self.closed:
            return
        path = os.path.join(self.wal_dir, file)
        e, f = (sealed, None)
        if e is None and os.path.exists(path):
            from .push import _from_seals

            e = _from_seals(self.wal_dir, [(path, self.kind)]).get(path)
            if e is None:
                e, f = describe(path, self.kind, fs=self.fs)
        if e is None or e.first_sequence is None:
            if f is not None:
                self.held_back.append(f"{file}: {f.reason}")
                self.warnings.append(f"{file}: not pushed sealed ({f.reason}); its records stay archived as pieces")
            self._flush()
            return
        if self.buf and self.buf_file == file and e.last_sequence != self.buf_last:
            self._flush()  # should not happen (the follower consumed the whole file): keep what it read
        key = object_key(self.ns, self.kind, file)
        known = self.entries.get(file)
        if known is None:
            info = self.store.head(key)
            if info is None:
                info = self.store.put_file(key, path, e.sha256, {"first-sequence": str(e.first_sequence),
                                                                 "last-sequence": str(e.last_sequence)})
                self.bytes_uploaded += e.size
            why = verify_upload(self.store, key, e, info)
            if why:
                raise NotClean(f"{key}: upload not verified: {why}", self.store.url, code=EXIT_CORRUPT)
            self.entries[file] = e._replace(uploaded_at=utc_now(), last_time_ms=self.buf_time)
            self.sealed_uploaded.append(file)
        elif known.sha256 != e.sha256:
            raise Refused(f"{key} is archived with other bytes; never overwritten", self.store.url)
        if self.buf_file == file:
            self.buf, self.buf_last = bytearray(), None
        self._shipped(e.last_sequence)
        stale = [n for n, x in self.entries.items() if x.kind == LIVE and x.piece.file == file]
        for n in stale:
            del self.entries[n]
        self.closed.add(file)
        self._write_manifest()  # first: it no longer lists the pieces
        self._delete_pieces(stale)

    def _delete_pieces(self, names: list[str]) -> None:
        for n in names:
            self.store.delete(object_key(self.ns, LIVE, n))
            self.pieces_deleted.append(n)

    def _write_manifest(self) -> None:
        write_manifest(self.store, self.ns, self.entries)
        self.dirty, self.last_manifest = False, self.clock()

    def close(self) -> None:
        """Uploads what is buffered (finishing the job), writes the manifest, drops the namespace lock."""
        if self.follower is not None:
            self._flush()
            if self.dirty:
                self._write_manifest()
        self.lock.release()

    def report(self, ended_by: str, problem: str | None = None, code: int = EXIT_OK) -> ShipReport:
        return ShipReport(self.store.url, self.ns, self.pieces_uploaded, tuple(self.sealed_uploaded),
                          tuple(self.pieces_deleted), tuple(self.held_back), self.bytes_uploaded,
                          self.shipped_through, ended_by, problem, code, tuple(self.warnings))


def _shipper(wal_dir: str):
    """KINDS: shipper (task logs, agent roots: file versions); else Shipper (a WAL, or no log file yet)."""
    from ...errors import WalctlError
    from ..kinds import KINDS
    from ..wal.verify import detect_kind

    try:
        return KINDS[detect_kind(wal_dir)].load("shipper")
    except (WalctlError, LookupError):
        return Shipper


def push_follow(wal_dir: str, dest: str, *, interval: float = 1.0, timeout: float | None = None,
                poll_interval: float | None = None, install_signals: bool = True, sleep=time.sleep,
                on_poll: Callable[[Shipper], None] | None = None, **kw) -> ShipReport:
    """archive push --follow: polls until SIGINT/SIGTERM (or `timeout`), then finishes the buffered
    piece and writes the manifest. A damaged log ends it with the damage's exit code; on_poll(shipper)."""
    sh = _shipper(wal_dir)(wal_dir, dest, interval=interval, **kw)
    stop = SimpleNamespace(signal=None)  # the signal that asked to stop
    old = {}
    if install_signals:
        for s in (signal.SIGINT, signal.SIGTERM):
            old[s] = signal.signal(s, lambda signum, frame: setattr(stop, "signal", signum))
    step = poll_interval if poll_interval is not None else min(0.2, interval / 4)
    deadline = None if timeout is None else sh.clock() + timeout
    try:
        while True:
            if stop.signal is not None:
                sh.close()
                return sh.report("signal", None, 130 if stop.signal == signal.SIGINT else EXIT_OK)
            if deadline is not None and sh.clock() >= deadline:
                sh.close()
                return sh.report("timeout")
            try:
                sh.poll()
            except NotClean as e:
                return sh.report("damage", e.reason, e.exit_code)
            if on_poll is not None:
                on_poll(sh)
            sleep(step)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        sh.lock.release(quietly=True)  # a failure above: the next follower need not wait for it to go stale
