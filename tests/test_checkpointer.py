"""ADR-003 checkpoints that keep up with the writer: the final checkpoint on close() and on SIGTERM (a real
child process), background checkpoints (a consistent snapshot while the state goes on changing), and a
crash at every step of a background checkpoint leaving the previous one in force (tests/simfs.py)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from simfs import SimCrash, SimFS
from walctl.ops.checkpoints.checkpoint import latest
from walctl.ops.checkpoints.checkpointer import Checkpointer
from walctl.ops.checkpoints.recover import recover
from walctl.ops.wal.verify import verify_path
from walctl.ops.wal.write import WalWriter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _append(w, state, i):
    seq = w.append_entry("memory_add", {"content": f"entry {i}"})
    state["memory_blocks"].append({"content": f"entry {i}", "sequence": seq, "timestamp": None})
    return seq


def test_close_writes_the_final_checkpoint_once_and_a_restart_replays_nothing(tmp_path):
    log, ck = str(tmp_path / "log"), str(tmp_path / "ck")
    last = [0]
    with WalWriter(log, format="segments") as w:
        cp = Checkpointer(ck, log=log, writer=w, every_entries=10, snapshot=lambda: (state, last[0]))
        state = cp.recover().state
        made = []
        for i in range(25):
            last[0] = _append(w, state, i)
            cp.entries_written()
            got = cp.maybe_checkpoint()
            made += [got.wal_sequence] if got else []
        assert made == [10, 20]
        final = cp.close()
        assert final.wal_sequence == 25 and cp.close() is None  # idempotent
    rep = recover(ck, log)
    assert (rep.checkpoint["wal_sequence"], rep.entries_replayed, rep.final_sequence) == (25, 0, 25)
    assert [b["content"] for b in rep.state["memory_blocks"]] == [f"entry {i}" for i in range(25)]
    again = Checkpointer(ck, log=log, snapshot=lambda: (rep.state, 25))
    again.recover()
    assert again.close() is None  # nothing new since the checkpoint on disk: no second file
    assert len([n for n in os.listdir(ck) if n.endswith(".ckpt")]) == 3


CHILD = textwrap.dedent("""
    import sys
    from walctl import Checkpointer
    from walctl.ops.wal.write import WalWriter

    log, ck, use_with = sys.argv[1], sys.argv[2], sys.argv[3] == "with"
    w = WalWriter(log, format="segments", sync="none")
    last = [0]
    cp = Checkpointer(ck, log=log, writer=w, every_entries=10**9, interval_s=1e9, snapshot=lambda: (state, last[0]))
    state = cp.recover().state
    cp.install_shutdown_hook()

    def run():
        i = 0
        while True:
            with cp.uninterrupted():  # append and apply as one step: SIGTERM ends the process between steps
                seq = w.append_entry("memory_add", {"content": f"entry {i}"})
                state["memory_blocks"].append({"content": f"entry {i}", "sequence": seq, "timestamp": None})
                last[0] = seq
            if i == 200:
                print("appending", flush=True)
            i += 1

    if use_with:
        with w:
            run()
    else:
        run()
""")


@pytest.mark.parametrize("shape", ["with", "open"])
def test_sigterm_leaves_a_checkpoint_at_the_last_appended_sequence(tmp_path, shape):
    """A child appends without pause; SIGTERM stops it. Its exit hook wrote a checkpoint at the last
    sequence in the log, so recovery replays nothing and has every entry."""
    log, ck = str(tmp_path / "log"), str(tmp_path / "ck")
    env = dict(os.environ, PYTHONPATH=ROOT)
    child = subprocess.Popen([sys.executable, "-c", CHILD, log, ck, shape], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert child.stdout.readline() == "appending\n"
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 128 + signal.SIGTERM, err
    last = verify_path(log).last_sequence
    assert last > 200
    found = latest(ck)
    assert found.report.header.wal_sequence == last
    rep = recover(ck, log)
    assert (rep.entries_replayed, rep.final_sequence) == (0, last)
    assert [b["content"] for b in rep.state["memory_blocks"]] == [f"entry {i}" for i in range(last)]


def test_a_background_checkpoint_holds_the_state_as_it_was_when_taken(tmp_path):
    log, ck = str(tmp_path / "log"), str(tmp_path / "ck")
    with WalWriter(log, format="segments") as w:
        cp = Checkpointer(ck, log=log, writer=w, background=True)
        state = cp.recover().state
        state["agent_state"]["blob"] = os.urandom(1 << 20).hex()  # big enough to take a moment
        for i in range(50):
            seq = _append(w, state, i)
        assert cp.checkpoint(state, seq) is None  # started; the caller goes on at once
        for i in range(50, 80):  # appends and state changes while it is being written
            _append(w, state, i)
        state["agent_state"]["blob"] = "changed"
        made = cp.wait()
        assert made.wal_sequence == 50 and cp.last_sequence == 50 and not cp.in_progress
    rep = recover(ck, log)
    assert rep.checkpoint["wal_sequence"] == 50 and rep.entries_replayed == 30
    assert len(rep.state["agent_state"]["blob"]) == 2 << 20  # the snapshot, not the later change
    assert [b["content"] for b in rep.state["memory_blocks"]] == [f"entry {i}" for i in range(80)]


class FullDisk(SimFS):
    """A disk that fills up: the next `failing` writes to a checkpoint's .tmp fail (ENOSPC)."""
    failing = 0

    def write(self, fd, data, path=""):
        if self.failing and path.endswith(".tmp"):
            from walctl.errors import EnvironmentProblem

            self.failing -= 1
            raise EnvironmentProblem("No space left on device", path)
        return super().write(fd, data, path)


def test_a_failed_background_checkpoint_is_raised_and_close_still_writes_the_final_one():
    fs = FullDisk(0)
    fs.makedirs_durable("/data")
    state = {"n": 1}
    cp = Checkpointer("/data/ck", background=True, fs=fs, snapshot=lambda: (state, 7))
    cp.checkpoint(state, 5)
    assert cp.wait().wal_sequence == 5
    fs.failing = 1
    cp.checkpoint(dict(state, n=2), 6)
    with pytest.raises(Exception) as err:
        cp.wait()
    assert "No space left" in str(err.value) and cp.last_sequence == 5
    assert latest("/data/ck", fs=fs).report.header.wal_sequence == 5  # the previous one, in force
    assert not [e.name for e in fs.listdir("/data/ck") if e.name.endswith(".tmp")]  # its .tmp removed
    fs.failing = 1
    cp.checkpoint(dict(state, n=3), 6)  # fails in the background too ...
    with pytest.raises(Exception) as err:
        cp.close()  # ... and close() writes the final checkpoint first, then says so
    assert "No space left" in str(err.value)
    found = latest("/data/ck", fs=fs).report
    assert found.header.wal_sequence == 7 and found.checked.state["n"] == 1


# ---- a crash at every step of a background checkpoint ---------------------------------------------------

CK = "/data/ck"


def _sim(seed: int) -> tuple[SimFS, Checkpointer]:
    fs = SimFS(seed)
    fs.makedirs_durable("/data")
    cp = Checkpointer(CK, background=True, fs=fs, level=3)
    cp.checkpoint({"generation": 1, "items": list(range(100))}, 10)
    cp.wait()
    return fs, cp


def test_a_crash_at_every_step_of_a_background_checkpoint_leaves_the_previous_one_in_force():
    probe, cp = _sim(0)
    start = probe.ops
    cp.checkpoint({"generation": 2, "items": list(range(200))}, 20)
    cp.wait()
    steps = probe.ops - start
    assert steps >= 4 and latest(CK, fs=probe).report.header.wal_sequence == 20
    for n in range(1, steps + 1):
        fs, cp = _sim(n)
        fs.crash_at = fs.ops + n
        state = {"generation": 2, "items": list(range(200))}
        cp.checkpoint(state, 20)
        state["generation"] = 3  # the caller goes on changing its state meanwhile
        with pytest.raises(SimCrash):
            cp.wait()
        fs.crash()
        found = latest(CK, fs=fs)
        assert found.report.header.wal_sequence == 10, n  # the previous checkpoint, whole
        assert found.report.checked.state["generation"] == 1 and not found.rejected and not found.fallbacks
        # the next run checkpoints again over what the crash left (a stale .tmp is not a candidate)
        again = Checkpointer(CK, fs=fs, background=True)
        again.checkpoint(state, 20)
        assert again.wait().wal_sequence == 20
        assert latest(CK, fs=fs).report.checked.state["generation"] == 3


def test_the_shutdown_hook_needs_a_snapshot_and_close_without_one_writes_nothing(tmp_path):
    cp = Checkpointer(str(tmp_path / "ck"))
    with pytest.raises(ValueError, match="snapshot"):
        cp.install_shutdown_hook()
    assert cp.close() is None and not (tmp_path / "ck").exists()
    made = Checkpointer(str(tmp_path / "ck")).close({"k": 1}, 3)  # or the state handed over
    assert made.wal_sequence == 3 and latest(str(tmp_path / "ck")).report.checked.state == {"k": 1, "wal_sequence": 3}
