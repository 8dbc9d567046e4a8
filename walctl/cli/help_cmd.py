from __future__ import annotations

import os
from typing import List

import typer

from ..errors import EXIT_OK, UsageError
from .render import emit

HELP = """Show a command's manual page as text, without `man` (the same pages `man walctl-COMMAND` shows).

The pages are shipped inside the package and installed under share/man/man1; `walctl help` alone shows
walctl(1), with the exit codes.

Example: walctl help verify
Example: walctl help quarantine purge"""


def help_(
    command: List[str] = typer.Argument(None, metavar="COMMAND", help="A command, e.g. verify or archive push."),
    width: int = typer.Option(0, "--width", min=0, help="Wrap at N columns (0: the terminal's width, at most 100)."),
) -> int:
    from .roff import render

    name = "walctl" if not command else f"walctl-{command[0]}"
    page = read_page(name)
    if page is None:
        import difflib

        from . import COMMANDS

        near = difflib.get_close_matches(command[0], list(COMMANDS), n=1)
        hint = f"did you mean 'walctl help {near[0]}'?" if near else "see 'walctl --help' for the commands"
        raise UsageError(f"no manual page for '{' '.join(command or [])}' ({hint})")
    _refuse_extra_words(command or [], page)
    if not width:
        import shutil

        width = min(100, shutil.get_terminal_size((80, 24)).columns)
    emit(render(page, width).rstrip("\n"))
    raise typer.Exit(EXIT_OK)


def _refuse_extra_words(command: list[str], page: str) -> None:
    """A word after the command is a subcommand of its group (named in the group's page), or a usage error:
    `walctl help verify extra` is never silently the verify page."""
    from . import COMMANDS

    if len(command) < 2:
        return
    subs = {ln.split()[3] for ln in page.splitlines()
            if COMMANDS.get(command[0], ("", "", ""))[2] == "group" and ln.startswith(f".B walctl {command[0]} ")
            and len(ln.split()) > 3}
    known = command[:2] if command[1] in subs else command[:1]
    extra = command[len(known):]
    if extra:
        raise UsageError(f"help {' '.join(command)}: unexpected {' '.join(extra)!r} after '{' '.join(known)}' "
                         f"(see 'walctl help {command[0]}')")


def page_dirs() -> list[str]:
    """Where the pages are: in the package (a wheel or pipx install), the source tree's man/ (a checkout or
    an editable install), then <prefix>/share/man/man1 (the data-files copy)."""
    import sys

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return [os.path.join(here, "man"), os.path.join(os.path.dirname(here), "man"),
            os.path.join(sys.prefix, "share", "man", "man1")]


def read_page(name: str) -> str | None:
    if not name.replace("-", "").isalnum():  # a command name, never a path
        return None
    for d in page_dirs():
        path = os.path.join(d, f"{name}.1")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return f.read()
    return None
