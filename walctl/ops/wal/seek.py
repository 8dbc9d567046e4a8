"""Seeking through the sequence index (`.walctl/index.jsonl`, format/seqindex.py): where a reader that wants
sequences from `target` on may start, without reading what comes before.

The index is a hint, never an answer. Before a reader starts anywhere on its word, what it points to is
checked, cheaply:
- every index line decodes and its CRC-32C holds (a damaged index is not used at all);
- each file it lets the reader skip or enter is sealed in the ledger with the size, hash, record count and
  first and last sequence the index line repeats, and the file's size and mtime are what they were when it
  was indexed (its bytes are trusted from there: whoever indexed it had just written it or verified its
  seal's SHA-256, and checking that hash again is verify's job, a full read);
- the record at the offset it names is intact (header and payload CRC; an ADR-003 entry's checksum) and
  carries the sequence it claims.
Anything else is an `index-stale` finding (a warning) and the reader scans as it would without an index:
a wrong index costs time, never a wrong answer. A read-only command never writes the index; `seal` and the
writer's sealer do (store/seqindex.py).

Which files are skipped follows the reader's scan: V2 replay skips file i when file i+1 starts at or below
the target (its covered prefix, ops/wal/tail.py); every other reader (segments, inspect, recover), whose scan
judges the whole log, only when file i+1 continues file i exactly: the skipped files then hold nothing its
scan would report.
"""
from __future__ import annotations

from typing import NamedTuple

from ...errors import EXIT_OK, WalctlError
from ...format import ledger as L
from ...format import seqindex as X
from ...store.fs import DEFAULT_FS
from .. import classes as K
from ..findings import Finding

ABSENT, USED, STALE, NOT_NEEDED = "absent", "used", "stale", "not-needed"


class Start(NamedTuple):
    file: int  # position, in the caller's list, of the first file to read
    offset: int  # a record boundary of that file to start at (0: the file's start)
    sequence: int | None  # the sequence of the record at `offset`, when it is a mark


class Seek(NamedTuple):
    state: str  # ABSENT | USED | STALE | NOT_NEEDED
    start: Start | None  # None: read as if there were no index
    findings: tuple  # index-stale warnings

    def to_json(self) -> dict:
        return {"state": self.state, "start_file": self.start.file if self.start else None,
                "start_offset": self.start.offset if self.start else None}


NO_INDEX = Seek(ABSENT, None, ())


def with_index(report, sk: "Seek | None"):
    """A PathReport with what was wrong with the sequence index (warnings: the log was read without it)."""
    return report if sk is None or not sk.findings else report._replace(findings=report.findings + sk.findings)


def _stale(reason: str, file: str | None = None, offset: int | None = None) -> Seek:
    f = Finding(K.INDEX_STALE, EXIT_OK, f"sequence index: {reason}; read without it", file=file, offset=offset)
    return Seek(STALE, None, (f,))


def seek(directory: str, files: list, target: int, is_v2: bool, fs=DEFAULT_FS, covered: bool = False) -> Seek:
    """Where to start reading `files` ((name, path) in the log's order) for sequences >= `target`.
    `covered`: skip as replay's covered prefix does (V2 replay); else only files the next one continues."""
    if target <= 1 or not files:
        return Seek(NOT_NEEDED, None, ())
    points = _Points(directory, fs)
    return _checked(directory, fs, lambda entries, sealed: _walk(files, target, entries, sealed, is_v2, fs, covered,
                                                                 points), points)


def seek_time(directory: str, files: list, since: int | None, until: int | None, fs=DEFAULT_FS,
              is_v2: bool = True) -> Seek:
    """Where to start reading the V2 chunks (or, not `is_v2`, ADR-003 segments) `files` ((name, path) in the
    log's order) for records timed in since..until (inclusive, ms; None: open): past the leading files
    whose [min_ts, max_ts] lies wholly outside, each continued exactly by the next (the scan, which judges
    the whole log, has nothing to say of them). Timestamps need not rise, so a file is skipped on its least
    and greatest, never on its first and last; only a prefix is skipped."""
    if (since is None and until is None) or len(files) < 2:
        return Seek(NOT_NEEDED, None, ())
    return _checked(directory, fs,
                    lambda entries, sealed: _walk_time(files, since, until, entries, sealed, fs, is_v2))


def _checked(directory: str, fs, walk, points: "_Points | None" = None) -> Seek:
    """`walk(entries, sealed)` when the index decodes and the directory has a ledger; else absent or stale.
    With no index but `points` on disk, the walk goes on with no sealed file indexed."""
    from ...store.ledger import read_ledger
    from ...store.seqindex import read_index

    try:
        idx = read_index(directory, fs)
        if idx is None:
            if points is None or not points.on_disk():
                return NO_INDEX
            led = read_ledger(directory, fs)
            got = walk({}, L.fold(led.lines).sealed if led is not None else {})
            return got if got.start is not None or got.findings else NO_INDEX
        if idx.bad:
            b = idx.bad[0]
            return _stale(f"line {b.number} of {L.LEDGER_DIR}/{X.INDEX_NAME} is damaged ({b.reason})")
        led = read_ledger(directory, fs)
        if led is None:
            return _stale(f"the directory has no ledger to check {L.LEDGER_DIR}/{X.INDEX_NAME} against")
        return walk(idx.entries, L.fold(led.lines).sealed)
    except WalctlError as e:  # an index that cannot be read is one that cannot be used
        return _stale(f"unreadable ({e.reason})")


def _walk_time(files: list, since: int | None, until: int | None, entries: dict, sealed: dict, fs,
               is_v2: bool) -> Seek:
    skip = 0
    for i, (name, path) in enumerate(files[:-1]):  # the last file is never skipped
        e = entries.get(name)
        if e is None or name not in sealed or e.min_ts is None:
            break  # not indexed, no longer sealed, or no times (a version-1 line, an empty file, a segment
            # indexed before segments had times): read it
        problem = _vouched(e, sealed[name], path, fs)
        if problem:
            return _stale(problem, name)
        if not ((since is not None and e.max_ts < since) or (until is not None and e.min_ts > until)):
            break
        n = entries.get(files[i + 1][0])
        first = n.first_seq if n is not None else _first_sequence(files[i + 1][1], is_v2, fs)
        if e.last_seq is None or first != e.last_seq + 1:
            break
        problem = _marks_timed(path, e, fs, is_v2)
        if problem:
            return _stale(problem[0], name, problem[1])
        skip = i + 1
    return Seek(USED, Start(skip, 0, None), ()) if skip else Seek(NOT_NEEDED, None, ())


def _marks_timed(path: str, e: X.IndexEntry, fs, is_v2: bool = True) -> tuple[str, int] | None:
    """Why the record at the file's first or last mark is not the intact one the index describes, in its
    time range (the range itself is the indexer's word, as the sequences between marks are: the file is
    unchanged since walctl indexed it; a line forged consistently with a good CRC is not caught, as a
    forged mark between two checked ones is not). Two records a file, as a sequence seek checks one: every
    mark of every skipped file made a time seek grow with the log (75 ms of 0.2 s at 1M entries). A
    segment's entry is timed in exact ms (format/segment.time_ms)."""
    if X.marks_problem(e):
        return f"the marks of its line: {X.marks_problem(e)}", None
    with fs.map_read(path) as buf:
        for seq, off in dict.fromkeys(e.marks[:1] + e.marks[-1:]):
            got = X.v2_record_at(buf, off) if is_v2 else X.segment_entry_at(buf, off)
            if got is None:
                return f"no intact record at offset {off}", off
            if got[0] != seq:
                return f"the record at offset {off} carries sequence {got[0]}, the index says {seq}", off
            if got[1] is None or not e.min_ts <= got[1] <= e.max_ts:
                return (f"the record at offset {off} is timed {got[1]}, outside the index's "
                        f"{e.min_ts}..{e.max_ts}"), off
    return None


def v2_start(path: str, chunks: list, after: int, skip_damaged: bool, fs, first_seq_of) -> tuple[int, int, Seek]:
    """replay's start in a V2 directory: (the first chunk to read, the record offset to start it at, the
    seek). Without a usable index: the covered prefix (`first_seq_of(path)` reads a chunk's first record)."""
    from .tail import covered_prefix

    sk = Seek(NOT_NEEDED, None, ())
    if after > 0 and not skip_damaged and chunks and all(c.kind == "file" for c in chunks) \
            and fs.stat(path).kind == "dir":
        sk = seek(path, [(c.name, c.path) for c in chunks], after + 1, True, fs, covered=True)
    if sk.start is not None:
        return sk.start.file, sk.start.offset, sk
    paths = [c.path if c.kind == "file" else None for c in chunks]
    return covered_prefix(paths, after, lambda p: None if p is None else first_seq_of(p)), 0, sk


def _walk(files: list, target: int, entries: dict, sealed: dict, is_v2: bool, fs, covered: bool,
          points: "_Points | None" = None) -> Seek:
    last = len(files) - 1
    for i, (name, path) in enumerate(files):
        e = entries.get(name)
        if e is None or name not in sealed:
            # not indexed (the active file, one sealed since), or no longer sealed (a cut, a repair, a move
            # the ledger recorded changed it on purpose): read from its points, else from its start
            entered = points.enter(i, name, path, target, is_v2) if points is not None and name not in sealed \
                else None
            if entered is not None:
                return entered
            return Seek(USED, Start(i, 0, None), ()) if i else Seek(NOT_NEEDED, None, ())
        problem = _vouched(e, sealed[name], path, fs)
        if problem:
            return _stale(problem, name)
        if i < last and _skippable(e, files[i + 1], entries, target, is_v2, fs, covered):
            continue
        if X.marks_problem(e):
            return _stale(f"the marks of {name}'s line: {X.marks_problem(e)}", name)
        mark = e.mark_at_or_before(target)
        if mark is None:  # the target is before this file: it is read from its start
            return Seek(USED, Start(i, 0, None), ()) if i else Seek(NOT_NEEDED, None, ())
        problem = _record_claims(path, mark, is_v2, fs)
        if problem:
            return _stale(problem, name, mark[1])
        return Seek(USED, Start(i, mark[1], mark[0]), ())
    return Seek(USED, Start(last, 0, None), ())  # not reached: the last file is never skipped


def _skippable(e: X.IndexEntry, nxt, entries: dict, target: int, is_v2: bool, fs, covered: bool) -> bool:
    if e.last_seq is not None and e.last_seq >= target:
        return False
    n = entries.get(nxt[0])
    first = n.first_seq if n is not None else _first_sequence(nxt[1], is_v2, fs)
    if first is None:
        return False
    if covered:
        return first <= target
    return e.last_seq is not None and first == e.last_seq + 1 and first <= target


def _vouched(e: X.IndexEntry, seal, path: str, fs) -> str | None:
    """Why the index line `e` cannot be believed for the file at `path` (None: it can)."""
    f = seal.fields
    if (e.size, e.sha256, e.records, e.first_seq, e.last_seq) != (
            f.get("size"), f.get("sha256"), f.get("records"), f.get("first_seq"), f.get("last_seq")):
        return f"describes other bytes than ledger line {seal.number} seals"
    st = fs.stat(path)
    if st.kind != "file" or st.size != e.size:
        return f"indexed at {e.size} bytes, the file has {st.size}"
    ident = getattr(fs, "identity", None)
    if ident is not None and e.mtime_ns and ident(path)[1] != e.mtime_ns:
        return "the file changed since it was indexed (its mtime differs; `walctl seal --apply` indexes it again)"
    return None


def _record_claims(path: str, mark: tuple[int, int], is_v2: bool, fs) -> str | None:
    """Why the record at the mark's offset is not an intact record with the mark's sequence (None: it is)."""
    seq, off = mark
    with fs.map_read(path) as buf:
        got = X.sequence_at(buf, off, is_v2)
    if got is None:
        return f"no intact record at offset {off}"
    if got != seq:
        return f"the record at offset {off} carries sequence {got}, the index says {seq}"
    return None


def _first_sequence(path: str, is_v2: bool, fs) -> int | None:
    """The first record's sequence of a file the index does not cover (the active file), when its header
    (V2: header CRC) or its entry (ADR-003: checksum) is intact."""
    try:
        if is_v2:
            from ...format.record import Invalid, check_header
            from ...format.v2 import FILE_HEADER, RECORD_HEADER

            head = fs.read_head(path, FILE_HEADER.size + RECORD_HEADER.size)
            h = check_header(head, FILE_HEADER.size, len(head))
            return None if type(h) is Invalid else h.sequence
        with fs.map_read(path) as buf:
            return X.sequence_at(buf, 0, False) if len(buf) else None
    except WalctlError:
        return None


class _Points:
    """The points of files not sealed (`.walctl/points.jsonl`, format/seqpoints.py), read once, when a walk
    reaches such a file. A file whose inode is not the one recorded, or that no longer reaches a mark, is
    another file under that name (a rewrite, a cut): its points are not used, and that is no finding."""

    def __init__(self, directory: str, fs):
        self.directory, self.fs = directory, fs
        self._read = False
        self.lines = None

    def on_disk(self) -> bool:
        from ...store.seqpoints import points_path

        return self.fs.exists(points_path(self.directory))

    def enter(self, i: int, name: str, path: str, target: int, is_v2: bool) -> Seek | None:
        """Where to start in the file at position `i` for `target`: None when its points cannot say."""
        from ...format import seqpoints as P
        from ...store.seqpoints import inode, read_points

        if not self._read:
            self._read, self.lines = True, read_points(self.directory, self.fs)
        if self.lines is None:
            return None
        if self.lines.bad:
            b = self.lines.bad[0]
            return _stale(f"line {b.number} of {L.LEDGER_DIR}/{P.POINTS_NAME} is damaged ({b.reason})")
        pts = P.latest(self.lines.lines).get(name)
        if pts is None or target <= pts.first_seq:
            return None
        st = self.fs.stat(path)
        if st.kind != "file" or (pts.ino and inode(path, self.fs) != pts.ino):
            return None
        mark = pts.mark_at_or_before(target, st.size)
        if mark is None or mark[0] == pts.first_seq:
            return None  # the file's first record: reading from its start is the same
        problem = _record_claims(path, mark, is_v2, self.fs)
        if problem:
            return _stale(f"{P.POINTS_NAME}: {problem}", name, mark[1])
        return Seek(USED, Start(i, mark[1], mark[0]), ())
