from __future__ import annotations

from typing import Optional

import typer

from ..errors import EXIT_OK
from .render import emit, json_document, plain_table, rerun, safe
from .targets import existing_dir

app = typer.Typer(help="""The ADR-002 workflow checkpoint store: ROOT/workflow-checkpoints/<id>.json.

Documents are JSON with sorted keys (never pickle), each written by durable replace. delete and cleanup
move files into ROOT/workflow-checkpoints/.quarantine/ (with a manifest line) and need --apply.

Example: walctl workflow list /var/lib/workflows""", no_args_is_help=True)


def _store(root):
    from ..ops.workflow.store import existing_store

    return existing_store(root)


def _summary(s) -> dict:
    from ..format.workflow import to_json

    d = to_json(s)
    return {"checkpoint_id": d["checkpoint_id"], "workflow_name": d["workflow_name"], "created_at": d["created_at"],
            "completed_waves": d["completed_waves"], "waves": len(d["execution_waves"]),
            "paused_at_block": (d["pause_metadata"] or {}).get("block_id")}


@app.command("list", help="""Checkpoints sorted by (created_at, id); unreadable documents are listed as problems.

Example: walctl workflow list /var/lib/workflows --workflow deploy --json""")
def list_(root: str = typer.Argument(..., help="The store's root directory.", callback=existing_dir),
          workflow: Optional[str] = typer.Option(None, "--workflow", help="Only this workflow_name."),
          json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.workflow-list/1).")):
    from ..ops.workflow.store import existing_store

    store = existing_store(root)
    states = store.list(workflow)
    code = 3 if store.problems else 0
    if json_out:
        emit(json_document("walctl.workflow-list/1", {"root": root, "checkpoints": [_summary(s) for s in states],
                                                      "problems": [p._asdict() for p in store.problems],
                                                      "exit_code": code}))
        raise typer.Exit(code)
    rows = [[x["checkpoint_id"], x["workflow_name"], x["created_at"], f"{x['completed_waves']}/{x['waves']}",
             x["paused_at_block"] or ""] for x in map(_summary, states)]
    for line in plain_table(["id", "workflow", "created_at", "waves", "paused at"], rows, indent=""):
        emit(line)
    for p in store.problems:
        emit(f"problem: {p.file}: {p.reason}")
    raise typer.Exit(code)


@app.command("show", help="""One checkpoint document, validated.

Example: walctl workflow show /var/lib/workflows 3f2a...""")
def show(root: str = typer.Argument(..., help="The store's root directory.", callback=existing_dir),
         checkpoint_id: str = typer.Argument(..., help="The checkpoint id."),
         json_out: bool = typer.Option(False, "--json", help="The document itself, as stored.")):
    import json

    from ..errors import NotClean, UsageError
    from ..format.workflow import to_json

    try:
        state = _store(root).load(checkpoint_id)
    except ValueError as e:  # the document does not validate (an invalid id is a UsageError, exit 2)
        raise NotClean(str(e), checkpoint_id) from None
    if state is None:
        raise UsageError(f"no checkpoint {checkpoint_id} in {root}")
    doc = to_json(state)
    if json_out:
        emit(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        for k in ("checkpoint_id", "workflow_name", "created_at", "completed_waves"):
            emit(f"{k:<16} {doc[k]}")
        emit(f"{'waves':<16} {len(doc['execution_waves'])}")
        emit(f"{'pause':<16} {json.dumps(doc['pause_metadata'], ensure_ascii=False)}")
        emit(f"{'context keys':<16} {', '.join(sorted(doc['context']))}")
    raise typer.Exit(EXIT_OK)


@app.command("pause", help="""Pause a running workflow at a block, awaiting a response. Records pause_metadata
{block_id, prompt, response: null} and the pause time as created_at (durable replace, under the store's
walctl lock: exit 6 when held). The same pause again changes nothing; a checkpoint paused otherwise is
refused (exit 6).

Example: walctl workflow pause /var/lib/workflows 3f2a... --block approve --prompt 'Deploy to prod?'""")
def pause(root: str = typer.Argument(..., help="The store's root directory.", callback=existing_dir),
          checkpoint_id: str = typer.Argument(..., help="The checkpoint id."),
          block: str = typer.Option(..., "--block", help="The block_id that paused execution."),
          prompt: str = typer.Option(..., "--prompt", help="The prompt awaiting a response."),
          json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.workflow-pause/1).")):
    import json

    from ..errors import WalctlError
    from ..format.workflow import to_json
    from ..ops.workflow.steps import pause as run_pause
    from .render import examined_document

    try:
        p = run_pause(root, checkpoint_id, block, prompt)
    except WalctlError as e:  # its own document when it examined the checkpoint; else walctl.error/1
        examined_document("walctl.workflow-pause/1", e, json_out)
        raise
    doc = to_json(p.state)
    if json_out:
        emit(json_document("walctl.workflow-pause/1", {"root": root, "checkpoint_id": checkpoint_id, "applied": True,
                                                       "outcome": "paused", "changed": p.changed, "state": "paused",
                                                       "document": doc, "exit_code": EXIT_OK}))
        raise typer.Exit(EXIT_OK)
    verb = "paused" if p.changed else "already paused (nothing changed):"
    emit(f"{verb} {checkpoint_id} at block {json.dumps(block, ensure_ascii=False)} in wave {doc['completed_waves']} "
         f"at {doc['created_at']}")
    emit(f"awaiting a response to: {json.dumps(prompt, ensure_ascii=False)}")
    raise typer.Exit(EXIT_OK)


@app.command("resume", help="""Resume a paused workflow and print the state to continue from. Validates the
checkpoint, records --response (if given, even empty) in context.blocks.<block_id>.outputs.response, clears
pause_metadata; execution continues at wave completed_waves + 1. Under the store's walctl lock: of two resumes exactly one wins; the other
finds it not paused, or the lock held, and exits 6 with nothing changed.

Example: walctl workflow resume /var/lib/workflows 3f2a... --response yes --json""")
def resume(root: str = typer.Argument(..., help="The store's root directory.", callback=existing_dir),
           checkpoint_id: str = typer.Argument(..., help="The checkpoint id."),
           response: Optional[str] = typer.Option(None, "--response", help="The response to the prompt."),
           json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.workflow-resume/1).")):
    import json

    from ..errors import WalctlError
    from ..format.workflow import to_json
    from ..ops.workflow.steps import resume as run_resume
    from .render import examined_document

    try:
        r = run_resume(root, checkpoint_id, response)
    except WalctlError as e:
        examined_document("walctl.workflow-resume/1", e, json_out)
        raise
    doc, p = to_json(r.state), r.pause
    if json_out:
        emit(json_document("walctl.workflow-resume/1", {
            "root": root, "checkpoint_id": checkpoint_id, "applied": True, "outcome": "resumed", "state": "running",
            "paused": {"block_id": p.block_id, "prompt": p.prompt, "response": p.response},
            "next_wave": r.next_wave, "document": doc, "exit_code": EXIT_OK}))
        raise typer.Exit(EXIT_OK)
    said = lambda text: json.dumps(text, ensure_ascii=False)  # noqa: E731 (one line, quoted, whatever it holds)
    emit(f"resumed {checkpoint_id}: paused at block {said(p.block_id)} awaiting a response to: {said(p.prompt)}")
    emit("response: " + ("none given" if p.response is None else said(p.response)))
    emit(f"continue at wave {r.next_wave} of {len(doc['execution_waves'])}; the state to continue from:")
    emit(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
    raise typer.Exit(EXIT_OK)


@app.command("complete", help="""The workflow finished: completion deletes its checkpoint. It is set aside into
.quarantine/ with a manifest line (action workflow-complete), as delete does. A paused checkpoint is refused (exit 6). Says
whether it existed. Dry run unless --apply; --apply holds the store's walctl lock.

Example: walctl workflow complete /var/lib/workflows 3f2a... --apply""")
def complete(root: str = typer.Argument(..., help="The store's root directory.", callback=existing_dir),
             checkpoint_id: str = typer.Argument(..., help="The checkpoint id."),
             apply: bool = typer.Option(False, "--apply", help="Do it (default: say what would happen)."),
             json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.workflow-complete/1).")):
    from ..errors import WalctlError
    from ..ops.workflow.steps import complete as run_complete
    from .render import examined_document

    try:
        c = run_complete(root, checkpoint_id, apply=apply)
    except WalctlError as e:
        examined_document("walctl.workflow-complete/1", e, json_out)
        raise
    if json_out:
        outcome = ("completed" if apply else "planned") if c.existed else "not-found"
        emit(json_document("walctl.workflow-complete/1", {"root": root, "checkpoint_id": checkpoint_id,
                                                          "applied": apply, "outcome": outcome, "existed": c.existed,
                                                          "state": "running" if c.existed else None,
                                                          "manifest": c.entry, "exit_code": EXIT_OK}))
    elif not c.existed:
        emit(f"no such checkpoint: {checkpoint_id}" + ("" if apply else "; dry run: nothing was changed"))
    elif apply:
        emit(f"completed {checkpoint_id}: its checkpoint set aside as {c.entry['evidence']}")
    else:
        emit(f"would complete {checkpoint_id} (its checkpoint set aside into .quarantine/)")
        emit(f"dry run: nothing was changed; to do it: {safe(rerun('--apply'))}")
    raise typer.Exit(EXIT_OK)


@app.command("delete", help="""Set a checkpoint aside (into .quarantine/, recorded), valid or not. Says whether it
existed, and whether the document validates. Dry run unless --apply; --apply holds the store's walctl lock
and refuses a symlinked entry (exit 7).

Example: walctl workflow delete /var/lib/workflows 3f2a... --apply""")
def delete(root: str = typer.Argument(..., help="The store's root directory.", callback=existing_dir),
           checkpoint_id: str = typer.Argument(..., help="The checkpoint id."),
           apply: bool = typer.Option(False, "--apply", help="Do it (default: say what would happen)."),
           json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.workflow-delete/1).")):
    from ..ops.workflow.store import delete as run_delete

    # Its refusals (an id that is not a name, a link, the lock) come before it reads a document: they are
    # walctl.error/1 (docs/json.md, the failure rule).
    p = run_delete(root, checkpoint_id, apply=apply)
    if json_out:
        emit(json_document("walctl.workflow-delete/1", {"root": root, "checkpoint_id": checkpoint_id,
                                                        "applied": p.applied, "existed": p.existed,
                                                        "problem": p.problem, "manifest": p.entry, "exit_code": EXIT_OK}))
        raise typer.Exit(EXIT_OK)
    invalid = f" (an invalid document: {p.problem})" if p.problem else ""
    if not p.existed:
        emit(f"no such checkpoint: {checkpoint_id}" + ("" if apply else "; dry run: nothing was changed"))
    elif apply:
        emit(f"set aside {checkpoint_id}{invalid} as {p.entry['evidence']}")
    else:
        emit(f"would set aside {checkpoint_id}{invalid}; dry run: nothing was changed")
    raise typer.Exit(EXIT_OK)


@app.command("cleanup", help="""Set aside checkpoints older than --max-age (created_at strictly older). Documents that
do not validate are reported (exit 3), never judged expired nor moved. Dry run unless --apply; --apply holds
the store's walctl lock and refuses a symlinked entry (exit 7, nothing moved).

Example: walctl workflow cleanup /var/lib/workflows --max-age 24h --apply""")
def cleanup(root: str = typer.Argument(..., help="The store's root directory.", callback=existing_dir),
            max_age: str = typer.Option("24h", "--max-age", help="Older than this (a duration: 30d, 12h) expires."),
            apply: bool = typer.Option(False, "--apply", help="Do it (default: list what would go)."),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.workflow-cleanup/1).")):
    from ..ops.workflow.store import cleanup as run_cleanup
    from .units import parse_duration

    # Unreadable documents are its own document's `problems` (exit 3); what stops it before a move (a link,
    # the lock, not a store) is walctl.error/1 (docs/json.md, the failure rule).
    p = run_cleanup(root, parse_duration(max_age, "--max-age") / 3600, apply=apply)
    if json_out:
        emit(json_document("walctl.workflow-cleanup/1", {"root": root, "applied": apply, "expired": list(p.expired),
                                                         "manifest": list(p.entries),
                                                         "problems": [x._asdict() for x in p.problems],
                                                         "exit_code": p.exit_code}))
    else:
        for cid in p.expired:
            emit(f"{'set aside' if apply else 'would set aside'} {cid}")
        if p.expired and not apply:
            emit(f"dry run: nothing was changed; to do it: {safe(rerun('--apply'))}")
        if not p.expired:
            emit("nothing has expired")
        for x in p.problems:
            emit(f"problem: {x.file}: {x.reason} (not judged, not moved)")
    raise typer.Exit(p.exit_code)
