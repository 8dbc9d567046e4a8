"""A directory a command builds beside its output (OUT.tmp, salvage's and migrate's), marked as its own by
a mark file written first: a rerun after a crash may clear what the mark proves is ours, and nothing
else. The one rule for both commands (the salvage sweep found the case of a crash while the mark itself
was being written, which migrate then refused for good)."""
from __future__ import annotations

import os

from ..errors import Refused
from . import durable


def clear_marked(tmp: str, mark: str, command: str, fs, keep_dir: bool = False) -> None:
    """Clears a directory an interrupted `command` left (it holds `mark`). One holding nothing, or only the
    mark's staging file, is a crash before the mark was durable: nothing in it to lose. `keep_dir`: OUT
    itself, whose absence of the mark means it is the operator's (or a finished copy), never ours to
    touch. Only what these commands write is removed: files, and a directory of files (a copy's ledger)."""
    if not fs.exists(tmp) or fs.stat(tmp).kind != "dir":
        return
    names = {e.name for e in fs.listdir(tmp)}
    if mark not in names:
        if keep_dir:
            return
        if names <= {mark + durable.TMP_SUFFIX}:  # interrupted while the mark itself was written
            for n in names:
                durable.remove(os.path.join(tmp, n), fs)
            durable.remove_dir(tmp, fs)
            return
        raise Refused(f"exists and was not left by walctl {command}; nothing was changed", tmp)
    for e in fs.listdir(tmp):  # copies of records that are still in the sources: safe to clear
        if e.name == mark:
            continue
        if e.kind == "dir":  # the copy's ledger
            for f in fs.listdir(e.path):
                durable.remove(f.path, fs)
            durable.remove_dir(e.path, fs)
        else:
            durable.remove(e.path, fs)
    durable.remove(os.path.join(tmp, mark), fs)
    if keep_dir:
        durable.remove_dir(tmp, fs)  # OUT: the rerun's copy takes the name again
