"""Substrat's agent tree, as its recovery rebuilds it from the sessions ops/agents/roots.py read: each agent's
parent from its agent.created event, pending messages (enqueued minus delivered), orphans and the sessions
that may be orphans only because something could not be read. Reads nothing itself."""
from __future__ import annotations

from typing import NamedTuple

# The sessions are ops/agents/roots.py's Session tuples; not imported: that module imports this one.


class Agent(NamedTuple):
    agent_id: str
    session_id: str
    name: str | None
    parent_session_id: str | None
    metadata: dict
    pending: tuple[dict, ...]  # enqueued and not delivered, in order


class Tree(NamedTuple):
    agents: dict  # agent_id -> Agent (sessions not terminated, in the tree)
    roots: tuple[str, ...]
    children: dict  # agent_id -> [child agent_ids]
    orphans: tuple[tuple[str, str], ...]  # (session_id, why)
    # orphans that may be orphans only because a line could not be read (their own agent.created, or a
    # parent's, or a parent's session.json) or was set aside: recover terminates them only with --force
    uncertain: frozenset = frozenset()
    # sessions whose agent.terminated is logged but which were not saved terminated (a crash between the two):
    # out of the tree as the runtime leaves them, not orphans; recover finishes the termination
    terminating: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"roots": list(self.roots),
                "agents": [{"agent_id": a.agent_id, "session_id": a.session_id, "name": a.name,
                            "parent_session_id": a.parent_session_id, "children": self.children.get(a.agent_id, []),
                            "metadata": a.metadata, "pending_message_ids": [m["message_id"] for m in a.pending]}
                           for a in self.agents.values()],
                "orphans": [{"session_id": s, "why": w} for s, w in self.orphans],
                "terminating": list(self.terminating)}


def _agent(s, data: dict) -> Agent:
    """The agent a session's log describes: agent.created's data, metadata updates folded in, and the
    messages enqueued but not delivered."""
    meta = dict(data.get("metadata") or {})
    enqueued, delivered = [], set()
    for e in s.events:
        d = e.get("data") or {}
        if e["event"] == "metadata.updated" and "key" in d:
            if d.get("value") is None:
                meta.pop(d["key"], None)
            else:
                meta[d["key"]] = d["value"]
        elif e["event"] == "message.enqueued" and "message_id" in d:
            enqueued.append(d)
        elif e["event"] == "message.delivered" and "message_id" in d:
            delivered.add(d["message_id"])
    return Agent(data.get("agent_id"), s.session_id, data.get("name"), data.get("parent_session_id"),
                 meta, tuple(m for m in enqueued if m["message_id"] not in delivered))


def _drop_unparented(info: dict, by_sid: dict, orphans: list, uncertain: set, set_aside: frozenset,
                     terminating: list) -> None:
    """Parents must resolve to a live session in the tree: an agent whose parent does not is an orphan (and
    so, in turn, are its children), uncertain when an unreadable file or line may be why."""
    changed = True
    while changed:
        changed = False
        for sid, a in list(info.items()):
            p = a.parent_session_id
            if p is not None and p not in info:
                parent = by_sid.get(p)
                if parent is None and p in set_aside:
                    why = f"its parent session {p} was set aside (.quarantine/)"
                    uncertain.add(sid)
                elif parent is None:
                    why = "its parent session does not exist"
                elif parent.meta is None:
                    why = f"its parent session {p} has no readable session.json"
                    uncertain.add(sid)
                elif parent.state == "terminated":
                    why = "its parent session is terminated"
                elif p in terminating:
                    why = f"its parent session {p} was being terminated (agent.terminated is logged)"
                elif p in uncertain:
                    why = f"its parent session {p} is not in the tree only because of an unreadable or set-aside line"
                    uncertain.add(sid)
                else:
                    why = f"its parent session {p} is itself an orphan"
                orphans.append((sid, why))
                del info[sid]
                changed = True


def build_tree(sessions: list, set_aside: frozenset = frozenset()) -> Tree:
    """The tree the runtime loads: the agent from each session's last agent.created (Substrat's recovery keeps
    the last one it reads); `set_aside`: sessions that had something set aside (ops/agents/roots.set_aside_sessions),
    whose loss of an agent.created makes what hangs on them uncertain rather than certain orphans."""
    by_sid = {s.session_id: s for s in sessions}
    info = {}
    orphans = []
    uncertain = set()
    terminating = []
    for s in sessions:
        if s.state == "terminated" or s.meta is None:
            continue
        if any(e["event"] == "agent.terminated" for e in s.events):
            terminating.append(s.session_id)
            continue
        created = [e for e in s.events if e["event"] == "agent.created"]
        if not created:
            if s.unreadable_lines:
                orphans.append((s.session_id, f"no readable agent.created in its log ({s.unreadable_lines} "
                                "unreadable lines: one may be it)"))
                uncertain.add(s.session_id)
            elif s.session_id in set_aside:
                orphans.append((s.session_id, "no agent.created in its log (a line of it was set aside: it may "
                                "have been it)"))
                uncertain.add(s.session_id)
            else:
                orphans.append((s.session_id, "no agent.created in its log"))
            continue
        info[s.session_id] = _agent(s, created[-1].get("data") or {})
    _drop_unparented(info, by_sid, orphans, uncertain, set_aside, terminating)
    for sid in list(info):  # parents that form a cycle: orphans too
        seen, cur = set(), sid
        while cur is not None and cur in info and cur not in seen:
            seen.add(cur)
            cur = info[cur].parent_session_id
        if cur is not None and cur in seen:
            orphans.append((sid, "its parents form a cycle"))
    for sid, _ in orphans:
        info.pop(sid, None)
    agents = {a.agent_id: a for a in info.values()}
    children: dict = {}
    roots = []
    for a in info.values():
        if a.parent_session_id is None:
            roots.append(a.agent_id)
        else:
            children.setdefault(info[a.parent_session_id].agent_id, []).append(a.agent_id)
    return Tree(agents, tuple(roots), children, tuple(orphans), frozenset(uncertain), tuple(terminating))
