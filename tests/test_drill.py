"""The incident drill (issue 22): for each damage class, make the damage, then follow walctl's own JSON
`next_steps` mechanically until `verify --json` is clean (or clean with an accepted loss on record).

The follower knows nothing about the damage. From a document's `next_steps` it takes the first step that
changes something (inspect, map, stats, verify and quarantine list/show only look), preferring a step that
carries `--apply` where one is offered, runs that argv as printed (in-process, `--json` added) and goes on
with the `next_steps` of that step's document; with none left it asks verify again. A step that creates a
directory (`--out X`) makes X the directory being mended (salvage). It fails on
- a dead end: verify is not clean and offers no step that changes anything;
- a loop: the same step a second time with the directories unchanged, or more than MAX_STEPS steps;
- a lost record: every acknowledged record whose bytes still exist somewhere (the directory, its
  `.quarantine/`) must be readable from the mended directory, byte for byte; only the records whose bytes
  the damage destroyed may be missing (and nothing else may appear).
Each verify on the way is also rendered as text, and its `next:` lines, split as a shell would, must be
exactly the JSON's argv arrays (one source for both).

Adding a damage class is one row of ROWS: a name, the log it starts from (a key of LOGS: `v2`,
`v2-no-ledger`, `segments`, `checkpoints`; a new one is a writer and a reader of its records), a damage
function that breaks the directory and returns the sequences it destroyed, how that loss must be on record,
and (`env`) what the operator's environment holds, such as an archive to heal from.
"""
from __future__ import annotations

import os
import shlex
import shutil
from typing import Callable, NamedTuple

import pytest

from conftest import flip_bit, record_offsets, tree_digest

MAX_STEPS = 12
LOOKING = {("inspect",), ("map",), ("stats",), ("verify",), ("quarantine", "list"), ("quarantine", "show")}
CHUNK_BYTES = 1200  # 3 chunks of 60 records: seq 1..22, 23..44, 45..60


# ---- the logs a drill starts from -------------------------------------------------------------------

def v2_log(d: str, ledger: bool = True, seal_on_close: bool = False) -> None:
    """60 records in 3 chunks, written by walctl's writer (which seals closed chunks in its ledger; with
    `seal_on_close`, the last one too, as a writer shut down with --seal-on-close: an archive push ships it)."""
    from walctl.ops.wal.write import WalWriter

    with WalWriter(d, max_chunk_bytes=CHUNK_BYTES, sync="always", seal_on_close=seal_on_close) as w:
        for i in range(1, 61):
            w.append(i % 5, f"mem-{i}", b"payload %d " % i + bytes([i]) * (i % 7))
    if not ledger:  # as a directory written by another writer (the Java one) looks
        shutil.rmtree(os.path.join(d, ".walctl"))


def v2_records(d: str) -> dict:
    return {r["sequence"]: (r["type_ordinal"], r["memory_id_hex"], r["payload_hex"]) for r in _replayed(d)}


def checkpoint_log(d: str) -> None:
    """A checkpoint directory (checkpoints at 20 and 40) beside the ADR-003 log they were taken from."""
    from test_recover import independent_fold, random_entries, write_segments
    from walctl.ops.checkpoints import checkpoint as C

    entries = random_entries(60, seed=22)
    write_segments(d + ".log", entries, per_segment=25)
    for w in (20, 40):
        C.create(d, independent_fold(entries[:w]), w, timestamp=1_795_300_000 + w)


def checkpoint_records(d: str) -> dict:
    """What recovery gives from the checkpoints and the log: sequence -> memory block (and the rest)."""
    from walctl.ops.checkpoints.recover import recover

    state = recover(d, d + ".log").state
    out = {b["sequence"]: b["content"] for b in state["memory_blocks"]}
    out["state"] = (state["agent_state"], state["tool_registry"], state["wal_sequence"])
    return out


def segment_log(d: str) -> None:
    """60 ADR-003 entries in 3 segments of 20 (written as another writer would: no ledger)."""
    from test_recover import random_entries, write_segments

    write_segments(d, random_entries(60, seed=3), per_segment=20)


def segment_records(d: str) -> dict:
    return {e["sequence"]: e["checksum"] for e in _replayed(d)}


def _replayed(d: str) -> list[dict]:
    """What `walctl replay` streams from the directory (it must stream all of it: exit 0)."""
    import contextlib
    import io
    import json
    import tempfile

    from walctl.cli import run

    with tempfile.TemporaryDirectory(dir=os.path.dirname(d)) as t:
        out, err = os.path.join(t, "replayed.jsonl"), io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = run(["replay", d, "--out", out])
        assert code == 0, f"replay of {d} exited {code}: {err.getvalue()}"
        with open(out, encoding="utf-8") as f:
            return [json.loads(line) for line in f]


LOGS = {"v2": (v2_log, v2_records), "v2-no-ledger": (lambda d: v2_log(d, ledger=False), v2_records),
        "v2-sealed": (lambda d: v2_log(d, seal_on_close=True), v2_records),
        "checkpoints": (checkpoint_log, checkpoint_records), "segments": (segment_log, segment_records)}


# ---- damage: each breaks the directory and returns the sequences whose bytes it destroyed ------------

def _chunks(d):
    return sorted(n for n in os.listdir(d) if n.startswith("wal") and n.endswith((".bin", ".log")))


def _rw(path, fn):
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(fn(data))


def _record(d, seq: int) -> tuple[str, int, int]:
    """(its chunk's path, its offset, where its payload starts) for the record holding `seq`."""
    from walctl.ops.wal.records import Record, RecordWalk

    r = next(r for r in RecordWalk(d) if isinstance(r, Record) and r.sequence == seq)
    path = os.path.join(d, r.file)
    with open(path, "rb") as f:
        data = f.read()
    return path, r.offset, data.index(r.payload, r.offset + 8)


def _sequences_in(d, chunk: str) -> set:
    from walctl.ops.wal.records import Record, RecordWalk

    return {r.sequence for r in RecordWalk(os.path.join(d, chunk)) if isinstance(r, Record)}


def torn_tail(d):
    """The last record cut in half (the writer died writing it)."""
    last = os.path.join(d, _chunks(d)[-1])
    _rw(last, lambda b: b[:record_offsets(b)[-1] + 20])
    return {60}


def zero_fill(d):
    """A preallocated tail of zeros after the last record (nothing destroyed)."""
    _rw(os.path.join(d, _chunks(d)[-1]), lambda b: b + bytes(4096))
    return set()


def checksum_tail(d):
    """The last record complete but one payload bit flipped: its bytes are gone (kept as evidence)."""
    path, _, payload = _record(d, 60)
    _rw(path, lambda b: flip_bit(b, payload + 2))
    return {60}


def mid_log_rot(d):
    """One bit of a record's payload in the middle chunk: that record is destroyed, the ones after it live."""
    path, _, payload = _record(d, 30)
    _rw(path, lambda b: flip_bit(b, payload + 2))
    return {30}


def deleted_chunk(pos: int) -> Callable[[str], set]:
    def damage(d):
        name = _chunks(d)[pos]
        gone = _sequences_in(d, name)
        os.remove(os.path.join(d, name))
        return gone

    damage.__doc__ = f"chunk {pos} deleted for good (no copy anywhere)"
    return damage


def quarantined_chunk(d):
    """An operator set the middle chunk aside with walctl (and left it there): its records still exist."""
    from walctl.ops.wal import quarantine

    quarantine.move(d, _chunks(d)[1], reason="suspected bad disk", apply=True)
    return set()


def stale_lock(d):
    """A writer crashed: its lock file is left (no process holds it), the data is whole."""
    with open(os.path.join(d, ".walctl.lock"), "w") as f:
        f.write("pid 999999 on a host that crashed\n")
    return set()


def crashed_append(d):
    """A writer crashed in the middle of appending record 61 (never acknowledged): half of it is on disk."""
    from conftest import make_record

    half = make_record(61, b"never acknowledged")[:30]
    _rw(os.path.join(d, _chunks(d)[-1]), lambda b: b + half)
    stale_lock(d)
    return set()


def truncated_checkpoint(d):
    """The newest checkpoint cut to 100 bytes: recovery falls back to the older one."""
    from walctl.ops.checkpoints.checkpoint import list_checkpoints

    newest = list_checkpoints(d).candidates[0].file
    _rw(os.path.join(d, newest), lambda b: b[:100])
    return set()  # the state is the log's: nothing is lost while the log holds every entry


def segment_torn_tail(d):
    """The last entry of the last segment cut short (the writer died writing it)."""
    last = os.path.join(d, _chunks(d)[-1])
    _rw(last, lambda b: b[:-30])
    return {60}


def segment_mid_log_rot(d):
    """One byte of entry 2's body in the first segment: entry 2 is destroyed, the ones after it live."""
    _rw(os.path.join(d, _chunks(d)[0]), lambda b: b[:200] + bytes([b[200] ^ 0xFF]) + b[201:])
    return {2}


def deleted_segment(d):
    """The middle segment deleted for good."""
    os.remove(os.path.join(d, _chunks(d)[1]))
    return set(range(21, 41))


def archived(damage: Callable[[str], set]) -> Callable[[str], set]:
    """The directory was pushed to an archive (`walctl archive push`) before the damage: every record the
    damage destroys still exists there (its log's chunks are all sealed: `v2-sealed`, or segments), so
    nothing may stay lost."""
    def with_archive(d):
        from walctl.ops.archive.push import push

        push(d, ARCHIVE_URL(d))
        damage(d)
        return set()

    with_archive.__doc__ = f"archived, then: {damage.__doc__}"
    return with_archive


def lost_disk(d):
    """The disk lost every chunk (the directory and its ledger survive, as on a separate metadata disk)."""
    for name in _chunks(d):
        os.remove(os.path.join(d, name))
    return set()


def ARCHIVE_URL(d: str) -> str:
    return "file://" + d + ".archive"


def ARCHIVE_ENV(d: str) -> dict:
    return {"WALCTL_ARCHIVE": ARCHIVE_URL(d)}


class Row(NamedTuple):
    name: str
    log: str
    damage: Callable[[str], set]
    # How the mended directory accounts for what was destroyed: "accepted-loss" (verify's warning, the
    # ledger's decision), "evidence" (the cut bytes kept in .quarantine/: a tail cut by repair), or
    # "undetectable" (a whole chunk gone at either end of a log with no ledger: nothing can tell)
    loss: str = "accepted-loss"
    xfail: str | None = None
    # environment the operator's shell has while following the advice (e.g. an archive a heal copies
    # from: lambda d: {"WALCTL_ARCHIVE": "file://" + d + ".archive"}), from the directory's path
    env: Callable[[str], dict] | None = None


ROWS = [
    Row("torn tail", "v2", torn_tail, loss="evidence"),
    Row("zero-fill tail", "v2", zero_fill),
    Row("checksum tail", "v2", checksum_tail, loss="evidence"),
    Row("mid-log rot", "v2", mid_log_rot),
    Row("deleted head chunk, ledger", "v2", deleted_chunk(0)),
    Row("deleted middle chunk, ledger", "v2", deleted_chunk(1)),
    Row("deleted tail chunk, ledger", "v2", deleted_chunk(-1)),
    Row("deleted head chunk, no ledger", "v2-no-ledger", deleted_chunk(0), loss="undetectable"),
    Row("deleted middle chunk, no ledger", "v2-no-ledger", deleted_chunk(1)),
    Row("deleted tail chunk, no ledger", "v2-no-ledger", deleted_chunk(-1), loss="undetectable"),
    Row("quarantined chunk", "v2", quarantined_chunk),
    Row("quarantined chunk, no ledger", "v2-no-ledger", quarantined_chunk),
    Row("crashed writer: stale lock", "v2", stale_lock),
    Row("crashed writer: append in flight", "v2-no-ledger", crashed_append),
    Row("crashed writer: append in flight, ledger", "v2", crashed_append),
    Row("truncated checkpoint", "checkpoints", truncated_checkpoint),
    Row("segments: torn tail", "segments", segment_torn_tail, loss="evidence"),
    Row("segments: deleted middle segment", "segments", deleted_segment),
    Row("mid-log rot, archive", "v2-sealed", archived(mid_log_rot), env=ARCHIVE_ENV),
    Row("checksum tail, archive", "v2-sealed", archived(checksum_tail), env=ARCHIVE_ENV),
    Row("deleted middle chunk, archive", "v2-sealed", archived(deleted_chunk(1)), env=ARCHIVE_ENV),
    Row("deleted middle chunk, no ledger, archive", "v2-no-ledger", archived(deleted_chunk(1)), env=ARCHIVE_ENV),
    Row("lost disk, archive", "v2-sealed", archived(lost_disk), env=ARCHIVE_ENV),
    Row("segments: deleted middle segment, archive", "segments", archived(deleted_segment), env=ARCHIVE_ENV),
    Row("segments: mid-log rot", "segments", segment_mid_log_rot, xfail=(
        "dead end: salvage copies Spector V2 chunks only (exit 5 on ADR-003 segments) and no other command "
        "copies the entries after mid-log damage in a segment; quarantine move would set aside intact entries")),
]


# ---- the follower ---------------------------------------------------------------------------------

class DrillFailed(AssertionError):
    pass


def _changes(argv) -> bool:
    words = tuple(argv[1:3])
    return words[:1] not in LOOKING and words[:2] not in LOOKING


def choose(steps) -> list[str] | None:
    acting = [s for s in steps if _changes(s)]
    return next((s for s in acting if "--apply" in s), acting[0] if acting else None)


def text_steps(out: str) -> list[list[str]]:
    """The argv of every `next:` line (and its continuation lines) of verify's text, split as a shell would."""
    steps, inside = [], False
    for line in out.splitlines():
        s = line.strip()
        if s.startswith("next: "):
            inside, s = True, s[len("next: "):]
        elif not (inside and s.startswith("walctl ")):
            inside = False
            continue
        steps.append(shlex.split(s, comments=True))
    return steps


def follow(cli, target: str, watch: list[str]) -> tuple[str, list]:
    """Follows the advice from verify of `target` until it is clean; (the mended directory, the steps run)."""
    ran, seen = [], set()
    while True:
        doc = _verify(cli, target)
        if doc["exit_code"] == 0:
            return target, ran
        step = choose(doc["paths"][0]["next_steps"])
        if step is None:
            raise DrillFailed(f"dead end: {target} is {doc['verdict']} and no step changes anything: "
                              f"{doc['paths'][0]['next_steps']}; ran {ran}")
        while step is not None:
            key = (tuple(step), repr([tree_digest(w) for w in watch if os.path.exists(w)]))
            if key in seen or len(ran) >= MAX_STEPS:
                raise DrillFailed(f"loop: {step} again with nothing changed (or over {MAX_STEPS} steps); ran {ran}")
            seen.add(key)
            assert step[0] == "walctl", step
            r = cli(*step[1:], "--json")
            ran.append((step, r.code))
            if r.code not in (0, 1, 3, 4):  # a step that could not run at all is a dead end too
                raise DrillFailed(f"{step} exited {r.code}: {r.err.strip()}; ran {ran}")
            if "--out" in step:  # it made a new directory: that is the one being mended now
                target = step[step.index("--out") + 1]
                watch.append(target)
            step = choose(r.json().get("next_steps") or [])


def _verify(cli, target):
    r = cli("verify", target, "--json")
    doc = r.json()
    assert r.code == doc["exit_code"]
    text = cli("verify", target)
    assert text_steps(text.out) == doc["paths"][0]["next_steps"], text.out  # one source, two renderings
    return doc


@pytest.mark.parametrize("row", [pytest.param(r, id=r.name, marks=[pytest.mark.xfail(reason=r.xfail, strict=True)]
                                              if r.xfail else []) for r in ROWS])
def test_drill(cli, tmp_path, monkeypatch, row):
    make, records = LOGS[row.log]
    d = str(tmp_path / "wal")
    make(d)
    acknowledged = records(d)
    destroyed = row.damage(d)
    for k, v in (row.env(d) if row.env else {}).items():
        monkeypatch.setenv(k, v)
    assert destroyed <= set(acknowledged)
    mended, ran = follow(cli, d, [d])
    got = records(mended)
    expected = {k: v for k, v in acknowledged.items() if k not in destroyed}
    lost = sorted(set(expected) - set(got))
    assert not lost, f"records lost that still existed: {lost}; ran {ran}"
    assert got == expected, f"records differ; ran {ran}"
    _accounted(cli, mended, destroyed, row.loss, ran)


def _accounted(cli, mended, destroyed, how, ran):
    """What was destroyed is on record in the mended directory, as the row says it must be."""
    import json

    if not destroyed or how == "undetectable":
        return
    if how == "evidence":
        with open(os.path.join(mended, ".quarantine", "MANIFEST.jsonl")) as f:
            cuts = [json.loads(line) for line in f if line.strip()]
        assert any(c["action"] == "truncate" and c["length"] > 0 for c in cuts), f"no evidence kept; ran {ran}"
        return
    doc = cli("verify", mended, "--json").json()
    accepted = [f for f in doc["paths"][0]["findings"] if f["class"] == "accepted-loss"]
    covered = {s for f in accepted for s in range(f["sequence_range"][0], f["sequence_range"][1] + 1)}
    assert destroyed <= covered, f"lost without a record of it: {sorted(destroyed - covered)}; ran {ran}"


def test_replay_of_segments_streams_across_a_gap_the_ledger_accepted_as_verify_does(cli, tmp_path):
    """The drill found it: after `repair --accept-loss` verify called a segment directory clean while replay
    still stopped at the gap (exit 4). Now both follow the ledger, as for V2 chunks."""
    import json

    d = str(tmp_path / "seg")
    segment_log(d)
    deleted_segment(d)
    out = tmp_path / "a.jsonl"
    r = cli("replay", d, "--out", out)
    assert r.code == 4 and "sequence gap: 20 missing (21..40)" in r.err  # not accepted: it stops
    assert cli("repair", d, "--accept-loss", "21..40", "--reason", "segment 2 lost", "--apply").code == 0
    assert cli("verify", d).code == 0
    out = tmp_path / "b.jsonl"
    r = cli("replay", d, "--out", out, "--report", tmp_path / "report.json")
    with open(out) as f:
        seqs = [json.loads(line)["sequence"] for line in f]
    assert r.code == 0 and seqs == list(range(1, 21)) + list(range(41, 61))
    with open(tmp_path / "report.json") as f:
        rep = json.load(f)
    assert rep["exit_code"] == 0 and rep["stopped"] is None


def test_the_follower_fails_on_a_dead_end(cli, tmp_path):
    """The drill's follower is not vacuous: bytes changed in a sealed chunk while every record still reads
    (its padding) are corruption that no walctl step mends without an archive (a heal, issue 22)."""
    d = str(tmp_path / "wal")
    v2_log(d)
    path, offset, payload = _record(d, 30)
    with open(path, "rb") as f:
        data = f.read()
    nxt = data.index(b"WA", payload)  # the next record's magic: the byte before it is padding
    _rw(path, lambda b: flip_bit(b, nxt - 1))
    with pytest.raises(DrillFailed, match="dead end"):
        follow(cli, d, [d])


class _Scripted:
    """A stand-in for walctl that advises one step forever and changes nothing when it is run."""

    def __init__(self, d):
        self.step = ["walctl", "quarantine", "move", d, "wal-000001.bin", "--apply"]

    def __call__(self, *args):
        import json

        from conftest import CliResult

        if args[0] == "verify":
            doc = {"exit_code": 3, "verdict": "corrupt", "paths": [{"next_steps": [self.step]}]}
            return CliResult(3, json.dumps(doc) if "--json" in args else f"  next: {shlex.join(self.step)}\n", "")
        return CliResult(0, json.dumps({"next_steps": []}), "")


def test_the_follower_fails_on_a_loop(tmp_path):
    d = str(tmp_path / "wal")
    os.mkdir(d)
    with pytest.raises(DrillFailed, match="loop"):
        follow(_Scripted(d), d, [d])
