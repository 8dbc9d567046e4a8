from __future__ import annotations

import os
from typing import Optional

import typer

from ..errors import EXIT_OK, UsageError
from .units import parse_duration, parse_time
from .progress import PROGRESS, Bar, on_interrupt, path_bytes
from .metrics_opt import METRICS_FILE, Recording
from .render import emit, error_line, json_document, plain_table, rerun, warn_line
from .targets import existing_archive, existing_dir

app = typer.Typer(help="""Ship sealed WAL chunks, segments and checkpoints to object storage; list, verify,
restore to a point in time, prune.

DEST is file:///path (a local directory, no server) or s3://bucket/prefix (any S3-compatible service;
--endpoint-url or AWS_ENDPOINT_URL, credentials from the AWS_* variables; needs pip install 'walctl[s3]').
Layout: <namespace>/chunks|segments|checkpoints/<file> and <namespace>/MANIFEST.json.

Example: walctl archive push /var/lib/agent/wal s3://backups/agents --checkpoints /var/lib/agent/ckpt""",
                  no_args_is_help=True)

ENDPOINT = typer.Option(None, "--endpoint-url", help="S3 endpoint (default: AWS_ENDPOINT_URL or AWS).")
JOBS = typer.Option(4, "--jobs", "-j", min=1, max=64, help="Parallel transfers.")


@app.command("push", help="""Upload every sealed file (every chunk or segment but the last, verified clean) and
every checkpoint that verifies. Idempotent: an object already archived with the same SHA-256 is skipped;
one with other bytes is never overwritten (exit 7). Each upload is verified (size, and the SHA-256 the
service vouches for or the object read back); the manifest is written last. --delete-local removes local
chunks the archive holds and compaction would remove (below the HWM), with --apply, each recorded in
.quarantine/MANIFEST.jsonl.

--follow keeps running after that: the file the writer appends to is shipped as it grows, as small
immutable live pieces under <namespace>/live/ (whole valid records only, never past a torn tail; at
most one per --interval, none while the writer is quiet); when the writer moves on to a new file, the
closed one is pushed sealed and replaces its pieces. SIGTERM stops it cleanly (exit 0), Ctrl-C too
(exit 130), after the buffered piece and the manifest; a rerun resumes where the archive ends.

Example: walctl archive push /var/lib/agent/wal s3://backups/agents --namespace agent-7 --jobs 8
         walctl archive push /var/lib/agent/wal s3://backups/agents --follow --interval 1s""")
def push(wal_dir: str = typer.Argument(..., help="A V2 chunk or ADR-003 segment directory.", callback=existing_dir),
         dest: str = typer.Argument(..., help="file:///path or s3://bucket/prefix."),  # (created if missing)
         namespace: Optional[str] = typer.Option(None, "--namespace", help="Default: the directory's name."),
         checkpoints: Optional[str] = typer.Option(None, "--checkpoints", help="Also push this checkpoint directory.", callback=existing_dir),
         jobs: int = JOBS,
         delete_local: bool = typer.Option(False, "--delete-local", help="Remove archived chunks below the HWM "
                                                                         "(with --apply)."),
         to: Optional[int] = typer.Option(None, "--to", min=0, help="--delete-local: the HWM (sequences <= N are covered)."),
         checkpoint_meta: Optional[str] = typer.Option(None, "--checkpoint-meta",
                                                       help="--delete-local: the HWM from Spector's checkpoint.meta."),
         apply: bool = typer.Option(False, "--apply", help="--delete-local: really remove."),
         endpoint_url: Optional[str] = ENDPOINT,
         follow: bool = typer.Option(False, "--follow", "-f", help="Keep shipping the active file as it grows."),
         interval: str = typer.Option("1s", "--interval", help="--follow: at most one live piece per interval "
                                                                "(500ms, 1s, 2m)."),
         min_piece_bytes: int = typer.Option(0, "--min-piece-bytes", min=0,
                                             help="--follow: a smaller piece waits up to --max-wait."),
         max_wait: Optional[str] = typer.Option(None, "--max-wait", help="--follow: the longest a piece under "
                                                                          "--min-piece-bytes waits (default: --interval)."),
         timeout: Optional[str] = typer.Option(None, "--timeout", help="--follow: stop after this long."),
         json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.archive-push/2; "
                                                             "--follow: walctl.archive-follow/1)."),
         progress: Optional[bool] = PROGRESS,
         metrics_file: Optional[str] = METRICS_FILE):
    if (to is not None or checkpoint_meta) and not delete_local:
        raise UsageError("--to/--checkpoint-meta set the HWM for --delete-local")
    if follow and (delete_local or apply):
        raise UsageError("--follow ships; --delete-local belongs to a one-shot push")
    with Recording(metrics_file, "archive push", [wal_dir], guard=[checkpoints, dest]) as rec:
        if follow:
            code = _push_follow(wal_dir, dest, namespace, checkpoints, endpoint_url,
                                parse_duration(interval, "--interval", zero=False), min_piece_bytes,
                                None if max_wait is None else parse_duration(max_wait, "--max-wait"),
                                None if timeout is None else parse_duration(timeout, "--timeout"), json_out, rec)
        else:
            code = _push_once(rec, wal_dir, dest, namespace, checkpoints, jobs, delete_local, to, checkpoint_meta,
                              apply, endpoint_url, json_out, progress)
    return code


def _push_once(rec, wal_dir, dest, namespace, checkpoints, jobs, delete_local, to, checkpoint_meta, apply,
               endpoint_url, json_out, progress) -> int:
    from ..ops.archive.push import push as run_push

    with Bar("push", path_bytes(wal_dir, checkpoints), progress) as bar:
        rep = run_push(wal_dir, dest, namespace=namespace, checkpoints=checkpoints, jobs=jobs,
                       delete_local=delete_local, hwm_before=to, checkpoint_meta=checkpoint_meta, apply=apply,
                       endpoint_url=endpoint_url, progress=bar.callback)
    if rec.path is not None:
        from ..ops.metrics import push_targets

        rec.record(push_targets(wal_dir, rep, endpoint_url))
    for w in rep.warnings:
        warn_line(w)
    for f in rep.held_back:
        warn_line(f"{f.file}: {f.reason}")
    if json_out:
        emit(json_document("walctl.archive-push/2", rep.to_json()))
    else:
        mb = rep.bytes_uploaded / 2 ** 20
        emit(f"{rep.destination}/{rep.namespace}: {len(rep.uploaded)} uploaded ({mb:.1f} MiB in {rep.seconds:.2f} s), "
             f"{len(rep.already_archived)} already archived, {len(rep.conflicts)} conflicts, {len(rep.failed)} failed, "
             f"{len(rep.held_back)} held back")
        if rep.deleted_local:
            emit(f"removed {len(rep.deleted_local)} archived local chunks: {', '.join(rep.deleted_local)}")
        if rep.would_delete_local:
            emit(f"would remove {len(rep.would_delete_local)} archived local chunks (add --apply): "
                 f"{', '.join(rep.would_delete_local)}")
    return rep.exit_code


def _push_follow(wal_dir, dest, namespace, checkpoints, endpoint_url, interval, min_piece_bytes, max_wait, timeout,
                 json_out, rec) -> int:
    from ..ops.archive.follow import push_follow

    if interval <= 0:
        raise UsageError("--interval must be more than 0")
    rep = push_follow(wal_dir, dest, namespace=namespace, checkpoints=checkpoints, endpoint_url=endpoint_url,
                      interval=interval, min_piece_bytes=min_piece_bytes, max_wait=max_wait, timeout=timeout,
                      on_poll=_metrics_refresh(rec, wal_dir, interval) if rec.path is not None else None)
    if rec.path is not None:
        from ..ops.metrics import Target

        stopped = rep.ended_by in ("signal", "timeout")  # the buffered piece was shipped on the way out
        rec.record([Target(wal_dir, rep.exit_code, {}, shipped_sequence=rep.shipped_through,
                           lag_sequences=0 if stopped else None, lag_seconds=0.0 if stopped else None,
                           bytes_uploaded=rep.bytes_uploaded)])
    for w in rep.warnings:
        warn_line(w)
    if json_out:
        emit(json_document("walctl.archive-follow/1", rep.to_json()))
    else:
        emit(f"{rep.destination}/{rep.namespace}: {len(rep.sealed_uploaded)} file versions uploaded "
             f"({rep.bytes_uploaded / 2**20:.1f} MiB); stopped by {rep.ended_by}" if rep.shipped_through is None
             and not rep.pieces_uploaded and _versions(rep.sealed_uploaded) else
             f"{rep.destination}/{rep.namespace}: shipped through sequence {rep.shipped_through}; "
             f"{rep.pieces_uploaded} live pieces, {len(rep.sealed_uploaded)} sealed files uploaded "
             f"({rep.bytes_uploaded / 2**20:.1f} MiB), {len(rep.pieces_deleted)} pieces deleted after their seal; "
             f"stopped by {rep.ended_by}")
    if rep.problem:
        error_line(rep.problem)
    if rep.exit_code == 130:
        on_interrupt(f"stopped; archived and verified through sequence {rep.shipped_through}, the manifest "
                     "written; run the same command to resume")
    return rep.exit_code


def _versions(names) -> bool:
    from ..format.archive_manifest import FILE_KINDS, parse_version_name

    return bool(names) and all(any(parse_version_name(k, n) for k in FILE_KINDS) for n in names)


def _metrics_refresh(rec, wal_dir: str, interval: float):
    """push --follow: the metrics file rewritten after a poll, at most once per --interval (exit code 0:
    running)."""
    import time

    from ..ops.metrics import follow_targets

    last = [float("-inf")]

    def refresh(sh) -> None:
        now = time.monotonic()
        if now - last[0] >= interval:
            last[0] = now
            rec.write_now(follow_targets(wal_dir, sh))
    return refresh


@app.command("list", help="""Namespaces, objects, sequence ranges, sizes and gaps. Reads the manifests (rebuilt
from a listing, with a warning, when missing or stale). `lag`: with --dir (the local log), sequences and
seconds between its newest record and the newest archived one; without, the newest archived record's age.

Example: walctl archive list s3://backups/agents --json""")
def list_(dest: str = typer.Argument(..., help="file:///path or s3://bucket/prefix.", callback=existing_archive),
          namespace: Optional[str] = typer.Option(None, "--namespace", help="Only this namespace."),
          endpoint_url: Optional[str] = ENDPOINT,
          wal_dir: Optional[str] = typer.Option(None, "--dir", help="The local log, for lag against its newest "
                                                                    "record (read-only)."),
          json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.archive-list/1).")):
    from ..ops.archive.listing import list_archive

    listing = list_archive(dest, namespace, wal_dir, endpoint_url, on_warning=warn_line)
    out = listing.namespaces
    if json_out:
        emit(json_document("walctl.archive-list/1", listing.to_json()))
        return EXIT_OK
    rows = [[s["namespace"], s["wal_objects"], len(s["checkpoints"]), f"{s['bytes'] / 2**20:.1f}",
             f"{s['first_sequence']}..{s['last_sequence']}" if s["first_sequence"] is not None else "-",
             ", ".join(f"{a}..{b}" for a, b in s["gaps"]) or "-", len(s["missing_objects"]), s["live_pieces"],
             _lag_text(s["lag"])] for s in out]
    for line in plain_table(["namespace", "wal objects", "checkpoints", "MiB", "sequences", "gaps", "missing", "live",
                             "lag"], rows,
                            indent=""):
        emit(line)
    return EXIT_OK


def _sample(subset, max_duration):
    """archive verify's --read-data-subset / --max-duration (ops/archive/verify.Sample), or None: read all."""
    if subset is None and max_duration is None:
        return None
    from ..ops.archive.verify import Sample
    from ..ops.wal.coverage import Deadline, parse_subset
    deadline = None if max_duration is None else Deadline(parse_duration(max_duration, "--max-duration"))
    return Sample(None if subset is None else parse_subset(subset, "--read-data-subset"), deadline)


def _lag_text(lag: dict) -> str:
    parts = []
    if lag.get("sequences") is not None:
        parts.append(f"{lag['sequences']} seq")
    if lag.get("seconds") is not None:
        parts.append(f"{lag['seconds']:.1f} s" + (" old" if "age_of" in lag else ""))
    return ", ".join(parts) or "-"


@app.command("verify", help="""Read every archived object (in parallel) and check it with the same scanners as
local verify, against the SHA-256 it was pushed with; report sequences missing across the archive and
objects the manifest lists but the store lacks. Exit codes as for verify.

--read-data-subset K/N (or P%) downloads only slice K of N of the objects (by a hash of each name: K =
1..N read each exactly once), as restic's check does; --max-duration starts no download after that long.
What was not read is listed; the manifest's own checks (gaps, missing objects) cover every object.

Example: walctl archive verify s3://backups/agents --namespace agent-7
Example: walctl archive verify s3://backups/agents --read-data-subset 3/7""")
def verify(dest: str = typer.Argument(..., help="file:///path or s3://bucket/prefix.", callback=existing_archive),
           namespace: Optional[str] = typer.Option(None, "--namespace", help="Only this namespace."),
           jobs: int = JOBS, endpoint_url: Optional[str] = ENDPOINT,
           json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.archive-verify/1)."),
           subset: Optional[str] = typer.Option(None, "--read-data-subset", metavar="K/N|P%", help="Download only "
                                                "slice K of N of the objects (or P% of them)."),
           max_duration: Optional[str] = typer.Option(None, "--max-duration", metavar="DURATION", help="Start no "
                                                      "download after this long (500ms, 90s, 10m, 1h)."),
           progress: Optional[bool] = PROGRESS):
    from ..ops.archive.verify import verify_archive
    from ..ops.report import VERDICTS

    sample = _sample(subset, max_duration)
    with Bar("archive verify", None, progress) as bar:
        summaries, findings, code = verify_archive(dest, namespace=namespace, jobs=jobs, endpoint_url=endpoint_url,
                                                   progress=bar.callback, sample=sample)
    for s in summaries:
        for w in s["warnings"]:
            warn_line(w)
    if json_out:
        emit(json_document("walctl.archive-verify/1", {"namespaces": [{k: v for k, v in s.items() if k != "entries"}
                                                                      for s in summaries],
                                                       "findings": [f.to_json() for f in findings],
                                                       "verdict": VERDICTS[code], "exit_code": code}))
        return code
    for s in summaries:
        emit(f"{s['namespace']}: {s['objects']} objects, sequences "
             f"{s['first_sequence']}..{s['last_sequence']}, {len(s['checkpoints'])} checkpoints")
        c = s.get("coverage")
        if c is not None:
            emit(f"  read {c['read']} of {c['objects']} objects ({c['bytes_read']} bytes"
                 + (f", subset {c['subset']}" if c["subset"] else "") + f"); not read: {len(c['not_read'])}"
                 + (" (--max-duration reached)" if c["stopped"] == "max-duration" else ""))
    for f in findings:
        emit(f"  {f.cls}: {f.file}: {f.reason}")
    emit(f"archive is {VERDICTS[code]} (exit {code})")
    return code


@app.command("restore", help="""Write OUT/wal holding exactly the archived events up to --to N or --until T
(default: all), and OUT/checkpoints with the newest archived checkpoint at or below that point that
verifies (falling back past damaged ones), then verify OUT/wal. OUT must be new or empty. Recover the
state with: walctl recover --checkpoints OUT/checkpoints --log OUT/wal. A namespace of task logs or of
a Substrat root is rebuilt in OUT as the directory was at --until T (task logs cut after their last
entry at or before T; an agent root's files as they stood), then verified.

Example: walctl archive restore s3://backups/agents /srv/agent-7 --namespace agent-7 --until 2026-11-21T12:00Z""")
def restore(dest: str = typer.Argument(..., help="file:///path or s3://bucket/prefix.", callback=existing_archive),
            out: str = typer.Argument(..., help="A new (or empty) directory."),
            namespace: Optional[str] = typer.Option(None, "--namespace", help="Needed when DEST holds several."),
            to: Optional[int] = typer.Option(None, "--to", min=1, help="The last sequence to restore."),
            until: Optional[str] = typer.Option(None, "--until", help="Restore events up to this time, inclusive "
                                                                      "(epoch ms or ISO-8601)."),
            jobs: int = JOBS, endpoint_url: Optional[str] = ENDPOINT,
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.archive-restore/2)."),
            progress: Optional[bool] = PROGRESS):
    from ..ops.archive.restore import restore as run_restore

    if to is not None and until is not None:
        raise UsageError("give --to or --until, not both")
    on_interrupt(f"interrupted before anything was written to {out}; run the same restore again: {rerun()}")

    def undone(undo) -> None:  # what the cleanup really did, for the Ctrl-C line
        then = (f"run the same restore again: {rerun()}" if undo.clean
                else f"remove what is left, then run the same restore again: {rerun()}")
        on_interrupt(f"interrupted; {undo.summary()}; {then}")

    with Bar("restore", None, progress) as bar:
        rep = run_restore(dest, out, namespace=namespace, to_seq=to,
                          to_time_ms=parse_time(until, "--until"), jobs=jobs, endpoint_url=endpoint_url,
                          progress=bar.callback, undone=undone)
    on_interrupt(None)
    for w in rep.warnings:
        warn_line(w)
    for fb in getattr(rep, "fallbacks", ()):
        warn_line(f"checkpoint passed over: {fb}")
    if hasattr(rep, "files"):  # task logs or an agent root, rebuilt as files
        if json_out:
            emit(json_document("walctl.archive-restore-files/1", rep.to_json()))
        else:
            emit(f"restored {len(rep.files)} {rep.kind} files into {rep.out}"
                 + (f" as they were at {rep.until_ms} ms" if rep.until_ms is not None else "")
                 + f"; the restored directory is {rep.verdict}")
    elif json_out:
        emit(json_document("walctl.archive-restore/2", rep.to_json()))
    else:
        emit(f"restored {rep.events} events (sequences {rep.first_sequence}..{rep.last_sequence}) from "
             f"{len(rep.objects)} objects into {os.path.join(rep.out, 'wal')}; checkpoint "
             f"{rep.checkpoint or 'none'}" + (f" (wal_sequence {rep.checkpoint_wal_sequence})" if rep.checkpoint else "")
             + f"; the restored log is {rep.verdict}")
    return EXIT_OK


@app.command("prune", help="""Delete archived objects older than --max-age that the newest --keep valid
checkpoints do not need (WAL objects wholly at or below the oldest kept checkpoint's wal_sequence, and
older checkpoints). With fewer valid checkpoints nothing is deleted. Dry run unless --apply; the
manifest is rewritten before any object is deleted.

Example: walctl archive prune s3://backups/agents --namespace agent-7 --keep 3 --max-age 30d --apply""")
def prune(dest: str = typer.Argument(..., help="file:///path or s3://bucket/prefix.", callback=existing_archive),
          namespace: str = typer.Option(..., "--namespace", help="The namespace to prune."),
          keep: int = typer.Option(2, "--keep", min=1, help="Keep what the newest K valid checkpoints need."),
          max_age: str = typer.Option("7d", "--max-age", help="Only objects older than this (a duration: 30d, 12h)."),
          apply: bool = typer.Option(False, "--apply", help="Really delete."),
          jobs: int = JOBS, endpoint_url: Optional[str] = ENDPOINT,
          json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.archive-prune/1).")):
    from ..ops.archive.prune import prune as run_prune

    rep = run_prune(dest, namespace=namespace, keep=keep, max_age_s=parse_duration(max_age, "--max-age"), apply=apply, jobs=jobs,
                    endpoint_url=endpoint_url)
    if json_out:
        emit(json_document("walctl.archive-prune/1", rep.to_json()))
        return EXIT_OK
    verb = "deleted" if apply else "would delete (add --apply)"
    emit(f"{rep.destination}/{rep.namespace}: kept checkpoints {', '.join(rep.kept_checkpoints) or 'none'}; "
         f"horizon {rep.horizon if rep.horizon is not None else '-'}; {verb}: {len(rep.delete)} objects")
    for n in rep.delete:
        emit(f"  {n}")
    return EXIT_OK
