"""The command line: parse -> one ops call -> render -> exit code. Errors are caught once, here."""
from __future__ import annotations

import os
import signal
import sys

import typer
from typer._click import exceptions as click_exceptions  # typer 0.27 vendors click

from ..version import __version__
from ..errors import EXIT_ENVIRONMENT, EXIT_OK, EXIT_USAGE, OutputClosed, WalctlError, exit_table
from .render import error_line

EXIT_TABLE = exit_table()
ROOT_HELP = ("Verify, inspect and mend write-ahead logs, checkpoints and JSON-lines logs.\n\n\b\n"
             + EXIT_TABLE + "\n\nExample: walctl verify /var/lib/agent/wal --json\n"
             "Example: walctl help verify")

# name -> (module, attribute, kind). Only the command being run is imported and built: typer inspects
# every registered function at start-up, and verify's cold start is part of the product.
COMMANDS = {
    "verify": ("verify_cmd", "verify", "command"),
    "inspect": ("inspect_cmd", "inspect", "command"),
    "map": ("map_cmd", "map_", "command"),
    "stats": ("stats_cmd", "stats", "command"),
    "write": ("write_cmd", "write", "command"),
    "repair": ("repair_cmd", "repair", "command"),
    "seal": ("seal_cmd", "seal", "command"),
    "cut": ("cut_cmd", "cut", "command"),
    "salvage": ("salvage_cmd", "salvage", "command"),
    "migrate": ("migrate_cmd", "migrate", "command"),
    "heal": ("heal_cmd", "heal", "command"),
    "compact": ("compact_cmd", "compact", "command"),
    "quarantine": ("quarantine_cmd", "app", "group"),
    "checkpoint": ("checkpoint_cmd", "app", "group"),
    "recover": ("recover_cmd", "recover", "command"),
    "replay": ("replay_cmd", "replay", "command"),
    "import": ("import_cmd", "import_", "command"),
    "merge": ("merge_cmd", "merge", "command"),
    "fingerprint": ("fingerprint_cmd", "fingerprint", "command"),
    "archive": ("archive_cmd", "app", "group"),
    "workflow": ("workflow_cmd", "app", "group"),
    "tasklog": ("tasklog_cmd", "app", "group"),
    "agents": ("agents_cmd", "app", "group"),
    "help": ("help_cmd", "help_", "command"),
    "schema": ("schema_cmd", "schema", "command"),
}

_debug = {"on": bool(os.environ.get("WALCTL_DEBUG"))}


def _version(value: bool):
    if value:
        print(f"walctl {__version__}")
        print(dependency_line())
        raise typer.Exit(EXIT_OK)


def dependency_line() -> str:
    """The versions walctl runs with. crcmod computes CRC-32C of short ledger lines only (the bulk CRC-32 is
    zlib's), so its pure-Python fallback is stated, not warned about."""
    from importlib import metadata

    def ver(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "missing"

    try:
        import importlib

        # crcmod's package re-exports names; the flag lives on its crcmod.crcmod submodule
        ext = "C extension" if importlib.import_module("crcmod.crcmod")._usingExtension else "pure Python"
    except ImportError:
        ext = "not importable"
    return (f"python {sys.version.split()[0]}; typer {ver('typer')}; rich {ver('rich')}; "
            f"zstandard {ver('zstandard')}; msgpack {ver('msgpack')}; crcmod {ver('crcmod')} ({ext})")


def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
    debug: bool = typer.Option(False, "--debug", help="Show a Python traceback on internal errors."),
):
    """walctl: durability toolkit for WAL chunks, checkpoints and JSON-lines logs."""
    if debug:
        _debug["on"] = True


def build_app(only: str | None = None) -> typer.Typer:
    """The typer app with every command, or with just `only` (what running one command needs)."""
    import importlib

    from .helpfmt import use_classes

    app = typer.Typer(name="walctl", help=ROOT_HELP, no_args_is_help=True, add_completion=True,
                      pretty_exceptions_enable=False, rich_markup_mode=None,
                      context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
    app.callback()(_root)
    for name, (module, attr, kind) in COMMANDS.items():
        if only is not None and name != only:
            continue
        mod = importlib.import_module(f".{module}", __name__)
        if kind == "group":
            app.add_typer(getattr(mod, attr), name=name)
        else:
            # no no_args_is_help: `walctl verify` alone says which argument is missing (exit 2)
            app.command(name, help=mod.HELP)(getattr(mod, attr))
    use_classes(app)
    return app


def __getattr__(name: str):
    if name == "app":  # the whole CLI, for tests and documentation tools
        return build_app()
    raise AttributeError(name)


def _command_in(args: list[str]) -> str | None:
    for a in args:
        if not a.startswith("-"):
            return a if a in COMMANDS else None
    return None


def _command_words(args: list[str]) -> str | None:
    """"repair", "quarantine restore": the command a failed run was, for its error document."""
    name = _command_in(args)
    if name is None:
        return None
    if COMMANDS[name][2] == "group":
        rest = [a for a in args[args.index(name) + 1:] if not a.startswith("-")]
        if rest:
            return f"{name} {rest[0]}"
    return name


def _fail(args: list[str], code: int, reason: str, message: str, path=None, offset=None, json_ok=True) -> int:
    """The one place a failed run is reported: the one-line error on stderr and, with --json, the one
    document on stdout (unless the command already printed its own)."""
    from .render import DOCUMENTS, emit, error_document

    line = ": ".join(str(p) for p in (path, None if offset is None else f"offset {offset}") if p is not None)
    error_line(f"{line}: {message}" if line else message)
    if json_ok and "--json" in args and not DOCUMENTS["built"]:
        emit(error_document(_command_words(args), code, reason, message, path, offset))
    return code


def _takes_json(e) -> bool:
    ctx = getattr(e, "ctx", None)
    return ctx is not None and any("--json" in getattr(p, "opts", ()) for p in ctx.command.params)


def main(argv: list[str] | None = None) -> int:
    """Console entry point. Returns (and exits with) the documented exit code."""
    if hasattr(signal, "SIGPIPE"):
        # `walctl inspect ... | head` should end quietly, like any Unix filter.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    code = run(argv)
    sys.exit(code)


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it


def _interrupted() -> int:
    from .progress import interrupted

    sys.stderr.write(f"walctl: {interrupted()}\n")  # what Ctrl-C left behind, and that the next run cleans it
    return EXIT_INTERRUPTED


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def run(argv: list[str] | None = None) -> int:
    """Runs one command with its text output passed through render.SafeStream (terminal safety)."""
    from .render import SafeStream

    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(out), SafeStream(err)
    try:
        return _run(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _run(argv: list[str] | None = None) -> int:
    from ..store.root import forget_followed

    forget_followed()  # (tests run many commands in one process)
    try:
        return _run_command(argv)
    finally:
        _say_followed()


def _say_followed() -> None:
    """`target: /a -> /b` on stderr for each target this run reached through a symbolic link: it was
    followed once, when the run opened it, and everything was done there (store/root.py)."""
    from ..store.root import FOLLOWED

    for typed, resolved in FOLLOWED:
        sys.stderr.write(f"target: {typed} -> {resolved}\n")


def _prepared(args: list[str]) -> list[str]:
    """The command line as the commands parse it: old option spellings rewritten, with a note (advice shows
    only the new ones), and --progress=json taken as progress in JSON lines on stderr."""
    from .aliases import rewrite
    from .progress import take_json_flag

    return take_json_flag(rewrite(args))


def _run_command(argv: list[str] | None = None) -> int:
    from .render import DOCUMENTS

    from .render import RUN

    DOCUMENTS["built"] = 0  # (tests run many commands in one process)
    args = _prepared(sys.argv[1:] if argv is None else list(argv))
    RUN["argv"] = [a for a in args if a != "--debug"]
    if "--debug" in args:
        _debug["on"] = True
    command = typer.main.get_command(build_app(_command_in(args)))
    from .fastparams import install

    install(command)  # typer 0.28+: no pydantic at start-up for walctl's plain parameters
    from . import targets

    targets.install(command)  # a missing or wrong path is exit 6, after the usage errors
    try:
        rv = command.main(args=args, prog_name="walctl", standalone_mode=False)
        if rv == EXIT_INTERRUPTED:  # typer 0.28+ turns Ctrl-C into a silent Exit(130); no command exits 130
            return _interrupted()
        return rv if isinstance(rv, int) else 0
    except click_exceptions.UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError" and e.ctx is not None:
            sys.stdout.write(e.ctx.get_help() + "\n")  # `walctl` or `walctl verify` alone: the help
            return EXIT_USAGE
        # the full path (`walctl quarantine purge --help`), not the last word; an option's missing value is
        # reported from the root's context, so the command comes from the words typed
        path = e.ctx.command_path if e.ctx is not None and e.ctx.command_path else "walctl"
        if path == "walctl" and _command_words(args):
            path = f"walctl {_command_words(args)}"
        return _fail(args, EXIT_USAGE, "usage", f"{e.format_message()} (see '{path} --help')",
                     json_ok=_takes_json(e))
    except click_exceptions.ClickException as e:
        return _fail(args, e.exit_code, "usage", e.format_message(), json_ok=_takes_json(e))
    except (typer.Abort, KeyboardInterrupt):
        return _interrupted()
    except WalctlError as e:
        return _fail(args, e.exit_code, e.kind, e.reason, e.path, e.offset)
    except OutputClosed:
        # The reader of our output went away (`| head`): end quietly, as SIGPIPE would.
        _quiet_stdout()
        return 128 + signal.SIGPIPE if hasattr(signal, "SIGPIPE") else EXIT_ENVIRONMENT
    except MemoryError:
        return _fail(args, EXIT_ENVIRONMENT, "io", "out of memory")
    except OSError as e:
        if _debug["on"]:
            raise
        from ..store.oserror import os_problem

        p = os_problem(e, None)  # the one mapping; a path only when the error names one, never a made-up one
        return _fail(args, EXIT_ENVIRONMENT, p.kind, p.reason, p.path)
    except Exception as e:  # the one place: never show a traceback to an operator unless asked
        if _debug["on"]:
            raise
        return _fail(args, EXIT_ENVIRONMENT, "internal",
                     f"internal error: {type(e).__name__}: {e} (run with --debug for a traceback)")
