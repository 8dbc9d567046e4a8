"""What `archive restore` made in OUT, so that a failed or interrupted run can take back exactly that
(and nothing the operator had there), and say what it did.

A path is recorded *before* the step that creates it: an interrupt between the step and the record would
otherwise leave a file no one knows about. Undo removes, newest first, each recorded path that exists (a
step that never happened left nothing); a directory only when it is empty (anything else in it is not
ours). A second Ctrl-C during the undo does not stop it halfway: the step is retried (unlinks and
rmdirs are quick), so the message says what is really there."""
from __future__ import annotations

import os
from typing import NamedTuple

from ...errors import WalctlError
from ...store import durable

RETRIES = 3


class Undo(NamedTuple):
    out: str
    removed: tuple[str, ...]  # files and directories this run made and removed, in removal order
    left: tuple[tuple[str, str], ...]  # (path, why) this run made and could not remove
    out_removed: bool  # OUT itself was made by this run and is gone again
    staging: str
    staging_left: bool

    @property
    def untouched(self) -> bool:
        """Nothing had been written to OUT, and nothing is left."""
        return not self.removed and self.clean

    @property
    def clean(self) -> bool:
        """Nothing of this run is left: OUT is as it was before (absent, or empty)."""
        return not self.left and not self.staging_left

    def summary(self) -> str:
        files = [p for p in self.removed if not p.endswith(os.sep)]
        dirs = len(self.removed) - len(files)
        if self.removed:
            said = (f"removed the {_n(len(files), 'file')} and {_n(dirs, 'directory', 'directories')} it had "
                    f"written in {self.out}" + (f", {self.out} itself included" if self.out_removed else ""))
        else:
            said = f"nothing had been written to {self.out}"
        if self.left:
            said += "; left (could not be removed): " + "; ".join(f"{p} ({why})" for p, why in self.left)
        if self.staging_left:
            said += f"; its staging directory {self.staging} is left"
        return said


def _n(k: int, one: str, many: str | None = None) -> str:
    return f"{k} {one if k == 1 else (many or one + 's')}"


class Made:
    """The paths one restore created beneath OUT, through `fs` (confined to OUT and the staging dir)."""

    def __init__(self, fs, out: str, scratch):
        self.fs, self.out, self.scratch = fs, out, scratch
        self.paths: list[tuple[str, bool]] = []  # (path, is_dir), in creation order

    def dir(self, path: str) -> None:
        if self.fs.exists(path):
            return  # the operator's (an empty OUT they named) or made earlier in this run
        self.paths.append((path, True))
        durable.make_dir(path, self.fs)

    def adopt(self, src: str, dst: str) -> None:
        self.paths.append((dst, False))
        durable.adopt(src, dst, self.fs)

    def create(self, path: str, data) -> None:
        self.paths.append((path, False))
        durable.create_file(path, data, self.fs)

    def undo(self) -> Undo:
        removed, left = [], []
        for path, is_dir in reversed(self.paths):
            why = self._remove(path, is_dir)
            if why is None:
                removed.append(os.path.normpath(path) + os.sep if is_dir else path)
            elif why:
                left.append((path, why))
        self.paths.clear()
        self.scratch.close()
        out_removed = os.path.normpath(self.out) + os.sep in removed
        return Undo(self.out, tuple(removed), tuple(left), out_removed, self.scratch.dir,
                    os.path.exists(self.scratch.dir))

    def _fs_for_dir(self, path: str):
        """OUT itself, when this run made it, is removed from its parent (rmdir: only when empty); the seam
        never removes the root it is confined to."""
        if os.path.normpath(path) != os.path.normpath(self.out):
            return self.fs
        return self.fs.beneath(os.path.dirname(os.path.abspath(self.out)))

    def _remove(self, path: str, is_dir: bool) -> str | None:
        """None: removed; "": nothing there (the step never ran); else why it stays."""
        tried = False
        for _ in range(RETRIES):
            try:
                if not self.fs.exists(path):
                    return None if tried else ""
                if is_dir and self.fs.listdir(path):  # what is left in it, or what someone else put there
                    n = len(self.fs.listdir(path))
                    return f"not empty: {n} {'entry' if n == 1 else 'entries'} in it"
                tried = True
                if is_dir:
                    durable.remove_dir(path, self._fs_for_dir(path))
                else:
                    durable.remove(path, self.fs)
                return None
            except KeyboardInterrupt:  # Ctrl-C again: finish taking back what was made
                continue
            except WalctlError as e:
                return e.reason
        return "interrupted again while removing it"
