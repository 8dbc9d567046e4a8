"""The bundled examples are golden: exactly what make_examples.py writes, and each gives its exit code."""
from __future__ import annotations

import filecmp
import os
import json
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
EXPECTED = {"wal-healthy": 0, "wal-torn-tail": 1, "wal-midlog-corrupt": 3, "wal-sequence-gap": 4, "wal-legacy-v1": 5,
            "segments": 0, "checkpoints": 3, "tasks": 1, "agents-crashed": 0}
BYTE_EXACT = [n for n in EXPECTED if n != "checkpoints"]  # zstd's bytes may differ between library versions


def test_examples_are_exactly_what_the_generator_writes(tmp_path):
    subprocess.run([sys.executable, os.path.join(EXAMPLES, "make_examples.py"), str(tmp_path)], check=True)
    from walctl.ops.checkpoints.checkpoint import check_path

    for name in ("checkpoints",):
        ours, fresh = sorted(os.listdir(os.path.join(EXAMPLES, name))), sorted(os.listdir(tmp_path / name))
        assert ours == fresh
        for f in ours:
            a, b = check_path(os.path.join(EXAMPLES, name, f)), check_path(str(tmp_path / name / f))
            assert (a.checked.ok, a.checked.state, a.header.wal_sequence, a.header.timestamp) == \
                (b.checked.ok, b.checked.state, b.header.wal_sequence, b.header.timestamp)
            assert (a.checked.failure and a.checked.failure.step) == (b.checked.failure and b.checked.failure.step)
    for name in BYTE_EXACT:
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
    assert "passed over: 0a6b3c1e-0000-4000-8000-000000000030.ckpt: step 8" in out.stdout
    # the closing verdict counts every check: each verify plus the recovery
    assert out.stdout.rstrip().endswith(f"\n{len(EXPECTED) + 1}/{len(EXPECTED) + 1} examples gave their documented "
                                        "exit code")


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
    assert sorted(os.listdir(torn)) == [".quarantine", ".walctl", ".walctl.lock", "wal-000001.bin"]  # chunk 0 compacted; the ledger says so
    corrupt = tmp_path / "corrupt"
    shutil.copytree(os.path.join(EXAMPLES, "wal-midlog-corrupt"), corrupt)
    out = subprocess.run(["sh", os.path.join(EXAMPLES, "recovery.sh"), str(corrupt)], capture_output=True, text=True,
                         env=env)
    assert out.returncode == 3
    rescued = [p for p in os.listdir(tmp_path) if p.startswith("corrupt.salvaged.") and not p.endswith(".json")]
    assert len(rescued) == 1
    assert "--accept-loss" in out.stdout


def test_recovery_script_salvages_accepts_the_loss_and_the_copy_takes_writes(tmp_path, cli):
    env = {**os.environ, "WALCTL": _walctl_on_path(tmp_path), "PYTHONPATH": ROOT, "ACCEPT_REASON": "INC-1"}
    corrupt = tmp_path / "corrupt"
    shutil.copytree(os.path.join(EXAMPLES, "wal-midlog-corrupt"), corrupt)
    out = subprocess.run(["sh", os.path.join(EXAMPLES, "recovery.sh"), str(corrupt)], capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    rescued = [p for p in os.listdir(tmp_path) if p.startswith("corrupt.salvaged.") and not p.endswith(".json")]
    copy = str(tmp_path / rescued[0])
    r = cli("verify", copy, "--json")
    findings = r.json()["paths"][0]["findings"]
    assert r.code == 0 and findings and {f["class"] for f in findings} == {"accepted-loss"}
    assert all(f["accepted_by"]["reason"] == "INC-1" for f in findings)
    last = r.json()["paths"][0]["summary"]["last_sequence"]
    w = cli("write", copy, "--type", "REMEMBER", "--id", "m", "--payload", "after", "--json")
    assert w.code == 0 and w.json()["first_sequence"] == last + 1


def test_recover_state_script(tmp_path):
    import json

    env = {**os.environ, "WALCTL": _walctl_on_path(tmp_path), "PYTHONPATH": ROOT}
    out = subprocess.run(["sh", os.path.join(EXAMPLES, "recover-state.sh"), os.path.join(EXAMPLES, "checkpoints"),
                          os.path.join(EXAMPLES, "segments"), str(tmp_path / "state.json")],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["wal_sequence"] == 40 and len(state["memory_blocks"]) == 32 and len(state["tool_registry"]) == 4
    assert "passed over 0a6b3c1e-0000-4000-8000-000000000030.ckpt step 8" in out.stdout


def test_task_examples_resume_where_the_log_says(tmp_path, cli):
    import json

    shutil.copytree(os.path.join(EXAMPLES, "tasks"), tmp_path / "tasks")
    path = str(tmp_path / "tasks" / "3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77.wal")
    r = cli("tasklog", "resume", path, "--apply")
    state = json.loads(r.out)
    assert r.code == 0 and state["resume_step_index"] == 1 and state["in_flight_step_index"] == 1
    assert state["canvas_snapshot"]["recoverable"] is True and state["evidence"].startswith(".quarantine/")
    done = cli("tasklog", "resume", str(tmp_path / "tasks" / "9c41d2aa-7e1b-4f0e-8d25-51a7b3c0e9f4.wal"))
    assert "nothing to resume: the task is completed" in done.err


def test_follower_script_replicates_and_is_idempotent(tmp_path):
    env = {**os.environ, "WALCTL": _walctl_on_path(tmp_path), "PYTHONPATH": ROOT}
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    shutil.copytree(os.path.join(EXAMPLES, "wal-healthy"), leader)
    script = os.path.join(EXAMPLES, "follower.sh")

    def events(path):
        r = subprocess.run([sys.executable, "-m", "walctl", "replay", str(path)], capture_output=True, env=env)
        return [(e["sequence"], e["memory_id_hex"], e["payload_hex"]) for e in map(__import__("json").loads,
                                                                                   r.stdout.splitlines())]

    out = subprocess.run(["sh", script, str(leader), str(follower), "0"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "imported 80 of 80" in out.stdout and events(follower) == events(leader)
    # the leader goes on; the next round brings exactly the new events (the one at the HWM is re-checked)
    subprocess.run([sys.executable, "-m", "walctl", "write", str(leader), "--type", "REMEMBER", "--id", "late",
                    "--payload", "after the first round"], check=True, capture_output=True, env=env)
    out = subprocess.run(["sh", script, str(leader), str(follower), "0"], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and "imported 1 of 2" in out.stdout
    assert events(follower) == events(leader) and len(events(leader)) == 81
    out = subprocess.run(["sh", script, str(leader), str(follower), "0"], capture_output=True, text=True, env=env)
    assert "imported 0 of 1" in out.stdout
    # a follower that diverged is refused, not extended
    other = tmp_path / "other"
    lines = "".join('{"type": "REMEMBER", "id": "x", "payload": "not the leader\'s %d"}\n' % i for i in range(5))
    subprocess.run([sys.executable, "-m", "walctl", "write", str(other)], input=lines, text=True, check=True,
                   capture_output=True, env=env)
    out = subprocess.run(["sh", script, str(leader), str(other), "0"], capture_output=True, text=True, env=env)
    assert out.returncode == 4 and "diverged" in out.stderr


def test_archive_script_pushes_and_restores_onto_a_fresh_directory(tmp_path):
    env = {**os.environ, "WALCTL": _walctl_on_path(tmp_path), "PYTHONPATH": ROOT, "ALERT": "echo ALERT"}
    script = os.path.join(EXAMPLES, "archive.sh")
    dest = "file://" + str(tmp_path / "backup")
    wal = tmp_path / "wal"
    shutil.copytree(os.path.join(EXAMPLES, "wal-healthy"), wal)
    for _ in range(2):  # twice: the second run has nothing new to send
        out = subprocess.run(["sh", script, "push", str(wal), os.path.join(EXAMPLES, "checkpoints"), dest, "agent"],
                             capture_output=True, text=True, env=env)
        assert out.returncode == 3, out.stdout + out.stderr  # the example's newest checkpoint is rotten
        assert "ALERT ARCHIVE" in out.stdout and "held back" in out.stdout
    out = subprocess.run(["sh", script, "restore", dest, "agent", str(tmp_path / "fresh"), "--to", "30"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "restored into" in out.stdout
    r = subprocess.run([sys.executable, "-m", "walctl", "verify", "--json", str(tmp_path / "fresh" / "wal")],
                       capture_output=True, text=True, env=env)
    assert json.loads(r.stdout)["paths"][0]["summary"]["last_sequence"] == 30
    assert os.listdir(tmp_path / "fresh" / "checkpoints") == ["0a6b3c1e-0000-4000-8000-000000000020.ckpt"]
