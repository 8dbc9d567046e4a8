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


def chunk_path(directory: str, chunk: str) -> str:
    return os.path.join(directory, chunk)
