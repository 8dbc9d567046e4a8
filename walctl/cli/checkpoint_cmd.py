from __future__ import annotations

import os
from typing import List, Optional

import typer

from ..errors import EXIT_OK, UsageError
from .metrics_opt import METRICS_FILE, Recording
from .units import parse_duration
from .recover_cmd import REDUCER_HELP
from .progress import PROGRESS, Bar, on_interrupt, path_bytes
from .render import emit, json_document, plain_table, rerun, safe, say
from .targets import existing_dir, existing_path

app = typer.Typer(help="""O_CKPT_V2 checkpoints: create, verify, inspect, list, prune, restore.

A checkpoint is <uuid>.ckpt: a 256-byte header (both SHA-256s, sizes, wal_sequence) and one zstd frame of
canonical msgpack state. "Latest" is by (wal_sequence, timestamp, id), never by name or mtime.

Example: walctl checkpoint list /var/lib/agent/checkpoints""", no_args_is_help=True)


@app.command("create", help="""Write a new checkpoint into DIR, durably: from a state file (JSON or msgpack) with
--to N (the last log sequence it holds), or by folding a log with a reducer (--log). Make the log durable up to the sequence first.

Example: walctl checkpoint create ckpts/ --state state.json --to 1200""")
def create(directory: str = typer.Argument(..., help="The checkpoint directory (created if missing)."),
           state: Optional[str] = typer.Option(None, "--state", help="A JSON or msgpack state file."),
           wal_seq: Optional[int] = typer.Option(None, "--to", min=0, help="The last log sequence the state holds."),
           log: Optional[str] = typer.Option(None, "--log", help="Fold this log from empty instead of --state.", callback=existing_path),
           reducer: str = typer.Option("auto", "--reducer", metavar="[auto|adr003|spector|MODULE:FUNCTION]", help=REDUCER_HELP + " With --log."),
           level: int = typer.Option(9, "--level", min=1, max=22, help="zstd level."),
           json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.checkpoint-create/1)."),
           progress: Optional[bool] = PROGRESS,
           metrics_file: Optional[str] = METRICS_FILE):
    if (state is None) == (log is None):
        raise UsageError("give --state FILE --to N, or --log DIR")
    with Recording(metrics_file, "checkpoint create", [directory], guard=[log]) as rec:
        _create(rec, directory, state, wal_seq, log, reducer, level, json_out, progress)


def _create(rec, directory, state, wal_seq, log, reducer, level, json_out, progress) -> None:
    from ..ops.checkpoints.checkpoint import create as run_create

    records = None
    if state is not None:
        if wal_seq is None:
            raise UsageError("--state needs --to N (the last log sequence the state reflects)")
        from ..ops.checkpoints.checkpoint import load_state_file

        st, seq = load_state_file(state), wal_seq
    else:
        from ..ops.checkpoints.recover import fold_log

        with Bar("read log", path_bytes(log), progress) as bar:
            rep = fold_log(log, reducer=reducer, progress=bar.callback)
        st, seq, records = rep.state, rep.final_sequence, rep.entries_replayed
    on_interrupt(f"interrupted; no checkpoint was written; a partial *.ckpt.tmp may be left in {directory} "
                 "(every reader ignores it; delete it)")
    with Bar("checkpoint", None, progress) as bar:  # compressed bytes written; the total is known only at the end
        made = run_create(directory, st, seq, level=level, progress=bar.callback)
    on_interrupt(None)
    if rec.path is not None:
        from ..ops.metrics import checkpoint_targets

        rec.record(checkpoint_targets(directory, made, records))
    if json_out:
        emit(json_document("walctl.checkpoint-create/1", made.to_json()))
    else:
        emit(f"created {made.path}: wal_sequence {made.wal_sequence}, {made.uncompressed_size} -> "
             f"{made.compressed_size} bytes ({made.uncompressed_size / made.compressed_size:.2f}x) in {made.seconds:.3f} s")
    raise typer.Exit(EXIT_OK)


@app.command("verify", help="""Check checkpoint files (or every *.ckpt of a directory) through all eleven steps.

Example: walctl checkpoint verify ckpts/ --json""")
def verify(paths: List[str] = typer.Argument(..., metavar="PATH", help="Checkpoint files or directories.", callback=existing_path),
           strict: bool = typer.Option(False, "--strict", help="Treat anomalies as corruption."),
           json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.verify/2).")):
    from . import verify_cmd

    verify_cmd.verify(paths=paths, json_out=json_out, strict=strict, jobs=1, quick=False, verbose=True, quiet=False,
                      show_map=False, archive=None, subset=None, resume=False, max_duration=None, progress=None,
                      metrics_file=None)


@app.command("inspect", help="""Header fields, sizes, compression ratio and the state's top-level keys, of a
checkpoint file or of every *.ckpt of a directory (exit code as for verify).

Example: walctl checkpoint inspect ckpts/3f2a...e1.ckpt""")
def inspect(path: str = typer.Argument(..., help="A checkpoint file or directory.", callback=existing_path),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.checkpoint-inspect/2).")):
    from ..errors import combine_exit_codes
    from ..ops.checkpoints.checkpoint import inspect_path

    reps, is_dir = inspect_path(path)
    bodies = [_inspect_body(r) for r in reps]
    code = combine_exit_codes(r.exit_code for r in reps)
    if json_out:
        # A file: its fields at the top level (as before); a directory: one entry per checkpoint.
        doc = bodies[0] if not is_dir else {"path": path, "exit_code": code, "checkpoints": bodies}
        emit(json_document("walctl.checkpoint-inspect/2", doc))
        raise typer.Exit(code)
    if is_dir:
        emit(f"{path}: {len(reps)} checkpoint{'s' if len(reps) != 1 else ''}, "
             f"{sum(r.checked.ok for r in reps)} valid")
    for rep, body in zip(reps, bodies):
        emit(f"{rep.path}: {'valid' if rep.checked.ok else 'INVALID'}")
        for k, v in (body["header"] or {}).items():
            emit(f"  {k:<20} {v}")
        for k, v in (body["top_level_keys"] or {}).items():
            emit(f"  state.{k:<14} {v}")
        if body["fingerprint"]:
            emit(f"  {'fingerprint':<20} {body['fingerprint']['sha256']} ({body['fingerprint']['form']} at sequence "
                 f"{body['fingerprint']['sequence']})")
        for f in rep.findings:
            emit(f"  {f.cls}: {f.reason}")
    raise typer.Exit(code)


def _inspect_body(rep) -> dict:
    from ..ops.checkpoints.checkpoint import header_json

    st = rep.checked.state
    return {"file": rep.file, "valid": rep.checked.ok, "exit_code": rep.exit_code,
            "header": header_json(rep.header) if rep.header else None,
            "top_level_keys": {k: _describe(v) for k, v in sorted(st.items())} if st is not None else None,
            "fingerprint": _fingerprint(st, rep.header.wal_sequence) if st is not None and rep.header else None,
            "findings": [f.to_json() for f in rep.findings]}


def _fingerprint(state: dict, sequence: int) -> dict | None:
    """What `walctl fingerprint` says of this state (None when it has no canonical form)."""
    from ..ops.checkpoints.fingerprint import FORM_STATE, state_sha256

    try:
        return {"form": FORM_STATE, "sha256": state_sha256(state, sequence), "sequence": sequence}
    except UsageError:
        return None


def _describe(v) -> str:
    if isinstance(v, dict):
        return f"map of {len(v)}"
    if isinstance(v, list):
        return f"list of {len(v)}"
    return type(v).__name__ + (f" {v}" if isinstance(v, (int, float, bool)) else "")


@app.command("list", help="""Checkpoints newest first (latest order), each valid or why not.

Example: walctl checkpoint list ckpts/""")
def list_(directory: str = typer.Argument(..., help="The checkpoint directory.", callback=existing_dir),
          json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.checkpoint-list/2).")):
    from ..ops.checkpoints.checkpoint import list_dir

    lst = list_dir(directory)
    if json_out:
        emit(json_document("walctl.checkpoint-list/2", lst.to_json()))
        raise typer.Exit(lst.exit_code)
    rows = [[i, c.file, c.header.wal_sequence, _iso(c.header.timestamp), c.header.compressed_size,
             "valid" if c.checked.ok else "INVALID"] for i, c in enumerate(lst.candidates)]
    rows += [["-", r.file, "", "", "", "REJECTED"] for r in lst.rejected]
    for line in plain_table(["rank", "file", "wal_sequence", "time (UTC)", "bytes", "status"], rows, indent="",
                            fixed=(1,)):
        emit(line)
    for r in lst.candidates + lst.rejected:  # why, under the table: a reason is prose, wrapped, never cut
        if not r.checked.ok:
            say(f"{r.file}: {'INVALID' if r.checked.header_ok else 'REJECTED'} step {r.checked.failure.step}: "
                f"{r.checked.failure.reason}")
    raise typer.Exit(lst.exit_code)


def _iso(seconds: int) -> str:
    """A header's timestamp (epoch seconds) as ISO-8601 UTC, as every other time walctl prints."""
    from ..format.hexdump import format_timestamp_ms

    try:
        return format_timestamp_ms(seconds * 1000)
    except (OverflowError, ValueError, OSError):
        return str(seconds)


@app.command("prune", help="""Move checkpoints older than --max-age into DIR/.quarantine/, always keeping the newest
--keep valid ones (never the newest valid checkpoint, never an invalid one: that is evidence). Dry run
unless --apply; each move is recorded in .quarantine/MANIFEST.jsonl. walctl deletes no checkpoint: remove
.quarantine/ files yourself once they cannot be needed.

Example: walctl checkpoint prune ckpts/ --max-age 24h --apply""")
def prune(directory: str = typer.Argument(..., help="The checkpoint directory.", callback=existing_dir),
          max_age: str = typer.Option("24h", "--max-age", help="Older than this (a duration: 30d, 12h) may go."),
          keep: int = typer.Option(2, "--keep", min=1, help="Always keep this many newest valid checkpoints."),
          apply: bool = typer.Option(False, "--apply", help="Move them (default: print the plan only)."),
          json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.checkpoint-prune/2).")):
    from ..ops.checkpoints.checkpoint import prune as run_prune

    rep = run_prune(directory, max_age_s=int(parse_duration(max_age, "--max-age")), keep=keep, apply=apply)
    if json_out:
        emit(json_document("walctl.checkpoint-prune/2", rep.to_json()))
        raise typer.Exit(EXIT_OK)
    moved = {e["source"]: e["evidence"] for e in rep.manifest}
    for r in rep.removals:
        what = f"{r.file} (wal_sequence {r.header.wal_sequence}, timestamp {r.header.timestamp})"
        emit(f"moved {what} to {moved[r.file]}" if rep.applied else f"would move {what} to .quarantine/")
    for r in rep.kept:
        emit(f"kept {r.file} (wal_sequence {r.header.wal_sequence})")
    for r in rep.left_alone:
        emit(f"left alone (invalid, evidence): {r.file}")
    if rep.removals and not rep.applied:
        emit(f"dry run: nothing was changed; to do it: {safe(rerun('--apply'))}")
    raise typer.Exit(EXIT_OK)


@app.command("restore", help="""Write the state of a checkpoint (or of the latest valid one in a directory) to a
new file as JSON or msgpack. Never overwrites.

Example: walctl checkpoint restore ckpts/ --out state.json""")
def restore(path: str = typer.Argument(..., help="A checkpoint file or directory.", callback=existing_path),
            out: str = typer.Option(..., "--out", help="The state file to create."),
            fmt: str = typer.Option("json", "--format", metavar="[json|msgpack]", help="json or msgpack."),
            progress: Optional[bool] = PROGRESS):
    from ..ops.checkpoints.checkpoint import resolve
    from ..ops.checkpoints.state_io import write_state

    on_interrupt(f"interrupted; {out} was not written (its partial copy was removed)")
    with Bar("restore", path_bytes(path) if not os.path.isdir(path) else None, progress) as bar:
        rep = resolve(path, progress=bar.callback)
        write_state(out, rep.checked.state, fmt, progress=bar.callback)
    on_interrupt(None)
    emit(f"restored {rep.file} (wal_sequence {rep.header.wal_sequence}) to {out}")
    raise typer.Exit(EXIT_OK)
