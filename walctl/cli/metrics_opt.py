"""`--metrics-file FILE` for verify, recover, checkpoint create and archive push (ops/metrics.py writes it).

Only typer is imported here: the metrics code loads when the flag is given, so start-up does not pay for it.
The file is the operator's own path, by design outside the target (the collector's directory); inside a
target the run checks or changes it is refused before anything runs (exit 2): monitoring must never
alter what it watches, and a stray *.prom in a WAL directory would be a foreign file to the next verify."""
from __future__ import annotations

import os
import time

import typer

METRICS_FILE = typer.Option(None, "--metrics-file", metavar="FILE",
                            help="Also write Prometheus metrics to FILE (text format, replaced atomically: for "
                                 "node_exporter's textfile collector); never inside the target.")


class Recording:
    """with Recording(path, "verify", guard=[...]) as rec: ...; rec.record(targets)

    Writes FILE when the block ends, however it ends: with the targets recorded, or, when the run failed
    before it could record them, each path with the exit code it ended with (a WalctlError's, a
    typer.Exit's) and the findings its own document carried."""

    def __init__(self, path: str | None, command: str, paths, guard=()):
        self.path, self.command = path, command
        self.paths = [p for p in paths if p]
        self.targets = None
        self.t0 = time.monotonic()
        if path is not None:
            refuse_inside(path, [g for g in (*self.paths, *guard) if g])

    def __enter__(self) -> "Recording":
        return self

    def record(self, targets) -> None:
        self.targets = targets

    def write_now(self, targets) -> None:
        """A refresh while the run goes on (archive push --follow, each interval)."""
        if self.path is not None:
            _write(self.path, self.command, targets, time.monotonic() - self.t0)

    def __exit__(self, et, e, tb) -> bool:
        if self.path is None:
            return False
        from ..ops import metrics

        code = _exit_code(e)
        targets = self.targets
        if targets is None or (code is not None and e is not None and not isinstance(e, typer.Exit)):
            targets = metrics.failed_targets(self.paths, code if code is not None else 0, getattr(e, "examined", None))
        _write(self.path, self.command, targets, time.monotonic() - self.t0)
        return False


def _exit_code(e) -> int | None:
    from ..errors import EXIT_ENVIRONMENT, WalctlError

    if e is None:
        return None
    if isinstance(e, typer.Exit):
        return e.exit_code
    if isinstance(e, WalctlError):
        return e.exit_code
    if isinstance(e, KeyboardInterrupt):
        from . import EXIT_INTERRUPTED

        return EXIT_INTERRUPTED
    return EXIT_ENVIRONMENT  # an internal error, as the edge reports it: never a file that says "clean"


def _write(path: str, command: str, targets, seconds: float) -> None:
    from ..errors import WalctlError
    from ..ops import metrics
    from .render import warn_line

    try:
        metrics.write(path, command, targets, seconds)
    except (OSError, WalctlError) as e:  # the run's own exit code stands; an alert sees the stale timestamp
        warn_line(f"{path}: metrics not written: {getattr(e, 'strerror', None) or e}")


def refuse_inside(path: str, guard) -> None:
    from ..errors import UsageError

    where = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    for g in guard:
        if g.startswith("file://"):
            g = g[len("file://"):]
        elif "://" in g:
            continue  # an object store: not a local directory
        real = os.path.realpath(g)
        top = os.path.dirname(real) if os.path.isfile(real) else real  # a file: its directory; else itself
        if where == top or where.startswith(top.rstrip(os.sep) + os.sep):
            raise UsageError(f"--metrics-file {path} is inside {g}: walctl never writes into what it checks; "
                             "put it in the collector's directory (e.g. /var/lib/node_exporter/textfile/)")
