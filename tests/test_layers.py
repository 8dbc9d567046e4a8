"""The package's shape: the public API is declared for type checkers and lazily loaded at run time,
the two lists being the same."""
from __future__ import annotations

import ast
import os
import subprocess
import sys

import walctl

ROOT = os.path.dirname(os.path.abspath(walctl.__file__))


def _type_checking_imports() -> dict[str, tuple[str, str]]:
    tree = ast.parse(open(os.path.join(ROOT, "__init__.py"), encoding="utf-8").read())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING")
    out = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.dump(node)
        for alias in node.names:
            out[alias.asname or alias.name] = (node.module, alias.name)
    return out


def test_public_api_declared_for_type_checkers_matches_the_lazy_table():
    declared = _type_checking_imports()
    assert declared == walctl._API
    assert sorted(walctl.__all__) == sorted(["__version__", *declared])
    for name, (module, attr) in declared.items():
        got = getattr(walctl, name)
        assert got.__name__ == attr, (name, got)
        assert got.__module__ == f"walctl.{module}" or module == "errors" and got.__module__ == "walctl.errors"


def test_the_api_loads_lazily():
    code = ("import sys, walctl; assert 'walctl.ops.stats' not in sys.modules; walctl.collect_stats; "
            "assert 'walctl.ops.stats' in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"
