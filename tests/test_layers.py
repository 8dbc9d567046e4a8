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
    code = ("import sys, walctl; assert 'walctl.ops.wal.stats' not in sys.modules; walctl.collect_stats; "
            "assert 'walctl.ops.wal.stats' in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def _import_graph() -> dict[str, set[str]]:
    """walctl module -> the walctl modules it imports, at module level or inside functions alike (a
    function-level import hides a cycle from Python, not from this test). The package's own
    TYPE_CHECKING declarations are left out: they never run."""
    mods = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                mods[rel.removesuffix(".__init__")] = os.path.join(dirpath, f)
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        deps: set[str] = set()
        is_pkg = path.endswith("__init__.py")
        if mod != "walctl":
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.Import):
                    deps.update(a.name for a in node.names if a.name in mods)
                elif isinstance(node, ast.ImportFrom):
                    base = mod if is_pkg else mod.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        base = base.rpartition(".")[0]
                    target = node.module if not node.level else (f"{base}.{node.module}" if node.module else base)
                    for a in node.names:
                        name = f"{target}.{a.name}"
                        deps.add(name if name in mods else target)
        graph[mod] = {d for d in deps if d in mods and d != mod}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# StorageAdapter.ship imports ops/archive/follow, which is built on ops/archive/objects: the adapter lives in its own
# module (ops/archive/adapter.py), so no back edge is left.
KNOWN_BACK_EDGES: set = set()


def test_no_import_cycles_even_through_function_level_imports():
    graph = _import_graph()
    for a, b in KNOWN_BACK_EDGES:
        graph[a].discard(b)
    assert "walctl.ops.wal.segments" in graph["walctl.ops.verify_kinds"]  # it sees imports inside functions
    assert _cycles(graph) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check can fail


def test_layers_import_one_way():
    """cli -> ops -> store -> format: format imports no other layer, store never ops or cli, ops never cli."""
    below = {"format": {"store", "ops", "cli"}, "store": {"ops", "cli"}, "ops": {"cli"}}
    wrong = []
    for mod, deps in _import_graph().items():
        layer = mod.split(".")[1] if mod.count(".") >= 1 else None
        for d in deps:
            if layer in below and d.count(".") >= 1 and d.split(".")[1] in below[layer]:
                wrong.append((mod, d))
    assert wrong == []


def _ops_sources():
    for dirpath, _, files in os.walk(os.path.join(ROOT, "ops")):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    yield os.path.relpath(path, ROOT), ast.parse(fh.read())


def test_ops_reads_and_writes_only_through_the_fs_it_is_given():
    """The fs seam is closed (issue #25 item 4): ops/ never calls open(), never branches on what the file
    system is (`.real`: a capability such as `fs.worker_processes` says what it may do), and names the
    operating system's file system (DEFAULT_FS) only as a parameter's default, never in a body, where it
    would bypass the fs a caller (a test's simulated one, a confined one) handed in."""
    bad = []
    for rel, tree in _ops_sources():
        defaults = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                defaults.update(id(d) for d in node.args.defaults + node.args.kw_defaults if d is not None)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
                bad.append(f"{rel}:{node.lineno}: open()")
            if isinstance(node, ast.Attribute) and node.attr == "real":
                bad.append(f"{rel}:{node.lineno}: .real")
            if isinstance(node, ast.Constant) and node.value == "real":
                bad.append(f"{rel}:{node.lineno}: 'real'")
            if isinstance(node, ast.Name) and node.id == "DEFAULT_FS" and id(node) not in defaults:
                bad.append(f"{rel}:{node.lineno}: DEFAULT_FS used in a body")
    assert not bad, "\n".join(bad)


def test_no_module_asks_whether_the_fs_is_real():
    bad = []
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
                bad += [f"{os.path.relpath(path, ROOT)}:{n.lineno}" for n in ast.walk(tree)
                        if (isinstance(n, ast.Attribute) and n.attr == "real")
                        or (isinstance(n, ast.Constant) and n.value == "real")]
    assert not bad, "\n".join(bad)


# ops/ at its top holds what every domain shares; these three exist to span the domains (one view over every kind).
SPANNING = {"walctl.ops.verify_kinds", "walctl.ops.damagemap", "walctl.ops.metrics"}


def test_shared_ops_modules_import_no_domain_and_nothing_imports_the_package_top():
    graph = _import_graph()
    domains = {m for m in graph if m.count(".") == 2 and m.startswith("walctl.ops.") and
               os.path.isdir(os.path.join(ROOT, "ops", m.split(".")[2]))}
    assert {"walctl.ops.wal", "walctl.ops.archive", "walctl.ops.checkpoints"} <= domains
    shared = {m for m in graph if m.count(".") == 2 and m.startswith("walctl.ops.") and m not in domains}
    wrong = sorted((m, d) for m in shared - SPANNING for d in graph[m]
                   if any(d == p or d.startswith(p + ".") for p in domains))
    assert wrong == []
    up = sorted(m for m, deps in graph.items() if "walctl" in deps and m != "walctl.__main__")
    assert up == []
