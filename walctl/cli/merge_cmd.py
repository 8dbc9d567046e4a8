from __future__ import annotations

from typing import List, Optional

import typer

from ..errors import EXIT_OK, UsageError, combine_exit_codes
from .render import emit, json_document, warn_line
from .targets import existing_path

HELP = """Merge Spector memory state from several WALs with CRDT rules: commutative, associative, idempotent.

Each input is a V2 WAL directory (folded into per-memory state: timestamp, tags, importance, recall
count, valence, tombstone/consolidated/pinned) or the state.json of an earlier merge. States join field
by field: latest timestamp, union of tags, highest importance and recall count, OR of the flags, and
the valence set last (ties broken by value, so the order of inputs never matters). Writes OUT/state.json
(never over an existing one); --json reports what changed relative to the first input. A damaged WAL is
folded up to its damage, and the exit code says so.

Example: walctl merge agent-a/wal agent-b/wal --out merged/ --json | jq .changes"""


def merge(
    inputs: List[str] = typer.Argument(..., help="Two or more WAL directories or state.json files.", callback=existing_path),
    out: Optional[str] = typer.Option(None, "--out", help="Write OUT/state.json (a new directory or one "
                                                          "without state.json)."),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.merge/1) on stdout."),
) -> int:
    from ..format import memstate as ms
    from ..ops.wal.merge import changes, id_key, load_input, merge_states, write_state

    if len(inputs) < 2:
        raise UsageError("merge needs at least two inputs")
    folded = [load_input(p) for p in inputs]
    merged = merge_states([f.states for f in folded])
    diff = changes(folded[0].states, merged)
    written = write_state(out, merged, list(inputs)) if out is not None else None
    code = combine_exit_codes(f.exit_code for f in folded)
    for f in folded:
        if f.stopped:
            warn_line(f"{f.source}: folded only up to damage at {f.stopped}")
    if json_out:
        emit(json_document("walctl.merge/1", {
            "inputs": [{"path": f.source, "kind": f.kind, "events": f.events, "folded_events": f.folded,
                        "memories": len(f.states), "exit_code": f.exit_code, "stopped": f.stopped} for f in folded],
            "memories": len(merged), "changes": diff, "out": written, "exit_code": code,
            "state": {id_key(m): ms.state_to_json(s) for m, s in sorted(merged.items())} if out is None else None}))
    else:
        for f in folded:
            emit(f"{f.source}: {f.kind}, {len(f.states)} memories" +
                 (f" from {f.folded} of {f.events} events" if f.kind == "wal" else ""))
        emit(f"merged: {len(merged)} memories; relative to {folded[0].source}: {len(diff['added'])} added, "
             f"{len(diff['changed'])} changed" + (f"; wrote {written}" if written else ""))
    return code if code != EXIT_OK else EXIT_OK
