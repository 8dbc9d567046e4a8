"""Help that copies and pastes: example lines whole at 80 and 120 columns, usage hints with the full command
path, a value name or the choices for every option, whole summaries, a missing argument that names itself;
`walctl help COMMAND` without man; and typer 0.28+'s run-time coercion kept free of pydantic."""
from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

import pytest
import typer.main
from typer.testing import CliRunner

from walctl.cli import app, run
from walctl.cli.helpfmt import summary

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=None)
def _all_commands():
    """(path words, click command) for the root, every group and every command."""
    root = typer.main.get_command(app)
    out = [((), root)]

    def walk(cmd, words):
        for name, sub in getattr(cmd, "commands", {}).items():
            out.append((words + (name,), sub))
            walk(sub, words + (name,))

    walk(root, ())
    return out


@functools.lru_cache(maxsize=None)
def _help(words, columns: int) -> str:
    r = CliRunner().invoke(app, list(words) + ["--help"], env={"COLUMNS": str(columns)}, terminal_width=columns)
    assert r.exit_code == 0, (words, r.output)
    return r.output


def _examples(cmd) -> list[str]:
    return [ln.strip() for ln in (cmd.help or "").splitlines() if ln.strip().startswith("Example")]


@pytest.mark.parametrize("columns", [80, 120])
def test_every_example_line_is_one_whole_line_of_help(columns):
    checked = 0
    for words, cmd in _all_commands():
        examples = _examples(cmd)
        assert examples, f"walctl {' '.join(words)} --help has no example"
        shown = [ln.strip() for ln in _help(words, columns).splitlines()]
        for ex in examples:
            assert ex.replace("\\\\", "\\") in shown or ex in shown, (words, ex)
            checked += 1
        # and no example was glued to the next line or split from it
        assert sum(ln.count("Example:") for ln in shown) == len(examples), words
    assert checked >= 50


@pytest.mark.parametrize("columns", [80, 120])
def test_options_name_their_value_and_show_their_choices(columns):
    for words, cmd in _all_commands():
        text = _help(words, columns)
        assert not re.search(r"<(int|str|float|int range|float range|text|integer)>", text, re.I), (words, text)
    write = _help(("write",), columns)
    assert "--sync [always|batch|none]" in write and "--format [v2|segments]" in write
    assert "--payload [auto|text|hex|base64|json|msgpack|none]" in _help(("inspect",), columns)
    assert "--older-than AGE" in _help(("quarantine", "purge"), columns)
    assert re.search(r"-j, --jobs N\b", _help(("verify",), columns))


@pytest.mark.parametrize("columns", [80, 120])
def test_group_listings_show_each_whole_first_sentence(columns):
    for words, cmd in _all_commands():
        if not getattr(cmd, "commands", None):
            continue
        flat = " ".join(re.sub(r"-\n\s+", "-", _help(words, columns)).split())  # click breaks at hyphens
        for name, sub in cmd.commands.items():
            first = summary(sub.help)
            assert first and not first.endswith("..."), (words, name)
            assert f"{name} {first}" in flat, (words, name, first)


def test_usage_errors_point_at_the_full_command_path(capsys):
    assert run(["quarantine", "purge", "w2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("walctl: error: Missing option '--older-than'") and \
        "(see 'walctl quarantine purge --help')" in err and err.count("\n") == 1
    assert run(["checkpoint", "create", "d", "--level", "99"]) == 2
    assert "(see 'walctl checkpoint create --help')" in capsys.readouterr().err
    assert run(["verify", "--bogus", "x"]) == 2
    assert "(see 'walctl verify --help')" in capsys.readouterr().err


def test_a_missing_argument_names_itself(capsys):
    assert run(["verify"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "walctl: error: Missing argument 'PATH'. (see 'walctl verify --help')\n"
    assert run(["quarantine", "show", "dir"]) == 2
    assert "Missing argument 'NAME'." in capsys.readouterr().err
    assert run(["quarantine"]) == 2  # a group alone still shows its commands
    assert "purge" in capsys.readouterr().out


def test_walctl_help_renders_the_man_page_without_man(capsys):
    assert run(["help", "verify", "--width", "80"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("WALCTL-VERIFY(1)")
    assert "\nNAME\n" in text and "\nEXIT STATUS\n" in text and "\\f" not in text and "\\-" not in text
    assert all(len(ln) <= 80 for ln in text.splitlines() if not ln.strip().startswith("walctl "))
    assert ("       walctl verify --json /var/lib/agent/wal | jq '.paths[].findings[] | {class, file, offset, "
            "reason}'") in text.splitlines()  # an .nf block is kept whole, wider than 80
    assert run(["help", "quarantine", "purge"]) == 0
    assert capsys.readouterr().out.startswith("WALCTL-QUARANTINE(1)")
    assert run(["help"]) == 0
    assert capsys.readouterr().out.startswith("WALCTL(1)")
    assert run(["help", "../etc/passwd"]) == 2
    assert "no manual page" in capsys.readouterr().err


def test_every_man_page_renders_as_text():
    from walctl.cli.roff import render

    for name in sorted(os.listdir(os.path.join(ROOT, "man"))):
        page = open(os.path.join(ROOT, "man", name), encoding="utf-8").read()
        text = render(page, 80)
        assert "\nSYNOPSIS\n" in text and "\nEXIT STATUS\n" in text and "\nEXAMPLES\n" in text, name
        assert not re.search(r"^\.[A-Za-z]", text, re.M) and "\\f" not in text, name


def test_fast_coercion_agrees_with_typers_and_keeps_pydantic_out():
    pytest.importorskip("typer._coercion", reason="typer 0.27 has no run-time coercion layer")
    code = ("import sys; from walctl.cli import run; rc = run(%r); "
            "sys.stderr.write('PYDANTIC=%%s\\n' %% ('pydantic' in sys.modules))")
    cases = [(["verify", os.path.join(ROOT, "examples", "wal-healthy"), "-j", "1"], 0),
             (["verify", os.path.join(ROOT, "examples", "wal-healthy"), "-j", "x"], 2),
             (["verify", os.path.join(ROOT, "examples", "wal-healthy"), "-j", "-1"], 2),
             (["inspect", os.path.join(ROOT, "examples", "wal-healthy"), "--limit", "2", "--type", "REMEMBER",
               "--type", "5"], 0),
             (["verify", "--help"], 0)]
    for argv, want in cases:
        p = subprocess.run([sys.executable, "-c", code % (argv,)], capture_output=True, text=True)
        assert "PYDANTIC=False" in p.stderr, (argv, p.stderr)
        assert "Traceback" not in p.stderr, p.stderr
    from walctl.cli.fastparams import install

    command = typer.main.get_command(app)
    assert install(command) > 150  # every parameter of every command
    # the same values and the same refusals as typer's own coercion
    for argv, want in cases:
        r_fast = _in_process(argv, fast=True)
        r_typer = _in_process(argv, fast=False)
        assert r_fast[:2] == r_typer[:2] and r_fast[0] == want, (argv, r_fast, r_typer)
        assert r_fast[2].split(":")[:3] == r_typer[2].split(":")[:3]  # the same option named; the words may differ


def _in_process(argv, fast: bool):
    """Run walctl with walctl's coercers (fast) or with typer's own (pydantic)."""
    import contextlib
    import io

    import walctl.cli.fastparams as fp

    out, err = io.StringIO(), io.StringIO()
    saved = fp.install
    if not fast:
        fp.install = lambda command: 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(argv)
    finally:
        fp.install = saved
    return code, out.getvalue(), err.getvalue()
