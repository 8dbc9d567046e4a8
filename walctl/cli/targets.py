"""What a command's path arguments must be: a path that does not exist, or is the wrong kind (a file where
a directory is expected), is exit 6 with its reason (not-found, not-a-directory) for every command,
read-only or not, never an empty "clean" result (docs/contract.md).

Declared on the parameter, `typer.Argument(..., callback=existing_dir)`, and checked once the whole
command line has parsed (`install`), so a usage error (a missing option) is still reported first as exit
2. The check itself lives in store/fs.py (the one place that asks the operating system); ops meet races
and report them with the same reasons.
"""
from __future__ import annotations

import typer

_DEFERRED = "walctl.targets"


def existing_dir(ctx: typer.Context, value):
    """A directory the command reads or changes (a list of them, or None for an absent option)."""
    return _check(ctx, "dir", value)


def existing_path(ctx: typer.Context, value):
    """A file or directory that must exist."""
    return _check(ctx, "path", value)


def existing_archive(ctx: typer.Context, value):
    """An archive destination: a file:// one (or a plain path) must be an existing directory; s3:// is
    asked when used."""
    if isinstance(value, str) and not value.startswith("s3://"):
        from ..store.objstore import FileStore, open_store

        store = open_store(value)
        if isinstance(store, FileStore):
            _check(ctx, "dir", store.root)
    return value


def _check(ctx, kind: str, value):
    if value is None or getattr(ctx, "resilient_parsing", False):  # (shell completion checks nothing)
        return value
    if getattr(ctx.command, "_walctl_targets", False):
        ctx.meta.setdefault(_DEFERRED, []).append((kind, value))
    else:
        _require(kind, value)
    return value


def _require(kind: str, value) -> None:
    from ..store.oserror import require_dir, require_path

    for v in value if isinstance(value, (list, tuple)) else (value,):
        (require_dir if kind == "dir" else require_path)(v)


def install(command) -> None:
    """Every command of this click tree checks its declared paths after parsing, before it runs."""
    for sub in getattr(command, "commands", {}).values():
        install(sub)
    if hasattr(command, "commands") or getattr(command, "_walctl_targets", False):
        return
    invoke = command.invoke

    def checked_invoke(ctx):
        for kind, value in ctx.meta.pop(_DEFERRED, []):
            _require(kind, value)
        return invoke(ctx)

    command.invoke = checked_invoke
    command._walctl_targets = True
