from __future__ import annotations

import sys
from typing import Optional

import typer

from .render import emit, json_document, rerun, safe
from .targets import existing_dir

app = typer.Typer(help="""Substrat agent session roots: ROOT/agents/<session_id>/{session.json, events.jsonl,
events.pending}.

verify checks every session and the agent tree; tree shows the recovered tree; pending lists undelivered
messages; recover suspends ACTIVE sessions, terminates orphans, completes pending entries and cuts partial
lines (evidence kept in ROOT/.quarantine/), only with --apply.

Example: walctl agents tree ~/.substrat --json""", no_args_is_help=True)


@app.command("verify", help="""Every session.json and event line, and the tree (orphans, dangling parents, cycles).
Exit codes as walctl-verify(1).

Example: walctl agents verify ~/.substrat""")
def verify(root: str = typer.Argument(..., help="The Substrat root.", callback=existing_dir),
           json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-verify/1).")):
    from ..ops.agents import exit_code, verify_root

    findings, tree, sessions = verify_root(root)
    code = exit_code(findings)
    if json_out:
        emit(json_document("walctl.agents-verify/1", {"root": root, "exit_code": code, "sessions": len(sessions),
                                                      "agents": len(tree.agents),
                                                      "findings": [f.to_json() for f in findings]}))
    else:
        emit(f"{root}: {len(sessions)} sessions, {len(tree.agents)} agents in the tree (exit {code})")
        for f in findings:
            emit(f"  {f.severity:<7} {f.cls}  {f.one_line()}")
    raise typer.Exit(code)


@app.command("tree", help="""The agent tree as recovery rebuilds it, with pending-message counts.

Example: walctl agents tree ~/.substrat --json""")
def tree(root: str = typer.Argument(..., help="The Substrat root.", callback=existing_dir),
         json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-tree/1).")):
    from ..ops.agents import exit_code, verify_root

    findings, t, _ = verify_root(root)
    if json_out:
        emit(json_document("walctl.agents-tree/1", t.to_json()))
        raise typer.Exit(exit_code(findings))

    def show(agent_id, depth):
        a = t.agents[agent_id]
        emit(f"{'  ' * depth}{a.name or '?'} ({agent_id[:8]}, session {a.session_id[:8]}) pending {len(a.pending)}")
        for child in sorted(t.children.get(agent_id, []), key=lambda c: t.agents[c].name or ""):
            show(child, depth + 1)

    for r in sorted(t.roots, key=lambda c: t.agents[c].name or ""):
        show(r, 0)
    for sid, why in t.orphans:
        emit(f"orphan session {sid}: {why}")
    raise typer.Exit(exit_code(findings))


@app.command("pending", help="""Undelivered messages per agent (enqueued minus delivered).

Example: walctl agents pending ~/.substrat --json""")
def pending(root: str = typer.Argument(..., help="The Substrat root.", callback=existing_dir),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-pending/1).")):
    from ..ops.agents import exit_code, verify_root

    findings, t, _ = verify_root(root)
    p = {a.agent_id: list(a.pending) for a in t.agents.values()}
    code = exit_code(findings)  # a damaged root's pending list may be incomplete: the exit code says so
    if json_out:
        emit(json_document("walctl.agents-pending/1", {"root": root, "exit_code": code, "pending": p,
                                                       "findings": [f.to_json() for f in findings]}))
    else:
        for agent_id, msgs in p.items():
            for m in msgs:
                emit(f"{agent_id}  {m['message_id']}  from {m.get('sender')}  {str(m.get('payload'))[:60]}")
        for f in findings:
            if f.exit_code:
                sys.stderr.write(f"walctl: warning: {f.cls}: {f.one_line()}\n")
    raise typer.Exit(code)


@app.command("recover", help="""Suspend ACTIVE sessions, terminate orphans, complete pending entries, cut partial
lines (kept in ROOT/.quarantine/ first). Everything is read before anything is written. Dry run unless --apply.

Example: walctl agents recover ~/.substrat --apply""")
def recover(root: str = typer.Argument(..., help="The Substrat root.", callback=existing_dir),
            apply: bool = typer.Option(False, "--apply", help="Do it (default: print the plan)."),
            force: bool = typer.Option(False, "--force", help="Also terminate sessions that may be orphans only "
                                       "because a line or session.json could not be read."),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-recover/1).")):
    from ..errors import WalctlError
    from ..ops.agents import exit_code, verify_root
    from ..ops.agents_mend import recover as run_recover

    try:
        plan, before = run_recover(root, apply=apply, force=force)
    except WalctlError as e:
        if json_out:  # one document on refusal too; the error line still goes to stderr at the edge
            emit(json_document("walctl.agents-recover/1", {"root": root, "applied": False, "outcome": "refused",
                                                           "message": str(e), "exit_code": e.exit_code, "plan": []}))
        raise
    after = verify_root(root)[0] if apply else before
    code = exit_code([f for f in after if f.cls != "active-session"])
    if json_out:
        emit(json_document("walctl.agents-recover/1", {"root": root, "applied": apply, "exit_code": code,
                                                       "plan": [a._asdict() for a in plan]}))
    else:
        for a in plan:
            emit(f"{'done' if apply else 'would'} {a.action} {a.session_id}: {a.detail}")
        if not plan:
            emit("nothing to recover")
        elif not apply:
            emit(f"dry run: nothing was changed; to do it: {safe(rerun('--apply'))}")
    raise typer.Exit(code)


@app.command("set-aside", help="""Set aside one unreadable events.jsonl line (--line N: the log is rewritten without
it) or an unreadable session.json (--session: removed, so the runtime skips the session instead of failing
the whole root). The whole old file is kept in ROOT/.quarantine/ first, with a manifest line; the new log is
written by durable replace. Only a line or file walctl cannot read is set aside. Dry run unless --apply;
--apply needs --force because it rewrites acknowledged history.

Example: walctl agents set-aside ~/.substrat 1860aabdf4444c9ca26cda431ac886de --line 4 --apply --force""")
def set_aside(root: str = typer.Argument(..., help="The Substrat root.", callback=existing_dir),
              session_id: str = typer.Argument(..., help="The session id (its directory name, 32 hex digits)."),
              line: Optional[int] = typer.Option(None, "--line", help="The events.jsonl line number (from 1)."),
              session: bool = typer.Option(False, "--session", help="Set aside session.json."),
              apply: bool = typer.Option(False, "--apply", help="Do it (default: print the plan)."),
              force: bool = typer.Option(False, "--force", help="Needed with --apply: history is rewritten."),
              json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-set-aside/1).")):
    from ..errors import WalctlError
    from ..ops.agents import exit_code, verify_root
    from ..ops.agents_mend import set_aside as run_set_aside

    try:
        r = run_set_aside(root, session_id, line=line, session=session, apply=apply, force=force)
    except WalctlError as e:
        if json_out:
            emit(json_document("walctl.agents-set-aside/1", {"root": root, "outcome": "refused", "applied": False,
                                                             "exit_code": e.exit_code, "message": str(e)}))
        raise
    # The state after it ran, as recover and repair: a dry run changed nothing, so that is the state before.
    code = exit_code(verify_root(root)[0])
    if json_out:
        emit(json_document("walctl.agents-set-aside/1", dict(r.to_json(), root=root, exit_code=code,
                                                             outcome="applied" if r.applied else "dry-run")))
    else:
        where = f"line {r.line} of" if r.line else "the whole"
        emit(f"{'set aside' if r.applied else 'would set aside'} {where} agents/{r.session_id}/{r.target} "
             f"(offset {r.offset}, {r.length} bytes): {r.why}")
        if r.applied:
            emit(f"the old file is kept as {r.evidence}")
        else:
            emit(f"dry run: nothing was changed; to do it: {safe(rerun('--apply', '--force'))}")
    raise typer.Exit(code)
