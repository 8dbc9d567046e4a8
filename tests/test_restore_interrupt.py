"""`archive restore` interrupted (Ctrl-C, injected at each step through the fs seam: tests/faultfs.py):
the line it prints says what its cleanup really did, OUT holds nothing of the run (an OUT the operator
made empty stays, empty), and the rerun it prints, run as printed, restores everything."""
from __future__ import annotations

import os
import shlex

import pytest

from faultfs import interrupt_at
from test_archive import events, make_checkpoints, make_wal
from walctl.ops.archive.push import push

OPS = ("mkdir", "rename", "open_new", "open_append", "unlink", "fsync_dir")


@pytest.fixture
def archive(tmp_path):
    wal = make_wal(tmp_path / "wal", n=120, max_chunk=4000)
    ck = make_checkpoints(tmp_path / "ck", [100, 200])
    url = "file://" + str(tmp_path / "archive")
    assert push(wal, url, namespace="n", checkpoints=ck).exit_code == 0
    return url, wal


def steps(tmp_path, cli, monkeypatch, url, premade=False) -> int:
    """How many seam steps a whole restore takes (the restore itself is checked by the tests)."""
    if premade:
        os.mkdir(tmp_path / "count")
    counter = interrupt_at(monkeypatch, 10 ** 9, OPS)
    assert cli("archive", "restore", url, str(tmp_path / "count")).code == 0
    monkeypatch.undo()
    return counter.calls


def interrupted_line(err: str) -> str:
    (line,) = [x for x in err.splitlines() if x.startswith("walctl: interrupted")]
    return line


def sweep(tmp_path, cli, monkeypatch, url, wal, premade, points=None):
    total = steps(tmp_path, cli, monkeypatch, url, premade)
    want = events(tmp_path / "count" / "wal")
    assert want == events(wal)[:len(want)] and len(want) > 60
    assert total > 10
    said = set()
    for n in points(total) if points else range(1, total + 1):
        out = tmp_path / f"out{n}"
        if premade:
            os.mkdir(out)  # the operator's empty directory: never removed
        hit = interrupt_at(monkeypatch, n, OPS)
        r = cli("archive", "restore", url, str(out))
        monkeypatch.undo()
        assert r.code == 130 and hit.fired, (n, r.err)
        line = interrupted_line(r.err)
        assert "; run the same restore again: " in line, (n, hit.fired, line)
        head, rerun = line.split("; run the same restore again: ")
        # what it says is what is there: OUT as before the run, and no staging directory
        assert os.path.exists(out) == premade and (not premade or os.listdir(out) == [])
        assert not [d for d in os.listdir(tmp_path) if d.startswith(".walctl-restore-")]
        if "removed the " in head:
            assert head.endswith(f"it had written in {out}" + ("" if premade else f", {out} itself included"))
        else:
            assert head in (f"walctl: interrupted before anything was written to {out}",
                            f"walctl: interrupted; nothing had been written to {out}")
        said.add("removed" if "removed the " in head else "nothing")
        # the printed command, run as printed
        argv = shlex.split(rerun)
        assert argv[:3] == ["walctl", "archive", "restore"]
        again = cli(*argv[1:])
        assert again.code == 0, (n, again.err)
        assert events(out / "wal") == want
        assert sorted(os.listdir(out / "checkpoints")) == sorted(os.listdir(tmp_path / "count" / "checkpoints"))
    # the points met both kinds of moment: before OUT had anything, and with files in it
    assert said == {"removed", "nothing"}


@pytest.mark.parametrize("premade", [False, True])
def test_ctrl_c_at_several_steps_says_what_was_removed_and_the_printed_rerun_restores(tmp_path, cli, monkeypatch,
                                                                                      archive, premade):
    # the first step (a download opened), OUT made, chunks adopted, the checkpoint, the last step
    sweep(tmp_path, cli, monkeypatch, *archive, premade,
          points=lambda total: sorted({1, 3, total // 2, total - 3, total}))


@pytest.mark.slow
@pytest.mark.parametrize("premade", [False, True])
def test_ctrl_c_at_every_step_of_a_restore(tmp_path, cli, monkeypatch, archive, premade):
    sweep(tmp_path, cli, monkeypatch, *archive, premade)


def test_ctrl_c_when_the_checkpoint_is_put_in_place_counts_what_it_removes(tmp_path, cli, monkeypatch, archive):
    url, _ = archive
    assert cli("archive", "restore", url, str(tmp_path / "count")).code == 0
    chunks = sorted(os.listdir(tmp_path / "count" / "wal"))
    assert len(chunks) >= 3 and len(os.listdir(tmp_path / "count" / "checkpoints")) == 1
    # open_append: each adopted chunk's fsync, then the checkpoint's .tmp: Ctrl-C there
    out = tmp_path / "out"
    hit = interrupt_at(monkeypatch, len(chunks) + 1, ("open_append",))
    r = cli("archive", "restore", url, str(out))
    monkeypatch.undo()
    assert hit.fired[1].startswith(str(out / "checkpoints") + os.sep) and hit.fired[1].endswith(".tmp")
    line = interrupted_line(r.err)
    # OUT/wal's chunks, OUT/checkpoints (empty yet), OUT/wal and OUT
    assert line == (f"walctl: interrupted; removed the {len(chunks)} files and 3 directories it had written in "
                    f"{out}, {out} itself included; run the same restore again: walctl archive restore {url} {out}")
    assert not os.path.exists(out)


def test_ctrl_c_again_during_the_cleanup_does_not_leave_half_of_it(tmp_path, cli, monkeypatch, archive):
    url, _ = archive
    assert cli("archive", "restore", url, str(tmp_path / "count")).code == 0
    chunks = len(os.listdir(tmp_path / "count" / "wal"))
    out = tmp_path / "out"
    # the first Ctrl-C at the checkpoint's .tmp, two more at the cleanup's first two unlinks
    hit = interrupt_at(monkeypatch, chunks + 1, ("open_append", "unlink"), again=(chunks + 3, chunks + 4))
    r = cli("archive", "restore", url, str(out))
    monkeypatch.undo()
    assert r.code == 130 and len(hit.fired_again) == 2 and hit.fired_again[0][0] == "unlink"
    line = interrupted_line(r.err)
    assert line.startswith(f"walctl: interrupted; removed the {chunks} files and 3 directories"), line
    assert not os.path.exists(out)
    assert cli(*shlex.split(line.split("again: ")[1])[1:]).code == 0
    assert events(out / "wal") == events(tmp_path / "count" / "wal")


def test_what_the_cleanup_could_not_remove_is_named_and_the_printed_steps_work(tmp_path, cli, monkeypatch, archive):
    """A chunk the cleanup cannot remove (an I/O error on unlink): the line names it and the directories
    that still hold it, says to remove them, and the printed command works once they are removed."""
    import shutil

    from walctl.errors import EnvironmentProblem
    from walctl.store.fs import OsFileSystem

    url, _ = archive
    out = tmp_path / "out"
    stuck = str(out / "wal" / "wal-000000.bin")
    real_unlink = OsFileSystem.unlink

    def unlink(self, path):
        if path == stuck:
            raise EnvironmentProblem("input/output error", path)
        return real_unlink(self, path)

    hit = interrupt_at(monkeypatch, 1, ("open_append",))  # Ctrl-C at the first adopted chunk's fsync
    hit.n = 3  # after two chunks were adopted
    monkeypatch.setattr(OsFileSystem, "unlink", unlink)
    r = cli("archive", "restore", url, str(out))
    monkeypatch.undo()
    line = interrupted_line(r.err)
    left = (f"left (could not be removed): {stuck} (input/output error); {out / 'wal'} (not empty: 1 entry in "
            f"it); {out} (not empty: 1 entry in it)")
    assert line.startswith(f"walctl: interrupted; removed the 1 file and 0 directories it had written in {out}; "
                           f"{left}; remove what is left, then run the same restore again: walctl archive restore "
                           f"{url} {out}"), line
    assert sorted(os.listdir(out)) == ["wal"] and os.listdir(out / "wal") == ["wal-000000.bin"]
    shutil.rmtree(out)  # what the line says to remove
    assert cli(*shlex.split(line.split("then run the same restore again: ")[1])[1:]).code == 0
    assert cli("archive", "restore", url, str(tmp_path / "ref")).code == 0
    assert events(out / "wal") == events(tmp_path / "ref" / "wal") and len(events(out / "wal")) > 60
