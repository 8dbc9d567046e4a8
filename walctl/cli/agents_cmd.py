from __future__ import annotations

import typer

from .render import emit, json_document

app = typer.Typer(help="""Substrat agent session roots: ROOT/agents/<session_id>/{session.json, events.jsonl,
events.pending}.

verify checks every session and the agent tree; tree shows the recovered tree; pending lists undelivered
messages; recover suspends ACTIVE sessions, terminates orphans, completes pending entries and cuts partial
lines (evidence kept in ROOT/.quarantine/), only with --apply.

Example: walctl agents tree ~/.substrat --json""", no_args_is_help=True)


@app.command("verify", help="""Every session.json and event line, and the tree (orphans, dangling parents, cycles).
Exit codes as walctl-verify(1).

Example: walctl agents verify ~/.substrat""")
def verify(root: str = typer.Argument(..., help="The Substrat root."),
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
def tree(root: str = typer.Argument(..., help="The Substrat root."),
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
def pending(root: str = typer.Argument(..., help="The Substrat root."),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-pending/1).")):
    from ..ops.agents import pending as run_pending

    p = run_pending(root)
    if json_out:
        emit(json_document("walctl.agents-pending/1", {"pending": p}))
    else:
        for agent_id, msgs in p.items():
            for m in msgs:
                emit(f"{agent_id}  {m['message_id']}  from {m.get('sender')}  {str(m.get('payload'))[:60]}")
    raise typer.Exit(0)


@app.command("recover", help="""Suspend ACTIVE sessions, terminate orphans, complete pending entries, cut partial
lines (kept in ROOT/.quarantine/ first). Everything is read before anything is written. Dry run unless --apply.

Example: walctl agents recover ~/.substrat --apply""")
def recover(root: str = typer.Argument(..., help="The Substrat root."),
            apply: bool = typer.Option(False, "--apply", help="Do it (default: print the plan)."),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-recover/1).")):
    from ..ops.agents import recover as run_recover, verify_root, exit_code

    plan, before = run_recover(root, apply=apply)
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
            emit("dry run: nothing was changed; run again with --apply")
    raise typer.Exit(code)
