"""Docs stay true: docs/format.md against the code's layouts, man pages against the CLI's options,
README's first two commands against .ci/run."""
from __future__ import annotations

import os
import re

import pytest

from walctl.format import checkpoint, ckptmeta, events, segment, v1, v2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMAT_MD = os.path.join(ROOT, "docs", "format.md")
STRUCT_CODES = {"u8": "B", "u16": "H", "u32": "I", "i32": "i", "i64": "q", "u64": "Q", "bytes4": "4s", "bytes16": "16s",
                "bytes32": "32s", "bytes120": "120s"}


def _table_after(marker: str) -> list[list[str]]:
    text = open(FORMAT_MD, encoding="utf-8").read()
    start = text.index(f"<!-- {marker} -->")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if set("".join(cells)) <= set("-: "):
            continue
        rows.append(cells)
    return rows[1:]  # without the heading row


@pytest.mark.parametrize("marker, layout", [
    ("layout: FILE_HEADER", v2.FILE_HEADER),
    ("layout: RECORD_HEADER", v2.RECORD_HEADER),
    ("layout: V1_PREFIX", v1.V1_PREFIX),
    ("layout: V1_TAIL", v1.V1_TAIL),
    ("layout: CHECKPOINT_META", ckptmeta.CHECKPOINT_META),
    ("layout: CHECKPOINT_HEADER", checkpoint.CHECKPOINT_HEADER),
    ("layout: FRAME_LENGTH", segment.FRAME_LENGTH),
    ("layout: SYNC_HEAD", events.SYNC_HEAD),
    ("layout: SYNC_MID", events.SYNC_MID),
])
def test_layout_tables_match_struct_definitions(marker, layout):
    rows = _table_after(marker)
    fmt, expected_offset = ">", 0
    for offset, size, typ, *_ in rows:
        assert int(offset) == expected_offset, f"{marker}: row at {offset} leaves a hole"
        fmt += STRUCT_CODES[typ]
        expected_offset += int(size)
    assert fmt == layout.format
    assert expected_offset == layout.size


def test_constants_table_matches_code():
    for name, value in _table_after("constants"):
        assert getattr(v2, name) == int(value, 0), name


def test_event_type_table_matches_code():
    rows = _table_after("event-types")
    assert [(int(o), n) for o, n in rows] == list(enumerate(v2.EVENT_TYPES))


# ---- man pages ----------------------------------------------------------------------------------

def _commands():
    import typer.main

    from walctl.cli import app

    group = typer.main.get_command(app)
    return group, {name: cmd for name, cmd in group.commands.items()}


def _man(name: str) -> str:
    path = os.path.join(ROOT, "man", f"{name}.1")
    assert os.path.exists(path), f"missing man page {path}"
    return open(path, encoding="utf-8").read()


def _flags(cmd) -> set[str]:
    out = set()
    for sub in getattr(cmd, "commands", {}).values():  # a group: its subcommands' options too
        out |= _flags(sub)
    for p in cmd.params:
        for opt in getattr(p, "opts", []) + getattr(p, "secondary_opts", []):
            if opt.startswith("-") and opt not in ("--help", "-h"):
                out.add(opt)
    return out


def test_every_command_has_a_man_page_with_every_option_and_the_exit_codes():
    group, commands = _commands()
    main_page = _man("walctl")
    for name, cmd in commands.items():
        page = _man(f"walctl-{name}")
        assert f"walctl\\-{name}" in main_page, f"walctl(1) does not list {name}"
        for flag in _flags(cmd):
            roff_flag = flag.replace("-", r"\-")
            assert roff_flag in page or flag in page, f"walctl-{name}(1) lacks {flag}"
        assert ".SH EXIT STATUS" in page and ".SH EXAMPLES" in page
    for flag in {o for p in group.params for o in getattr(p, "opts", []) if o.startswith("-")}:
        if flag not in ("--install-completion", "--show-completion", "--help", "-h"):
            assert flag.replace("-", r"\-") in main_page, f"walctl(1) lacks {flag}"
    for code in range(8):
        assert re.search(rf"^\.IP {code}\b", main_page, re.M), f"walctl(1) exit code {code}"


def test_man_pages_are_roff_with_name_and_synopsis():
    for name in os.listdir(os.path.join(ROOT, "man")):
        page = open(os.path.join(ROOT, "man", name), encoding="utf-8").read()
        assert page.startswith(".TH "), name
        assert ".SH NAME" in page and ".SH SYNOPSIS" in page, name


# ---- README and CI ------------------------------------------------------------------------------

def _readme_commands() -> list[str]:
    text = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    blocks = re.findall(r"```(?:sh|bash|console)?\n(.*?)```", text, re.S)
    return [line.strip() for line in blocks[0].splitlines() if line.strip() and not line.startswith("#")]


def test_readme_starts_with_two_commands_and_ci_runs_the_test_one():
    cmds = _readme_commands()
    assert len(cmds) == 2
    install_run, test = cmds
    assert "pip install" in install_run and "examples/" in install_run
    assert "pip install" in test and "[test]" in test and "pytest" in test
    ci = open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8").read()
    assert test in ci, ".ci/run must run exactly the README's test command"


def test_man_pages_render_without_warnings():
    import shutil
    import subprocess

    if not shutil.which("groff"):
        pytest.skip("groff is not installed")
    for name in sorted(os.listdir(os.path.join(ROOT, "man"))):
        out = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", os.path.join(ROOT, "man", name)],
                             capture_output=True, text=True)
        assert out.returncode == 0 and out.stderr == "", (name, out.stderr)
