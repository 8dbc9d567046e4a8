"""A disk that fills up (ENOSPC, injected under the fs seam by tests/faultfs.py): every command names the
file it could not write, in text and in JSON, and `write` says through which sequence the log is durable
(and that is true: those records read back, nothing after them was acknowledged)."""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from conftest import DATA, make_chunk, write_dir
from faultfs import full_disk
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.write import WalWriter
from walctl.store.lock import holder_text

TASK = "3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77.wal"


def wal_dir(path, n=40, chunk=2000):
    with WalWriter(str(path), sync="none", max_chunk_bytes=chunk) as w:
        for i in range(n):
            w.append(i % 4, f"m{i}", b"payload-%d" % i, 1000 + i)
    return str(path)


def error_path(r):
    """(the path the text error names, the JSON error document's path)."""
    line = r.err.strip().splitlines()[-1]
    assert line.startswith("walctl: error: ") and ": no space left on device" in line, line
    return line[len("walctl: error: "):line.index(": no space left on device")]


def torn(path):
    with open(os.path.join(path, "wal-000000.bin"), "ab") as f:
        f.write(b"\x00" * 5)  # a torn tail repair has to cut (and keep first)
    return path


def setups(tmp_path, cli):
    """(name, argv) for each command, its target prepared while the disk still had room."""
    wal = wal_dir(tmp_path / "wal")
    archive = "file://" + str(tmp_path / "archive")
    assert cli("archive", "push", wal, archive).code == 0
    task = tmp_path / "tasks" / TASK
    os.makedirs(task.parent)
    assert cli("tasklog", "append", str(task), "--entry", '{"type": "InstructionStart", "instruction": "go"}').code == 0
    root = str(tmp_path / "agents")
    shutil.copytree(os.path.join(DATA, "substrat", "crashed-active", "root"), root)
    return {
        "seal": ["seal", write_dir(tmp_path / "s", {0: make_chunk(range(1, 21)), 1: make_chunk(range(21, 41)),
                                                    2: make_chunk(range(41, 45))}), "--apply"],
        "repair": ["repair", torn(wal_dir(tmp_path / "r")), "--apply"],
        "archive restore": ["archive", "restore", archive, str(tmp_path / "out")],
        "agents recover": ["agents", "recover", root, "--apply"],
        "tasklog append": ["tasklog", "append", str(task), "--entry", '{"type": "ShutdownMarker"}'],
    }


# which file each command names (under tmp_path): the lock's note is the first write on a full disk
WHERE = {
    "seal": (r"s/\.walctl\.lock", r"s/\.walctl/ledger\.jsonl"),
    "repair": (r"r/\.walctl\.lock", r"r/\.quarantine/MANIFEST\.jsonl"),
    "archive restore": (r"\.walctl-restore-[^/]+/wal-000000\.bin",) * 2,  # the download, staged beside OUT
    "agents recover": (r"agents/\.walctl\.lock", r"agents/\.quarantine/[^/]+__session\.json\.0-\d+\.[0-9a-f]+\.tmp"),
    "tasklog append": (r"tasks/\.walctl\.lock", "tasks/" + re.escape(TASK)),
}


# a full disk (the lock's note is the first write), and one with room for the lock's note and a few
# bytes more (the command's own files are where it runs out)
@pytest.mark.parametrize("after_lock", [False, True])
def test_every_command_names_the_file_the_disk_refused(tmp_path, cli, monkeypatch, after_lock):
    cases = setups(tmp_path, cli)
    for name, argv in cases.items():
        room = len(holder_text(name)) + 10 if after_lock else 0
        disk = full_disk(monkeypatch, room)
        text = cli(*argv)
        disk.room = room
        doc = cli(*argv, "--json") if name != "tasklog append" else None
        monkeypatch.undo()
        assert text.code == 6, (name, text.err)
        named = error_path(text)
        assert re.fullmatch(re.escape(str(tmp_path)) + "/" + WHERE[name][after_lock], named), (name, named)
        assert disk.refused >= 1
        if name == "archive restore":  # the download failed before OUT was made: no OUT, no staging file
            assert text.err.strip().endswith(f": no space left on device (a download staged beside {argv[-1]}; "
                                             f"the staging directory is removed)")
            assert not os.path.exists(named) and not os.path.exists(argv[-1])
        if doc is not None:
            assert doc.code == 6
            got = json.loads(doc.out)
            err, named = got.get("error"), error_path(doc)
            if isinstance(err, dict):  # walctl.error/1
                assert err["path"] == named and err["message"].startswith("no space left on device"), (name, got)
            else:  # the command's own document (its key for the message is its own): names the file
                said = err or got.get("message")
                assert said.startswith(f"{named}: no space left on device"), (name, got)
            assert got["exit_code"] == 6


def test_full_disk_names_the_lock_file_first(tmp_path, cli, monkeypatch):
    wal = wal_dir(tmp_path / "wal")
    full_disk(monkeypatch, 0)
    r = cli("seal", wal, "--apply")
    assert r.code == 6 and error_path(r) == os.path.join(wal, ".walctl.lock")


@pytest.mark.parametrize("sync", ["always", "batch", "none"])
def test_write_says_through_which_sequence_the_log_is_durable(tmp_path, cli, monkeypatch, sync):
    d = wal_dir(tmp_path / "w", n=10)
    lines = "".join(json.dumps({"type": "REMEMBER", "id": f"n{i}", "payload": "x" * 30}) + "\n" for i in range(200))
    for json_out in (False, True):
        monkeypatch.setattr("sys.stdin", __import__("io").StringIO(lines))
        full_disk(monkeypatch, 3000)
        r = cli("write", d, "--sync", sync, *(["--json"] if json_out else []))
        monkeypatch.undo()
        assert r.code == 6, r.err
        if json_out:
            doc = json.loads(r.out)
            durable, msg = doc["durable_sequence"], doc["error"]
            assert doc["exit_code"] == 6 and doc["error_path"].startswith(d + os.sep)
            assert doc["error_path"] in msg
        else:
            msg = r.err.strip().splitlines()[-1]
            durable = int(msg.split("durable through seq ")[1].split(";")[0])
            assert f"{d}/wal-" in msg
        assert msg.endswith(f"durable through seq {durable}; nothing after it was acknowledged")
        assert "no space left on device" in msg
        seqs = [x.sequence for x in RecordWalk(d) if isinstance(x, Record)]
        # what it says is durable is there, in order, from the first record; a little after it may be
        # there too (written, never acknowledged), never a gap
        assert durable >= 10 and seqs[:durable] == list(range(1, durable + 1)), (durable, seqs[-3:])
        assert seqs == list(range(1, len(seqs) + 1))
        # the next run (the disk has room again) cuts any torn tail and continues after what is there
        assert cli("write", d, "--type", "REMEMBER", "--id", "after", "--payload", "p").code == 0
        seqs = [x.sequence for x in RecordWalk(d) if isinstance(x, Record)]
        assert seqs == list(range(1, len(seqs) + 1))


def test_restore_that_runs_out_of_space_in_out_says_what_it_removed(tmp_path, cli, monkeypatch):
    """The disk fills up while the checkpoint is written into OUT (after the chunks were adopted): the error
    names the file, says that what the restore had written was removed, and OUT is gone again."""
    wal = wal_dir(tmp_path / "wal", n=150)
    from test_archive import make_checkpoints

    ck = make_checkpoints(tmp_path / "ck", [30])
    archive = "file://" + str(tmp_path / "archive")
    assert cli("archive", "push", wal, archive, "--checkpoints", ck).code == 0
    assert cli("archive", "restore", archive, str(tmp_path / "probe")).code == 0
    chunks = len(os.listdir(tmp_path / "probe" / "wal"))
    assert chunks >= 3
    downloads = sum(os.path.getsize(tmp_path / "probe" / "wal" / n) for n in os.listdir(tmp_path / "probe" / "wal"))
    (ckpt,) = os.listdir(tmp_path / "probe" / "checkpoints")
    ckpt_size = os.path.getsize(tmp_path / "probe" / "checkpoints" / ckpt)
    out = tmp_path / "out"
    # room for the downloads (the chunks, the checkpoint) and half of the checkpoint's copy into OUT
    full_disk(monkeypatch, downloads + ckpt_size + ckpt_size // 2)
    r = cli("archive", "restore", archive, str(out))
    monkeypatch.undo()
    line = r.err.strip().splitlines()[-1]
    assert r.code == 6 and not out.exists()
    assert re.fullmatch(re.escape(f"walctl: error: {out}/checkpoints/") + r"[^/]+\.ckpt\.tmp: no space left on "
                        r"device; " + re.escape(f"removed the {chunks} files and 3 directories it had written in "
                                                f"{out}, {out} itself included"), line), line
