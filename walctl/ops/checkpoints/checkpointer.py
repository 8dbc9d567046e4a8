"""The library API a Python agent runtime calls to checkpoint and recover (ADR-003's triggers).

    from walctl import Checkpointer
    cp = Checkpointer("ckpts/", log="segments/", writer=w, snapshot=lambda: (state, w.last_sequence))
    state = cp.recover().state                         # at start-up
    cp.install_shutdown_hook()                         # opt-in: SIGTERM and normal exit write a checkpoint
    ...
    with cp.uninterrupted():                           # SIGTERM waits for the step to end
        seq = w.append_entry(...); apply(state, ...)
    cp.entries_written(1)                              # after each log append
    cp.maybe_checkpoint()                              # cheap when nothing is due
    cp.checkpoint(state, last_sequence)                # on demand
    cp.close()                                         # on shutdown: the final checkpoint

It never decides what the state is: the runtime hands it over (or a `snapshot` callable that returns
(state, the last sequence it reflects)). Before writing a checkpoint it makes the log durable up to that
sequence (when given the WalWriter that writes it), so a checkpoint never claims entries the log could
still lose.

Shutdown (ADR-003 "on shutdown"): close() writes a final checkpoint when the log went further than the
last one, so a clean stop never needs a replay. install_shutdown_hook() runs close() at interpreter exit
and turns SIGTERM into SystemExit(143) in the main thread: the stack unwinds first (locks held by an
append in progress are released by their `finally`), then the exit hook checkpoints. Doing the work in the
signal handler itself could deadlock on a lock the interrupted code holds. A signal that arrives inside
`with cp.uninterrupted():` (append an entry and apply it) waits for the block to end, so the state and
the sequence the final checkpoint records agree.

Background (ADR-003 "async checkpoint creation"): with background=True, checkpoint() flushes the log and
takes the snapshot (the state's canonical bytes, one compiled pass) in the caller, then compresses, hashes
and writes in a thread while appends go on; zstd runs single-threaded there so the appending thread keeps
a core. The file appears by durable rename only when whole, so a crash during it leaves the previous
checkpoint in force. A failure is raised by the next checkpoint(), wait() or close().
"""
from __future__ import annotations

import atexit
import contextlib
import signal
import threading
import time
from typing import Callable

from ...store.fs import DEFAULT_FS
from .checkpoint import Created, create, latest, snapshot_body
from .recover import RecoverReport, recover

Snapshot = Callable[[], tuple[dict, int]]


class Checkpointer:
    def __init__(self, checkpoints: str, *, log: str | None = None, writer=None, interval_s: float = 300.0,
                 every_entries: int = 10_000, reducer: str = "adr003", level: int = 9, clock=time.monotonic,
                 snapshot: Snapshot | None = None, background: bool = False, fs=DEFAULT_FS):
        self.checkpoints, self.log, self.writer = checkpoints, log, writer
        self.interval_s, self.every_entries = interval_s, every_entries
        self.reducer, self.level, self.clock = reducer, level, clock
        self.snapshot, self.background, self.fs = snapshot, background, fs
        self._since_entries = 0
        self._last = clock()
        self.last_sequence: int | None = None  # of the last checkpoint known to be on disk
        self._thread: threading.Thread | None = None
        self._result: Created | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._deferring = 0  # uninterrupted() blocks in progress (main thread: where signals are handled)
        self._stop_pending = 0

    def recover(self, *, allow_gap: bool = False) -> RecoverReport:
        rep = recover(self.checkpoints, self.log, reducer=self.reducer, allow_gap=allow_gap, fs=self.fs)
        self.last_sequence = rep.checkpoint["wal_sequence"] if rep.checkpoint else None
        return rep

    def latest(self):
        return latest(self.checkpoints, fs=self.fs).report

    def entries_written(self, n: int = 1) -> None:
        self._since_entries += n

    def due(self) -> bool:
        return (self._since_entries >= self.every_entries
                or self.clock() - self._last >= self.interval_s)

    @property
    def in_progress(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def maybe_checkpoint(self, snapshot: Snapshot | None = None) -> Created | None:
        """Checkpoints when a trigger fired (every N entries, or the interval); `snapshot` (or the one given
        at construction) is only called then. In background mode, not while one is still being written."""
        if not self.due() or self.in_progress:
            return None
        state, seq = (snapshot or self._snapshot_fn())()
        return self.checkpoint(state, seq)

    def checkpoint(self, state: dict, wal_sequence: int) -> Created | None:
        """On demand: the log durable up to wal_sequence first, then the checkpoint. In background mode
        this returns None once the snapshot is taken; wait() gives the result."""
        self.wait()  # one at a time: a previous background checkpoint finishes (or raises) first
        if self.writer is not None and self._log_durable_to() < wal_sequence:
            raise ValueError(f"the log is durable only to {self.writer.durable_sequence}, not {wal_sequence}")
        body = snapshot_body(state, wal_sequence, level=self.level, threads=0 if self.background else -1)
        self._since_entries = 0
        self._last = self.clock()
        if not self.background:
            return self._write(body, wal_sequence)
        self._thread = threading.Thread(target=self._run, args=(body, wal_sequence), name="walctl-checkpoint",
                                        daemon=True)
        self._thread.start()
        return None

    def wait(self) -> Created | None:
        """Waits for a background checkpoint; returns what it wrote (None when none ran), or raises its error."""
        t, self._thread = self._thread, None
        if t is not None:
            t.join()
        err, self._error = self._error, None
        if err is not None:
            raise err
        made, self._result = self._result, None
        return made

    def close(self, state: dict | None = None, wal_sequence: int | None = None) -> Created | None:
        """The final checkpoint, in this thread: of (state, wal_sequence), or of the snapshot callable's,
        unless the last checkpoint already reflects that sequence. Idempotent. A background checkpoint
        that failed is raised after the final one is written."""
        if self._closed:
            return None
        self._closed = True
        failed = None
        try:
            self.wait()
        except BaseException as e:  # noqa: BLE001 - the final checkpoint is still written, then this is raised
            failed = e
        made = None
        if state is None and self.snapshot is not None:
            state, wal_sequence = self.snapshot()
        # nothing new since the last checkpoint on disk: a restart replays nothing anyway
        if state is not None and (self.last_sequence is None or wal_sequence > self.last_sequence):
            background, self.background = self.background, False
            try:
                with self.uninterrupted():  # a second SIGTERM does not cut the final checkpoint short
                    made = self.checkpoint(state, wal_sequence)
            finally:
                self.background = background
        if failed is not None:
            raise failed
        return made

    def install_shutdown_hook(self, signals=(signal.SIGTERM,)) -> None:
        """Opt-in: close() at interpreter exit, and `signals` end the process through SystemExit(128 + n)
        so the exit hook runs. Call from the main thread (Python delivers signals there); a handler that
        was installed before is called first. Needs the snapshot callable (given at construction)."""
        if self.snapshot is None:
            raise ValueError("a shutdown checkpoint needs Checkpointer(snapshot=...): what to checkpoint at exit")
        atexit.register(self._at_exit)
        for signum in signals:
            previous = signal.getsignal(signum)

            def handler(n, frame, previous=previous):
                if callable(previous):
                    previous(n, frame)
                if self._deferring:
                    self._stop_pending = n  # acted on when the step in progress ends
                    return
                raise SystemExit(128 + n)

            signal.signal(signum, handler)

    @contextlib.contextmanager
    def uninterrupted(self):
        """A step the shutdown hook's signal must not cut in two (append an entry, then apply it to the
        state): a signal that arrives inside it ends the process when the step is done, so the final
        checkpoint's state and sequence agree."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1
        if not self._deferring and self._stop_pending:
            n, self._stop_pending = self._stop_pending, 0
            raise SystemExit(128 + n)

    # ---- internals ----

    def _snapshot_fn(self) -> Snapshot:
        if self.snapshot is None:
            raise ValueError("no snapshot callable: pass one to maybe_checkpoint() or to Checkpointer()")
        return self.snapshot

    def _log_durable_to(self) -> int:
        try:
            return self.writer.flush()
        except ValueError:  # closed (the runtime's `with` ended before the exit hook): its close() synced all
            return self.writer.durable_sequence

    def _write(self, body, wal_sequence: int) -> Created:
        made = create(self.checkpoints, None, wal_sequence, level=self.level, body=body, fs=self.fs)
        self.last_sequence = wal_sequence
        return made

    def _run(self, body, wal_sequence: int) -> None:
        try:
            self._result = self._write(body, wal_sequence)
        except BaseException as e:  # noqa: BLE001 - kept for the caller's next wait(), close() or checkpoint()
            self._error = e

    def _at_exit(self) -> None:
        if not self._closed:
            self.close()
