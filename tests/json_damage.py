"""Generated damage for the schema test (issue 26): every command's --json/--jsonl over each kind of damage
a log, a checkpoint, a task log or an agent root can carry, and a file name that is not UTF-8. Each case
as in json_cases: (label, argv, what, schema)."""
from __future__ import annotations

import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
NOT_UTF8 = b"wal-\xff\xfe.bin"  # a foreign file whose name is not UTF-8


def _copy(ws: str, example: str, name: str) -> str:
    dst = os.path.join(ws, name)
    shutil.copytree(os.path.join(EXAMPLES, example), dst, symlinks=True)
    return dst


def flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x10]))


def _cut(path: str, drop: int) -> None:
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size - drop)


def workspace(ws: str) -> None:
    """d-* directories, each holding one kind of damage."""
    _cut(os.path.join(_copy(ws, "wal-healthy", "d-torn"), "wal-000002.bin"), 7)
    p = os.path.join(_copy(ws, "wal-healthy", "d-flip"), "wal-000000.bin")
    flip(p, os.path.getsize(p) // 2)
    os.remove(os.path.join(_copy(ws, "wal-healthy", "d-missing"), "wal-000001.bin"))
    os.makedirs(os.path.join(ws, "d-empty"))
    d = _copy(ws, "wal-healthy", "d-names")
    with open(os.path.join(os.fsencode(d), NOT_UTF8), "wb") as f:
        f.write(b"not a chunk")
    d = _copy(ws, "checkpoints", "d-ckpt")
    names = sorted(os.listdir(d))
    flip(os.path.join(d, names[-1]), os.path.getsize(os.path.join(d, names[-1])) - 5)  # body SHA-256
    _cut(os.path.join(d, names[-2]), 1)  # size
    flip(os.path.join(d, names[0]), 1)  # magic
    d = _copy(ws, "tasks", "d-task-new")  # a task log with no plan yet: nothing to resume at
    for name in os.listdir(d):
        with open(os.path.join(d, name), "rb") as f:
            first = f.readline()
        with open(os.path.join(d, name), "wb") as f:
            f.write(first)
    d = _copy(ws, "tasks", "d-tasks")
    _cut(os.path.join(d, sorted(os.listdir(d))[0]), 5)
    _cut(os.path.join(_copy(ws, "segments", "d-seg-torn"), "wal_00000002.log"), 3)
    from walctl.cli import run

    run(["seal", "--apply", _copy(ws, "segments", "d-seg-indexed")])  # inspect --since skips a segment
    d = _copy(ws, "agents-crashed", "d-agents")
    first = sorted(os.listdir(os.path.join(d, "agents")))[0]
    with open(os.path.join(d, "agents", first, "events.jsonl"), "ab") as f:
        f.write(b'{"torn": \n')


def cases(ws: str):
    w = lambda *p: os.path.join(ws, *p)  # noqa: E731
    got = []
    for d in ("d-torn", "d-flip", "d-missing", "d-empty", "d-names"):
        streams = [] if d == "d-empty" else [  # nothing to stream: --jsonl prints no error document
            (f"inspect {d}", ["inspect", w(d), "--jsonl"], "jsonl", "walctl.record/1"),
            (f"replay {d}", ["replay", w(d), "--skip-damaged", "--out", w(d + ".jsonl"), "--no-progress"],
             ("jsonl-file", w(d + ".jsonl")), "walctl.record/1")]
        got += streams + [
            (f"verify {d}", ["verify", w(d), "--json"], "doc", "walctl.verify/2"),
            (f"map {d}", ["map", w(d), "--json"], "doc", "walctl.map/2"),
            (f"stats {d}", ["stats", w(d), "--json"], "doc", "walctl.error/1" if d == "d-empty" else "walctl.stats/2"),
            (f"repair {d}", ["repair", w(d), "--json"], "doc", "walctl.repair/2"),
            (f"quarantine list {d}", ["quarantine", "list", w(d), "--json"], "doc", "walctl.quarantine/1"),
            (f"archive push {d}", ["archive", "push", w(d), "file://" + w("d-archive"), "--json"], "doc",
             "walctl.error/1" if d == "d-empty" else "walctl.archive-push/2"),
        ]
    ck = w("d-ckpt")
    newest = sorted(os.listdir(ck))[-1]
    got += [
        ("verify d-ckpt", ["verify", ck, "--json"], "doc", "walctl.verify/2"),
        ("map d-ckpt", ["map", ck, "--json"], "doc", "walctl.map/2"),
        ("stats d-ckpt", ["stats", ck, "--json"], "doc", "walctl.stats/2"),
        ("checkpoint list d-ckpt", ["checkpoint", "list", ck, "--json"], "doc", "walctl.checkpoint-list/2"),
        ("checkpoint inspect d-ckpt", ["checkpoint", "inspect", os.path.join(ck, newest), "--json"], "doc",
         "walctl.checkpoint-inspect/2"),
        ("checkpoint inspect dir d-ckpt", ["checkpoint", "inspect", ck, "--json"], "doc", "walctl.checkpoint-inspect/2"),
        ("checkpoint verify d-ckpt", ["checkpoint", "verify", ck, "--json"], "doc", "walctl.verify/2"),
        ("recover d-ckpt", ["recover", "--checkpoints", ck, "--log", w("d-seg-torn"), "--json"], "doc",
         "walctl.recover/2"),
        ("checkpoint prune d-ckpt", ["checkpoint", "prune", ck, "--max-age", "0", "--keep", "1", "--json"], "doc",
         "walctl.checkpoint-prune/2"),
        ("verify d-seg-torn", ["verify", w("d-seg-torn"), "--json"], "doc", "walctl.verify/2"),
        ("map d-seg-torn", ["map", w("d-seg-torn"), "--json"], "doc", "walctl.map/2"),
        ("stats d-seg-torn", ["stats", w("d-seg-torn"), "--json"], "doc", "walctl.stats/2"),
        ("inspect d-seg-torn", ["inspect", w("d-seg-torn"), "--jsonl"], "jsonl", "walctl.entry/1"),
        ("inspect --since d-seg-indexed", ["inspect", w("d-seg-indexed"), "--jsonl", "--since", "1795300035000",
                                           "--until", "2026-11-21T22:27:18Z"], "jsonl", "walctl.entry/1"),
    ]
    t = w("d-tasks")
    torn = os.path.join(t, sorted(os.listdir(t))[0])
    got += [
        ("verify d-tasks", ["verify", t, "--json"], "doc", "walctl.verify/2"),
        ("map d-tasks", ["map", t, "--json"], "doc", "walctl.map/2"),
        ("tasklog verify d-tasks", ["tasklog", "verify", t, "--json"], "doc", "walctl.tasklog-verify/2"),
        ("tasklog inspect d-tasks", ["tasklog", "inspect", torn, "--json"], "doc", "walctl.tasklog-inspect/2"),
        ("tasklog resume d-tasks", ["tasklog", "resume", torn, "--json"], "doc", "walctl.tasklog-resume/2"),
        ("tasklog inspect d-tasks after", ["tasklog", "inspect", torn, "--json"], "doc", "walctl.tasklog-inspect/2"),
        ("tasklog replay d-tasks", ["tasklog", "replay", torn, "--json"], "jsonl", "walctl.tasklog-replay/1"),
    ]
    new = w("d-task-new", sorted(os.listdir(w("d-task-new")))[0])
    got += [
        ("tasklog inspect no plan", ["tasklog", "inspect", new, "--json"], "doc", "walctl.tasklog-inspect/2"),
        ("tasklog resume no plan", ["tasklog", "resume", new, "--json"], "doc", "walctl.tasklog-resume/2"),
        ("tasklog verify no plan", ["tasklog", "verify", w("d-task-new"), "--json"], "doc", "walctl.tasklog-verify/2"),
        ("tasklog replay no plan", ["tasklog", "replay", new, "--json"], "jsonl", "walctl.tasklog-replay/1"),
        ("stats uncompressed", ["stats", w("wal-repeat"), "--json"], "doc", "walctl.stats/2"),
        ("stats segments torn", ["stats", w("d-seg-torn"), "--json"], "doc", "walctl.stats/2"),
        ("repair apply d-torn", ["repair", w("d-torn"), "--apply", "--json"], "doc", "walctl.repair/2"),
        ("quarantine list d-torn", ["quarantine", "list", w("d-torn"), "--json"], "doc", "walctl.quarantine/1"),
        ("salvage d-flip", ["salvage", w("d-flip"), "--out", w("d-flip-salvaged"), "--json"], "doc",
         "walctl.salvage/1"),
        ("heal d-missing", ["heal", w("d-missing"), "--from", "file://" + w("d-archive"), "--json"], "doc",
         "walctl.heal/1"),
        ("checkpoint create d-ckpt", ["checkpoint", "create", w("d-ckpt"), "--state", w("state.json"), "--wal-seq",
                                      "99", "--json"], "doc", "walctl.checkpoint-create/1"),
    ]
    a = w("d-agents")
    got += [
        ("verify d-agents", ["verify", a, "--json"], "doc", "walctl.verify/2"),
        ("agents verify d-agents", ["agents", "verify", a, "--json"], "doc", "walctl.agents-verify/2"),
        ("agents recover d-agents", ["agents", "recover", a, "--json"], "doc", "walctl.agents-recover/2"),
        ("archive verify d-archive", ["archive", "verify", "file://" + w("d-archive"), "--json"], "doc",
         "walctl.archive-verify/1"),
        ("archive list d-archive", ["archive", "list", "file://" + w("d-archive"), "--json"], "doc",
         "walctl.archive-list/1"),
        ("archive restore d-archive", ["archive", "restore", "file://" + w("d-archive"), w("d-restored"),
                                       "--namespace", "d-torn", "--json"], "doc", "walctl.archive-restore/2"),
    ]
    return got
