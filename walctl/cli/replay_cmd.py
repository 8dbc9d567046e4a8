from __future__ import annotations

import os
import sys
from typing import Optional

import typer

from ..errors import UsageError
from .progress import PROGRESS, Bar, on_interrupt, path_bytes
from .render import error_line, json_document, seq_range, warn_line
from .targets import existing_path
from .units import follow_durations

HELP = """Stream every event after a high-water mark, in order, for a follower or another tool. Read-only.

Reads a V2 chunk directory or an ADR-003 segment directory. Forms: --jsonl (default; the inspect --jsonl
object, payload_hex decoded, lossless), --msgpack (a stream of maps), --sync-blob (Spector CloudSync's
[i64 seq][u8 type][i32 idLen][id][i64 ts][i32 len][payload], big-endian; with --out DIR the file is
named wal-%012d.bin after its last sequence). The stream stops at damage and says where (exit code as
for verify); --skip-damaged goes on and lists every range it skipped. A summary line goes to stderr,
--report FILE writes it as JSON (schema walctl.replay/1). --follow keeps streaming as a live writer
appends, until SIGINT/SIGTERM or --timeout. From 64 MiB of chunks to read, V2 chunks are encoded by a
worker per core (--jobs N to choose); the output is the same, in order.

Example: walctl replay /var/lib/agent/wal --after "$(cat hwm)" --jsonl | walctl import /srv/follower/wal
Example: walctl replay wal/ --after 5000 --sync-blob --out outbox/"""


def replay(
    path: str = typer.Argument(..., help="A V2 chunk directory (or chunk) or an ADR-003 segment directory.", callback=existing_path),
    after: int = typer.Option(0, "--after", min=0, help="Only events with sequence > N (the follower's HWM)."),
    to: Optional[int] = typer.Option(None, "--to", min=0, help="Only events with sequence <= N."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Stop after N events."),
    jsonl: bool = typer.Option(False, "--jsonl", help="JSON lines (the default)."),
    msgpack_: bool = typer.Option(False, "--msgpack", help="A stream of msgpack maps."),
    sync_blob: bool = typer.Option(False, "--sync-blob", help="Spector's CloudSync blob (V2 events only)."),
    out: Optional[str] = typer.Option(None, "--out", help="Write durably to FILE (--sync-blob: into DIR) "
                                                          "instead of standard output."),
    skip_damaged: bool = typer.Option(False, "--skip-damaged", help="Go on past damage (a chunk .quarantine/ "
                                      "holds for a missing one is read); report what was skipped."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=0, show_default=False,
                                       help="Encode V2 chunks in N processes (0: one per core; default: one per "
                                            "core from 64 MiB to replay, else 1); the output is the same."),
    report_path: Optional[str] = typer.Option(None, "--report", help="Write the JSON report to FILE ('-': stderr)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No summary line (errors and skips are still shown)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep streaming new events as they are appended."),
    interval: str = typer.Option("200ms", "--interval", help="--follow: poll this often (10ms to 60s)."),
    timeout: Optional[str] = typer.Option(None, "--timeout", help="--follow: stop after this long (2m, 30s)."),
    progress: Optional[bool] = PROGRESS,
) -> int:
    from ..format import events as ev

    forms = [f for f, on in ((ev.FORM_JSONL, jsonl), (ev.FORM_MSGPACK, msgpack_), (ev.FORM_SYNC, sync_blob)) if on]
    if len(forms) > 1:
        raise UsageError("give one of --jsonl, --msgpack, --sync-blob")
    form = forms[0] if forms else ev.FORM_JSONL
    if to is not None and to <= after:
        raise UsageError(f"--to {to} is not above --after {after}: nothing to replay")
    if follow:
        if out is not None or skip_damaged:
            raise UsageError("--follow writes to standard output and stops at damage; drop --out/--skip-damaged")
        return _follow(path, form, after, to, limit, *follow_durations(interval, timeout))
    if form != ev.FORM_JSONL and out is None and sys.stdout.isatty():
        raise UsageError("a binary stream would go to the terminal; use --out or a pipe")
    from ..ops.wal.replay import ReplayOptions, replay as run_replay

    opts = ReplayOptions(after, to, limit, form, skip_damaged, None if jobs is None else jobs or os.cpu_count() or 1)
    if out is None:  # progress on stderr when it is a terminal, as pv and restic do (`... | gzip > f`)
        write, fd = _stdout_writer()
        with Bar("replay", path_bytes(path), progress) as bar:
            report = run_replay(path, write, opts, out_fd=fd, progress=bar.callback)
    else:
        on_interrupt(f"interrupted; {out} was not written (its partial .tmp is removed on the way out, or by "
                     "the next run); run the same replay again")
        with Bar("replay", path_bytes(path), progress) as bar:
            report = _replay_to_file(path, out, opts, bar.callback)
        on_interrupt(None)
    _summarise(report, report_path, quiet)
    return report.exit_code


def _stdout_writer():
    """writev straight to fd 1 when stdout is a real file (the fast path), else through sys.stdout."""
    import io

    from ..ops.wal.fdwrite import write_pieces_to_fd

    sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
        return write_pieces_to_fd(fd), fd
    except (OSError, ValueError, io.UnsupportedOperation):
        buf = sys.stdout.buffer
        return (lambda pieces: buf.write(b"".join(pieces))), None


def _replay_to_file(path: str, out: str, opts, progress=None):
    from ..ops.wal.replay_file import replay_to_file

    report, final = replay_to_file(path, out, opts, progress)
    if final is None:
        warn_line("no events to export: no blob written")
    else:
        sys.stderr.write(f"walctl: wrote {final}\n")
    return report


def _where(s, sep: str) -> str:
    """`FILE[: ]offset N`, or just the file when the block has no offset (a chunk that is not a file)."""
    return f"{s.file}" + (f"{sep} offset {s.offset}" if s.offset is not None else "")


def _summarise(report, report_path: str | None, quiet: bool = False) -> None:
    for c in report.set_aside_read():
        warn_line(f"read {c['file']} (set aside in .quarantine/) in place of the chunk the directory "
                  f"lacks: {c['records']} events, sequences {seq_range(c['first_sequence'], c['last_sequence'])}")
    for f in report.index.findings:
        warn_line(f"{report.path}: {f.file + ': ' if f.file else ''}{f.reason}")
    for s in report.skipped:
        warn_line(f"skipped {_where(s, ':')}: {s.cls}: {s.reason}"
                  + (f"; lost sequences {s.lost_sequences[0]}..{s.lost_sequences[1]}" if s.lost_sequences else ""))
    if report.stopped is not None:
        s = report.stopped
        error_line(f"{report.path}: replay stopped at {_where(s, '')}: {s.cls}: {s.reason}; last event streamed: "
                   f"{report.last_sequence if report.last_sequence is not None else 'none'} "
                   f"(use --skip-damaged to go on past it)")
    rng = f"{report.first_sequence}..{report.last_sequence}" if report.events else "none"
    if not quiet:
        with_aside = " (with what was read from .quarantine/)" if report.set_aside_read() else ""
        sys.stderr.write(f"walctl: {report.events} events streamed (sequences {rng}); {report.path}{with_aside} is "
                         f"{report.verify.verdict if report.verify else 'clean'} (exit {report.exit_code})\n")
    if report_path is not None:
        doc = json_document("walctl.replay/1", report.to_json())
        if report_path == "-":
            sys.stderr.write(doc + "\n")
        else:
            from ..ops.wal.replay_file import write_report_file

            write_report_file(report_path, doc)


def _follow(path, form, after, to, limit, interval, timeout) -> int:
    from ..ops.wal.follow import follow_events
    from ..ops.wal.segments import looks_like_segment_dir

    if form == "sync" and os.path.isdir(path) and looks_like_segment_dir(path):
        raise UsageError("the sync blob carries V2 events; follow ADR-003 segments as --jsonl or --msgpack")
    if form != "jsonl" and sys.stdout.isatty():
        raise UsageError("a binary stream would go to the terminal; use a pipe")
    stdout = sys.stdout.buffer
    result = follow_events(path, form, stdout, after=after, to=to, limit=limit, interval=interval, timeout=timeout)
    sys.stderr.write(f"walctl: followed {path}: {result.events} events"
                     + (f" (sequences {result.first}..{result.last})" if result.events else "")
                     + f"; stopped by {result.ended_by}\n")
    if result.problem is not None:
        error_line(result.problem)
    return result.exit_code
