"""Reading and appending `.walctl/ledger.jsonl` (format in walctl/format/ledger.py).

  read:    no lock, no writes: a read-only command may look at the ledger of a directory being written
  append:  the caller holds the directory's lock; a torn last line (a crash mid-append) is cut first
           (durable truncate), then the new lines are appended and synced in one write (durable append)
  seal:    the SHA-256 and stat data of a chunk file that will not change again (callers sync it first)
"""
from __future__ import annotations

import hashlib
import os
import queue
import threading

from ..format import ledger as L
from ..format.lines import tail_of
from ..format.digest import sha256_hex
from . import durable
from .fs import DEFAULT_FS


def ledger_dir(directory: str) -> str:
    return os.path.join(directory, L.LEDGER_DIR)


def ledger_path(directory: str) -> str:
    return os.path.join(directory, L.LEDGER_DIR, L.LEDGER_NAME)


def has_ledger(directory: str, fs=DEFAULT_FS) -> bool:
    return fs.exists(ledger_path(directory))


def read_ledger(directory: str, fs=DEFAULT_FS, name: str = L.LEDGER_NAME, check=None) -> L.LedgerRead | None:
    """The decoded ledger, or None when the directory has none. `name`, `check`: another file of lines
    CRC'd alike in `.walctl/` (verify's runs), with its own fields."""
    path = os.path.join(ledger_dir(directory), name)
    if not fs.exists(path):
        return None
    with fs.map_read(path) as buf:
        if len(buf) > KEEP_BYTES:
            return L.decode_ledger(buf, check)  # the mapping itself: every line is copied out, never the whole file
        key = (hashlib.sha256(buf).digest(), check)
        read = _READ.get(key)
        if read is None:
            read = L.decode_ledger(buf, check)
            if len(_READ) >= 2:
                _READ.clear()
            _READ[key] = read
    return read


# One command reads a directory's ledger several times (the sequence index's checks, the expectations,
# accepted gaps): 320 seal lines cost ~15 ms a decode here, which made seeking grow with the number of
# chunks. The last two decodes are kept by the SHA-256 of the bytes decoded (~0.1 ms for those 320
# lines), so that a second read gives what decoding again would give, whoever changed the file in
# between; only for ledgers up to KEEP_BYTES, so that what is kept stays small (callers never change a
# LedgerRead: its lines are shared).
_READ: dict = {}
KEEP_BYTES = 4 << 20


def append_lines(directory: str, lines: list[bytes], fs=DEFAULT_FS, name: str = L.LEDGER_NAME,
                 sync: bool = True) -> None:
    """Durably appends whole lines (the caller holds the directory's lock; `name`: verify's runs file,
    see ops/wal/coverage.py for why it needs no lock; `sync=False`: the sequence index's points, a hint
    that need not survive a crash)."""
    if not lines:
        return
    durable.make_dir(ledger_dir(directory), fs)
    path = os.path.join(ledger_dir(directory), name)
    if fs.exists(path):
        size = fs.stat(path).size
        if size and fs.read_range(path, size - 1, 1) != b"\n":
            with fs.map_read(path) as buf:
                tail = tail_of(buf, L.MAX_LINE_BYTES)
            keep = tail.offset
            if tail.overlong:  # not a torn append: damage, which is never cut silently
                from ..errors import EXIT_CORRUPT, NotClean

                raise NotClean(f"the ledger's last {tail.length} bytes have no newline and are longer than any "
                               f"line: damaged, not torn (verify reports it); move {L.LEDGER_DIR}/ aside to go on "
                               f"without its expectations (nothing is read from it but them)", path, code=EXIT_CORRUPT)
            durable.truncate(path, keep, fs)  # the torn line was never acknowledged
    durable.append(path, b"".join(lines), fs, sync=sync)


def file_identity(path: str, fs=DEFAULT_FS) -> dict:
    """{"ino", "mtime_ns"} of a file (0, 0 where the file system has none: the simulated one)."""
    ident = getattr(fs, "identity", None)
    if ident is None:
        return {"ino": 0, "mtime_ns": 0}
    ino, mtime_ns = ident(path)
    return {"ino": ino, "mtime_ns": mtime_ns}


def sha256_file(path: str, fs=DEFAULT_FS) -> tuple[str, int]:
    """(hex digest, size) of a file, hashed from a mapping (hashlib releases the GIL on large buffers)."""
    with fs.map_read(path) as buf:
        return sha256_hex(buf), len(buf)


def seal_line(path: str, first_seq, last_seq, records: int, ts: str, fs=DEFAULT_FS) -> bytes:
    ident = file_identity(path, fs)
    sha, size = sha256_file(path, fs)
    return L.encode_line(L.SEAL, ts, file=os.path.basename(path), size=size, records=records,
                         first_seq=first_seq, last_seq=last_seq, sha256=sha, stat=ident)


class Sealer:
    """A writer's ledger: seal lines for the chunks it closed, hwm lines for the sequences it issued.

    Where the file system allows a background thread (`fs.background_threads`), a closed chunk is hashed
    and its line appended by one, so a roll costs the writer nothing it waits for; elsewhere (the simulated
    file system of the crash tests) in the caller's thread. Every chunk handed over is already synced: a seal never claims bytes that were
    not durable. A crash before its line is written just leaves the chunk unsealed."""

    def __init__(self, directory: str, fs, clock, points=None):
        """points: the writer's store/seqpoints.Keeper (None: no points)."""
        self.directory, self.fs, self.clock, self.points = directory, fs, clock, points
        self.hwm_written = 0
        self.error: BaseException | None = None
        self._q: queue.Queue | None = None
        self._thread = None
        if fs.background_threads:
            self._q = queue.Queue()
            self._thread = threading.Thread(target=self._run, name="walctl-seal", daemon=True)
            self._thread.start()

    def closed(self, items, hwm: int) -> None:
        """items: (file name, first_seq, last_seq, records[, index hint]) of chunks synced and closed for
        good (the hint: store/appender.py _index_hint)."""
        self._job(self._do, list(items), hwm)

    def durable(self, name: str, first_seq: int, upto_seq: int, marks: tuple) -> None:
        """Records first_seq..upto_seq of the file `name` are durable, `marks` among them: its points may
        reach them."""
        if self.points is not None:
            self._job(self.points.advance, name, first_seq, upto_seq, marks)

    def hwm(self, seq: int) -> None:
        self.closed([], seq)

    def _job(self, fn, *args) -> None:
        if self._q is not None:
            self._q.put((fn, args))
        else:
            fn(*args)

    def _do(self, items, hwm: int) -> None:
        ts = self.clock()
        lines = [seal_line(os.path.join(self.directory, name), first, last, records, ts, self.fs)
                 for name, first, last, records, *_ in items]
        if hwm > self.hwm_written:
            lines.append(L.encode_line(L.HWM, ts, seq=hwm))
        append_lines(self.directory, lines, self.fs)
        self.hwm_written = max(self.hwm_written, hwm)
        if items:  # the sequence index follows the seals it repeats (store/seqindex.py)
            from .seqindex import refresh_index

            refresh_index(self.directory, self.fs, only={name for name, *_ in items},
                          hints={it[0]: it[4] for it in items if len(it) > 4 and it[4] is not None})
            if self.points is not None:
                self.points.sealed({name for name, *_ in items})

    def _run(self) -> None:
        while True:
            job = self._q.get()
            if job is None:
                return
            if self.error is None:
                try:
                    job[0](*job[1])
                except BaseException as e:  # noqa: BLE001 - raised by close()
                    self.error = e

    def close(self) -> None:
        if self._thread is not None:
            self._q.put(None)
            self._thread.join()
            self._thread = None
        self._q = None  # from here on, lines are written in the caller's thread
        if self.error is not None:
            raise self.error


def record(directory: str, event: str, ts: str, fs=DEFAULT_FS, **fields) -> None:
    """One line, durably, before the action it announces (the caller holds the directory's lock)."""
    append_lines(directory, [L.encode_line(event, ts, **fields)], fs)


def chunk_range(directory: str, name: str, fs=DEFAULT_FS) -> tuple[int | None, int | None]:
    """(first_seq, last_seq) of a chunk about to leave: from its seal when it still matches, else read."""
    from .chunkread import scan_chunk_file

    path = os.path.join(directory, name)
    read = read_ledger(directory, fs)
    if read is not None:
        line = L.fold(read.lines).sealed.get(name)
        if line is not None and fs.stat(path).size == line.get("size"):
            return line.get("first_seq"), line.get("last_seq")
    o = scan_chunk_file(path, fs)
    return (o.scan.first_seq, o.scan.last_seq) if o.scan is not None else (None, None)


def record_moved(directory: str, name: str, to: str, why: str, ts: str, fs=DEFAULT_FS,
                 seqs: tuple | None = None) -> None:
    """A `moved` line for a chunk (or segment) about to leave the directory; other files get none."""
    if not L.is_log_file_name(name):
        return
    first, last = seqs if seqs is not None else chunk_range(directory, name, fs)
    record(directory, L.MOVED, ts, fs, file=name, first_seq=first, last_seq=last, to=to, why=why)


def record_restored(directory: str, name: str, ts: str, fs=DEFAULT_FS) -> None:
    """A `restored` line for a chunk (or segment) moved back, unless the ledger already has it back (a
    rerun after a crash that came after this line): the ledger then says once that the file is here."""
    if not L.is_log_file_name(name):
        return
    read = read_ledger(directory, fs)
    if read is not None and name in L.fold(read.lines).moved:
        record(directory, L.RESTORED, ts, fs, file=name)
