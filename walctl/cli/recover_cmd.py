from __future__ import annotations

from typing import Optional

import typer

from .metrics_opt import METRICS_FILE, Recording
from .progress import PROGRESS, Bar, on_interrupt, path_bytes
from .render import emit, examined_document, json_document, next_lines
from .targets import existing_dir, existing_path

HELP = """Recover state: the newest checkpoint that fully verifies, plus replay of the log after its wal_sequence.

Checkpoints that fail are passed over (listed with their reason): the state is still complete and the exit
is 0, but the outcome is recovered-with-fallback (exit 3 with --strict, to alert). The first replayed entry
must follow the checkpoint (a gap is exit 4 unless --allow-gap stops at the checkpoint); damage among the replayed entries
is an error and no state is written; a torn tail is ignored and counted. The log is ADR-003 segments or a
Spector V2 chunk directory. Writes the state with --out (JSON or msgpack; never overwriting).

Example: walctl recover --checkpoints ckpts/ --log segments/ --out state.json --json"""

REDUCER_HELP = "auto (spector for a Spector V2 log, else adr003), adr003, spector, or module:function."


SKIPPED_SHOWN = 10  # the text lists this many skipped entries; --json the first 100

def recover(
    checkpoints: Optional[str] = typer.Option(None, "--checkpoints", help="The checkpoint directory.", callback=existing_dir),
    log: Optional[str] = typer.Option(None, "--log", help="The log: ADR-003 segments or V2 chunks.", callback=existing_path),
    reducer: str = typer.Option("auto", "--reducer", metavar="[auto|adr003|spector|MODULE:FUNCTION]",
                                 help=REDUCER_HELP),
    allow_gap: bool = typer.Option(False, "--allow-gap", help="Stop at the checkpoint when the log has a gap after it; "
                                   "with no valid checkpoint and a log not contiguous from 1 (history-lost), "
                                   "still write the empty state with --out."),
    out: Optional[str] = typer.Option(None, "--out", help="Write the recovered state to this new file."),
    fmt: str = typer.Option("json", "--format", metavar="[json|msgpack]", help="--out as json or msgpack."),
    json_out: bool = typer.Option(False, "--json", help="The report as one JSON document (schema walctl.recover/2)."),
    strict: bool = typer.Option(False, "--strict", help="Exit 3 when a checkpoint file was passed over "
                                "(recovered-with-fallback), as verify --strict does for any anomaly."),
    progress: Optional[bool] = PROGRESS,
    metrics_file: Optional[str] = METRICS_FILE,
) -> int:
    from ..errors import UsageError

    if checkpoints is None and log is None:
        raise UsageError("give --checkpoints DIR and/or --log DIR")
    with Recording(metrics_file, "recover", [log or checkpoints], guard=[checkpoints]) as rec:
        _recover(rec, checkpoints, log, reducer, allow_gap, out, fmt, json_out, strict, progress)


def _recover(rec, checkpoints, log, reducer, allow_gap, out, fmt, json_out, strict, progress) -> None:
    from ..errors import NotClean
    from ..ops.checkpoints.recover import recover as run_recover
    from ..ops.checkpoints.state_io import write_state

    from ..ops.checkpoints.recover import OUTCOME_HISTORY_LOST

    on_interrupt("interrupted; recover changes nothing it reads" + (f", and {out} was not written" if out else ""))
    with Bar("recover", path_bytes(log), progress) as bar:
        try:
            rep = run_recover(checkpoints, log, reducer=reducer, allow_gap=allow_gap, progress=bar.callback,
                              strict=strict)
        except NotClean as e:  # the log or the checkpoints were examined: recover's own document says what
            if e.examined is not None:
                e.examined = dict(e.examined, state_written=None)
            examined_document("walctl.recover/2", e, json_out)
            raise
    if rec.path is not None:
        from ..ops.metrics import recover_targets

        rec.record(recover_targets(log or checkpoints, rep))
    # history-lost: the empty state stands for a log that has entries; it is written only when asked.
    written = out is not None and (rep.outcome != OUTCOME_HISTORY_LOST or allow_gap)
    if written:
        write_state(out, rep.state, fmt)
    fp = _fingerprint(rep, written or out is None)
    if json_out:
        emit(json_document("walctl.recover/2", dict(rep.to_json(), state_written=out if written else None,
                                                    fingerprint=fp)))
    else:
        _render_text(rep, out, written, strict, fp)
    raise typer.Exit(rep.exit_code)


def _fingerprint(rep, shown: bool) -> dict | None:
    """The fingerprint of the state recover wrote (or would write), as `walctl fingerprint` computes it:
    None when nothing was written (history lost) or the state has no canonical form."""
    from ..errors import UsageError
    from ..ops.checkpoints.fingerprint import FORM_STATE, state_sha256

    if not shown:
        return None
    try:
        return {"form": FORM_STATE, "sha256": state_sha256(rep.state, rep.final_sequence),
                "sequence": rep.final_sequence}
    except UsageError:
        return None


def _render_text(rep, out, written: bool, strict: bool, fp: dict | None = None) -> None:
    from ..ops.checkpoints.recover import OUTCOME_FALLBACK

    used = rep.checkpoint
    emit(f"outcome: {rep.outcome}; final sequence {rep.final_sequence}")
    emit(f"  checkpoint: {used['file'] + ' (wal_sequence ' + str(used['wal_sequence']) + ')' if used else 'none'}")
    for f in rep.fallbacks:
        emit(f"  passed over: {f['file']}: step {f['step']}: {f['reason']}")
    for f in rep.rejected:
        emit(f"  rejected: {f['file']}: step {f['step']}: {f['reason']}")
    if rep.outcome == OUTCOME_FALLBACK:
        n = len(rep.fallbacks) + len(rep.rejected)
        emit(f"  recovered with fallback: {n} checkpoint file{'s' if n != 1 else ''} passed over; the state is "
             f"complete{' (exit 3: --strict)' if strict else ' (--strict exits 3)'}")
    emit(f"  replayed {rep.entries_replayed} entries, skipped {len(rep.skipped)}, duplicates {rep.duplicates}, "
         f"torn bytes ignored {rep.torn_bytes_ignored}; {rep.seconds['total'] * 1000:.1f} ms")
    for w in rep.warnings:
        emit(f"  warning: {w}")
    for s in rep.skipped[:SKIPPED_SHOWN]:  # what the warning's "listed as skipped" points to
        emit(f"  skipped: sequence {s['sequence']}: {s['reason']}")
    if len(rep.skipped) > SKIPPED_SHOWN:
        emit(f"  skipped: {len(rep.skipped) - SKIPPED_SHOWN} more (--json lists the first 100)")
    if written:
        emit(f"  state written to {out}")
    if fp:
        emit(f"  fingerprint: {fp['sha256']} ({fp['form']} at sequence {fp['sequence']})")
    elif out:
        emit(f"  state NOT written to {out}: history lost (--allow-gap writes the empty state)")
    for line in next_lines(rep.next_steps(), "  "):
        emit(line)
