"""The finding-class table (walctl/ops/classes.py) and the exit-code table (walctl/errors.py: EXITS) are the
one place their vocabularies live: no class literal elsewhere, help and the man pages agree with EXITS, and
every finding walctl reports over the examples is a row of the table, with an exit code the row allows."""
from __future__ import annotations

import ast
import os
import re
import shutil

import pytest

from walctl.errors import EXIT_PRECEDENCE, EXITS, combine_exit_codes, exit_table, precedence_text
from walctl.ops import classes as K
from walctl.ops.findings import Finding

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "walctl")
TABLE = os.path.join(PKG, "ops", "classes.py")
# format/ is pure and below ops/: it names its own problems (a task log's `rule`, `corrupt-line`...), which
# ops/tasklog/logs.py turns into findings; the table lists them (test_format_problem_kinds_are_rows).
FORMAT_VOCABULARY = {os.path.join(PKG, "format", "tasklog.py")}


def _modules():
    for dirpath, _, files in os.walk(PKG):
        for name in sorted(files):
            path = os.path.join(dirpath, name)
            if name.endswith(".py") and path != TABLE and path not in FORMAT_VOCABULARY:
                yield path, ast.parse(open(path, encoding="utf-8").read(), path)


def _is_cls(node) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "cls"


def _literals(node):
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_no_class_literal_outside_the_table():
    """A hyphenated class name is nowhere a literal; a one-word one (`sequence`, `anomaly`: words other
    vocabularies share) is never a Finding's class argument nor compared with a `.cls`."""
    distinct = {name for name in K.CLASSES if "-" in name}
    bad = []
    for path, tree in _modules():
        rel = os.path.relpath(path, ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in distinct:
                bad.append(f"{rel}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding" and node.args:
                bad += [f"{rel}:{node.lineno}: Finding({v!r}, ...)" for v in _literals(node.args[0])]
            elif isinstance(node, ast.Compare) and any(map(_is_cls, [node.left, *node.comparators])):
                bad += [f"{rel}:{node.lineno}: .cls vs {v!r}" for v in _literals(node) if v in K.CLASSES]
    assert bad == [], "name the class by its constant in walctl/ops/classes.py"


def test_format_problem_kinds_are_rows():
    text = open(os.path.join(PKG, "format", "tasklog.py"), encoding="utf-8").read()
    kinds = set(re.findall(r'"([a-z][a-z-]+)"', text)) & set(K.CLASSES)
    assert {"rule", "sequence", "ts-backwards", "unsupported-version", "corrupt-line"} <= kinds


def test_the_table_is_well_formed():
    codes = {e.code for e in EXITS}
    assert [e.code for e in EXITS] == sorted(codes) == list(range(8))
    for c in K.CLASSES.values():
        assert c.exit_codes and set(c.exit_codes) <= codes and 2 not in c.exit_codes and 7 not in c.exit_codes, c
        assert c.strict is None or c.strict in c.exit_codes, c
        assert c.mark is None or c.mark in _marks(), c
        assert c.absent in (None, "missing", "sequence_range") and c.acts <= set(K.ACTS), c
    # what each command acts on, as the ad-hoc sets said it before there was a table
    assert K.acted_on_by(K.REPAIR_TRUNCATE) == {K.TAIL_DAMAGE}
    assert K.acted_on_by(K.REPAIR_SET_ASIDE) == {K.SHORT_CHUNK}
    assert K.acted_on_by(K.SALVAGE) == {K.MID_LOG_DAMAGE, K.TAIL_DAMAGE, K.UNDECODABLE_PAYLOAD, K.SHORT_CHUNK}
    assert K.acted_on_by(K.HEAL) == K.acted_on_by(K.SALVAGE) | {
        K.UNSUPPORTED, K.UNREADABLE, K.SEAL_MISMATCH, K.CHECKPOINT_CORRUPT, K.CHECKPOINT_UNSUPPORTED}
    assert K.with_absent() == {K.SEQUENCE_GAP: "missing", K.SEQUENCE_MISSING: "sequence_range",
                               K.SEALED_MISSING: "sequence_range"}
    assert K.acted_on_by(K.UNHELD) == set(K.with_absent()) | {K.ACCEPTED_LOSS}
    assert K.acted_on_by(K.NO_COMPACT) == {K.SEQUENCE_REPEAT, K.SEQUENCE_REGRESSION, K.SEQUENCE_BELOW_ONE}
    assert K.acted_on_by(K.DISCONTINUITY) == {K.SEQUENCE_GAP, K.SEQUENCE_REPEAT, K.SEQUENCE_REGRESSION}


def _marks():
    from walctl.ops.damagemap import MARKS

    return MARKS


def test_severity_and_strict_come_from_the_tables():
    sev = {e.code: e.severity for e in EXITS}
    for c in K.CLASSES.values():
        for code in c.exit_codes:
            assert Finding(c.name, code, "r").severity == (c.severity or sev[code])
        assert K.strict_code(c.name, False, c.exit_codes[0]) == c.exit_codes[0]
        assert K.strict_code(c.name, True, c.exit_codes[0]) == (c.strict if c.strict is not None else c.exit_codes[0])
    assert Finding(K.IN_PROGRESS, 0, "r").severity == "note" and Finding(K.ANOMALY, 0, "r").severity == "warning"
    assert combine_exit_codes([1, 4, 3]) == 3 and precedence_text() == "6, 3, 4, 5, 1"
    assert EXIT_PRECEDENCE == (6, 3, 4, 5, 1)


def _run(argv, capsys):
    from walctl.cli import run

    rc = run(argv)
    return rc, capsys.readouterr().out


def test_help_lists_every_exit_code_from_the_table(capsys):
    rc, out = _run(["--help"], capsys)
    assert rc == 0
    flat = " ".join(out.split())
    assert " ".join(exit_table().splitlines()[0].split()) in flat
    for e in EXITS:
        assert f"{e.code} {e.help}" in flat, e
    rc, out = _run(["verify", "--help"], capsys)
    assert f"(order {precedence_text()})" in " ".join(out.split())


def _exit_sections():
    for name in sorted(os.listdir(os.path.join(ROOT, "man"))):
        page = open(os.path.join(ROOT, "man", name), encoding="utf-8").read()
        m = re.search(r"^\.SH EXIT STATUS\n(.*?)(?=^\.SH |\Z)", page, re.M | re.S)
        assert m, name
        yield name, m.group(1)


# A page that opens a code's paragraph with its own word (seal: nothing to judge, so 0 is "Done").
OWN_OPENING = {("walctl-seal.1", 0): "Done"}


def test_man_pages_exit_tables_match_the_table():
    """Each page lists the codes its command can exit with (seal: never a finding's 1, 3 or 4), in the
    table's order, each paragraph opening with the table's title; a page whose findings combine states the
    precedence (or says it judges as verify does)."""
    titles = {e.code: e.title for e in EXITS}
    for name, section in _exit_sections():
        paragraphs = [(int(code), text) for code, text in
                      re.findall(r"^\.IP (\d+) 4\n(.*?)(?=^\.[A-Z]|\Z)", section, re.M | re.S)]
        codes = [code for code, _ in paragraphs]
        assert codes == sorted(set(codes)) and set(codes) <= set(titles) and {0, 2, 5, 6, 7} <= set(codes), name
        for code, text in paragraphs:
            assert text.startswith(OWN_OPENING.get((name, code), titles[code])), (name, code, text[:40])
        orders = re.findall(r"order ((?:\d, )+\d)", section)
        assert all(o == precedence_text() for o in orders), name
        if {1, 3} <= set(codes):
            assert orders or section.startswith("As \\fBwalctl verify\\fR"), name


@pytest.mark.parametrize("strict", [False, True])
def test_every_finding_over_the_examples_is_a_row(tmp_path, strict):
    from walctl.ops.wal.verify import verify_path

    seen = set()
    for name in sorted(os.listdir(os.path.join(ROOT, "examples"))):
        src = os.path.join(ROOT, "examples", name)
        if not os.path.isdir(src):
            continue
        dst = tmp_path / name
        shutil.copytree(src, dst, symlinks=True)
        try:
            report = verify_path(str(dst), strict=strict)
        except Exception as e:  # a refusal is no finding
            assert type(e).__name__ != "KeyError", e
            continue
        for f in report.findings:
            row = K.CLASSES[f.cls]
            assert f.exit_code in row.exit_codes, (name, f.cls, f.exit_code)
            if strict and row.strict is not None:
                assert f.exit_code == row.strict, (name, f.cls)
            seen.add(f.cls)
    assert {K.TAIL_DAMAGE, K.MID_LOG_DAMAGE, K.SEQUENCE_GAP, K.UNSUPPORTED} <= seen


def test_format_md_exit_table_matches_the_table():
    text = open(os.path.join(ROOT, "docs", "format.md"), encoding="utf-8").read()
    section = text[text.index("### 2.5 Exit codes"):text.index("### 2.6")]
    rows = re.findall(r"^\| (\d) \| (.+) \|$", section, re.M)
    assert [int(code) for code, _ in rows] == [e.code for e in EXITS]
    for (_, meaning), e in zip(rows, EXITS):
        assert meaning.startswith(e.title.lower()), (e.code, meaning)
    assert f"the order {precedence_text()}" in " ".join(section.split())
