from __future__ import annotations

import os
from typing import List, Optional

import typer

from ..errors import precedence_text
from ..ops.classes import SEQUENCE_GAP
from ..ops.kinds import kind_of
from ..ops.report import VerifyReport

from ..ops.wal.verify import verify_paths
from .metrics_opt import METRICS_FILE, Recording
from .progress import PROGRESS, Bar, path_bytes
from .render import emit, json_document, next_lines, paint, plain_table, plural, rerun, safe, say, seq_range, singular

HELP = f"""Check WAL chunk files or directories and say exactly what is damaged. Read-only.

Each PATH is a chunk directory (wal-NNNNNN.bin files) or a single chunk file. Every finding names the
file, byte offset, sequences, class and the stored vs computed values. The exit code is the worst
finding (order {precedence_text()}): 0 clean, 1 torn tail only, 3 corruption, 4 sequence gap/repeat,
5 unsupported, 6 environment/locked.

--subset K/N (or P%) reads a slice of the sealed chunks; --max-duration stops at a chunk boundary and
--resume goes on where the last run stopped (kept in DIR/.walctl/verify.jsonl, the one thing verify writes).

Example: walctl verify /var/lib/agent/wal --json | jq .exit_code
Example: walctl verify /var/lib/agent/wal --resume --max-duration 10m"""

_SEVERITY_COLOR = {"error": "red", "torn": "yellow", "warning": "yellow", "note": "dim"}
_VERDICT_COLOR = {"clean": "green", "torn": "yellow"}


def verify(
    paths: List[str] = typer.Argument(..., metavar="PATH", help="Chunk directories or chunk files."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.verify/2) on stdout."),
    strict: bool = typer.Option(False, "--strict", help="Treat every anomaly as corruption (exit 3): a type "
                                "ordinal 16..255 (the reference Java reader cannot open the directory), a record "
                                "version other than 2, unknown flag bits, non-zero reserved bytes or padding, a "
                                "memoryId not UTF-8, bytes after a zlib stream, an accepted loss."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=0, help="Scan chunks in N processes (0: one per "
                                       "core; default: one per core when 256 MB or more are to be scanned)."),
    quick: bool = typer.Option(False, "--quick", help="Trust sealed chunks whose size, inode and mtime are "
                               "unchanged since their ledger seal (listed in the report)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="List every chunk, not only the damaged ones."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing; only the exit code speaks."),
    show_map: bool = typer.Option(False, "--map", help="Also draw the damage map of each PATH (as `walctl map`; "
                                                       "with --json: a \"map\" object per path)."),
    archive: Optional[str] = typer.Option(None, "--from", metavar="DEST", help="An archive (file:///path, "
                                          "s3://bucket/prefix; default: $WALCTL_ARCHIVE): when it can heal a "
                                          "finding, next: names the walctl heal command."),
    subset: Optional[str] = typer.Option(None, "--subset", metavar="K/N|P%", help="Read only slice K of N of the "
                                         "sealed chunks (by a hash of each name: K = 1..N read each exactly once), "
                                         "or P% of them; unsealed chunks are always read. The others are judged by "
                                         "their seals, unread; the report lists them."),
    resume: bool = typer.Option(False, "--resume", help="Start where the last --resume or --max-duration run "
                                "stopped (recorded in DIR/.walctl/verify.jsonl; this run's line is added)."),
    max_duration: Optional[str] = typer.Option(None, "--max-duration", metavar="DURATION", help="Start no sealed "
                                               "chunk after this long (500ms, 90s, 10m, 1h); stops at a chunk "
                                               "boundary and records where, for --resume."),
    progress: Optional[bool] = PROGRESS,
    metrics_file: Optional[str] = METRICS_FILE,
) -> int:
    if jobs == 0:
        jobs = os.cpu_count() or 1
    cover = _cover(subset, resume, max_duration)
    with Recording(metrics_file, "verify", paths) as rec:
        _verify(rec, paths, json_out, strict, jobs, quick, cover, verbose, quiet, show_map, archive, progress)


def _verify(rec: Recording, paths, json_out, strict, jobs, quick, cover, verbose, quiet, show_map, archive,
            progress) -> None:
    with Bar("verify", path_bytes(*paths), progress) as bar:
        report = verify_paths(paths, strict=strict, jobs=jobs, progress=bar.callback, quick=quick, cover=cover)
    if rec.path is not None:
        from ..ops.metrics import verify_targets

        rec.record(verify_targets(report))
    maps = _maps(report) if show_map else None
    if json_out:
        doc = to_json(report, archive)
        if maps is not None:
            for p, m in zip(doc["paths"], maps):
                p["map"] = m.to_json()
        emit(json_document("walctl.verify/2", doc))
    elif not quiet:
        render_human(report, verbose, archive)
        if maps is not None:
            from .map_cmd import render_text

            for m in maps:
                emit("")
                render_text(m)
    raise typer.Exit(report.exit_code)


def _cover(subset, resume, max_duration):
    """The request of ops/wal/coverage.py, or None for a verify that reads everything and writes nothing."""
    if subset is None and not resume and max_duration is None:
        return None
    from ..ops.wal.coverage import Deadline, Request, parse_subset
    from .units import parse_duration

    deadline = None if max_duration is None else Deadline(parse_duration(max_duration, "--max-duration"))
    return Request(None if subset is None else parse_subset(subset), resume, deadline)


def _maps(report: VerifyReport):
    from ..ops.damagemap import map_from_report

    return [map_from_report(p) for p in report.paths]


def to_json(report: VerifyReport, archive: str | None = None) -> dict:
    from ..ops.advice import steps_json
    from ..ops.archive.heal_advice import advise

    return {"exit_code": report.exit_code, "verdict": report.verdict, "strict": report.strict,
            "paths": [dict(p.to_json(), next_steps=steps_json(advise(p, archive))) for p in report.paths]}


def render_human(report: VerifyReport, verbose: bool, archive: str | None = None) -> None:
    for p in report.paths:
        head = f"{p.path}: {paint(p.verdict.upper(), _VERDICT_COLOR.get(p.verdict, 'red'))} (exit {p.exit_code})"
        if p.chunks:
            unit = _units(p.kind)
            head += (f": {plural(len(p.chunks), unit[0])}, {plural(p.records, singular(unit[1]))}, "
                     f"seq {seq_range(p.first_sequence, p.last_sequence)}, {p.damaged_bytes} damaged bytes")
        say(head)
        if p.live_writer:
            say(f"  live writer: {p.live_writer}")
        if p.ledger and (p.ledger["verified_by_hash"] or p.ledger["trusted_by_stat"]):
            say(f"  ledger: {len(p.ledger['verified_by_hash'])} sealed chunks verified by SHA-256"
                 + (f", {len(p.ledger['trusted_by_stat'])} trusted unchanged (--quick): "
                    + ", ".join(p.ledger["trusted_by_stat"]) if p.ledger["trusted_by_stat"] else ""))
        if p.ledger and p.ledger.get("note"):
            say(f"  note: {p.ledger['note']}")
        if p.coverage is not None:
            for line in coverage_lines(p):
                emit(line)
        shown = [c for c in p.chunks if verbose or c.exit_code != 0]
        if shown:
            rows = [[c.file, c.size, c.records, seq_range(c.first_sequence, c.last_sequence), c.damaged_bytes,
                     c.verdict] for c in shown]
            unit = _units(p.kind)
            for line in plain_table([unit[0], "bytes", unit[1], "sequences", "damaged", "verdict"], rows):
                emit(line)
        for f in p.findings:
            label = f"{f.severity:<7} {f.cls}"
            say(f"  {paint(label, _SEVERITY_COLOR.get(f.severity))}  {f.one_line()}", "    ")
            extra = f.extra
            if extra.get("salvageable_records"):
                a, b = extra["salvageable_sequence_range"]
                say(f"      salvageable after it: {plural(extra['salvageable_records'], 'record')}, seq {a}..{b}")
            if f.lost_sequence_range and f.cls != SEQUENCE_GAP:
                a, b = f.lost_sequence_range
                emit(f"      sequences lost: {seq_range(a, b)}")
        from ..ops.archive.heal_advice import advise

        for line in next_lines(advise(p, archive), "  "):
            emit(line)


def _units(kind: str | None) -> tuple[str, str]:
    """What a row is called and what it counts, by the kinds table (a path not recognised: chunks)."""
    k = kind_of(kind)
    return (k.item, k.counted) if k is not None else ("chunk", "records")


def coverage_lines(p) -> list[str]:
    """What this run read and did not (verify --subset / --resume / --max-duration)."""
    c = p.coverage
    if c["window"] is None:
        return ["  coverage: every file read (no sealed chunks to sample)"]
    a, b = c["window"]
    out = [f"  coverage: {c['sealed_checked']} of {c['sealed']} sealed chunks read (arc {a:.6f}..{b:.6f}"
           + (f", subset {c['subset']}" if c["subset"] else "") + f"), {c['unsealed_checked']} unsealed read; "
           f"{len(c['not_checked'])} sealed not read ({c['bytes_not_checked']} bytes: their seals stand in)"]
    if c["stopped"] == "max-duration":
        out.append("  stopped: --max-duration reached (at a chunk boundary)")
    if c.get("state_error"):
        out.append(f"  note: {c['state_error']} (the next --resume starts where the last recorded run stopped)")
    # --resume goes on where this run stopped: within its slice after a deadline, or with the next P%
    if c["state"] is not None and (c["stopped"] == "max-duration" or (
            str(c["subset"]).endswith("%") and not c["circle_done"])):
        out.append(f"  next: {safe(rerun('--resume'))}")
    return out
