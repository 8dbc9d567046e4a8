"""Issue 24, "The target is resolved once": a mutating command opens its target directory once and
resolves every later step, read or change, from that descriptor (walctl/store/root.py), so swapping the
target itself for a symbolic link mid-run redirects nothing. Real file system, except the simulated one's
story at the end. Each case builds a sentinel tree (a WAL-like copy: what a redirected step would find and
change), swaps the target for a link to it at a chosen step of the seam (deterministic, via the seam's
hook) or all along from a background thread (bounded), and asserts the sentinel is byte-identical
afterwards (name, type, mode, size, sha256, mtime) and that the directory the run started in got the work."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
import time

import pytest

from conftest import make_chunk, tree_digest, write_dir
from walctl.store.fs import OsFileSystem

HOOK_POINTS = 24  # swap points tried per command (spread over all of its steps)


def healthy(path) -> str:
    return write_dir(path, {0: make_chunk(range(1, 4)), 1: make_chunk(range(4, 7)), 2: make_chunk(range(7, 10))})


def torn(path) -> str:
    d = healthy(path)
    with open(os.path.join(d, "wal-000002.bin"), "ab") as f:
        f.write(make_chunk([10])[8:38])  # a record cut after 30 bytes: a torn tail
    return d


def read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _ident(name: str) -> str:
    return name.replace(" ", "_").replace("-", "_")


class Case:
    """One mutating command: `target` is the directory swapped; `argv` the command; `check(real)` asserts
    the work landed in `real`, the directory the run started in (wherever it is now)."""

    def __init__(self, tmp, name):
        self.tmp, self.name = tmp, name
        # What a redirected step would find and change: chunks of the same names, other bytes.
        self.sentinel = tmp / "sentinel"
        write_dir(self.sentinel, {i: make_chunk(range(3 * i + 1, 3 * i + 4), lambda s: b"sentinel-%d" % s)
                                  for i in range(3)})
        (self.sentinel / "marker").write_bytes(b"not walctl's\n")
        getattr(self, "setup_" + _ident(name))()

    def setup_repair(self):
        self.target = torn(self.tmp / "wal")
        self.argv, self.want = ["repair", self.target, "--apply"], (0,)

    def check_repair(self, real):
        assert os.path.getsize(os.path.join(real, "wal-000002.bin")) == len(make_chunk(range(7, 10)))
        (kept,) = [n for n in os.listdir(os.path.join(real, ".quarantine")) if n.startswith("wal-000002.bin.")]
        assert read(os.path.join(real, ".quarantine", kept)) == make_chunk([10])[8:38]
        assert os.path.exists(os.path.join(real, ".walctl.lock"))

    def setup_quarantine_move(self):
        self.target = healthy(self.tmp / "wal")
        self.argv = ["quarantine", "move", self.target, "wal-000000.bin", "--reason", "swap test", "--apply"]
        self.want = (4, 0)  # the move leaves a gap before seq 4, by design (the exit is verify's)

    def check_quarantine_move(self, real):
        assert read(os.path.join(real, ".quarantine", "wal-000000.bin")) == make_chunk(range(1, 4))
        assert not os.path.exists(os.path.join(real, "wal-000000.bin"))
        line = json.loads(read(os.path.join(real, ".quarantine", "MANIFEST.jsonl")).splitlines()[-1])
        assert (line["source"], line["sha256"]) == ("wal-000000.bin",
                                                   hashlib.sha256(make_chunk(range(1, 4))).hexdigest())

    def setup_compact(self):
        self.target = healthy(self.tmp / "wal")
        self.argv, self.want = ["compact", self.target, "--to", "6", "--apply"], (0,)

    def check_compact(self, real):
        assert sorted(n for n in os.listdir(real) if n.startswith("wal-")) == ["wal-000002.bin"]
        assert read(os.path.join(real, ".quarantine", "wal-000000.bin")) == make_chunk(range(1, 4))
        assert read(os.path.join(real, ".quarantine", "wal-000001.bin")) == make_chunk(range(4, 7))

    def setup_salvage(self):
        self.source = torn(self.tmp / "src")
        self.target = str(self.tmp / "out-parent")  # salvage's target: the directory OUT and OUT.tmp live in
        os.mkdir(self.target)
        self.argv, self.want = ["salvage", self.source, "--out", os.path.join(self.target, "out")], (0,)

    def check_salvage(self, real):
        got = b"".join(read(os.path.join(real, "out", n))[8:] for n in sorted(os.listdir(os.path.join(real, "out")))
                      if n.startswith("wal-"))  # the chunks (the copy has its ledger too)
        assert got == make_chunk(range(1, 10))[8:]
        assert sorted(os.listdir(real)) == ["out"]

    def setup_archive_restore(self):
        from walctl.cli import run

        wal = healthy(self.tmp / "wal")
        self.url = "file://" + str(self.tmp / "arch")
        assert run(["archive", "push", wal, self.url]) == 0
        self.target = str(self.tmp / "restored")  # made by the restore itself
        self.argv, self.want = ["archive", "restore", self.url, self.target], (0,)

    def check_archive_restore(self, real):
        assert sorted(os.listdir(os.path.join(real, "wal"))) == ["wal-000000.bin", "wal-000001.bin"]
        assert read(os.path.join(real, "wal", "wal-000001.bin")) == make_chunk(range(4, 7))


    def setup_archive_push___delete_local(self):
        self.target = healthy(self.tmp / "wal")
        self.arch = self.tmp / "arch"
        self.argv = ["archive", "push", self.target, f"file://{self.arch}", "--delete-local", "--to", "6",
                     "--apply"]
        # 6: an upload the swap made read other bytes than the file described is refused by the archive's
        # own check ("upload not verified"); nothing is deleted for it
        self.want = (0, 6)

    def check_archive_push___delete_local(self, real):
        # A chunk is deleted only when the archive holds exactly its bytes (hashed again through the
        # target's descriptor: an upload that read the sentinel through the swapped path does not match).
        for i in range(2):
            name, data = f"wal-00000{i}.bin", make_chunk(range(3 * i + 1, 3 * i + 4))
            if not os.path.exists(os.path.join(real, name)):
                assert read(self.arch / "wal" / "chunks" / name) == data
                assert f'"source": "{name}"' in read(os.path.join(real, ".quarantine", "MANIFEST.jsonl")).decode()
            else:
                assert read(os.path.join(real, name)) == data
        assert read(os.path.join(real, "wal-000002.bin")) == make_chunk(range(7, 10))


    def setup_archive_push(self):  # the target: a file:// archive's root
        self.wal = healthy(self.tmp / "wal")
        self.target = str(self.tmp / "arch")
        os.mkdir(self.target)
        self.argv, self.want = ["archive", "push", self.wal, f"file://{self.target}"], (0,)

    def check_archive_push(self, real):
        for i in range(2):  # the closed chunks, shipped and listed (the last one is the writer's)
            assert read(os.path.join(real, "wal", "chunks", f"wal-00000{i}.bin")) == make_chunk(range(3 * i + 1, 3 * i + 4))
        manifest = json.loads(read(os.path.join(real, "wal", "MANIFEST.json")))
        assert sorted(o["name"] for o in manifest["objects"]) == ["wal-000000.bin", "wal-000001.bin"], manifest


    def setup_write(self):  # opening cuts the torn tail (kept), then appends seq 10 (sync=batch: the helper)
        self.target = torn(self.tmp / "wal")
        self.argv, self.want = ["write", self.target, "--type", "REMEMBER", "--id", "m", "--payload", "hi"], (0,)

    def check_write(self, real):
        from walctl.ops.wal.records import Record, RecordWalk

        got = [(r.sequence, r.payload) for r in RecordWalk(real) if isinstance(r, Record)]
        assert got == [(s, b"payload-%d" % s) for s in range(1, 10)] + [(10, b"hi")]
        assert any(n.startswith("wal-000002.bin.") for n in os.listdir(os.path.join(real, ".quarantine")))


class Swapper:
    """Swaps `target` for a link to the sentinel (the real directory renamed aside), and back. A target
    that does not exist yet gets a link planted in its place."""

    def __init__(self, case):
        self.case, self.aside = case, str(case.tmp / "aside")
        self.moved = self.planted = False

    def swap(self):
        t = self.case.target
        if self.moved or self.planted:
            return
        if os.path.isdir(t) and not os.path.islink(t):
            os.rename(t, self.aside)
            self.moved = True
        else:
            self.planted = True
        os.symlink(str(self.case.sentinel), t)

    def back(self):
        if self.moved or self.planted:
            os.unlink(self.case.target)
        if self.moved:
            os.rename(self.aside, self.case.target)
        self.moved = self.planted = False


COMMANDS = ("repair", "quarantine move", "compact", "salvage", "archive restore", "archive push --delete-local",
            "archive push", "write")


def run_case(case, hook, monkeypatch, capsys):
    """Runs the case with `hook(op, path)` called at each step resolved from the target (opened by then:
    a link there before it was opened is the operator's path, followed once by design)."""
    from walctl.cli import run

    def on_target(op, path):
        if os.path.abspath(path) == case.target or os.path.abspath(path).startswith(case.target + os.sep):
            hook(op, path)

    monkeypatch.setattr(OsFileSystem, "hook", staticmethod(on_target))
    try:
        code = run([str(a) for a in case.argv])
    finally:
        monkeypatch.setattr(OsFileSystem, "hook", None)
    out = capsys.readouterr()
    return code, out


def count_steps(tmp, name, monkeypatch, capsys) -> int:
    case = Case(tmp, name)
    calls = []
    code, out = run_case(case, lambda op, path: calls.append(op), monkeypatch, capsys)
    assert code in case.want, out
    getattr(case, "check_" + _ident(name))(case.target)
    return len(calls)


@pytest.mark.parametrize("name", COMMANDS)
def test_a_swap_at_any_step_of_the_seam_redirects_nothing(name, tmp_path, monkeypatch, capsys):
    steps = count_steps(tmp_path / "count", name, monkeypatch, capsys)
    assert steps > 3
    points = sorted({1 + i * steps // HOOK_POINTS for i in range(HOOK_POINTS)} | {1, 2, steps})
    for n in points:
        tmp = tmp_path / f"at-{n}"
        tmp.mkdir()
        case = Case(tmp, name)
        before = tree_digest(case.sentinel)
        swapper, seen = Swapper(case), []

        def hook(op, path):
            seen.append(op)
            if len(seen) == n:
                swapper.swap()

        code, out = run_case(case, hook, monkeypatch, capsys)
        planted = swapper.planted
        swapper.back()  # the directory the run started in is the target again
        assert tree_digest(case.sentinel) == before, (name, n, "the sentinel changed")
        if planted:  # a link planted where the restore makes OUT: refused, nothing made, exit 7
            assert code == 7 and "symbolic link" in out.err, (n, out.err)
            continue
        assert code in case.want, (name, n, out.err)
        getattr(case, "check_" + _ident(name))(case.target)


@pytest.mark.parametrize("name", COMMANDS)
def test_a_background_swapper_redirects_nothing(name, tmp_path, monkeypatch, capsys):
    """Ten trials per command; a thread swaps the target and back in a loop (bounded: until the command
    ends, at most 5 s) from the command's first step on (the target was opened before: a link there at the
    start would be the operator's path, followed once)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the swapper with the command as finely as the GIL allows
    try:
        for trial in range(10):
            tmp = tmp_path / f"trial-{trial}"
            tmp.mkdir()
            case = Case(tmp, name)
            before = tree_digest(case.sentinel)
            swapper, stop, started, swaps = Swapper(case), threading.Event(), [], [0]
            lock = threading.Lock()

            def loop():
                end = time.monotonic() + 5
                while not stop.is_set() and time.monotonic() < end:
                    with lock:
                        swapper.swap()
                        swaps[0] += 1
                    time.sleep(0)
                    with lock:
                        if swapper.moved:  # (a planted link stays: the restore must refuse it)
                            swapper.back()

            def hook(op, path):
                if not started:
                    started.append(threading.Thread(target=loop, daemon=True))
                    started[0].start()

            code, out = run_case(case, hook, monkeypatch, capsys)
            stop.set()
            started[0].join(10)
            assert not started[0].is_alive()
            planted = swapper.planted
            swapper.back()
            assert swaps[0] > 0
            assert tree_digest(case.sentinel) == before, (name, trial, "the sentinel changed")
            if planted:
                assert code == 7 and "symbolic link" in out.err, out.err
                continue
            assert code in case.want, (name, trial, out.err)
            getattr(case, "check_" + _ident(name))(case.target)
    finally:
        sys.setswitchinterval(old)


def test_a_target_typed_through_a_link_is_followed_once_and_said(tmp_path, cli):
    real = torn(tmp_path / "real")
    link = tmp_path / "link"
    os.symlink(real, link)
    r = cli("repair", str(link), "--apply", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["targets"] == [{"path": str(link), "resolved": real}]
    assert f"target: {link} -> {real}" in r.err.splitlines()
    assert os.path.getsize(os.path.join(real, "wal-000002.bin")) == len(make_chunk(range(7, 10)))
    assert os.path.islink(link) and os.path.isdir(os.path.join(real, ".quarantine"))
    r = cli("repair", str(link))  # text: the same line; nothing followed is said when nothing was
    assert f"target: {link} -> {real}" in r.err.splitlines()
    r = cli("repair", real, "--json")
    assert "targets" not in r.json() and "target:" not in r.err


def test_the_simulated_seam_models_the_descriptor(tmp_path):
    """tests/simfs.py pins a root as the real seam does: a repair whose target is swapped for a link at
    its Nth step of the simulated file system still cuts the tail in the directory it started in."""
    from simfs import load_tree
    from walctl.ops.wal.repair import repair

    torn(tmp_path / "wal")
    torn(tmp_path / "sentinel")
    probe = load_tree(str(tmp_path / "wal"), "/r")
    steps = []
    probe.hook = lambda op, path: steps.append(op)
    repair("/r", apply=True, fs=probe)
    assert len(steps) > 3
    for n in range(1, len(steps) + 1):
        fs = load_tree(str(tmp_path / "wal"), "/r")
        for d, _, files in os.walk(tmp_path / "sentinel"):
            fs.makedirs_durable("/s")
            for f in files:
                fd = fs.open_append(f"/s/{f}", create=True)
                fs.write(fd, read(os.path.join(d, f)))
                fs.close(fd)
        fs.settle()
        sentinel = {p: bytes(i.data) for p, i in fs.files.items() if p.startswith("/s/")}
        seen = []

        def hook(op, path, fs=fs, seen=seen, n=n):
            seen.append(op)
            if len(seen) == n:
                fs.move_dir_now("/r", "/moved")
                fs.symlink("/s", "/r")

        fs.hook = hook
        rep = repair("/r", apply=True, fs=fs)
        assert rep.applied and [c.file for c in rep.cuts] == ["wal-000002.bin"]
        assert {p: bytes(i.data) for p, i in fs.files.items() if p.startswith("/s/")} == sentinel
        here = "/moved" if len(seen) >= n else "/r"
        assert bytes(fs.files[f"{here}/wal-000002.bin"].data) == make_chunk(range(7, 10))
        assert any(p.startswith(f"{here}/.quarantine/wal-000002.bin.") for p in fs.files)
