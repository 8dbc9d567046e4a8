"""The library API a Python agent runtime calls to checkpoint and recover (ADR-003's triggers).

    from walctl import Checkpointer
    cp = Checkpointer("ckpts/", log="segments/", interval_s=300, every_entries=10_000)
    state = cp.recover().state                         # at start-up
    ...
    cp.entries_written(1)                              # after each log append
    cp.maybe_checkpoint(lambda: (state, last_sequence)) # cheap when nothing is due
    cp.checkpoint(state, last_sequence)                # on demand, and on shutdown

It never decides what the state is: the runtime hands it over. Before writing a checkpoint it makes the
log durable up to that sequence (when given the WalWriter that writes it), so a checkpoint never claims
entries the log could still lose.
"""
from __future__ import annotations

import time
from typing import Callable

from .checkpoint import Created, create, latest
from .recover import RecoverReport, recover


class Checkpointer:
    def __init__(self, checkpoints: str, *, log: str | None = None, writer=None, interval_s: float = 300.0,
                 every_entries: int = 10_000, reducer: str = "adr003", level: int = 9, clock=time.monotonic):
        self.checkpoints, self.log, self.writer = checkpoints, log, writer
        self.interval_s, self.every_entries = interval_s, every_entries
        self.reducer, self.level, self.clock = reducer, level, clock
        self._since_entries = 0
        self._last = clock()

    def recover(self, *, allow_gap: bool = False) -> RecoverReport:
        return recover(self.checkpoints, self.log, reducer=self.reducer, allow_gap=allow_gap)

    def latest(self):
        return latest(self.checkpoints).report

    def entries_written(self, n: int = 1) -> None:
        self._since_entries += n

    def due(self) -> bool:
        return (self._since_entries >= self.every_entries
                or self.clock() - self._last >= self.interval_s)

    def maybe_checkpoint(self, snapshot: Callable[[], tuple[dict, int]]) -> Created | None:
        """Checkpoints when a trigger fired (every N entries, or the interval); `snapshot` is only called then."""
        if not self.due():
            return None
        state, seq = snapshot()
        return self.checkpoint(state, seq)

    def checkpoint(self, state: dict, wal_sequence: int) -> Created:
        """On demand (and on shutdown): the log durable up to wal_sequence first, then the checkpoint."""
        if self.writer is not None and self.writer.flush() < wal_sequence:
            raise ValueError(f"the log is durable only to {self.writer.durable_sequence}, not {wal_sequence}")
        made = create(self.checkpoints, state, wal_sequence, level=self.level)
        self._since_entries = 0
        self._last = self.clock()
        return made
