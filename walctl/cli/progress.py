"""The one progress rule for long work (verify, stats, inspect, salvage, replay --out, import, recover,
checkpoint create/restore, archive push/verify/restore).

- Ops never print: they take a `progress(n_bytes)` callback and call it as they read or write (one that
  learns the total only as it runs first calls `progress(0, total=N)`).
- A bar (rich, on stderr) appears only once the work has run for SHOW_AFTER_S seconds, so quick runs
  print nothing; it shows bytes done of the total, the rate and the time left, and is erased when done.
- Shown on a terminal (stderr is a TTY), never on a pipe or a file: `walctl replay DIR | gzip > f` on a
  terminal draws it on stderr, as pv and restic do. `--progress` forces it on (e.g. under `script` or a CI
  log that renders carriage returns); `--no-progress` forces it off.
- The rate is the bytes done over the time since the work started (defined from the first update, unlike
  rich's windowed estimate, which showed `? -:--:--` for work reported in a few large steps), the time
  left the bytes to go at that rate.
- `--progress=json`: instead of a bar, one JSON object per line on stderr (schema walctl.progress/1,
  docs/json.md) from the start, at most one a second, and a last one with "final": true.
- Ctrl-C: `interrupted()` gives the one line main() prints before exit 130, saying what the command may
  have left behind and that the next run cleans it (commands set it with `on_interrupt`).
"""
from __future__ import annotations

import os
import sys
import time
from typing import Callable, Optional

import typer

SHOW_AFTER_S = 1.0
JSON_EVERY_S = 1.0
PROGRESS_SCHEMA = "walctl.progress/1"

PROGRESS = typer.Option(None, "--progress/--no-progress",
                        help="Force the progress bar on or off (default: on a terminal, after about 1 s); "
                             "--progress=json: JSON lines on stderr (schema walctl.progress/1).")
MODE = {"json": False}  # set by take_json_flag() for this run


def take_json_flag(args: list[str]) -> list[str]:
    """`--progress=json` (a form click's boolean flag does not take) becomes --progress in JSON mode."""
    MODE["json"] = "--progress=json" in args[:args.index("--")] if "--" in args else "--progress=json" in args
    return [("--progress" if a == "--progress=json" else a) for a in args] if MODE["json"] else args

_interrupt_note: dict = {"text": None}


def on_interrupt(text: Optional[str]) -> None:
    """What Ctrl-C leaves behind, for the line main() prints (None: nothing is left; nothing changed)."""
    _interrupt_note["text"] = text


def interrupted() -> str:
    return _interrupt_note["text"] or "interrupted; nothing was left behind"


def wanted(flag: Optional[bool], stream=None) -> bool:
    """--progress/--no-progress win; otherwise a terminal gets a bar and a pipe does not."""
    if flag is not None:
        return flag
    stream = stream or sys.stderr
    return hasattr(stream, "isatty") and stream.isatty()


def path_bytes(*paths: Optional[str]) -> int:
    """The bytes a command will read: a file's size, or the files directly in a directory."""
    total = 0
    for path in paths:
        if not path:
            continue
        try:
            if os.path.isdir(path):
                total += sum(e.stat().st_size for e in os.scandir(path) if e.is_file(follow_symlinks=False))
            else:
                total += os.path.getsize(path)
        except OSError:
            pass
    return total


class Bar:
    """Use as a context manager; pass `.callback` (None when no bar can ever show) to the ops function."""

    def __init__(self, label: str, total_bytes: Optional[int], flag: Optional[bool], *,
                 clock: Callable[[], float] = time.monotonic):
        self.label = label
        self.total = total_bytes or None
        self.json = bool(MODE["json"]) and flag is not False
        self.enabled = self.json or wanted(flag)
        self.clock = clock
        self.started = clock()
        self.done = 0
        self.bar = None
        self.task = None
        self.said_at = None  # when the last JSON line was written

    def __enter__(self) -> "Bar":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def callback(self) -> Optional[Callable[[int], None]]:
        return self.advance if self.enabled else None

    def advance(self, n: int, total: Optional[int] = None, more_total: int = 0) -> None:
        """`n` more bytes done; an ops function that learns the total only as it runs passes `total`, one
        that adds a stage of work to it (a restore's write after its read) passes `more_total`."""
        if total is not None:
            self.total = total or None
        if more_total:
            self.total = (self.total or self.done) + more_total
        self.done += n
        if self.json:
            now = self.clock()
            if self.said_at is None or now - self.said_at >= JSON_EVERY_S:
                self._say(now, False)
            return
        if self.bar is None:
            if self.clock() - self.started < SHOW_AFTER_S:
                return
            self._start()
        self.bar.update(self.task, completed=self.done, total=self.total)
        self.bar.refresh()

    def rate(self, now: float | None = None) -> float | None:
        """Bytes a second since the work started (None before any time has passed)."""
        elapsed = (self.clock() if now is None else now) - self.started
        return self.done / elapsed if elapsed > 0 else None

    def eta(self, now: float | None = None) -> float | None:
        """Seconds left at the rate so far (None without a total or a rate)."""
        r = self.rate(now)
        if self.total is None or not r:
            return None
        return max(self.total - self.done, 0) / r

    def line(self, now: float, final: bool) -> dict:
        """One walctl.progress/1 object."""
        rate, eta = self.rate(now), self.eta(now)
        from ..version import __version__

        return {"schema": PROGRESS_SCHEMA, "walctl_version": __version__, "label": self.label, "done_bytes": self.done,
                "total_bytes": self.total, "elapsed_s": round(now - self.started, 3),
                "rate_bytes_per_s": None if rate is None else round(rate, 1),
                "eta_s": None if eta is None or final else round(eta, 3), "final": final}

    def _say(self, now: float, final: bool) -> None:
        import json

        from .render import raw_stream

        self.said_at = now
        stream = raw_stream(sys.stderr)
        stream.write(json.dumps(self.line(now, final)) + "\n")
        stream.flush()

    def _start(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

        from .render import raw_stream

        # rich writes its own escape sequences, so it gets the raw stream (run() wraps stderr in the
        # terminal-safety filter); the label is ours, never text from a file, and never read as markup.
        console = Console(file=raw_stream(sys.stderr), force_terminal=True if self.enabled else None,
                          no_color=bool(os.environ.get("NO_COLOR")), highlight=False, markup=False, emoji=False)
        # no refresh thread: --jobs forks workers, and a thread would outlive a Ctrl-C. No redirection:
        # rich would otherwise route our stdout (records, JSON) through the stderr console.
        self.bar = Progress(TextColumn("{task.description}", markup=False), BarColumn(), DownloadColumn(),
                            *_rate_and_eta(self), console=console, transient=True,
                            auto_refresh=False, redirect_stdout=False, redirect_stderr=False)
        self.task = self.bar.add_task(self.label, total=self.total)
        self.bar.start()

    def close(self) -> None:
        if self.json and self.enabled:
            self._say(self.clock(), True)
            self.enabled = False
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _rate_and_eta(bar: Bar):
    """rich columns for our rate and time left (rich imported only once a bar is drawn)."""
    from rich.filesize import decimal
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task):
            r = bar.rate()
            return Text("?" if r is None else f"{decimal(int(r))}/s", style="progress.data.speed")

    class Eta(ProgressColumn):
        def render(self, task):
            e = bar.eta()
            if e is None:
                return Text("-:--:--", style="progress.remaining")
            s = int(e + 0.5)
            return Text(f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}", style="progress.remaining")

    return Rate(), Eta()
