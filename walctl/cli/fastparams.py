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
    Returns how many parameters were given one (on typer 0.27: how many number types were made ASCII-only).
    The --help option is made per context by click; WalctlCommand.get_help_option passes it to `give`."""
    done = sum(install(sub) for sub in getattr(command, "commands", {}).values())
    return done + sum(give(p) for p in command.params)


def give(param) -> bool:
    cls = _coercer()
    if cls is None:
        return _ascii_click_number(param)
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


def ascii_number(text: str, typ: type) -> bool:
    """ASCII digits only: Python's int()/float() also take '١٢', '1_000' and full-width digits."""
    return text.isascii() and "_" not in text and (typ is float or text.lstrip("+-").isdigit())


def _ascii_click_number(param) -> bool:
    """typer 0.27 converts numbers with click's types, whose int()/float() take non-ASCII digits: check
    the text first (once per type object; click.INT is shared by every parameter, which is what we want)."""
    t = getattr(param, "type", None)
    try:
        from typer._click.types import FloatParamType, IntParamType  # typer 0.27 vendors click
    except ImportError:
        try:
            from click.types import FloatParamType, IntParamType
        except ImportError:
            return False
    if not isinstance(t, (IntParamType, FloatParamType)) or getattr(t, "_walctl_ascii", False):
        return False
    typ, convert = (int if isinstance(t, IntParamType) else float), t.convert

    def strict(value, param=None, ctx=None):
        if isinstance(value, str) and not ascii_number(value.strip(), typ):
            t.fail(f"{value!r} is not a valid {'integer' if typ is int else 'float'}.", param, ctx)
        return convert(value, param, ctx)

    t.convert, t._walctl_ascii = strict, True
    return True


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
                    if not ascii_number(text, typ):
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
