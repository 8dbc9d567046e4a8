"""What both followers share (V2 chunks in ops/wal/follow.py, ADR-003 segments in ops/wal/follow_segments.py):
the tail of the file being read (what has been streamed, what is pending, damage left behind on a
roll), the polling loop around a follower's step(), and its result. Read-only."""
from __future__ import annotations

import os
from typing import NamedTuple

from ...format.scan import TAIL, Damage
from ...store.fs import DEFAULT_FS


class FollowResult(NamedTuple):
    events: int
    first: int | None
    last: int | None
    ended_by: str  # "signal" | "timeout" | "limit" | "to" | "damage"
    problem: str | None
    exit_code: int


def covered_prefix(paths: list[str], after: int, first_seq_of) -> int:
    """How many files at the front hold only sequences <= after: file i is skipped while file i+1
    provably starts at or below after + 1 (`first_seq_of(path)`: its first sequence, or None)."""
    start = 0
    while after > 0 and start + 1 < len(paths):
        s = first_seq_of(paths[start + 1])
        if s is None or s > after + 1:
            break
        start += 1
    return start


class Tail:
    """What both followers keep of the file they read: its name, the file offset `base` where the bytes
    not yet consumed (`pending`) start, and how many polls a suspicious tail has stayed the same
    (`unsettled`). What is left in a file they roll away from is a Damage for their judge."""

    def __init__(self, directory: str, current: str | None, unit: str, look_behind: int = 0, fs=DEFAULT_FS):
        self.directory, self.current, self.unit, self.fs = directory, current, unit, fs
        self.base, self.pending, self.unsettled = 0, b"", 0
        # `behind`: up to `look_behind` real bytes of the file just before `base` (V2's scanner reads
        # the 8 bytes before each record), read again with the tail at each poll
        self.look_behind, self.behind = look_behind, b""

    @classmethod
    def open(cls, directory: str, names: list[tuple[int, str]], unit: str, after: int, first_seq_of,
             start=None, look_behind: int = 0, fs=DEFAULT_FS) -> tuple["Tail", int | None]:
        """(the tail a follower starts from, the last sequence already consumed). `names`: the log's
        (number, name) in order; `start` = (file, offset, last sequence) resumes at a record boundary
        already known (archive push --follow); otherwise the first file that may hold a sequence above
        `after` (covered_prefix, `first_seq_of(path)`)."""
        if start is not None:
            t = cls(directory, start[0], unit, look_behind, fs)
            t.base = start[1]
            return t, start[2]
        pos = covered_prefix([os.path.join(directory, n) for _, n in names], after, first_seq_of)
        return cls(directory, names[pos][1] if names else None, unit, look_behind, fs), None

    def poll(self, names: list[tuple[int, str]], number) -> tuple[list[str], str | None]:
        """Reads the unconsumed tail again: (the names after the current file, damage when the file was
        cut below what was already streamed). `names`: (number, name) in order; `number(name)`."""
        if self.current is None and names:
            self.current = names[0][1]
        if self.current is None:
            return [], None
        lb = min(self.look_behind, self.base)
        # The whole unconsumed tail again, each poll (`fs.read_tail`: never a FIFO or a device): it is at
        # most an append in flight, and a repair or a reopening writer may have cut the bytes held and
        # appended after the cut, which no size comparison can tell.
        fresh, cut = self.fs.read_tail(os.path.join(self.directory, self.current), self.base - lb)
        if cut is None and len(fresh) < lb:
            cut = self.base - lb + len(fresh)
        self.behind, fresh = fresh[:lb], fresh[lb:]
        if cut is not None:
            return [], (f"{self.current} was cut to {cut} bytes, before {self.unit} already streamed (which "
                        f"ended at offset {self.base})")
        if not fresh.startswith(self.pending):
            self.unsettled = 0
        self.pending = fresh
        return [n for i, n in names if i > number(self.current)], None

    def consume(self, n: int) -> None:
        self.pending, self.base, self.unsettled = self.pending[n:], self.base + n, 0

    def roll(self, to: str) -> Damage | None:
        """The writer has moved on to `to`: the current file will not grow, and what is left in it is
        tail damage (returned, for the follower's judge) the next record has to prove torn."""
        left = None
        if self.pending:
            left = Damage(TAIL, self.base, self.base + len(self.pending),
                          f"{len(self.pending)} bytes at {self.current} offset {self.base}")
        self.current, self.base, self.pending, self.unsettled = to, 0, b"", 0
        return left

    def stuck(self, settle_polls: int, writer_alive) -> bool:
        """One more poll with the same suspicious tail: True once it has outlasted `settle_polls` polls
        and no writer holds the directory."""
        self.unsettled += 1
        return self.unsettled > settle_polls and not writer_alive(self.directory)


def drive(follower, interval, timeout, clock, sleep, stop) -> FollowResult:
    """The polling loop around a follower's step(): stops on a signal, at the deadline, or when the
    follower ends; sleeps `interval` after a poll that handed nothing on."""
    deadline = None if timeout is None else clock() + timeout
    while True:
        if stop.signal is not None:
            return follower.result("signal")
        if deadline is not None and clock() >= deadline:
            return follower.result("timeout")
        progressed, end = follower.step()
        if end is not None:
            return end
        if not progressed:
            sleep(interval)


def writer_is_alive(directory: str) -> bool:
    from ...store.lock import probe_writer

    return probe_writer(directory) is not None
