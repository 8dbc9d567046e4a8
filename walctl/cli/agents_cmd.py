from __future__ import annotations

import sys
from typing import Optional

import typer

from .render import emit, json_document, rerun, safe
from .targets import existing_dir

app = typer.Typer(help="""Substrat agent session roots: ROOT/agents/<session_id>/{session.json, events.jsonl,
events.pending}.

verify checks every session and the agent tree; tree shows the tree the runtime loads; pending lists
undelivered messages; recover finishes what an ordinary crash left (ACTIVE sessions suspended, orphans and
interrupted terminations terminated, pending entries completed or set aside, partial lines cut, sessions
never saved set aside; evidence kept in ROOT/.quarantine/), only with --apply; set-aside moves one bad line or
session aside. Nothing changes while a live daemon holds ROOT/daemon.lock.

Example: walctl agents tree ~/.substrat --json""", no_args_is_help=True)


@app.command("verify", help="""Every session.json and event line, and the tree (orphans, dangling parents, cycles).
Exit codes as walctl-verify(1).

Example: walctl agents verify ~/.substrat""")
def verify(root: str = typer.Argument(..., help="The Substrat root.", callback=existing_dir),
           json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-verify/2).")):
    from ..ops.agents.roots import exit_code, verify_root

    findings, tree, sessions = verify_root(root)
    code = exit_code(findings)
    if json_out:
        emit(json_document("walctl.agents-verify/2", {"root": root, "exit_code": code, "sessions": len(sessions),
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
    from ..ops.agents.roots import exit_code, verify_root

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
    for sid in t.terminating:
        emit(f"terminating session {sid}: agent.terminated is logged, the session not yet saved terminated "
             "(recover finishes it)")
    raise typer.Exit(exit_code(findings))


@app.command("pending", help="""Undelivered messages per agent (enqueued minus delivered).

Example: walctl agents pending ~/.substrat --json""")
def pending(root: str = typer.Argument(..., help="The Substrat root.", callback=existing_dir),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-pending/2).")):
    from ..ops.agents.roots import exit_code, verify_root

    findings, t, _ = verify_root(root)
    p = {a.agent_id: list(a.pending) for a in t.agents.values()}
    code = exit_code(findings)  # a damaged root's pending list may be incomplete: the exit code says so
    if json_out:
        emit(json_document("walctl.agents-pending/2", {"root": root, "exit_code": code, "pending": p,
                                                       "findings": [f.to_json() for f in findings]}))
    else:
        for agent_id, msgs in p.items():
            for m in msgs:
                emit(f"{agent_id}  {m['message_id']}  from {m.get('sender')}  {str(m.get('payload'))[:60]}")
        for f in findings:
            if f.exit_code:
                sys.stderr.write(f"walctl: warning: {f.cls}: {f.one_line()}\n")
    raise typer.Exit(code)


@app.command("recover", help="""Suspend ACTIVE sessions, terminate orphans, finish interrupted terminations, complete
pending entries (a pending file that is not one whole event line was never acknowledged: it is set aside and
nothing is appended), cut partial lines, set aside session directories never saved (no session.json). Every
byte replaced, cut or removed is kept in ROOT/.quarantine/ first. Everything is read before anything is
written; refused while a live daemon holds ROOT/daemon.lock (exit 6). Dry run unless --apply. Exits with the
state after it ran, as verify would.

Example: walctl agents recover ~/.substrat --apply""")
def recover(root: str = typer.Argument(..., help="The Substrat root.", callback=existing_dir),
            apply: bool = typer.Option(False, "--apply", help="Do it (default: print the plan)."),
            force: bool = typer.Option(False, "--force", help="Also terminate sessions that may be orphans only "
                                       "because a line or session.json could not be read or was set aside."),
            json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-recover/2).")):
    from ..ops.agents.roots import exit_code, verify_root
    from ..ops.agents.mend import recover as run_recover

    # A refusal before anything changed (a live daemon, a link, walctl's own lock) ends at the CLI edge:
    # walctl.error/1. Once it ran, recover prints its own document, on failure too.
    r = run_recover(root, apply=apply, force=force)
    after = verify_root(root)[0] if apply else r.findings
    code = r.error.exit_code if r.error else exit_code(after)
    outcome = "dry-run" if not apply else "failed" if r.error else "recovered" if code == 0 else "incomplete"
    if json_out:
        doc = {"root": root, "applied": apply, "outcome": outcome, "exit_code": code, "done": r.done,
               "plan": [a._asdict() for a in r.plan], "findings": [f.to_json() for f in after]}
        if r.error:
            doc["message"] = str(r.error)
        emit(json_document("walctl.agents-recover/2", doc))
    else:
        for i, a in enumerate(r.plan):
            verb = "would" if not apply else "done" if i < r.done else "not done"
            emit(f"{verb} {a.action} {a.session_id}: {safe(a.detail)}")
        if not r.plan:
            emit("nothing to recover")
        elif not apply:
            emit(f"dry run: nothing was changed; to do it: {safe(rerun('--apply'))}")
        for f in after if apply and not r.error else ():
            if f.exit_code:
                sys.stderr.write(f"walctl: {f.severity}: {f.cls}: {safe(f.one_line())}\n")
    if r.error:
        raise r.error  # the one error line, at the CLI edge; the document above is this run's
    raise typer.Exit(code)


@app.command("set-aside", help="""Set aside one events.jsonl line (--line N: the log is rewritten without it), when
it is unreadable or one of several agent.created lines (the runtime uses the last), or a whole session
directory whose session.json is unreadable or missing (--session: every file is kept, then the directory is
removed; the runtime skips a session without session.json, and an unreadable one stops the whole root). The
old files are kept in ROOT/.quarantine/ first, each with a manifest line; the new log is written by durable
replace. Nothing readable and single is set aside. Refused while a live daemon holds ROOT/daemon.lock
(exit 6). Dry run unless --apply; --apply needs --force because it rewrites acknowledged history. Exits with
the state after it ran: a set-aside that leaves the root clean exits 0. When a session is left without an
agent.created, it and the sessions that name it as their parent become orphans (a warning says so): recover
keeps them suspended, recover --apply --force terminates them.

Example: walctl agents set-aside ~/.substrat 1860aabdf4444c9ca26cda431ac886de --line 4 --apply --force""")
def set_aside(root: str = typer.Argument(..., help="The Substrat root.", callback=existing_dir),
              session_id: str = typer.Argument(..., help="The session id (its directory name, 32 hex digits)."),
              line: Optional[int] = typer.Option(None, "--line", help="The events.jsonl line number (from 1)."),
              session: bool = typer.Option(False, "--session", help="Set aside the session directory (its "
                                           "session.json unreadable or missing)."),
              apply: bool = typer.Option(False, "--apply", help="Do it (default: print the plan)."),
              force: bool = typer.Option(False, "--force", help="Needed with --apply: history is rewritten."),
              json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.agents-set-aside/1).")):
    from ..errors import EXIT_REFUSED, WalctlError
    from ..ops.advice import cmd
    from ..ops.agents.roots import exit_code, verify_root
    from ..ops.agents.aside import set_aside as run_set_aside

    try:
        r = run_set_aside(root, session_id, line=line, session=session, apply=apply, force=force)
    except WalctlError as e:
        if json_out and e.exit_code == EXIT_REFUSED:  # a lock or a missing path: walctl.error/1 at the edge
            emit(json_document("walctl.agents-set-aside/1", {"root": root, "outcome": "refused", "applied": False,
                                                             "exit_code": e.exit_code, "message": str(e)}))
        raise
    # The state after it ran, as recover and repair: a dry run changed nothing, so that is the state before.
    code = exit_code(verify_root(root)[0])
    what = f"line {r.line} of agents/{r.session_id}/{r.target} (offset {r.offset}, {r.length} bytes)" if r.line \
        else f"the session directory agents/{r.session_id} ({', '.join(r.files) or 'empty'})"
    said = f"{'set aside' if r.applied else 'would set aside'} {what}: {r.why}"
    if json_out:
        emit(json_document("walctl.agents-set-aside/1", dict(r.to_json(), root=root, exit_code=code, message=said,
                                                             outcome="applied" if r.applied else "dry-run")))
    else:
        emit(safe(said))
        if r.applied:
            kept = r.evidence or "nothing to keep"
            emit(f"the old {'file is' if r.line else 'files are'} kept in .quarantine/ ({kept})")
        else:
            emit(f"dry run: nothing was changed; to do it: {safe(rerun('--apply', '--force'))}")
    for w in r.warnings:
        sys.stderr.write(f"walctl: warning: {safe(w)}\n")
    if r.warnings and r.applied and not json_out:
        emit(f"next: {safe(cmd('agents', 'recover', root, '--apply', '--force'))}   (terminates those orphans; "
             "without --force recover keeps them suspended)")
    raise typer.Exit(code)
