"""Containment checks made before a mutation starts, so that a refusal changes nothing.

The fs seam already refuses, at the moment of each change, a link at any step of a path, a path outside
the target and a file with other hard links (store/fs.py). A mutation of several steps (a repair that
keeps evidence, writes a manifest line, then truncates) must not be refused half-way through, so it
asks here first about every file it will touch, and about the files every mutation touches: the lock,
`.quarantine/` and its manifest, `.walctl/` and its ledger.
"""
from __future__ import annotations

import os

from ..errors import Refused
from .lock import LOCK_NAME
from ..format.ledger import LEDGER_DIR, LEDGER_NAME
from ..format.seqindex import INDEX_NAME
from .quarantine import MANIFEST, QUARANTINE_DIR

ALWAYS = (LOCK_NAME, QUARANTINE_DIR, f"{QUARANTINE_DIR}/{MANIFEST}", LEDGER_DIR, f"{LEDGER_DIR}/{LEDGER_NAME}",
          f"{LEDGER_DIR}/{INDEX_NAME}")


def refuse_links(directory: str, names, fs, *, what: str = "modify") -> None:
    """Refuses (exit 7, nothing changed) when any of `names` (paths relative to `directory`), the lock
    file, `.quarantine/`, its manifest, `.walctl/` or its ledger is a symbolic link, or a file with other
    hard links."""
    for name in (*ALWAYS, *names):
        path = os.path.join(directory, name)
        if fs.is_symlink(path):
            raise Refused(f"{name} is a symbolic link; walctl never changes anything through a link "
                          f"({what} refused; nothing was changed)", directory)
        if fs.link_count(path) > 1:  # (a directory counts 1: see fs.link_count)
            raise Refused(f"{name} has other hard links (its bytes also live under another name); walctl "
                          f"never changes such a file ({what} refused; nothing was changed)", directory)
