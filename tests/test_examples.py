"""The bundled examples are golden: exactly what make_examples.py writes, and each gives its exit code."""
from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
EXPECTED = {"wal-healthy": 0, "wal-torn-tail": 1, "wal-midlog-corrupt": 3, "wal-sequence-gap": 4, "wal-legacy-v1": 5}


def test_examples_are_exactly_what_the_generator_writes(tmp_path):
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "make_examples.py"), str(tmp_path)], check=True)
    for name in EXPECTED:
        cmp = filecmp.dircmp(os.path.join(EXAMPLES, name), tmp_path / name)
        assert cmp.left_only == cmp.right_only == [] and cmp.diff_files == [], name
        _, mismatch, errors = filecmp.cmpfiles(os.path.join(EXAMPLES, name), tmp_path / name, cmp.common_files,
                                               shallow=False)
        assert mismatch == errors == [], name


@pytest.mark.parametrize("name, code", sorted(EXPECTED.items()))
def test_each_example_gives_its_exit_code(cli, name, code):
    assert cli("verify", os.path.join(EXAMPLES, name)).code == code


def _walctl_on_path(tmp_path) -> str:
    shim = tmp_path / "walctl"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m walctl \"$@\"\n")
    shim.chmod(0o755)
    return str(shim)


def test_tour_script_passes(tmp_path):
    out = subprocess.run(["sh", os.path.join(EXAMPLES, "tour.sh"), _walctl_on_path(tmp_path)], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("as documented") == len(EXPECTED)


def test_cron_script_acts_on_exit_codes(tmp_path):
    env = {**os.environ, "WALCTL": _walctl_on_path(tmp_path), "ALERT": "echo ALERT", "PYTHONPATH": ROOT}
    dirs = [os.path.join(EXAMPLES, n) for n in ("wal-healthy", "wal-torn-tail", "wal-midlog-corrupt")]
    out = subprocess.run(["sh", os.path.join(EXAMPLES, "cron-verify.sh"), *dirs], capture_output=True, text=True,
                         env=env)
    assert out.returncode == 3
    lines = out.stdout.splitlines()
    assert lines[0].startswith("ok ") and "80 records" in lines[0]
    assert lines[1].startswith("torn ")
    assert any(line.startswith("ALERT CORRUPT") for line in lines)
    assert shutil.which("sh")


def test_recovery_script_repairs_a_torn_copy_and_salvages_a_corrupt_one(tmp_path):
    env = {**os.environ, "WALCTL": _walctl_on_path(tmp_path), "PYTHONPATH": ROOT}
    torn = tmp_path / "torn"
    shutil.copytree(os.path.join(EXAMPLES, "wal-torn-tail"), torn)
    from walctl.format.ckptmeta import encode_checkpoint_meta

    (tmp_path / "checkpoint.meta").write_bytes(encode_checkpoint_meta(40))
    out = subprocess.run(["sh", os.path.join(EXAMPLES, "recovery.sh"), str(torn), str(tmp_path / "checkpoint.meta")],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ready for the service" in out.stdout
    assert sorted(os.listdir(torn)) == [".quarantine", ".walctl.lock", "wal-000001.bin"]  # chunk 0 compacted
    corrupt = tmp_path / "corrupt"
    shutil.copytree(os.path.join(EXAMPLES, "wal-midlog-corrupt"), corrupt)
    out = subprocess.run(["sh", os.path.join(EXAMPLES, "recovery.sh"), str(corrupt)], capture_output=True, text=True,
                         env=env)
    assert out.returncode == 3
    rescued = [p for p in os.listdir(tmp_path) if p.startswith("corrupt.salvaged.") and not p.endswith(".json")]
    assert len(rescued) == 1
