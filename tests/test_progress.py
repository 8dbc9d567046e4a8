"""The one progress rule: a bar on stderr only after ~1 s, on a terminal or with --progress, never with
--no-progress or on a pipe; ops report bytes through a callback and never print; Ctrl-C says what was
left behind and exits 130."""
from __future__ import annotations

import os
import shutil
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import make_chunk, write_dir
from test_verify_subset import Ticks  # a clock that moves one second per read: progress driven by data, never sleeps
from walctl.cli import progress as P
from walctl.cli import run


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_the_bar_waits_a_second_then_counts_every_byte(capsys):
    clock = Clock()
    with P.Bar("verify", 1000, True, clock=clock) as bar:
        bar.callback(100)
        assert bar.bar is None  # quick work: nothing drawn
        clock.t = 1.2
        bar.callback(300)
        assert bar.bar is not None and bar.done == 400
        task = bar.bar.tasks[0]
        assert (task.completed, task.total) == (400, 1000)
        bar.callback(0, total=2000)  # an op that learns its total as it runs
        assert bar.bar.tasks[0].total == 2000
    assert bar.bar is None  # closed, and transient: erased
    err = capsys.readouterr().err
    assert "verify" in err and capsys.readouterr().out == ""


def test_flags_force_it_and_a_pipe_gets_none(monkeypatch):
    class Tty:
        def isatty(self):
            return True

    class Pipe:
        def isatty(self):
            return False

    assert P.wanted(True, Pipe()) and not P.wanted(False, Tty())
    assert P.wanted(None, Tty()) and not P.wanted(None, Pipe())
    assert P.Bar("x", 10, False).callback is None  # --no-progress: the ops get no callback at all


def _big_wal(tmp_path, chunks=6, records=400):
    return write_dir(tmp_path / "wal", {i: make_chunk(range(i * records + 1, (i + 1) * records + 1),
                                                      payload_for=lambda s: os.urandom(64))
                                        for i in range(chunks)})


@pytest.mark.parametrize("argv", [
    ["verify", "{wal}"], ["stats", "{wal}"], ["inspect", "{wal}", "--jsonl"], ["salvage", "{wal}", "--out", "{out}"],
    ["replay", "{wal}", "--out", "{out}.jsonl"], ["recover", "--log", "{wal}"],
    ["stats", "{seg}"], ["inspect", "{seg}", "--jsonl"], ["replay", "{seg}", "--out", "{out}.jsonl"],
    ["recover", "--log", "{seg}"],
])
def test_every_long_command_reports_each_chunk_read_and_prints_nothing_itself(tmp_path, monkeypatch, capsys, argv):
    wal = _big_wal(tmp_path)
    seg = str(tmp_path / "segments")
    shutil.copytree(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                                 "segments"), seg)
    src = seg if "{seg}" in argv else wal
    sizes = sorted(os.path.getsize(os.path.join(src, n)) for n in os.listdir(src))
    calls = []

    class Spy(P.Bar):
        def advance(self, n, total=None):
            calls.append(n)

    for mod in ("verify_cmd", "stats_cmd", "inspect_cmd", "salvage_cmd", "replay_cmd", "recover_cmd"):
        m = __import__(f"walctl.cli.{mod}", fromlist=["x"])  # imported before P.Bar is patched: a module
        if hasattr(m, "Bar"):                                 # first imported under the patch kept the Spy
            monkeypatch.setattr(m, "Bar", Spy)
    monkeypatch.setattr(P, "Bar", Spy)
    args = [a.format(wal=wal, seg=seg, out=str(tmp_path / "out")) for a in argv] + ["--progress"]
    assert run(args) == 0
    assert sorted(c for c in calls if c) == sizes and sum(calls) == sum(sizes)
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err  # the spy drew nothing, and nothing else did


def test_no_progress_means_no_callback(tmp_path, monkeypatch):
    wal = _big_wal(tmp_path, chunks=2, records=10)
    seen = []
    import walctl.cli.verify_cmd as vc

    real = vc.verify_paths
    monkeypatch.setattr(vc, "verify_paths", lambda paths, **kw: seen.append(kw["progress"]) or real(paths, **kw))
    assert run(["verify", wal, "--no-progress"]) == 0
    assert run(["verify", wal, "--progress"]) == 0
    assert seen[0] is None and callable(seen[1])


def test_piped_long_work_prints_no_progress_and_forced_progress_draws_a_bar(tmp_path):
    wal = _big_wal(tmp_path)
    slow = ("import time, walctl.cli.progress as p, sys; p.SHOW_AFTER_S = 0.0; "
            "from walctl.cli import main; main(sys.argv[1:])")
    piped = subprocess.run([sys.executable, "-c", slow, "stats", wal], capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == ""
    forced = subprocess.run([sys.executable, "-c", slow, "stats", wal, "--progress"], capture_output=True, text=True)
    assert forced.returncode == 0 and "stats" in forced.stderr
    assert "\r" in forced.stderr or "\x1b" in forced.stderr  # drawn in place, as on a terminal
    assert forced.stdout == piped.stdout  # the bar never touches stdout


# A real SIGINT, sent by the process to itself at a chosen call of the fs seam: the interrupt lands at the
# same step every run (no sleeps, no race with a timer).
SIGINT_AT = ("import os, signal, sys, walctl.store.fs as F\n"
             "real, n = F.OsFileSystem.{op}, [0]\n"
             "def hooked(self, *a, **k):\n"
             "    n[0] += 1\n"
             "    if n[0] == {at}: os.kill(os.getpid(), signal.SIGINT)\n"
             "    return real(self, *a, **k)\n"
             "F.OsFileSystem.{op} = hooked\n"
             "from walctl.cli import main; main(sys.argv[1:])")


def _seam_calls(monkeypatch, op, argv) -> int:
    """How many times a run of `argv` calls the seam's `op`."""
    from walctl.store import fs as F

    real, n = getattr(F.OsFileSystem, op), [0]

    def counted(self, *a, **k):
        n[0] += 1
        return real(self, *a, **k)

    with monkeypatch.context() as m:
        m.setattr(F.OsFileSystem, op, counted)
        run(argv)
    return n[0]


@pytest.mark.parametrize("op, at, left", [("write", 3, "was removed"), ("unlink", 1, "still marked unfinished"),
                                          ("map_read", -1, "is complete")])
def test_ctrl_c_says_what_was_left_and_exits_130(tmp_path, monkeypatch, op, at, left):
    import shlex

    wal = _big_wal(tmp_path, chunks=8, records=200)
    out = tmp_path / "salvaged"
    if at < 0:  # the last read of the run: the final check of the finished copy
        at = _seam_calls(monkeypatch, op, ["salvage", wal, "--out", str(tmp_path / "probe")])
    p = subprocess.run([sys.executable, "-c", SIGINT_AT.format(op=op, at=at), "salvage", wal, "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 130, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr and p.stdout == ""
    assert lines[0].startswith("walctl: interrupted;") and left in lines[0], lines[0]
    if left == "was removed":  # mid-copy: salvage cleaned its own copy at once, and says so
        assert f"{out}.tmp" in lines[0] and not os.path.exists(str(out) + ".tmp") and not out.exists()
    else:  # after the final rename: the copy is whole (still marked ours, or final and only unchecked)
        assert not os.path.exists(str(out) + ".tmp") and sorted(os.listdir(out))[-1] == "wal-000007.bin"
        assert (left == "is complete") != os.path.exists(out / ".walctl-salvage")
    # the command the line names, run as printed, does what it says
    printed = shlex.split(lines[0].split("`")[1])
    assert printed[0] == "walctl" and run(printed[1:]) == 0
    assert not os.path.exists(str(out) + ".tmp") and len([n for n in os.listdir(out) if n.endswith(".bin")]) == 8


def test_checkpoint_restore_counts_the_file_read_then_the_state_written(tmp_path, monkeypatch):
    from walctl.cli import checkpoint_cmd
    from walctl.ops.checkpoints.checkpoint import create

    made = create(str(tmp_path / "ck"), {"blob": os.urandom(3 << 20).hex()}, 7)  # ~6 MB of state
    calls = []

    class Spy(P.Bar):
        def advance(self, n, total=None, more_total=0):
            calls.append((n, more_total))

    monkeypatch.setattr(checkpoint_cmd, "Bar", Spy)
    from walctl.ops.checkpoints import checkpoint as ops_ck

    monkeypatch.setattr(ops_ck, "PROGRESS_PIECE_BYTES", 256 << 10)
    out = tmp_path / "state.json"
    assert run(["checkpoint", "restore", made.path, "--out", str(out), "--progress"]) == 0
    written, size = os.path.getsize(out), os.path.getsize(made.path)
    read = calls[:calls.index((0, written))]  # the file, read and checked in pieces: the bar moves as it goes
    assert sum(n for n, _ in read) == size and all(m == 0 for _, m in read)
    assert max(n for n, _ in read) <= 256 << 10 and len(read) == 1 + -(-(size - 256) // (256 << 10)) > 4
    rest = calls[len(read) + 1:]  # then the write adds its bytes to the work, and does them
    assert sum(n for n, _ in rest) == written and rest
    calls.clear()
    out.unlink()
    assert run(["checkpoint", "restore", made.path, "--out", str(out), "--no-progress"]) == 0 and calls == []


# ---- rate, time left, where it goes, --progress=json (issue #26) ------------------------------------

def _read_all(fd) -> bytes:
    import select

    out = b""
    while select.select([fd], [], [], 0)[0]:
        try:
            got = os.read(fd, 65536)
        except OSError:
            break
        if not got:
            break
        out += got
    return out


def test_in_a_terminal_the_bar_shows_rate_and_time_left_on_stderr_while_stdout_is_piped(tmp_path, monkeypatch,
                                                                                          capfd):
    import pty

    wal = _big_wal(tmp_path)
    master, slave = pty.openpty()
    tty = os.fdopen(slave, "w", buffering=1)
    monkeypatch.setattr(sys, "stderr", tty)  # stderr a terminal, stdout (captured) a pipe: `| gzip > f`
    monkeypatch.setitem(P.Bar.__init__.__kwdefaults__, "clock", Ticks())
    monkeypatch.delenv("NO_COLOR", raising=False)
    try:
        assert run(["replay", wal]) == 0
        tty.flush()
        drawn = _read_all(master).decode("utf-8", "replace")
    finally:
        tty.close()
        os.close(master)
    out = capfd.readouterr().out
    assert len(out.splitlines()) == 6 * 400 and "replay" not in out  # the records, and only them, on stdout
    assert "replay" in drawn and "/s" in drawn  # the bar, on the terminal, with a rate
    assert "? " not in drawn.replace("\x1b[?25l", "").replace("\x1b[?25h", "")  # never `? -:--:--`
    assert re.search(r"\d:\d\d:\d\d", drawn) and "-:--:--" not in drawn  # a time left


def test_progress_json_lines_validate_and_count_every_byte(tmp_path, monkeypatch, capfd):
    jsonschema = pytest.importorskip("jsonschema")
    import json

    from walctl import schemas

    wal = _big_wal(tmp_path)
    monkeypatch.setitem(P.Bar.__init__.__kwdefaults__, "clock", Ticks())  # each update is a second later
    assert run(["verify", wal, "--progress=json"]) == 0
    cap = capfd.readouterr()
    lines = [json.loads(ln) for ln in cap.err.splitlines() if ln.startswith('{"schema": "walctl.progress/1"')]
    check = jsonschema.Draft202012Validator(schemas.load("walctl.progress/1"))
    for ln in lines:
        check.validate(ln)
    total = sum(os.path.getsize(os.path.join(wal, f)) for f in os.listdir(wal))
    assert [ln["final"] for ln in lines] == [False] * (len(lines) - 1) + [True]
    assert lines[-1]["done_bytes"] == lines[-1]["total_bytes"] == total
    assert all(a["done_bytes"] <= b["done_bytes"] for a, b in zip(lines, lines[1:]))
    assert all(ln["rate_bytes_per_s"] > 0 for ln in lines) and lines[0]["eta_s"] > 0
    assert "CLEAN" in cap.out  # stdout keeps the report
    assert run(["verify", wal, "--progress=json", "--no-progress"]) == 0  # --no-progress still wins
    assert "walctl.progress/1" not in capfd.readouterr().err
