"""Every command that prints --json or --jsonl, run on real inputs (copies of examples/), for
tests/test_schemas.py and tests/make_schemas.py. Each case: (label, argv, what, schema) where `what` is
"doc" (one document on stdout that names its schema), "jsonl" (records on stdout), ("jsonl-file", path)
(records the command wrote to a file), or a path (a document the command wrote: `replay --report`, an
archive's MANIFEST.json, merge's state.json). argv None: the document was written by an earlier case.
"""
from __future__ import annotations

import json
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def workspace(ws: str) -> None:
    _workflow_steps_workspace(ws)
    for name in os.listdir(EXAMPLES):
        src = os.path.join(EXAMPLES, name)
        if os.path.isdir(src):
            shutil.copytree(src, os.path.join(ws, name), symlinks=True)
    # failures after the command examined data (docs/json.md): a log damaged after the checkpoint, a
    # directory whose ledger ends in damage
    shutil.copytree(os.path.join(EXAMPLES, "segments"), os.path.join(ws, "segments-rot"))
    with open(os.path.join(ws, "segments-rot", "wal_00000002.log"), "r+b") as f:
        f.seek(10)
        f.write(b"\xff")
    shutil.copytree(os.path.join(EXAMPLES, "wal-healthy"), os.path.join(ws, "wal-cut"))
    shutil.copytree(os.path.join(EXAMPLES, "wal-healthy"), os.path.join(ws, "wal-bad-ledger"))
    os.mkdir(os.path.join(ws, "wal-bad-ledger", ".walctl"))
    with open(os.path.join(ws, "wal-bad-ledger", ".walctl", "ledger.jsonl"), "wb") as f:
        f.write(b"x" * (65 << 10))
    from conftest import make_chunk, write_dir

    write_dir(os.path.join(ws, "wal-repeat"), {0: make_chunk(range(1, 6)), 1: make_chunk(range(5, 9))})
    from walctl.ops.wal.write import WalWriter

    with WalWriter(os.path.join(ws, "wal-sealed"), max_chunk_bytes=2048) as wr:  # verify --subset: seals
        for i in range(300):
            wr.append(1, "m-%d" % (i % 7), b"x" * 50)
    with open(os.path.join(ws, "state.json"), "w", encoding="utf-8") as f:
        json.dump({"memories": {"m1": {"text": "hi"}}}, f)
    from datetime import datetime, timedelta, timezone

    from walctl.format.workflow import CheckpointState, PauseMetadata
    from walctl.ops.workflow.store import DirectoryWorkflowStore

    # a Substrat root with a corrupt line: recover cannot finish it (its own document, exit 3), set-aside can
    shutil.copytree(os.path.join(ws, "agents-crashed"), os.path.join(ws, "agents-damaged"))
    first = sorted(os.listdir(os.path.join(ws, "agents-damaged", "agents")))[0]
    with open(os.path.join(ws, "agents-damaged", "agents", first, "events.jsonl"), "ab") as f:
        f.write(b"not an event\n")
    os.makedirs(os.path.join(ws, "agents-damaged", "agents", "0123456789abcdef0123456789abcdef"))  # never saved
    open(os.path.join(ws, "agents-damaged", "agents", "0123456789abcdef0123456789abcdef", "events.jsonl"), "wb").close()
    store = DirectoryWorkflowStore(os.path.join(ws, "flows"))
    old = datetime.now(timezone.utc) - timedelta(days=3)
    for cid, at in (("stale", old), ("fresh", datetime.now(timezone.utc))):
        store.save(CheckpointState(cid, "deploy", {"env": "prod"}, [[{"id": "a"}], [{"id": "b"}]], 1,
                                   {"blocks": {"a": {"outputs": {"ok": True}}}}, at, PauseMetadata("ask", "Go?", None)))
    from walctl.ops.archive.lock import NamespaceLock
    from walctl.store.objstore import open_store

    NamespaceLock(open_store("file://" + os.path.join(ws, "archive-lock")), "agent").acquire()  # a follower's lock
    _heal_workspace(ws)


def _heal_workspace(ws: str) -> None:
    """heal-wal: a copy of wal-healthy pushed to heal-archive, then its first chunk rotted mid-log."""
    from walctl.ops.archive.push import push

    wal = os.path.join(ws, "heal-wal")
    shutil.copytree(os.path.join(EXAMPLES, "wal-healthy"), wal)
    push(wal, "file://" + os.path.join(ws, "heal-archive"))
    path = os.path.join(wal, "wal-000000.bin")
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x10]))


def _workflow_steps_workspace(ws: str) -> None:
    """flows-live: pause, resume, complete (issue 28): one running workflow and one paused."""
    from datetime import datetime, timezone

    from walctl.format.workflow import CheckpointState, PauseMetadata
    from walctl.ops.workflow.store import DirectoryWorkflowStore

    live = DirectoryWorkflowStore(os.path.join(ws, "flows-live"))
    for cid, pause in (("run-1", None), ("ask-1", PauseMetadata("approve", "Ship it?", None))):
        live.save(CheckpointState(cid, "deploy", {"env": "prod"}, [[{"id": "build"}], [{"id": "approve"}], [{"id": "ship"}]],
                                  1, {"blocks": {"build": {"outputs": {"ok": True}}}}, datetime.now(timezone.utc), pause))


def cases(ws: str):
    w = lambda *p: os.path.join(ws, *p)  # noqa: E731
    ckpt = sorted(os.listdir(w("checkpoints")))[-1]
    task = sorted(os.listdir(w("tasks")))[0]
    session = sorted(os.listdir(w("agents-crashed", "agents")))[0]
    arch = "file://" + w("archive")
    return [
        ("verify clean", ["verify", w("wal-healthy"), "--json"], "doc", "walctl.verify/2"),
        ("verify corrupt", ["verify", w("wal-midlog-corrupt"), w("wal-sequence-gap"), w("wal-torn-tail"), "--json"],
         "doc", "walctl.verify/2"),
        ("verify kinds", ["verify", w("segments"), w("checkpoints"), w("tasks"), w("agents-crashed"), w("flows"),
                          w("wal-legacy-v1"), "--json"], "doc", "walctl.verify/2"),
        ("verify subset", ["verify", w("wal-sealed"), w("wal-healthy"), "--subset", "2/3", "--resume",
                           "--max-duration", "1h", "--json"], "doc", "walctl.verify/2"),
        ("verify map", ["verify", w("wal-midlog-corrupt"), w("wal-sequence-gap"), "--map", "--json"], "doc",
         "walctl.verify/2"),
        ("map", ["map", w("wal-midlog-corrupt"), "--json"], "doc", "walctl.map/2"),
        ("map segments", ["map", w("segments"), "--json"], "doc", "walctl.map/2"),
        ("inspect v2", ["inspect", w("wal-midlog-corrupt"), "--jsonl"], "jsonl", "walctl.record/1"),
        ("inspect v2 --payload none", ["inspect", w("wal-midlog-corrupt"), "--jsonl", "--payload", "none"], "jsonl",
         "walctl.record/1"),
        ("inspect segments", ["inspect", w("segments"), "--jsonl"], "jsonl", "walctl.entry/1"),
        ("stats v2", ["stats", w("wal-healthy"), "--json"], "doc", "walctl.stats/2"),
        ("stats segments", ["stats", w("segments"), "--json"], "doc", "walctl.stats/2"),
        ("stats other", ["stats", w("checkpoints"), "--json"], "doc", "walctl.stats/2"),
        ("write", ["write", w("newwal"), "--type", "REMEMBER", "--id", "m1", "--payload", "hi", "--json"],
         "doc", "walctl.write/1"),
        ("repair plan", ["repair", w("wal-torn-tail"), "--json"], "doc", "walctl.repair/2"),
        ("repair apply", ["repair", w("wal-torn-tail"), "--apply", "--json"], "doc", "walctl.repair/2"),
        ("seal", ["seal", w("wal-healthy"), "--json"], "doc", "walctl.seal/2"),
        ("cut plan", ["cut", w("wal-torn-tail"), "--after", "3", "--json"], "doc", "walctl.cut/1"),
        ("cut", ["cut", w("wal-cut"), "--after", "3", "--apply", "--json"], "doc", "walctl.cut/1"),
        ("seal failed", ["seal", w("wal-bad-ledger"), "--apply", "--json"], "doc", "walctl.seal/2"),
        ("accept loss refused", ["repair", w("wal-sequence-gap"), "--accept-loss", "1..5", "--reason", "no", "--json"],
         "doc", "walctl.repair/2"),
        ("accept loss", ["repair", w("wal-sequence-gap"), "--accept-loss", "41..80", "--reason", "gone", "--json"],
         "doc", "walctl.repair/2"),
        ("salvage", ["salvage", w("wal-midlog-corrupt"), "--out", w("salvaged"), "--json"], "doc", "walctl.salvage/1"),
        ("migrate", ["migrate", w("wal-legacy-v1"), "--out", w("migrated"), "--json"], "doc", "walctl.migrate/1"),
        ("migrate v2", ["migrate", w("wal-healthy"), "--out", w("migrated-healthy"), "--json"], "doc",
         "walctl.migrate/1"),
        ("migrate damaged", ["migrate", w("wal-midlog-corrupt"), "--out", w("migrated-corrupt"), "--json"], "doc",
         "walctl.migrate/1"),
        ("compact", ["compact", w("wal-healthy"), "--to", "60", "--json"], "doc", "walctl.compact/2"),
        ("compact refused", ["compact", w("wal-repeat"), "--to", "3", "--json"], "doc", "walctl.compact/2"),
        ("quarantine list", ["quarantine", "list", w("wal-torn-tail"), "--json"], "doc", "walctl.quarantine/1"),
        ("quarantine show", ["quarantine", "show", w("wal-torn-tail"), "@first", "--json"], "doc",
         "walctl.quarantine-show/1"),
        ("quarantine move", ["quarantine", "move", w("wal-healthy"), "wal-000000.bin", "--reason", "t", "--json"],
         "doc", "walctl.quarantine-move/1"),
        ("quarantine restore", ["quarantine", "restore", w("wal-torn-tail"), "@first", "--json"], "doc",
         "walctl.quarantine-restore/1"),
        ("quarantine purge", ["quarantine", "purge", w("wal-torn-tail"), "--older-than", "0", "--json"], "doc",
         "walctl.quarantine-purge/1"),
        ("checkpoint create", ["checkpoint", "create", w("ck2"), "--state", w("state.json"), "--to", "5",
                               "--json"], "doc", "walctl.checkpoint-create/1"),
        ("checkpoint verify", ["checkpoint", "verify", w("checkpoints"), "--json"], "doc", "walctl.verify/2"),
        ("checkpoint inspect", ["checkpoint", "inspect", w("checkpoints", ckpt), "--json"], "doc",
         "walctl.checkpoint-inspect/2"),
        ("checkpoint list", ["checkpoint", "list", w("checkpoints"), "--json"], "doc", "walctl.checkpoint-list/2"),
        ("checkpoint prune", ["checkpoint", "prune", w("checkpoints"), "--max-age", "0", "--keep", "1", "--json"],
         "doc", "walctl.checkpoint-prune/2"),
        ("recover", ["recover", "--checkpoints", w("checkpoints"), "--log", w("segments"), "--json"], "doc",
         "walctl.recover/2"),
        ("recover failed", ["recover", "--checkpoints", w("checkpoints"), "--log", w("segments-rot"), "--json"], "doc",
         "walctl.recover/2"),
        ("replay v2", ["replay", w("wal-healthy"), "--after", "10", "--out", w("v2.jsonl")],
         ("jsonl-file", w("v2.jsonl")), "walctl.record/1"),
        ("replay segments", ["replay", w("segments"), "--out", w("seg.jsonl")], ("jsonl-file", w("seg.jsonl")),
         "walctl.entry/1"),
        ("progress json", ["verify", w("wal-healthy"), "--progress=json"], "progress", "walctl.progress/1"),
        ("replay report", ["replay", w("wal-healthy"), "--out", w("stream.jsonl"), "--report", w("report.json")],
         w("report.json"), "walctl.replay/1"),
        ("import", ["import", w("follower"), "--from", w("stream.jsonl"), "--json"], "doc", "walctl.import/1"),
        ("merge", ["merge", w("wal-healthy"), w("wal-sequence-gap"), "--out", w("merged"), "--json"], "doc",
         "walctl.merge/1"),
        ("merge state", None, w("merged", "state.json"), "walctl.memory-state/1"),
        ("fingerprint", ["fingerprint", w("segments"), "--checkpoints", w("checkpoints"), "--to", "25", "--json"],
         "doc", "walctl.fingerprint/1"),
        ("fingerprint merge", ["fingerprint", w("merged"), "--json"], "doc", "walctl.fingerprint/1"),
        ("archive push", ["archive", "push", w("wal-sequence-gap"), arch, "--checkpoints", w("checkpoints"),
                          "--json"], "doc", "walctl.archive-push/2"),
        ("archive push --follow", ["archive", "push", w("wal-healthy"), "file://" + w("archive-live"), "--follow", "--timeout", "0.3",
                                   "--json"], "doc", "walctl.archive-follow/1"),
        ("archive list lag", ["archive", "list", "file://" + w("archive-live"), "--namespace", "wal-healthy", "--dir", w("wal-healthy"),
                              "--json"], "doc", "walctl.archive-list/1"),
        ("archive manifest", None, w("archive", "wal-sequence-gap", "MANIFEST.json"), "walctl.archive-manifest/1"),
        ("archive lock", None, w("archive-lock", "agent", "LOCK.json"), "walctl.archive-lock/1"),
        ("archive list", ["archive", "list", arch, "--json"], "doc", "walctl.archive-list/1"),
        ("heal plan", ["heal", w("heal-wal"), "--from", "file://" + w("heal-archive"), "--json"], "doc",
         "walctl.heal/1"),
        ("heal apply", ["heal", w("heal-wal"), "--from", "file://" + w("heal-archive"), "--apply", "--json"], "doc",
         "walctl.heal/1"),
        ("heal nothing", ["heal", w("wal-sequence-gap"), "--from", arch, "--json"], "doc", "walctl.heal/1"),
        ("archive verify", ["archive", "verify", arch, "--json"], "doc", "walctl.archive-verify/1"),
        ("archive verify subset", ["archive", "verify", arch, "--read-data-subset", "1/2", "--max-duration", "1h",
                                   "--json"], "doc", "walctl.archive-verify/1"),
        ("archive restore", ["archive", "restore", arch, w("restored"), "--json"], "doc", "walctl.archive-restore/2"),
        ("archive push tasks", ["archive", "push", w("tasks"), "file://" + w("archive-tasks"), "--json"], "doc",
         "walctl.archive-push/2"),
        ("archive restore tasks", ["archive", "restore", "file://" + w("archive-tasks"), w("restored-tasks"), "--until",
                                   "2099-01-01T00:00:00Z", "--json"], "doc", "walctl.archive-restore-files/1"),
        ("archive prune", ["archive", "prune", arch, "--namespace", "wal-sequence-gap", "--keep", "1", "--max-age",
                           "0s", "--json"], "doc", "walctl.archive-prune/1"),
        ("workflow list", ["workflow", "list", w("flows"), "--json"], "doc", "walctl.workflow-list/1"),
        ("workflow delete", ["workflow", "delete", w("flows"), "stale", "--json"], "doc", "walctl.workflow-delete/1"),
        ("workflow cleanup", ["workflow", "cleanup", w("flows"), "--max-age", "1d", "--json"], "doc",
         "walctl.workflow-cleanup/1"),
        ("workflow pause", ["workflow", "pause", w("flows-live"), "run-1", "--block", "approve", "--prompt", "Go?", "--json"],
         "doc", "walctl.workflow-pause/1"),
        ("workflow pause again", ["workflow", "pause", w("flows-live"), "run-1", "--block", "approve", "--prompt", "Go?",
                                  "--json"], "doc", "walctl.workflow-pause/1"),
        ("workflow pause refused", ["workflow", "pause", w("flows-live"), "run-1", "--block", "b", "--prompt", "p",
                                    "--json"], "doc", "walctl.workflow-pause/1"),
        ("workflow resume", ["workflow", "resume", w("flows-live"), "ask-1", "--response", "yes", "--json"], "doc",
         "walctl.workflow-resume/1"),
        ("workflow resume no response", ["workflow", "resume", w("flows-live"), "run-1", "--json"], "doc",
         "walctl.workflow-resume/1"),
        ("workflow resume refused", ["workflow", "resume", w("flows-live"), "ask-1", "--json"], "doc",
         "walctl.workflow-resume/1"),
        ("workflow complete plan", ["workflow", "complete", w("flows-live"), "ask-1", "--json"], "doc",
         "walctl.workflow-complete/1"),
        ("workflow complete", ["workflow", "complete", w("flows-live"), "ask-1", "--apply", "--json"], "doc",
         "walctl.workflow-complete/1"),
        ("workflow complete gone", ["workflow", "complete", w("flows-live"), "ask-1", "--apply", "--json"], "doc",
         "walctl.workflow-complete/1"),
        ("workflow pause before complete", ["workflow", "pause", w("flows-live"), "run-1", "--block", "approve", "--prompt",
                                       "Go?", "--json"], "doc", "walctl.workflow-pause/1"),
        ("workflow complete refused", ["workflow", "complete", w("flows-live"), "run-1", "--apply", "--json"], "doc",
         "walctl.workflow-complete/1"),
        ("tasklog verify", ["tasklog", "verify", w("tasks"), "--json"], "doc", "walctl.tasklog-verify/2"),
        ("tasklog resume", ["tasklog", "resume", w("tasks", task), "--json"], "doc", "walctl.tasklog-resume/2"),
        ("tasklog inspect", ["tasklog", "inspect", w("tasks", task), "--json"], "doc", "walctl.tasklog-inspect/2"),
        ("agents verify", ["agents", "verify", w("agents-crashed"), "--json"], "doc", "walctl.agents-verify/2"),
        ("agents tree", ["agents", "tree", w("agents-crashed"), "--json"], "doc", "walctl.agents-tree/1"),
        ("agents pending", ["agents", "pending", w("agents-crashed"), "--json"], "doc", "walctl.agents-pending/2"),
        ("agents set-aside", ["agents", "set-aside", w("agents-crashed"), session, "--session", "--json"], "doc",
         "walctl.agents-set-aside/1"),
        ("agents recover", ["agents", "recover", w("agents-crashed"), "--json"], "doc", "walctl.agents-recover/2"),
        ("agents set-aside line", ["agents", "set-aside", w("agents-damaged"), session, "--line",
                                   str(_lines(w("agents-damaged", "agents", session, "events.jsonl"))), "--json"],
         "doc", "walctl.agents-set-aside/1"),
        ("agents set-aside session", ["agents", "set-aside", w("agents-damaged"), "0123456789abcdef0123456789abcdef",
                                      "--session", "--json"], "doc", "walctl.agents-set-aside/1"),
        ("agents recover incomplete", ["agents", "recover", w("agents-damaged"), "--apply", "--json"], "doc",
         "walctl.agents-recover/2"),
        ("agents set-aside applied", ["agents", "set-aside", w("agents-damaged"), session, "--line",
                                      str(_lines(w("agents-damaged", "agents", session, "events.jsonl"))), "--apply",
                                      "--force", "--json"], "doc", "walctl.agents-set-aside/1"),
        ("error not-found", ["repair", w("no-such-dir"), "--json"], "doc", "walctl.error/1"),
        ("error wrong kind", ["workflow", "list", w("state.json"), "--json"], "doc", "walctl.error/1"),
        ("error refused", ["salvage", w("wal-midlog-corrupt"), "--out", w("wal-healthy"), "--json"], "doc",
         "walctl.error/1"),
        ("error usage", ["repair", w("wal-healthy"), "--max-drop-bytes", "-1", "--json"], "doc", "walctl.error/1"),
    ]


def _lines(path: str) -> int:
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def first_quarantined(ws: str, directory: str) -> str:
    names = sorted(n for n in os.listdir(os.path.join(ws, directory, ".quarantine")) if n != "MANIFEST.jsonl")
    return names[0]


def run_case(run, ws: str, argv) -> str:
    """Run one case in-process; its stdout."""
    import contextlib
    import io

    if argv is None:
        return ""
    argv = [first_quarantined(ws, "wal-torn-tail") if a == "@first" else a for a in argv]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        run(argv)
    STDERR["last"] = err.getvalue()
    return out.getvalue()


STDERR = {"last": ""}  # the last case's stderr: --progress=json lines are read from it


def documents(what, text: str) -> list:
    if what == "progress":  # walctl.progress/1 lines, on stderr
        return [json.loads(ln) for ln in STDERR["last"].splitlines() if ln.startswith('{"schema": "walctl.progress/1"')]
    if what == "doc":
        return [json.loads(text)]
    if what == "jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(what, tuple):
        with open(what[1], encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    with open(what, encoding="utf-8") as f:
        return [json.load(f)]
