from __future__ import annotations

import sys
from typing import List, Optional

import typer

from ..errors import EXIT_OK, UsageError
from ..ops.kinds import VIEW_AGENTS, VIEW_CHECKPOINTS, VIEW_TASKLOGS, VIEW_WORKFLOWS
from .inspect_bytes import forensic_view, quarantined_piece
from .inspect_listing import show_entries, show_records
from .progress import PROGRESS, Bar, path_bytes
from .render import warn_line
from .targets import existing_path
from .units import follow_durations, parse_time

# Kept here, not imported: the command modules load their ops only when run (cold start of verify).
PAYLOAD_MODES = ("auto", "text", "hex", "base64", "json", "msgpack")

HELP = """Show the records of a WAL chunk or directory, and the bytes around damage. Read-only.

Reads past damage: every valid record is shown, damaged ranges are listed where they occur. Filters
combine (AND); one that cannot apply (--id on ADR-003 entries, --since with --follow) is refused.
Payloads are shown decoded (inflated when compressed): as JSON, text or msgpack when
they are one, else hex. Exit code as for verify (0 when --limit stopped the walk early).

From a finding to its bytes: --damaged dumps every damaged region of a directory (fields named, CRCs
marked, what was lost and what resumes after it); --seq N and --around CHUNK:OFFSET go straight to the
bytes. A piece in DIR/.quarantine/ is read at the offset it was cut from.

Example: walctl inspect wal/ --from 100 --type REMEMBER --jsonl | jq .payload_hex
Example: walctl inspect wal/ --damaged
Example: walctl inspect wal/ --around wal-000003.bin:2368 --context 64"""


def inspect(
    path: str = typer.Argument(..., help="A chunk directory or one chunk file (also a quarantined one).", callback=existing_path),
    jsonl: bool = typer.Option(False, "--jsonl", help="One JSON object per valid record on stdout."),
    from_seq: Optional[int] = typer.Option(None, "--from", help="Only sequences >= N."),
    to_seq: Optional[int] = typer.Option(None, "--to", help="Only sequences <= N."),
    types: Optional[List[str]] = typer.Option(None, "--type", help="Only this event type (name or ordinal; ADR-003: the operation); repeatable."),
    memory_id: Optional[str] = typer.Option(None, "--id", help="Only records with this memoryId (V2)."),
    since: Optional[str] = typer.Option(None, "--since", help="Only timestamps >= T (epoch ms or ISO-8601; ADR-003 seconds x 1000)."),
    until: Optional[str] = typer.Option(None, "--until", help="Only timestamps <= T (epoch ms or ISO-8601; ADR-003 seconds x 1000)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Stop after N matching records."),
    payload: str = typer.Option("auto", "--payload", metavar="[" + "|".join((*PAYLOAD_MODES, "none")) + "]", help=f"Payload view: {', '.join(PAYLOAD_MODES)}, none."),
    hexdump: bool = typer.Option(False, "--hexdump", help="Annotated hex dump of each matching record."),
    around_offset: Optional[str] = typer.Option(None, "--around", metavar="[CHUNK:]OFFSET",
                                                help="Annotated bytes around this offset of a chunk file "
                                                     "(of a directory: CHUNK:OFFSET)."),
    damaged: bool = typer.Option(False, "--damaged", help="Every damaged region of the path as an annotated "
                                                          "dump, in order, with what was lost and what resumes."),
    seq: Optional[int] = typer.Option(None, "--seq", min=0, help="The annotated bytes of the record carrying "
                                                                 "sequence N (or the damage that lost it)."),
    context: int = typer.Option(64, "--context", min=0, max=1 << 20, help="Bytes each side of --around."),
    strict: bool = typer.Option(False, "--strict", help="Exit as verify --strict: any anomaly (an accepted "
                                                        "loss too) is corruption (3)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing records as a live writer appends "
                                                              "(filters --from/--to/--limit apply)."),
    interval: str = typer.Option("200ms", "--interval", help="--follow: poll this often (10ms to 60s)."),
    timeout: Optional[str] = typer.Option(None, "--timeout", help="--follow: stop after this long (2m, 30s)."),
    progress: Optional[bool] = PROGRESS,
) -> int:
    from ..ops.wal.records import RecordFilter
    from ..ops.kinds import KINDS, VIEW_ENTRIES
    from ..ops.wal.verify import detect_kind

    if payload not in PAYLOAD_MODES + ("none",):
        raise UsageError(f"--payload must be one of {', '.join(PAYLOAD_MODES)}, none (got {payload!r})")
    since_ms, until_ms = parse_time(since, "--since"), parse_time(until, "--until")
    given = _given(from_seq, to_seq, types, memory_id, since, until, limit, hexdump, payload, strict)
    _refuse_unused(given, follow, around_offset is not None or seq is not None or damaged, path)
    if follow:
        return _follow(path, jsonl, payload, from_seq, to_seq, limit, *follow_durations(interval, timeout))
    if around_offset is not None or seq is not None or damaged:
        return forensic_view(path, around_offset, seq, damaged, context, strict)
    piece = quarantined_piece(path)
    if piece is not None:
        return piece
    view = KINDS[detect_kind(path)].inspect
    if view in _OTHER_TOOLS:  # shown by the command that owns the artifact
        _refuse(given, _FILTERS + ("--strict",), f"to {_NAMES[view]}: no WAL records there to filter")
        return _OTHER_TOOLS[view](path, jsonl)
    if view == VIEW_ENTRIES:
        _refuse(given, ("--id", "--hexdump", "--payload"), _NOT_FOR_ENTRIES)
        with Bar("inspect", path_bytes(path), progress) as bar:
            return show_entries(path, jsonl, from_seq, to_seq, types, limit, bar.callback, strict, since_ms, until_ms)
    flt = RecordFilter.from_options(from_seq, to_seq, types, memory_id, since_ms, until_ms, limit)
    with Bar("inspect", path_bytes(path), progress) as bar:
        walk = show_records(path, flt, jsonl, hexdump, payload, bar.callback, strict)
    if walk.report is None:
        return EXIT_OK
    _summarise(walk)
    raise typer.Exit(walk.report.exit_code)


_NOT_FOR_ENTRIES = {
    "--id": "to ADR-003 entries: they have no memoryId (--id filters V2 records)",
    "--hexdump": "to ADR-003 entries (it dumps V2 records; an entry's bytes: --seq N or --around SEGMENT:OFFSET)",
    "--payload": "to ADR-003 entries: their data is shown as JSON (--payload views V2 payloads)",
}
_FILTERS = ("--from", "--to", "--type", "--id", "--since", "--until", "--limit", "--hexdump", "--payload")


def _given(from_seq, to_seq, types, memory_id, since, until, limit, hexdump, payload, strict) -> dict:
    """option -> whether the command line gave it (a value other than its default)."""
    return {"--from": from_seq is not None, "--to": to_seq is not None, "--type": bool(types),
            "--id": memory_id is not None, "--since": since is not None, "--until": until is not None,
            "--limit": limit is not None, "--hexdump": hexdump, "--payload": payload != "auto", "--strict": strict}


def _refuse(given: dict, names, why) -> None:
    """UsageError for the first of `names` given (a filter or view that would be silently ignored)."""
    for name in names:
        if given[name]:
            reason = why[name] if isinstance(why, dict) else why
            raise UsageError(f"{name} does not apply {reason}")


def _holds_segments(path: str) -> bool:
    import os

    from ..format.names import parse_segment_name
    from ..ops.wal.segments import looks_like_segment_dir

    if os.path.isdir(path):
        return looks_like_segment_dir(path)
    return parse_segment_name(os.path.basename(path)) is not None


def _refuse_unused(given: dict, follow: bool, forensic: bool, path: str) -> None:
    if follow:
        _refuse(given, ("--type", "--id", "--since", "--until", "--hexdump", "--strict"),
                "with --follow (it applies --from, --to and --limit only)")
        if given["--payload"] and _holds_segments(path):
            _refuse(given, ("--payload",), _NOT_FOR_ENTRIES)
    elif forensic:
        _refuse(given, _FILTERS, "with --seq, --around or --damaged (they show bytes, unfiltered)")


def _inspect_checkpoints(path: str, jsonl: bool) -> int:
    from .checkpoint_cmd import inspect as inspect_checkpoint

    return inspect_checkpoint(path=path, json_out=jsonl)


def _inspect_tasklogs(path: str, jsonl: bool) -> int:
    from .tasklog_cmd import inspect as inspect_tasklog

    return inspect_tasklog(path=path, json_out=jsonl)


def _inspect_agents(path: str, jsonl: bool) -> int:
    from .agents_cmd import tree

    return tree(root=path, json_out=jsonl)


def _inspect_workflows(path: str, jsonl: bool) -> int:
    from .workflow_cmd import list_

    return list_(root=path, workflow=None, json_out=jsonl)


_NAMES = {VIEW_CHECKPOINTS: "checkpoints", VIEW_TASKLOGS: "task logs", VIEW_AGENTS: "an agent root",
          VIEW_WORKFLOWS: "a workflow store"}
# ops/kinds.py inspect view -> the command that shows it (for kinds that hold no records of their own)
_OTHER_TOOLS = {VIEW_CHECKPOINTS: _inspect_checkpoints, VIEW_TASKLOGS: _inspect_tasklogs,
                VIEW_AGENTS: _inspect_agents, VIEW_WORKFLOWS: _inspect_workflows}


def _follow(path, jsonl, payload_mode, from_seq, to_seq, limit, interval, timeout) -> int:
    import json

    from ..format.hexdump import format_timestamp_ms
    from ..ops.wal.follow import follow
    from ..ops.wal.records import render_payload

    def show(recs) -> None:
        from ..ops.wal.records import Record
        from ..ops.wal.segments import entry_json

        for r in recs:
            if not isinstance(r, Record):  # (segment, entry): its inspect --jsonl object either way
                line = json.dumps(entry_json(*r), ensure_ascii=False, sort_keys=True)
            elif jsonl:
                line = json.dumps(r.to_json(), ensure_ascii=False)
            else:
                view = "" if payload_mode == "none" else render_payload(r.payload, payload_mode)[1]
                line = (f"{r.sequence:>8} {str(r.type):<14} {r.memory_id_text[:40]:<24} "
                        f"{format_timestamp_ms(r.timestamp_ms)} {r.file}@{r.offset} {view[:120]}")
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    after = from_seq - 1 if from_seq else 0
    res = follow(path, show, after=after, to=to_seq, limit=limit, interval=interval, timeout=timeout)
    sys.stderr.write(f"walctl: followed {path}: {res.events} records; stopped by {res.ended_by}\n")
    if res.problem:
        warn_line(res.problem)
    return res.exit_code


def _summarise(walk) -> None:
    rep = walk.report
    bad = [f for f in rep.findings if f.exit_code != 0] + list(walk.seek.findings if walk.seek else ())
    for f in bad:
        warn_line(f"{rep.path}: {f.cls}: {f.one_line()}")
    sys.stderr.write(f"walctl: {walk.matched} records shown; {rep.path} is {rep.verdict} (exit {rep.exit_code})\n")


