from __future__ import annotations

from typing import Optional

import typer

from .render import emit, json_document, use_color
from .targets import existing_path

HELP = """Draw where the damage is: one line per chunk (segment, checkpoint, task log) with its sequence
range and a bar of its bytes, damaged regions marked by class, gaps between chunks, and the pieces set
aside in .quarantine/ with the ranges they came from. Read-only.

The regions are exactly verify's findings (one per finding, same order); the exit code is verify's.
Colour only on a terminal (NO_COLOR respected); the width follows the terminal (COLUMNS, --width).

Example: walctl map /var/lib/agent/wal --svg incident-4711.svg"""


def map_(
    path: str = typer.Argument(..., help="A chunk directory or chunk file (or segments, checkpoints, task logs).", callback=existing_path),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.map/2) on stdout."),
    svg: Optional[str] = typer.Option(None, "--svg", metavar="FILE",
                                      help="Also write the map as a self-contained SVG to FILE (never overwritten)."),
    width: Optional[int] = typer.Option(None, "--width", min=40, max=1000,
                                        help="Columns to fit (default: the terminal's, else 80)."),
    strict: bool = typer.Option(False, "--strict", help="Treat every anomaly as corruption (exit 3), as verify does."),
    archive: Optional[str] = typer.Option(None, "--from", metavar="DEST", help="An archive (file:///path, "
                                          "s3://bucket/prefix; default: $WALCTL_ARCHIVE): when it can heal a "
                                          "finding, next: names the walctl heal command."),
) -> int:
    from ..ops.damagemap import damage_map

    from ..errors import WalctlError

    m = damage_map(path, strict=strict)
    try:
        svg_written = write_svg(m, svg) if svg else None
    except WalctlError as e:
        if not json_out:
            raise
        # --json is one document even on failure: the map, and why the SVG was not written
        emit(json_document("walctl.map/2", dict(m.to_json(), svg=None, exit_code=e.exit_code,
                                                 error={"exit_code": e.exit_code, "reason": str(e)})))
        raise typer.Exit(e.exit_code)
    if json_out:
        body = dict(m.to_json(), svg=svg_written)
        emit(json_document("walctl.map/2", body))
    else:
        render_text(m, width)
        _heal_next(m, archive)
        if svg_written:
            import sys

            from .shown import shown

            sys.stderr.write(f"walctl: wrote {shown(svg_written)}\n")
    raise typer.Exit(m.exit_code)


def _heal_next(m, archive) -> None:
    from ..ops.archive.heal_advice import heal_steps
    from .render import next_lines

    for line in next_lines(heal_steps(m.report, archive)):
        emit(line)


def terminal_width(width: int | None = None) -> int:
    if width:
        return width
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


def render_text(m, width: int | None = None) -> None:
    from .map_text import render_map

    for line in render_map(m, terminal_width(width), use_color()):
        emit(line)


def write_svg(m, target: str) -> str:
    """Rendered here, written by ops (durable create: no half SVG after a crash, never overwritten)."""
    from ..ops.damagemap import save_picture
    from .map_svg import render_svg

    return save_picture(target, render_svg(m))
