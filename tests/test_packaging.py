"""What an install carries: the wheel holds the man pages (inside the package for `walctl help`, and as
data files for `man`), the JSON schemas and the licence; the sdist is a working source tree (docs, man,
examples, tests and their data). Built from a copy of the tree with setuptools' own PEP 517 hooks."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAN_PAGES = sorted(n for n in os.listdir(os.path.join(ROOT, "man")) if n.endswith(".1"))


def _setuptools_ok() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77  # SPDX `license` and `license-files`


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not _setuptools_ok():
        pytest.skip("needs setuptools>=77 (the test extra installs it)")
    src = tmp_path_factory.mktemp("src") / "walctl"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.pyc", "build",
                                                              "dist", "*.egg-info", ".hypothesis"))
    out = tmp_path_factory.mktemp("dist")
    built = []
    for hook in ("build_sdist", "build_wheel"):  # one process each: the hooks share state within one
        code = f"import sys; from setuptools import build_meta as b; print('BUILT', b.{hook}(sys.argv[1]))"
        p = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-3000:]
        built.append(p.stdout.rsplit("BUILT ", 1)[1].strip())
    sdist, wheel = built
    return os.path.join(out, wheel), os.path.join(out, sdist)


def test_the_wheel_carries_man_pages_schemas_and_the_licence(built):
    with zipfile.ZipFile(built[0]) as z:
        names = set(z.namelist())
        meta = z.read("walctl-0.1.0.dist-info/METADATA").decode()
    for page in MAN_PAGES:
        assert f"walctl/man/{page}" in names, page                            # walctl help COMMAND
        assert f"walctl-0.1.0.data/data/share/man/man1/{page}" in names, page  # man walctl-COMMAND
    assert "walctl/man/walctl-verify.1" in names and "walctl/man/walctl-help.1" in names
    from walctl import schemas

    for name in schemas.names():
        assert f"walctl/schemas/{schemas.file_name(name)}" in names, name
    assert "walctl-0.1.0.dist-info/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in meta and "License-File: LICENSE" in meta
    assert not any(n.startswith("tests/") or n.endswith(".whl") for n in names)


def test_the_sdist_is_a_working_source_tree(built):
    with tarfile.open(built[1]) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for needed in ("LICENSE", "README.md", "setup.py", ".ci/run", "docs/format.md", "docs/json.md",
                   "examples/tour.sh", "examples/wal-healthy/wal-000000.bin", "tests/conftest.py",
                   "tests/json_cases.py", "benchmarks/cold_start.py"):
        assert needed in names, needed
    assert {f"man/{p}" for p in MAN_PAGES} <= names
    data = {n for n in names if n.startswith("tests/data/")}
    expected = {os.path.relpath(os.path.join(b, f), ROOT) for b, _, fs in os.walk(os.path.join(ROOT, "tests", "data"))
                for f in fs}
    assert data >= expected and expected
    assert not any(n.endswith(".whl") or "__pycache__" in n for n in names)


def test_walctl_help_finds_pages_in_the_package_first():
    from walctl.cli import help_cmd

    dirs = help_cmd.page_dirs()
    assert dirs[0].endswith(os.path.join("walctl", "man")) and dirs[1] == os.path.join(ROOT, "man")
    assert dirs[2].endswith(os.path.join("share", "man", "man1"))
    assert help_cmd.read_page("walctl-verify").startswith(".TH WALCTL\\-VERIFY")
    assert help_cmd.read_page("../../etc/passwd") is None and help_cmd.read_page("walctl-nope") is None
