from __future__ import annotations

import sys
from typing import List, Optional

import typer

from ..errors import EXIT_OK
from .render import emit, json_document, plain_table
from .targets import existing_path

app = typer.Typer(help="""Tiffany ADR-0006 task logs: <task_id>.wal, one JSON entry per line.

verify checks every line and rule; inspect folds the log into the task's state (status, plan, last
confirmed and resume step, in-flight step, last git SHA, canvas); resume cuts a torn last line (kept as
evidence) and prints the state for a runtime; replay shows the state after each entry; append writes
validated entries, one write and fsync each.

Example: walctl tasklog inspect wal/3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77.wal""", no_args_is_help=True)


def _reports(path, strict):
    from ..ops.tasklog.logs import read_all

    return read_all(path, strict=strict)


def _table(reps) -> None:
    rows = [[r.task_id, r.read.status, r.state_json()["resume_step_index"], r.read.state.last_sha or "",
             r.exit_code] for r in reps]
    for line in plain_table(["task", "status", "resume step", "last sha", "exit"], rows, indent=""):
        emit(line)


@app.command("verify", help="""Every line valid, every rule kept; exit codes as walctl-verify(1) (torn last line 1,
corrupt line or broken rule 3, seq problem 4, unknown entry version 5).

Example: walctl tasklog verify wal/ --json""")
def verify(path: str = typer.Argument(..., help="A task log or a directory of them.", callback=existing_path),
           strict: bool = typer.Option(False, "--strict", help="ts going backwards counts as corruption."),
           json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.tasklog-verify/2).")):
    from ..errors import combine_exit_codes

    reps = _reports(path, strict)
    code = combine_exit_codes(r.exit_code for r in reps)
    if json_out:
        emit(json_document("walctl.tasklog-verify/2", {"exit_code": code, "tasks": [r.to_json() for r in reps]}))
        raise typer.Exit(code)
    for r in reps:
        emit(f"{r.path}: {r.read.status} (exit {r.exit_code}), {r.read.lines} lines")
        for f in r.findings:
            emit(f"  {f.severity:<7} {f.cls}  {f.one_line()}")
    raise typer.Exit(code)


@app.command("inspect", help="""The task's state from its log, read-only; a directory gives a summary table.

Example: walctl tasklog inspect wal/ --json""")
def inspect(path: str = typer.Argument(..., help="A task log or a directory of them.", callback=existing_path),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.tasklog-inspect/2).")):
    import json

    from ..errors import combine_exit_codes

    reps = _reports(path, False)
    code = combine_exit_codes(r.exit_code for r in reps)
    if json_out:
        emit(json_document("walctl.tasklog-inspect/2", {"exit_code": code, "tasks": [r.to_json() for r in reps]}))
    elif len(reps) == 1:
        st = reps[0].state_json()
        for k, v in st.items():
            if k not in ("plan", "tool_results"):
                emit(f"{k:<26} {json.dumps(v, ensure_ascii=False)}")
        emit(f"{'plan':<26} {len(st['plan'] or [])} steps")
        for f in reps[0].findings:
            emit(f"  {f.cls}: {f.one_line()}")
    else:
        _table(reps)
    raise typer.Exit(code)


@app.command("resume", help="""Prepare a task to resume: cut a torn last line (kept in .quarantine/ first), check the
log, print the state as JSON for the runtime. Dry run unless --apply; refuses a log that does not validate
unless --force; says "nothing to resume" for a completed or failed task.

Example: walctl tasklog resume wal/3f2a...77.wal --apply""")
def resume(path: str = typer.Argument(..., help="A task log.", callback=existing_path),
           apply: bool = typer.Option(False, "--apply", help="Cut the torn tail (default: say what would happen)."),
           force: bool = typer.Option(False, "--force", help="Go on although the log breaks a rule."),
           json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.tasklog-resume/2), "
                                         "also on refusal.")):
    import json

    from ..errors import WalctlError
    from ..ops.tasklog.logs import resume as run_resume

    try:
        res = run_resume(path, apply=apply, force=force)
    except WalctlError as e:
        if json_out:  # one document on refusal too; the error line still goes to stderr at the edge
            emit(json_document("walctl.tasklog-resume/2", {"path": path, "outcome": "refused", "applied": False,
                                                            "exit_code": e.exit_code, "message": str(e)}))
        raise
    evidence = res.cut["evidence"] if res.cut else None
    if json_out:
        emit(json_document("walctl.tasklog-resume/2", {
            "path": path, "outcome": "applied" if res.applied else ("dry-run" if res.report.read.torn else "ready"),
            "applied": res.applied, "exit_code": res.report.exit_code, "message": res.message,
            "evidence": evidence, "state": res.report.state_json(),
            "findings": [f.to_json() for f in res.report.findings]}))
        raise typer.Exit(res.report.exit_code)
    sys.stderr.write(f"walctl: {res.message}\n")
    emit(json.dumps(dict(res.report.state_json(), evidence=evidence), ensure_ascii=False, indent=2))
    raise typer.Exit(res.report.exit_code)


@app.command("replay", help="""The state after each entry, in order, read-only (recorded results are the truth:
nothing is re-executed); --to-line stops after a line, --until before the first entry stamped later.

Example: walctl tasklog replay wal/3f2a...77.wal --to-line 12
Example: walctl tasklog replay wal/3f2a...77.wal --until 2026-11-21T12:00Z --jsonl""")
def replay(path: str = typer.Argument(..., help="A task log.", callback=existing_path),
           to_line: Optional[int] = typer.Option(None, "--to-line", min=1, help="Stop after this line number."),
           until: Optional[str] = typer.Option(None, "--until", help="Only entries stamped at or before T "
                                                                    "(epoch ms or ISO-8601)."),
           jsonl: bool = typer.Option(False, "--jsonl", help="One JSON object per entry (JSON lines, schema walctl.tasklog-replay/1).")):
    import json

    from ..ops.tasklog.logs import read_task

    rep = read_task(path, timeline=True, until=to_line, until_ms=_until_time(until))
    for number, kind, st in rep.read.states:
        row = {"line": number, "type": kind, "last_confirmed": st.last_confirmed,
               "resume_step_index": st.resume_step_index(), "in_flight": st.in_flight_step_index,
               "last_sha": st.last_sha, "complete": st.complete}
        emit(json.dumps(row, ensure_ascii=False) if jsonl else
             f"line {number:>4} {kind:<16} confirmed {_dash(st.last_confirmed)} resume {_dash(st.resume_step_index())} "
             f"in-flight {_dash(st.in_flight_step_index)} sha {(st.last_sha or '-')[:12]}")
    raise typer.Exit(rep.exit_code)


def _until_time(text: str | None) -> int | None:
    """--until took a line number before it took a time (issue #26): a number that small is refused, never
    read as a moment of 1970."""
    from ..errors import UsageError
    from .units import parse_time

    ms = parse_time(text, "--until")
    if ms is not None and text.strip().isdigit() and ms < 10 ** 11:
        raise UsageError(f"--until {text}: --until is a time now (epoch ms or ISO-8601); "
                         f"stop after a line with --to-line {text}")
    return ms


def _dash(v) -> str:
    return "-" if v is None else str(v)


@app.command("append", help="""Append entries, validated: one JSON object (--entry) or JSON lines on standard input;
v, ts and task_id are filled in when absent. Refuses an entry that breaks a rule (--force writes it) and a
log ending in a torn line (run resume --apply first).

Example: walctl tasklog append wal/3f2a...77.wal --entry '{"type":"StepStart","step_index":2}'""")
def append(path: str = typer.Argument(..., help="The task log (created if missing)."),
           entry: Optional[List[str]] = typer.Option(None, "--entry", help="A JSON object; repeatable."),
           force: bool = typer.Option(False, "--force", help="Write entries that break a rule.")):
    from ..errors import UsageError
    from ..format.jsonload import loads
    from ..ops.tasklog.logs import append as run_append
    from .stdin import stdin_lines

    texts = [(f"entry {i}", t) for i, t in enumerate(entry, 1)] if entry else \
        [(f"stdin line {i}", line) for i, line in enumerate(stdin_lines(), 1) if line.strip()]
    entries = []
    for where, t in texts:
        try:  # not UTF-8, NaN/Infinity, nesting past the bound, lone surrogates: refused before any write
            entries.append(loads(t, allow_lone_surrogates=False))
        except ValueError as e:
            raise UsageError(f"{where} is not JSON text: {e}; nothing was written") from None
    written = run_append(path, entries, force=force)
    emit(f"appended {len(written)} entr{'y' if len(written) == 1 else 'ies'} to {path}")
    raise typer.Exit(EXIT_OK)
