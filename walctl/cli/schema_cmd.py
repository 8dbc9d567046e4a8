from __future__ import annotations

import typer

from ..errors import EXIT_OK, UsageError
from .render import emit, plain_table

HELP = """Print the JSON Schema (draft 2020-12) of a --json document or --jsonl record, or list them all.

Every --json document names its schema ("schema": "walctl.verify/2"); a change that breaks consumers
bumps the number (docs/json.md). NAME may omit the walctl. prefix and the /1.

Example: walctl schema
Example: walctl schema walctl.verify/2 > verify.schema.json"""


def schema(
    name: str = typer.Argument(None, metavar="NAME", help="A schema name, e.g. walctl.verify/2."),
) -> int:
    from .. import schemas

    if name is None:
        rows = [[n, schemas.title(n)] for n in schemas.names()]
        for line in plain_table(["schema", "document"], rows, indent=""):
            emit(line)
        raise typer.Exit(EXIT_OK)
    full = schemas.resolve(name)
    if full is None:
        raise UsageError(f"no schema named '{name}' (run 'walctl schema' for the list)")
    emit(schemas.text(full).rstrip("\n"))
    raise typer.Exit(EXIT_OK)
