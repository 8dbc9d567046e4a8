from __future__ import annotations

from typing import Optional

import typer

from .render import emit, json_document
from .targets import existing_dir

HELP = """Put back, from the archive, what the directory lost: chunks, segments or checkpoints that are damaged,
missing or changed since their ledger seal, and acknowledged tails whose bytes were shipped as live pieces.
Dry run unless --apply: the plan names each file, what replaces it, from which object, and what stays lost.

Each copy is downloaded beside its target (NAME.tmp) and checked before anything moves: SHA-256 (the
ledger seal's when there is one, else the archive manifest's), a full scan, and its sequences against its
neighbours'. Then the damaged original's bytes are kept in .quarantine/ (with their manifest line) and the
copy is renamed over it. A healthy file is never a target. Refuses while a live writer holds the lock (exit 6). Exits with
the verdict of verify: on the directory now (dry run), or after the heal (--apply). A crash at any step:
run the same heal again. DEST: file:///path or s3://bucket/prefix, as for walctl archive.

Example: walctl heal /var/lib/agent/wal --from s3://backups/agents
Example: walctl heal /var/lib/agent/wal --from s3://backups/agents --apply"""


def heal(
    path: str = typer.Argument(..., help="A V2 chunk, ADR-003 segment or checkpoint directory.", callback=existing_dir),
    dest: str = typer.Option(..., "--from", metavar="DEST", help="The archive: file:///path or s3://bucket/prefix."),
    namespace: Optional[str] = typer.Option(None, "--namespace", help="Default: the directory's name when the "
                                            "archive holds it, else the archive's only namespace."),
    apply: bool = typer.Option(False, "--apply", help="Put the copies in place (default: print the plan only)."),
    endpoint_url: Optional[str] = typer.Option(None, "--endpoint-url",
                                               help="S3 endpoint (default: AWS_ENDPOINT_URL or AWS)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.heal/1) on stdout."),
) -> int:
    from ..ops.archive.heal_apply import heal as run_heal
    from .shown import shown

    rep = run_heal(path, dest, namespace=namespace, apply=apply, endpoint_url=endpoint_url)
    if json_out:
        emit(json_document("walctl.heal/1", rep.to_json()))
        raise typer.Exit(rep.exit_code)
    for line in render(rep):
        emit(shown(line))
    raise typer.Exit(rep.exit_code)


VERBS = {("replace", False): "would replace", ("restore", False): "would restore",
         ("replace", True): "replaced", ("restore", True): "restored"}


def render(rep) -> list[str]:
    out = []
    for s in rep.plan.steps:
        src = ", ".join(k for k, _, _ in s.objects[:3]) + (f" and {len(s.objects) - 3} more" if len(s.objects) > 3
                                                          else "")
        seqs = f"seq {s.sequence_range[0]}..{s.sequence_range[1]}" if s.sequence_range else "no sequences"
        what = f"{s.file} ({s.finding}) from {src} ({s.size} bytes, {seqs}, matched by {s.matched_by})"
        if s.outcome == "refused":
            out.append(f"refused: {what}: {s.reason}")
            continue
        out.append(f"{VERBS[s.action, s.outcome == 'healed']} {what}")
        if s.evidence:
            out.append(f"  the damaged original is kept as {s.evidence}")
    for x in rep.plan.left:
        out.append(f"stays: {x.file or '-'} ({x.finding}): {x.reason}")
    for a, b in rep.plan.lost:
        out.append(f"stays lost: seq {a}..{b}: no archived copy that can be used holds it")
    if not rep.heals:
        out.append(f"{rep.path}: nothing the archive can heal ({rep.before.verdict})")
    elif not rep.applied:
        out.append(f"dry run: nothing was changed; to heal {rep.heals} file(s) ({rep.damaged_bytes} bytes):")
    else:
        out.append(f"{rep.path}: now {rep.after.verdict} (exit {rep.exit_code}); downloaded {rep.downloaded_bytes} "
                   "bytes")
    out += [f"  {line}" for line in rep.advice()]
    return out
