"""archive push --follow: the directory ledger's seal lines as a trigger to close the followed file.

A writer that shuts down without rolling seals its last file in `.walctl/ledger.jsonl`; without this the
shipper would keep that file as live pieces until a next file appears (maybe never). A seal closes the
file only when it is exactly what the shipper consumed, so a seal never makes the archive claim bytes
it did not read and judge:
  size        == the offset the follower consumed to == the end of what was shipped or buffered
  last_seq    == the last sequence consumed
  file size   == the seal's size now (nothing pending past it: the file did not grow)
  sha256      == the file's bytes (hashed once per seal line and file identity: at most one chunk)
The ledger is append-only, so it is re-read (with the ledger reader, bounded per line) only when its
size changes; a stat per poll otherwise. Rules: docs/format.md section 13 (live pieces).
"""
from __future__ import annotations

import os

from ...format.ledger import fold
from ...store.chunkread import usable_seal
from ...store.ledger import ledger_path, read_ledger, sha256_file
from .objects import Entry


class LedgerSeals:
    """The seal lines of one directory's ledger, kept in step with the file by its size."""

    def __init__(self, wal_dir: str):
        self.wal_dir = wal_dir
        self.size: int | None = -1  # the ledger's size at the last read (None: no ledger); -1: never read
        self.sealed: dict = {}  # file -> its seal Line (fold: a later `moved` line drops it)
        self.reads = 0  # ledger reads so far (a test checks they follow the size, not the polls)
        self.mismatch: str | None = None  # why the last seal looked at was not trusted (a warning), if worth one
        self._hashed: dict = {}  # (file, line number, size, ino, mtime_ns) -> the file's SHA-256

    def _refresh(self) -> None:
        try:
            size = os.stat(ledger_path(self.wal_dir)).st_size
        except FileNotFoundError:
            size = None
        if size == self.size:
            return
        read = read_ledger(self.wal_dir) if size is not None else None
        self.reads += read is not None
        self.size = size
        self.sealed = fold(read.lines).sealed if read is not None else {}

    def matching(self, file: str, kind: str, *, consumed: int, shipped_end: int | None,
                 last_sequence: int | None) -> Entry | None:
        """The sealed Entry for `file` when its seal line matches what the shipper consumed, else None
        (and `mismatch` says why, when the seal disagrees with bytes already consumed)."""
        self.mismatch = None
        self._refresh()
        line = self.sealed.get(file)
        if line is None or not usable_seal(line.fields) or line.get("first_seq") is None:
            return None
        size, last = line.get("size"), line.get("last_seq")
        if consumed > size:
            self.mismatch = (f"{file}: its ledger seal says {size} bytes (sequence {last}), the shipper consumed "
                             f"{consumed}: the file grew after its seal; shipped as live pieces, not sealed")
            return None
        if consumed != size or shipped_end != consumed or last_sequence != last:
            return None  # not consumed that far yet (or the seal is of other bytes): the file stays live
        path = os.path.join(self.wal_dir, file)
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        if st.st_size != size:
            return None  # grew since the follower read it: its next poll sees the rest
        key = (file, line.number, size, st.st_ino, st.st_mtime_ns)
        sha = self._hashed.get(key)
        if sha is None:
            sha, _ = sha256_file(path)
            self._hashed = {key: sha}  # one file at a time is followed: keep one
        if sha != line.get("sha256"):
            self.mismatch = (f"{file}: its ledger seal (line {line.number}) has SHA-256 {line.get('sha256')}, its "
                             f"{size} bytes hash to {sha}: damaged or rewritten; shipped as live pieces, not sealed")
            return None
        return Entry(file, kind, size, sha, line.get("first_seq"), last, "")
