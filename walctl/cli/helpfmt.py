"""Help that copies and pastes, applied to every command in one place (build_app sets these classes).

- Example lines are never re-wrapped: click re-flows every paragraph to the terminal width, which split a
  long example over two lines or glued two examples into one. An example paragraph is marked with
  click's no-rewrap marker (a paragraph starting with a line holding only ``\\b``).
- Summaries in a group's command list are the whole first sentence, not click's 45-column cut.
- Every option that takes a value shows a name for it: its choices when it has them (set as `metavar`
  where the option is declared), else N, S or a word from METAVARS, never click's `<int range>`/`<str>`.
"""
from __future__ import annotations

import re

from typer.core import TyperCommand, TyperGroup

NO_REWRAP = "\b"

# Value names for options that take free text, by option name; choices are declared with the option.
METAVARS = {
    "--out": "PATH", "--from": "FILE", "--report": "FILE", "--state": "FILE", "--log": "DIR",
    "--checkpoints": "DIR", "--archive-to": "DIR", "--checkpoint-meta": "FILE", "--older-than": "AGE",
    "--max-age": "AGE", "--since": "TIME", "--until": "TIME", "--endpoint-url": "URL",
    "--id": "ID", "--namespace": "NAME", "--workflow": "NAME", "--reason": "TEXT", "--entry": "JSON",
    "--type": "TYPE", "--payload-hex": "HEX", "--payload-b64": "BASE64",
}


def keep_examples(text: str | None) -> str | None:
    """Mark every paragraph holding an example (a line starting with 'Example') as not to be re-wrapped."""
    if not text:
        return text
    out = []
    for para in re.split(r"\n\s*\n", text.strip("\n")):
        lines = para.split("\n")
        first = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("Example")), None)
        if first is None or lines[0] == NO_REWRAP:
            out.append(para)
            continue
        if first > 0:
            out.append("\n".join(lines[:first]))
        out.append("\n".join([NO_REWRAP] + lines[first:]))
    return "\n\n".join(out)


def summary(text: str | None) -> str | None:
    """The first sentence of the help, whole, on one line."""
    if not text:
        return None
    para = " ".join(text.strip().split("\n\n")[0].split())
    m = re.match(r"(.+?[.!?])(\s|$)", para)
    return (m.group(1) if m else para).rstrip(".")


def _metavar(param) -> str | None:
    if getattr(param, "param_type_name", "") == "argument":  # PATH, not `path <str>` (typer 0.28+)
        return param.metavar or (param.name or "").upper() or None
    if getattr(param, "param_type_name", "") != "option" or param.is_flag or getattr(param, "count", False):
        return None
    if param.metavar is not None:
        return param.metavar
    desc = getattr(param, "type_descriptor", None)  # typer 0.28+ describes types itself
    if desc is not None:
        choices, kind = desc.choices, getattr(desc.annotation, "__name__", str(desc.annotation))
    else:  # typer 0.27: click types
        choices, kind = getattr(param.type, "choices", None), type(param.type).__name__
    if choices:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in choices) + "]"
    long = max(param.opts, key=len)
    if long in METAVARS:
        return METAVARS[long]
    kind = kind.lower()
    if "int" in kind:
        return "N"
    if "float" in kind:
        return "S"
    return long.lstrip("-").upper()


def _no_type(ctx=None):
    return None


def polish(command) -> None:
    command.help = keep_examples(command.help)
    if command.short_help is None:
        command.short_help = summary(command.help.replace(NO_REWRAP + "\n", "") if command.help else None)
    for p in command.params:
        mv = _metavar(p)
        if mv is not None:
            p.metavar = mv
        if getattr(p, "param_type_name", "") == "argument" and hasattr(p, "display_type_rich"):
            p.display_type_rich = _no_type  # typer 0.28+ lists `PATH <str>`: the name says it
        if getattr(p, "param_type_name", "") == "argument" and hasattr(p, "_usage_display_name"):
            p._usage_display_name = _usage_name.__get__(p)  # typer 0.29 writes `{PATH}...`, `[[NAME]]`


def _usage_name(arg) -> str:
    """`PATH`, `PATH...`, `[NAME]`, `[COMMAND]...`: the usage line as man pages write it."""
    name = arg.display_name_raw.strip("[]")
    name = name if arg.required else f"[{name}]"
    return name + ("..." if arg.nargs != 1 else "")


def _fast_help_option(option):
    if option is not None:
        from .fastparams import give

        give(option)
    return option


class WalctlCommand(TyperCommand):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        polish(self)

    def get_help_option(self, ctx):
        return _fast_help_option(super().get_help_option(ctx))


class WalctlGroup(TyperGroup):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        polish(self)

    def get_help_option(self, ctx):
        return _fast_help_option(super().get_help_option(ctx))


def use_classes(typer_app) -> None:
    """Make every command and group registered on `typer_app` (recursively) use the classes above."""
    typer_app.info.cls = WalctlGroup
    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand):  # typer fills in its own class when none was given
            info.cls = WalctlCommand
    for group in typer_app.registered_groups:
        if getattr(group, "cls", None) in (None, TyperGroup):
            group.cls = WalctlGroup
        use_classes(group.typer_instance)
