""""What to do next" lines that name the real directory, chunk and range, shell-quoted so they
copy-paste (`walctl salvage /srv/wal --out /srv/wal.salvaged`). Pure strings; the CLI prints them."""
from __future__ import annotations

import os
import shlex


def cmd(*words) -> str:
    """`walctl WORD...` with every word shell-quoted."""
    return " ".join(["walctl"] + [shlex.quote(str(w)) for w in words])


def salvage_out(directory: str) -> str:
    """Where advice suggests salvaging to: beside the directory, never inside it."""
    return os.path.normpath(directory).rstrip(os.sep) + ".salvaged"


def no_ledger_note(directory: str) -> str:
    """verify's one note on a V2 directory without a ledger (written by the Java writer, say)."""
    return (f"absence of a whole chunk is not detectable here (no ledger: a chunk deleted where its neighbours' "
            f"sequences still meet leaves no trace); `{cmd('seal', directory, '--apply')}` makes it so")


def no_ledger(directory: str) -> dict:
    """What the ledger part of verify's report says of a V2 directory that has none, with its note."""
    return {"lines": 0, "sealed": 0, "verified_by_hash": [], "trusted_by_stat": [], "note": no_ledger_note(directory)}


def chunk_path(directory: str, chunk: str) -> str:
    return os.path.join(directory, chunk)


def next_steps(report) -> list[str]:
    """After verify: the commands that take an operator from the alert to the bytes, for this path."""
    from ..errors import EXIT_CORRUPT, EXIT_SEQUENCE, EXIT_TORN
    from .kinds import kind_of

    code, p = report.exit_code, report.path
    if code == 0 or report.kind is None:
        return []
    out = [cmd("inspect", p, "--damaged"), cmd("map", p)]
    if kind_of(report.kind).mend:
        if code == EXIT_TORN:
            out.append(cmd("repair", p) + "   (dry run: shows the cut; add --apply)")
        elif code == EXIT_CORRUPT:
            out.append(cmd("salvage", p, "--out", salvage_out(p)))
        elif code == EXIT_SEQUENCE:
            out.append(cmd("quarantine", "list", p))
    return out
