"""How the code is shaped (issue #13): the CLI names its exit codes, typed outcomes and accessors carry
what strings and dict keys used to, and functions and modules stay short."""
from __future__ import annotations

import ast
import json
import os
import re

import walctl
from walctl.errors import EXIT_CORRUPT, EXIT_TORN
from walctl.ops.archive.push import Outcome
from walctl.ops.findings import SHARED_KEYS, TAIL_DAMAGE, Finding

ROOT = os.path.dirname(os.path.abspath(walctl.__file__))


def _sources(sub: str = ""):
    base = os.path.join(ROOT, sub)
    for dirpath, _, names in os.walk(base):
        for n in sorted(names):
            if n.endswith(".py"):
                path = os.path.join(dirpath, n)
                yield os.path.relpath(path, ROOT), open(path, encoding="utf-8").read()


LITERAL_EXIT = re.compile(r"Exit\(\d+\)|^\s+return \d+\s*$|exit_code\s*=\s*\d|\"exit_code\":\s*\d|sys\.exit\(\d")


def test_cli_names_its_exit_codes():
    found = [(rel, n + 1, line.strip()) for rel, text in _sources("cli")
             for n, line in enumerate(text.splitlines()) if LITERAL_EXIT.search(line.split("#")[0])]
    # map_svg/map_text return geometry, not exit codes
    found = [f for f in found if not f[0].startswith(("cli/map_svg", "cli/map_text"))]
    assert found == []


def test_archive_push_outcomes_are_typed():
    assert {o.value for o in Outcome} == {"held", "empty", "already", "conflict", "adopted", "uploaded", "failed"}
    tree = ast.parse(open(os.path.join(ROOT, "ops", "archive", "push.py"), encoding="utf-8").read())
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    # the outcome words appear once, in the Enum, never as bare results compared elsewhere
    assert sum(1 for n in ast.walk(tree) if isinstance(n, ast.Compare)
               and any(isinstance(c, ast.Constant) and c.value in ("held", "already", "uploaded")
                       for c in n.comparators)) == 0
    assert "held" in strings


def test_finding_shared_keys_are_fields_and_json_keeps_them_in_one_order():
    f = Finding(TAIL_DAMAGE, EXIT_TORN, "checksum tail", "c.wal", 100, 160, (10, 12), 1, 2, {"writer": "pid 7"},
                field="payload-crc", last_good_sequence=9, claimed_sequence=10, lost_sequence_range=(10, 12),
                tail_kind="checksum", torn=True)
    assert (f.torn, f.tail_kind, f.field) == (True, "checksum", "payload-crc")
    assert f.lost_sequence_range == (10, 12) and f.lost_or_missing == (10, 12)
    assert (f.claimed_sequence, f.last_good_sequence, f.missing, f.repeated) == (10, 9, None, None)
    d = f.to_json()
    # the common keys, then the shared ones that apply (in SHARED_KEYS order, None left out), then extra
    assert list(d)[9:12] == ["stored", "computed", "value_kind"]  # text, one type (issue 26)
    assert (d["stored"], d["computed"], d["value_kind"]) == ("00000001", "00000002", "crc32")
    assert list(d)[12:] == ["field", "tail_kind", "torn", "claimed_sequence", "last_good_sequence",
                            "lost_sequence_range", "writer"]
    assert d["lost_sequence_range"] == [10, 12] and d["length"] == 60 and d["torn"] is True
    gap = Finding("sequence-gap", EXIT_CORRUPT, "gap", missing=(3, 5), previous_sequence=2)
    assert gap.lost_or_missing == (3, 5) and gap.torn is None and gap.lost_sequence_range is None
    assert json.loads(json.dumps(gap.to_json()))["missing"] == [3, 5]
    assert Finding("short-chunk", EXIT_CORRUPT, "x", torn=False).to_json()["torn"] is False


def test_no_producer_hides_a_shared_key_in_extra():
    """`extra` is for class-specific keys only: a shared key there would shadow (or duplicate) the field."""
    shared = set(SHARED_KEYS)
    hits = []
    for rel, text in _sources():
        for node in ast.walk(ast.parse(text)):
            keys = []
            if isinstance(node, ast.keyword) and node.arg == "extra":
                v = node.value
                if isinstance(v, ast.Dict):
                    keys = [k.value for k in v.keys if isinstance(k, ast.Constant)]
                elif isinstance(v, ast.Call) and getattr(v.func, "id", None) == "dict":
                    keys = [k.arg for k in v.keywords]
            elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "extra" and isinstance(node.slice, ast.Constant):
                keys = [node.slice.value]
            hits += [(rel, node.lineno, k) for k in keys if k in shared]
    assert hits == []


def test_every_kind_has_one_table_entry_whose_functions_load():
    from walctl.ops.archive import objects as archive
    from walctl.ops import kinds

    names = {v for k, v in vars(kinds).items() if k.startswith("KIND_")}
    assert set(kinds.KINDS) == names
    for k in kinds.KINDS.values():
        for what in kinds.Kind._fields:  # every "module:function" column
            ref = getattr(k, what)
            if isinstance(ref, str) and ":" in ref:
                assert callable(k.load(what)), (k.name, what)
        assert k.archive in (None, *archive.KINDS) and k.archive != archive.LIVE
        if k.files is not None:  # pushed as a log: its files hold sequences, described, cut and followed
            assert k.archive in archive.WAL_KINDS and None not in (k.describe, k.number, k.cut, k.until, k.follower)
        assert k.annotated == (k.verify is None)  # only V2 chunks are read by ops/wal/verify.py itself
    assert set(kinds.ARCHIVED) == {archive.CHUNKS, archive.SEGMENTS, archive.CHECKPOINTS, *archive.FILE_KINDS}
    for k in kinds.KINDS.values():  # file versions: staged, described, restored and shipped through the table
        assert (k.stage is None) == (k.sources is None) == (k.restore is None) == (k.shipper is None)
    assert {k.name for k in kinds.KINDS.values() if k.replay} == {
        kinds.KIND_DIR, kinds.KIND_CHUNK, kinds.KIND_SEGMENTS, kinds.KIND_SEGMENT}


DISPATCHERS = ("cli/inspect_cmd.py", "cli/stats_cmd.py", "ops/wal/replay.py", "ops/checkpoints/recover.py", "ops/wal/merge.py",
               "ops/archive/objects.py", "ops/wal/verify.py")
KIND_CHAIN = re.compile(r"\bkind\s*(==|!=|in|not in)\s*\(?\s*(KIND_|\"(spector|adr003|checkpoint|tasklog|substrat|workflow))")


# archive object kinds (chunks, segments, checkpoints) are columns of the kinds table: no branch on one
_OBJECT_KIND = r"\bkind\s*(==|!=)\s*(CHUNKS|SEGMENTS|CHECKPOINTS|WAL_KINDS\[)"
ARCHIVE_CHAIN = re.compile(rf"^\s*(if|elif)\s.*{_OBJECT_KIND}|{_OBJECT_KIND}\S*\s+else\b|\.is_v2\b|\.is_segment\b.*\belse\b")


def test_archive_object_kinds_are_dispatched_by_the_table():
    hits = [(rel, line.strip()) for rel, text in _sources() if rel.startswith("ops/archive")
            for line in text.splitlines() if ARCHIVE_CHAIN.search(line)]
    assert hits == []
    assert ARCHIVE_CHAIN.search("    if kind == CHECKPOINTS:") and ARCHIVE_CHAIN.search("x = a if e.kind == CHUNKS else b")
    assert not ARCHIVE_CHAIN.search("cks = [e for e in es if e.kind == CHECKPOINTS]")  # a filter is no dispatch
    assert not [rel for rel, text in _sources() if re.search(r"\.is_v2\b", text)]  # what a kind allows: a named column


def test_dispatchers_choose_by_the_kinds_table_not_by_if_chains():
    # every module, not only the dispatchers: what a kind allows (a ledger, mending, its units) is a column
    hits = [(rel, line.strip()) for rel, text in _sources() if rel != "ops/kinds.py"
            for line in text.splitlines() if KIND_CHAIN.search(line)]
    assert hits == []
    assert KIND_CHAIN.search("if report.kind in (KIND_DIR, KIND_SEGMENTS):")  # the pattern does see one


MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 400
# What is still longer (issue #13: split where it reads better). The scanner's hot loop stays inlined for speed.
LONG_FUNCTIONS = {
    "format/scan.py:_scan_records",  # the hot loop (benchmarks/verify_throughput.py)
}
LONG_MODULES: set[str] = set()  # every module is under 400 lines


def _long_functions_and_modules():
    long_fns, long_mods = set(), set()
    for rel, text in _sources():
        if text.count("\n") > MAX_MODULE_LINES:
            long_mods.add(rel)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                long_fns.add(f"{rel}:{node.name}")
    return long_fns, long_mods


def test_functions_and_modules_stay_short_outside_the_allow_list():
    long_fns, long_mods = _long_functions_and_modules()
    assert long_fns - LONG_FUNCTIONS == set(), "split it, or (with a reason) add it to LONG_FUNCTIONS"
    assert long_mods - LONG_MODULES == set(), "split it by responsibility"
    # the allow-lists only shrink: an entry that is now short must leave the list
    assert LONG_FUNCTIONS - long_fns == set() and LONG_MODULES - long_mods == set()


# Public library API that nothing in walctl/, tests/ or benchmarks/ names (walctl/__init__.py's _API names
# its entries as strings, which count): none today. Add a name here only with the reason it stays.
UNREFERENCED_API: dict[str, str] = {}
_IDENTIFIER_STRING = re.compile(r"[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?")  # "ops.wal.verify:verify_path", "replay"


def _references(tree) -> set[str]:
    """Names a module uses: loaded names and attributes, and strings that name a function ("module:function"
    in the kinds table, a name for getattr); never a docstring's words."""
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Store):
            out.add(n.attr)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and _IDENTIFIER_STRING.fullmatch(n.value):
            out.update(re.findall(r"[A-Za-z_]\w*", n.value))
    return out


def test_every_top_level_function_and_class_is_used():
    """Dead code stays out (issue #25 item 8): each top-level function and class of walctl/ is named
    somewhere in walctl/, tests/ or benchmarks/ (its own definition does not count), or is listed in
    UNREFERENCED_API. An import alone does not count either: `from x import f` with f unused is no use."""
    top = os.path.dirname(ROOT)
    used: set[str] = set()
    defined = []
    for sub in ("walctl", "tests", "benchmarks"):
        for dirpath, _, files in os.walk(os.path.join(top, sub)):
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read())
                used |= _references(tree)
                if sub == "walctl":
                    defined += [(os.path.relpath(path, top), n.lineno, n.name) for n in tree.body
                                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    dead = [f"{path}:{line}: {name}" for path, line, name in defined
            if name not in used and name not in UNREFERENCED_API and not name.startswith("__")]
    assert not dead, "defined, never used:\n" + "\n".join(dead)
