"""Keep pydantic out of start-up on typer 0.28+.

typer 0.28 and later coerce every parameter value through a pydantic TypeAdapter, built when the command
runs; importing pydantic and building the adapters costs ~150 ms, which took `walctl verify` on one small
chunk from 1.1x to 2.8x the `import typer` baseline (benchmarks/cold_start.py). walctl's parameters are
plain str, int, float, bool and lists of them, which need no pydantic: `install` gives each such
parameter a small coercer before the command runs. Anything else (a parser, an enum, a path type, a
clamp) keeps typer's own. typer 0.27 has no run-time coercion layer and nothing is done.

The coercers accept what typer's would and reject what it would (same types, the same --min/--max
bounds), with the same BadParameter error; tests/test_help.py runs the commands through both.
"""
from __future__ import annotations

from typing import Any, get_args, get_origin

_SIMPLE = (str, int, float, bool)


def install(command) -> int:
    """Give every simple parameter of `command` (and its subcommands) a pydantic-free coercer.
    Returns how many parameters were given one (0 on typer 0.27 or when typer's internals moved).
    The --help option is made per context by click; WalctlCommand.get_help_option passes it to `give`."""
    done = sum(install(sub) for sub in getattr(command, "commands", {}).values())
    return done + sum(give(p) for p in command.params)


def give(param) -> bool:
    cls = _coercer()
    desc = getattr(param, "type_descriptor", None)
    if cls is None or desc is None or getattr(param, "_runtime_param", "absent") is not None:
        return False
    info = desc.parameter_info
    if desc.file_annotation is not None or getattr(info, "parser", None) is not None \
            or getattr(info, "clamp", False) or _simple_kind(desc.annotation) is None:
        return False
    try:
        param._runtime_param = cls(parameter_info=info, annotation=desc.annotation)
    except TypeError:  # RuntimeParam's fields changed: leave typer's own
        return False
    return True


_CLASS: list = []


def _coercer():
    if not _CLASS:
        try:
            from typer._coercion import RuntimeParam
        except ImportError:  # typer 0.27: click's own types, no pydantic at run time
            _CLASS.append(None)
        else:
            _CLASS.append(_coercer_class(RuntimeParam))
    return _CLASS[0]


def _simple_kind(annotation) -> tuple[bool, type] | None:
    if annotation in _SIMPLE:
        return (False, annotation)
    if get_origin(annotation) is list:
        args = get_args(annotation)
        if len(args) == 1 and args[0] in _SIMPLE and args[0] is not bool:
            return (True, args[0])
    return None


_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"0", "false", "f", "no", "n", "off"}


def _coercer_class(base):
    from dataclasses import dataclass

    from typer._click.exceptions import BadParameter

    @dataclass(frozen=True)
    class SimpleRuntimeParam(base):
        def _coerce_value(self, value: Any, param, ctx) -> Any:
            many, typ = _simple_kind(self.annotation)
            if many:
                items = value if isinstance(value, (list, tuple)) else [value]
                return [self._one(v, typ, param, ctx) for v in items]
            return self._one(value, typ, param, ctx)

        def _one(self, value, typ, param, ctx):
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if typ is str:
                return str(value)
            if typ is bool:
                if isinstance(value, bool):
                    return value
                text = str(value).strip().lower()
                if text in _TRUE or text in _FALSE:
                    return text in _TRUE
                raise BadParameter(f"{value!r} is not a valid boolean.", ctx=ctx, param=param)
            if isinstance(value, typ) and not isinstance(value, bool):
                number = value
            else:
                text = str(value).strip()
                try:
                    # ASCII digits only: Python's int()/float() also take '١٢', '1_000' and full-width digits
                    if not text.isascii() or "_" in text or (typ is int and not text.lstrip("+-").isdigit()):
                        raise ValueError(text)
                    number = typ(text) if typ is float else int(text, 10)
                except ValueError:
                    raise BadParameter(f"{value!r} is not a valid {'integer' if typ is int else 'float'}.",
                                       ctx=ctx, param=param) from None
            lo, hi = self.parameter_info.min, self.parameter_info.max
            if (lo is not None and number < lo) or (hi is not None and number > hi):
                rng = " and ".join(s for s in (f"x>={lo}" if lo is not None else "",
                                               f"x<={hi}" if hi is not None else "") if s)
                raise BadParameter(f"{number} is not in the range {rng}.", ctx=ctx, param=param)
            return number

    return SimpleRuntimeParam
