"""Reading and writing `.walctl/points.jsonl` (format in walctl/format/seqpoints.py).

  read:   no lock, no writes: a read-only command never writes it
  record: the caller holds the directory's lock (the writer's sealer, seal --apply): lines are appended as
          the ledger's are, a torn last line cut first, but not synced: a point is a hint, and one a crash
          loses only sends a reader to an earlier point or to the file's start
  trim:   rewrites the file with the last line of each file that is neither sealed nor gone (durable
          replace), dropping damaged lines and a torn tail with them; the writer trims when it opens and
          after each seal, so the file holds a few lines, not one per update since the directory began
  Keeper: the writer's points of the file it appends to, extended as its records become durable
"""
from __future__ import annotations

import os

from ..errors import WalctlError
from ..format import ledger as L
from ..format import seqpoints as P
from . import durable
from .fs import DEFAULT_FS
from .ledger import append_lines, read_ledger


def points_path(directory: str) -> str:
    return os.path.join(directory, L.LEDGER_DIR, P.POINTS_NAME)


def read_points(directory: str, fs=DEFAULT_FS) -> L.LedgerRead | None:
    """The decoded lines (damaged ones apart, a torn tail noted), or None when there is no file."""
    return read_ledger(directory, fs, P.POINTS_NAME, P.check_points)


def inode(path: str, fs) -> int:
    ident = getattr(fs, "identity", None)
    return ident(path)[0] if ident is not None else 0


def record(directory: str, pts: P.Points, ts: str, fs=DEFAULT_FS) -> None:
    append_lines(directory, [L.encode_line(P.POINTS, ts, P.check_points, **pts.fields())], fs, P.POINTS_NAME,
                 sync=False)


def trim(directory: str, sealed, fs=DEFAULT_FS) -> None:
    """Keeps the last good line of each file not in `sealed` that still exists; rewrites only when that
    drops something (a line, a damaged line, a torn tail)."""
    read = read_points(directory, fs)
    if read is None:
        return
    last: dict = {}
    for ln in read.lines:
        last[ln.get("file")] = ln
    keep = [ln for f, ln in sorted(last.items())
            if f not in sealed and fs.exists(os.path.join(directory, f))]
    if len(keep) == len(read.lines) and not read.bad and read.torn_offset is None:
        return
    durable.create_file(points_path(directory),
                        b"".join(L.encode_line(P.POINTS, ln.ts, P.check_points, **ln.fields) for ln in keep), fs,
                        replace=True)


TRIM_BYTES = 64 << 10


class Keeper:
    """Points of the file a writer appends to. `advance` runs where the writer's ledger lines are written
    (its sealer), with the marks the writer noted as it appended (store/appender.py) once their records
    are durable: each is checked at its offset before it is written down. For a file the writer
    continued, the records before its own are hopped once, and must end exactly where its first begins.
    Any failure here stops points for the rest of the writer's life and nothing else: a missing point
    costs a reader time, never an answer, and a hint must not fail a writer whose records are safe."""

    def __init__(self, directory: str, fs, is_v2: bool, clock):
        self.directory, self.fs, self.v2_chunks, self.clock = directory, fs, is_v2, clock
        self.cur: P.Points | None = None
        self.dead: set = set()  # files whose points stopped (a mark that did not check): no more for them
        self.said: dict = {}  # file -> (ino, marks) of its last line: a line saying nothing new is not written
        self.broken: BaseException | None = None

    def advance(self, name: str, first_seq: int, upto_seq: int, marks: tuple) -> None:
        if self.broken is not None or name in self.dead or upto_seq < first_seq:
            return
        try:
            self._advance(name, first_seq, upto_seq, marks)
        except (WalctlError, OSError, ValueError) as e:
            self.broken = e

    def _advance(self, name: str, first_seq: int, upto_seq: int, marks: tuple) -> None:
        path = os.path.join(self.directory, name)
        fresh = self.cur is None or self.cur.file != name or self.cur.first_seq != first_seq
        if fresh and not marks:
            return  # nothing to start from yet
        with self.fs.map_read(path) as buf:
            if fresh:
                self.cur = P.Points(name, first_seq, (), first_seq - 1, inode(path, self.fs))
                if marks[0][0] > first_seq:  # a continued file: what the writer found there, hopped once
                    found, end = P.scan(buf, self.v2_chunks, name, first_seq, marks[0][0] - 1, self.cur.ino)
                    if found.last_seq != marks[0][0] - 1 or end != marks[0][1]:
                        self.dead.add(name)
                        return
                    self.cur = found
            ok = P.checked(buf, self.v2_chunks, marks)
        room = P.MAX_MARKS - len(self.cur.marks)
        self.cur = self.cur._replace(marks=self.cur.marks + ok[:room], last_seq=upto_seq)
        if len(ok) < len(marks):
            self.dead.add(name)
            self.cur = self.cur._replace(last_seq=ok[-1][0] if ok else self.cur.last_seq)
        if (self.cur.ino, self.cur.marks) != self.said.get(name):
            record(self.directory, self.cur, self.clock(), self.fs)
            self.said[name] = (self.cur.ino, self.cur.marks)

    def sealed(self, names, at_open: bool = False) -> None:
        """The files just sealed: their points are the index's job now (readers never look at points of a
        sealed file). Their lines are dropped when the writer opens, and then only once the file has grown
        past TRIM_BYTES: a durable rewrite at every roll cost a sealing writer ~2% of its throughput."""
        if self.broken is not None:
            return
        if self.cur is not None and self.cur.file in names:
            self.cur = None
        try:
            path = points_path(self.directory)
            if not at_open:
                if not self.fs.exists(path) or self.fs.stat(path).size <= TRIM_BYTES:
                    return
                led = read_ledger(self.directory, self.fs)
                names = set(names) | (set(L.fold(led.lines).sealed) if led is not None else set())
            trim(self.directory, set(names), self.fs)
            read = read_points(self.directory, self.fs)
        except (WalctlError, OSError) as e:
            self.broken = e
            return
        self.said = {f: (p.ino, p.marks) for f, p in P.latest(read.lines).items()} if read is not None else {}


def forget(directory: str, names, fs=DEFAULT_FS) -> None:
    """Drops the points of files about to be cut in place (repair, cut): their marks past the cut would
    name records a later writer puts elsewhere. Before the cut, so that a crash leaves no point past it;
    a failure leaves them, which readers check anyway."""
    try:
        trim(directory, set(names), fs)
    except (WalctlError, OSError):
        pass


def point_file(directory: str, name: str, first_seq: int, is_v2: bool, ts: str, fs=DEFAULT_FS) -> bool:
    """Points of a whole file from its start, recorded unless its last line already says as much (seal
    --apply, for the last file, which verify just read clean; the caller holds the lock). True when a
    line was written."""
    path = os.path.join(directory, name)
    with fs.map_read(path) as buf:
        pts, _ = P.scan(buf, is_v2, name, first_seq, (1 << 63) - 1, inode(path, fs))
    read = read_points(directory, fs)
    have = P.latest(read.lines).get(name) if read is not None else None
    if not pts.marks or (have is not None and have == pts):
        return False
    record(directory, pts, ts, fs)
    return True
