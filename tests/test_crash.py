"""Crash safety on the simulated file system: a crash at every operation of a writer session, of a
repair, of a salvage and of a compaction, and a seeded state machine that interleaves them.

The oracle, after any crash and recovery:
- every acknowledged record (durable by its sync policy) is readable, in order, with its content;
- nothing appears that was not written: the readable records are a prefix of what was handed to
  append (acknowledged ones, then at most the ones in flight when the power failed);
- no acknowledged sequence is ever reused for other content;
- every byte a repair removed is in .quarantine/, identical, with its manifest line.
"""
from __future__ import annotations

import hashlib
import json
import os

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from simfs import SimCrash, SimFS
from walctl.errors import WalctlError
from walctl.ops.wal.compact import compact
from walctl.ops.wal.records import Record, RecordWalk
from walctl.ops.wal.repair import repair
from walctl.ops.wal.salvage import salvage
from walctl.ops.wal.verify import verify_path
from walctl.ops.wal.write import WalWriter
from walctl.store import quarantine as q

WAL = "/data/wal"
POLICIES = ("always", "batch", "none")


def event(i: int) -> tuple[int, bytes, bytes, int]:
    return i % 16, b"mem-%d" % (i % 5), bytes((i + k) % 251 for k in range(i * 37 % 300)), 1795300000000 + i


def fresh_fs(seed: int = 0, crash_at: int | None = None) -> SimFS:
    fs = SimFS(seed, crash_at)
    fs.makedirs_durable("/data")
    return fs


def read_back(fs) -> tuple[list[Record], object]:
    walk = RecordWalk(WAL, fs=fs)
    records = [r for r in walk if isinstance(r, Record)]
    return records, walk.report


def chunk_bytes(fs) -> dict[str, bytes]:
    if not fs.exists(WAL):
        return {}
    out = {}
    for e in fs.listdir(WAL):
        if e.name.startswith("wal-") and e.kind == "file":
            out[e.name] = fs.read_range(e.path, 0, e.size)
    return out


def assert_evidence_covers_cuts(fs, before: dict[str, bytes]) -> None:
    """Whatever a repair removed from a chunk is a quarantined file with a matching manifest line."""
    after = chunk_bytes(fs)
    entries, _ = q.read_manifest(WAL, fs)
    kept = {}
    for e in entries:
        if e["action"] in ("truncate", "quarantine-chunk") and e.get("evidence"):
            data = fs.read_range(os.path.join(WAL, e["evidence"]), 0, e["length"])
            assert hashlib.sha256(data).hexdigest() == e["sha256"], e
            kept.setdefault(e["source"], []).append((e["offset"], data))
    for name, old in before.items():
        new = after.get(name)
        if new is None:
            assert any(off == 0 and data == old for off, data in kept.get(name, ())), f"{name} vanished without evidence"
        elif len(new) < len(old):
            assert old.startswith(new), name
            assert (len(new), old[len(new):]) in kept.get(name, []), f"cut of {name} at {len(new)} has no evidence"


def writer_session(fs, policy: str, start: int, n: int, acked: dict, attempted: list) -> None:
    """Appends events start..start+n-1; records what was acknowledged and what was handed over."""
    w = WalWriter(WAL, fs=fs, sync=policy, batch_records=3, max_chunk_bytes=600)
    for i in range(start, start + n):
        ev = event(i)
        attempted.append((w.last_sequence + 1, ev))
        seq = w.append(ev[0], ev[1], ev[2], ev[3])
        assert seq == attempted[-1][0]
        for s, e in attempted:
            if s <= w.durable_sequence:
                acked[s] = e
    w.flush()
    for s, e in attempted:
        acked[s] = e
    w.close()


def check_recovered(fs, acked: dict, attempted: list, label: str) -> list[Record]:
    before = chunk_bytes(fs)
    w = WalWriter(WAL, fs=fs)  # opening cuts a torn tail (with evidence) and must then succeed
    next_seq = w.opened.first_sequence
    w.close()
    assert_evidence_covers_cuts(fs, before)
    records, report = read_back(fs)
    assert report.exit_code == 0, (label, [f.one_line() for f in report.findings], fs.log[-12:])
    got = [(r.sequence, (r.type_ordinal, r.memory_id, r.payload, r.timestamp_ms)) for r in records]
    assert got == attempted[:len(got)], (label, "the records are not a prefix of what was written", fs.log[-12:])
    present = {s for s, _ in got}
    missing = sorted(s for s in acked if s not in present)
    assert not missing, (label, f"acknowledged sequences lost: {missing[:10]}", fs.log[-12:])
    assert next_seq == (got[-1][0] + 1 if got else 1), (label, "the next sequence would reuse or skip one")
    return records


@pytest.mark.parametrize("policy", POLICIES)
def test_crash_at_every_operation_of_a_writer_session(policy):
    probe = fresh_fs()
    writer_session(probe, policy, 0, 14, {}, [])
    total = probe.ops
    assert total > 14
    for n in range(1, total + 1):
        for seed in (n, n + 1000):
            fs = fresh_fs(seed, crash_at=n)
            acked: dict = {}
            attempted: list = []
            with pytest.raises(SimCrash):
                writer_session(fs, policy, 0, 14, acked, attempted)
            fs.crash()
            check_recovered(fs, acked, attempted, f"{policy} crash at op {n}/{total} seed {seed}")


@pytest.mark.parametrize("policy", POLICIES)
def test_second_session_after_a_crash_continues_without_reuse(policy):
    for n in range(1, 40, 3):
        fs = fresh_fs(n, crash_at=n)
        acked: dict = {}
        attempted: list = []
        try:
            writer_session(fs, policy, 0, 10, acked, attempted)
        except SimCrash:
            fs.crash()
        fs.crash_at = None
        records = check_recovered(fs, acked, attempted, f"first session, crash at {n}")
        attempted = attempted[:len(records)]
        writer_session(fs, policy, 100, 5, acked, attempted)
        check_recovered(fs, acked, attempted, f"second session after crash at {n}")
        # acknowledged content never changes under its sequence
        final, _ = read_back(fs)
        for r in final:
            if r.sequence in acked:
                assert (r.type_ordinal, r.memory_id, r.payload, r.timestamp_ms) == acked[r.sequence]


def _torn_fs(seed: int) -> tuple[SimFS, dict, list]:
    """A directory whose writer died mid-record, everything before it durable."""
    fs = fresh_fs(seed)
    acked: dict = {}
    attempted: list = []
    writer_session(fs, "always", 0, 8, acked, attempted)
    last = sorted(n for n in chunk_bytes(fs))[-1]
    fd = fs.open_append(os.path.join(WAL, last))
    fs.write(fd, b"\x57\x41\x02" + bytes(range(60)))
    fs.fsync(fd)
    fs.close(fd)
    return fs, acked, attempted


def test_crash_at_every_operation_of_repair_keeps_evidence_first():
    probe, _, _ = _torn_fs(0)
    start = probe.ops
    repair(WAL, apply=True, fs=probe)
    steps = probe.ops - start
    assert steps >= 5  # evidence file, rename, dir fsync, manifest, truncate, fsync
    for n in range(1, steps + 1):
        fs, acked, attempted = _torn_fs(n)
        before = chunk_bytes(fs)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            repair(WAL, apply=True, fs=fs)
        fs.crash()
        assert_evidence_covers_cuts(fs, before)
        assert verify_path(WAL, fs=fs).exit_code in (0, 1)
        # and a second repair finishes the job without duplicating the evidence
        rep = repair(WAL, apply=True, fs=fs)
        assert rep.exit_code == 0
        assert_evidence_covers_cuts(fs, before)
        files = [e.name for e in fs.listdir(os.path.join(WAL, q.QUARANTINE_DIR)) if e.name != q.MANIFEST]
        assert len([f for f in files if not f.endswith(".tmp")]) == 1, files
        # one cut, one manifest line (a crash between the line and the truncate must not give two)
        lines = [e for e in q.read_manifest(WAL, fs)[0] if e["action"] == "truncate"]
        assert len(lines) == 1, (n, lines)
        check_recovered(fs, acked, attempted, f"repair crash at {n}")


def test_crash_during_salvage_leaves_no_output_or_a_whole_one():
    probe, _, _ = _torn_fs(0)
    start = probe.ops
    salvage(WAL, "/data/out", fs=probe)
    steps = probe.ops - start
    expected = [r.sequence for r in read_back(probe)[0]]
    for n in range(1, steps + 1):
        fs, _, _ = _torn_fs(n)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            salvage(WAL, "/data/out", fs=fs)
        fs.crash()
        if fs.exists("/data/out"):
            assert [r.sequence for r in RecordWalk("/data/out", fs=fs) if isinstance(r, Record)] == expected
        # the source is untouched, and a rerun completes
        rep = salvage(WAL, "/data/out2", fs=fs)
        assert [r.sequence for r in RecordWalk("/data/out2", fs=fs) if isinstance(r, Record)] == expected
        assert rep.records == len(expected)


def test_crash_at_every_operation_of_salvage_then_one_rerun_to_the_same_out_finishes():
    """Killed before its mark is durable, at the final rename or after it: the rerun with the same OUT
    finishes (no exit 7 with the copy left in OUT.tmp), and ends as an uninterrupted run does."""
    probe, _, _ = _torn_fs(0)
    start = probe.ops
    whole = salvage(WAL, "/data/out", fs=probe)
    steps = probe.ops - start
    expected = [r.sequence for r in read_back(probe)[0]]
    assert whole.records == len(expected) == 8
    want = _salvaged(probe, "/data/out")
    for n in range(1, steps + 1):
        fs, _, _ = _torn_fs(n)
        source = chunk_bytes(fs)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            salvage(WAL, "/data/out", fs=fs)
        fs.crash()
        rep = salvage(WAL, "/data/out", fs=fs)
        assert rep.records == len(expected) and rep.exit_code == 0, n
        assert [r.sequence for r in RecordWalk("/data/out", fs=fs) if isinstance(r, Record)] == expected
        got = _salvaged(fs, "/data/out")
        assert got == want, f"crash at {n}: {sorted(got)} vs {sorted(want)}"  # no mark, no extra file
        assert not fs.exists("/data/out.tmp") and chunk_bytes(fs) == source


def _salvaged(fs, out: str) -> dict:
    """A salvage's output: each chunk's bytes, and its ledger's lines without their time, CRC and stat."""
    got = {}
    for e in fs.listdir(out):
        if e.kind == "dir":
            assert e.name == ".walctl", e.name
            text = fs.read_range(os.path.join(e.path, "ledger.jsonl"), 0, 1 << 20).decode()
            got[e.name] = [{k: v for k, v in json.loads(ln).items() if k not in ("ts", "crc32c", "stat")}
                           for ln in text.splitlines()]
        else:
            got[e.name] = fs.read_range(e.path, 0, e.size)
    return got


def test_salvage_of_a_source_without_a_valid_record_creates_nothing():
    fs = fresh_fs(0)
    fs.makedirs_durable(WAL)
    from walctl.format.v2 import encode_file_header

    fd = fs.open_append(os.path.join(WAL, "wal-000000.bin"), create=True)
    fs.write(fd, encode_file_header())
    fs.fsync(fd)
    fs.close(fd)
    with pytest.raises(WalctlError) as err:
        salvage(WAL, "/data/out", fs=fs)
    assert err.value.exit_code == 7 and "no valid record" in err.value.reason
    assert not fs.exists("/data/out") and not fs.exists("/data/out.tmp")


def quarantined(fs, directory=WAL) -> dict[str, bytes]:
    """Every file in the directory's .quarantine/ but the manifest, by name."""
    qd = q.qdir(directory)
    if not fs.exists(qd):
        return {}
    return {e.name: fs.read_range(e.path, 0, e.size) for e in fs.listdir(qd)
            if e.kind == "file" and e.name != q.MANIFEST}


def assert_removed_chunks_quarantined(fs, before: dict[str, bytes]) -> None:
    """A chunk gone from the WAL is byte for byte in .quarantine/ (recorded, or reported unrecorded)."""
    kept = set(quarantined(fs).values())
    for name, data in before.items():
        if name not in chunk_bytes(fs):
            assert data in kept, f"{name} left the WAL and is not in .quarantine/"


def test_crash_during_compaction_never_loses_a_byte():
    def setup(seed):
        fs = fresh_fs(seed)
        acked: dict = {}
        attempted: list = []
        writer_session(fs, "batch", 0, 30, acked, attempted)
        return fs, acked

    probe, acked = setup(0)
    start = probe.ops
    rep = compact(WAL, before=15, apply=True, fs=probe)
    assert rep.removals and all(e["action"] == "compact" for e in rep.evidence)
    steps = probe.ops - start
    for n in range(1, steps + 1):
        fs, acked = setup(n)
        before = chunk_bytes(fs)
        fs.crash_at = fs.ops + n
        with pytest.raises(SimCrash):
            compact(WAL, before=15, apply=True, fs=fs)
        fs.crash()
        records, report = read_back(fs)
        seqs = [r.sequence for r in records]
        assert [s for s in acked if s > 15 and s not in seqs] == []
        assert seqs == list(range(seqs[0], seqs[-1] + 1)) and report.exit_code == 0
        assert_removed_chunks_quarantined(fs, before)
        entries, _ = q.read_manifest(WAL, fs)
        for e in entries:  # each line's bytes are in .quarantine/, or still in the WAL (crash before the move)
            data = quarantined(fs).get(e["evidence"].split("/", 1)[1], chunk_bytes(fs).get(e["source"]))
            assert data is not None and hashlib.sha256(data).hexdigest() == e["sha256"], e
        # the rerun finishes the job: the same chunks end in .quarantine/, each recorded once
        compact(WAL, before=15, apply=True, fs=fs)
        assert set(chunk_bytes(fs)) == set(chunk_bytes(probe))
        assert_removed_chunks_quarantined(fs, before)
        entries, problems = q.read_manifest(WAL, fs)
        assert sorted(e["source"] for e in entries if e["action"] == "compact") == sorted(r.file for r in rep.removals)
        assert len(problems) <= 1 and all("torn by a crash" in p for p in problems), problems  # the crashed append


# ---- the state machine ----------------------------------------------------------------------------

class WalStory(RuleBasedStateMachine):
    """append / roll / crash / reopen / repair / salvage / compact / quarantine, in any order."""

    @initialize(seed=st.integers(0, 2 ** 32 - 1))
    def start(self, seed):
        self.seed = seed
        self.fs = fresh_fs(seed)
        self.writer = None
        self.acked: dict = {}
        self.history: dict = {}  # seq -> event handed to append (returned or in flight)
        self.next_event = 0
        self.hwm = 0  # compaction may remove sequences <= hwm
        self.outs = 0
        self.step = 0

    def _label(self, what):
        self.step += 1
        return f"seed {self.seed} step {self.step}: {what}; last ops {self.fs.log[-8:]}"

    def _crashed(self):
        self.fs.crash()
        self.writer = None

    @rule(n=st.integers(1, 12), policy=st.sampled_from(POLICIES), crash_in=st.none() | st.integers(1, 40))
    def append(self, n, policy, crash_in):
        self._label(f"append {n} {policy} crash_in={crash_in}")
        if crash_in is not None:
            self.fs.crash_at = self.fs.ops + crash_in
        try:
            if self.writer is None:
                # batch_ms far away: commits happen at group boundaries only, so every run of a seed
                # does the same file-system operations in the same order (hypothesis needs that)
                self.writer = WalWriter(WAL, fs=self.fs, sync=policy, batch_records=4, batch_ms=3_600_000,
                                        max_chunk_bytes=700)
                self.policy = self.writer._appender.sync
            for _ in range(n):
                ev = event(self.next_event)
                self.next_event += 1
                # handed over before the call: a crash inside append may still leave it on disk
                self.history[self.writer.last_sequence + 1] = ev
                seq = self.writer.append(*ev)
                assert self.history[seq] == ev
                if self.policy != "always":
                    continue  # batch commits in its own thread: what is acknowledged is read at flush/close
                for s in range(self.writer.durable_sequence, 0, -1):
                    if s in self.acked or s not in self.history:
                        break
                    self.acked[s] = self.history[s]
            self._settle_commit_thread()
        except SimCrash:
            self._crashed()
        finally:
            self.fs.crash_at = None

    def _settle_commit_thread(self):
        """Waits until no group is in flight, so that the armed crash point is reached (or not) in the
        same place on every run; a crash in the commit thread is the power failure it stands for."""
        ap = self.writer._appender
        with ap._lock:
            while ap._inflight is not None:
                ap._cv.wait()
        if isinstance(ap._failed, SimCrash):
            raise ap._failed

    @precondition(lambda self: self.writer is not None)
    @rule()
    def flush(self):
        self._label("flush")
        try:
            last = self.writer.flush()
        except SimCrash:
            self._crashed()
            return
        for s in range(1, last + 1):
            if s in self.history:
                self.acked.setdefault(s, self.history[s])

    @precondition(lambda self: self.writer is not None)
    @rule()
    def close(self):
        self._label("close")
        last = self.writer.close()
        for s in range(1, last + 1):
            if s in self.history:
                self.acked.setdefault(s, self.history[s])
        self.writer = None

    @rule()
    def power_failure(self):
        self._label("power failure")
        self._crashed()

    @precondition(lambda self: self.writer is None)
    @rule(crash_in=st.none() | st.integers(1, 12))
    def repair(self, crash_in):
        self._label(f"repair crash_in={crash_in}")
        before = chunk_bytes(self.fs)
        if crash_in is not None:
            self.fs.crash_at = self.fs.ops + crash_in
        try:
            if self.fs.exists(WAL):
                repair(WAL, apply=True, fs=self.fs)
        except SimCrash:
            self._crashed()
        except WalctlError:
            pass
        finally:
            self.fs.crash_at = None
        assert_evidence_covers_cuts(self.fs, before)

    @precondition(lambda self: self.writer is None)
    @rule(crash_in=st.none() | st.integers(1, 30))
    def salvage(self, crash_in):
        if not self.fs.exists(WAL) or not chunk_bytes(self.fs):
            return
        self._label(f"salvage crash_in={crash_in}")
        self.outs += 1
        out = f"/data/out{self.outs}"
        expected = [r.sequence for r in read_back(self.fs)[0]]
        if crash_in is not None:
            self.fs.crash_at = self.fs.ops + crash_in
        try:
            salvage(WAL, out, fs=self.fs)
        except SimCrash:
            self._crashed()
        except WalctlError as e:  # a log with no valid record yet: refused, nothing created
            assert e.exit_code == 7 and not expected, e
        finally:
            self.fs.crash_at = None
        if self.fs.exists(out):
            assert [r.sequence for r in RecordWalk(out, fs=self.fs) if isinstance(r, Record)] == expected

    @precondition(lambda self: self.writer is None and self.acked)
    @rule(frac=st.floats(0, 1), crash_in=st.none() | st.integers(1, 20))
    def compact(self, frac, crash_in):
        hwm = int(max(self.acked) * frac)
        self._label(f"compact before={hwm} crash_in={crash_in}")
        before = chunk_bytes(self.fs)
        if crash_in is not None:
            self.fs.crash_at = self.fs.ops + crash_in
        try:
            rep = compact(WAL, before=hwm, apply=True, fs=self.fs)
            if rep.removals:
                self.hwm = max(self.hwm, rep.removals[-1].last_sequence)
        except SimCrash:
            self._crashed()
            self.hwm = max(self.hwm, hwm)
        finally:
            self.fs.crash_at = None
        assert_removed_chunks_quarantined(self.fs, before)

    @precondition(lambda self: self.writer is None)
    @rule()
    def quarantine_and_restore_last_chunk(self):
        from walctl.ops.wal import quarantine as Q

        chunks = sorted(chunk_bytes(self.fs))
        if not chunks:
            return
        self._label(f"quarantine move+restore {chunks[-1]}")
        data = chunk_bytes(self.fs)[chunks[-1]]
        act = Q.move(WAL, chunks[-1], reason="state machine", apply=True, fs=self.fs)
        assert not self.fs.exists(os.path.join(WAL, chunks[-1]))
        name = act.target.split("/", 1)[1]
        Q.restore(WAL, name, apply=True, fs=self.fs)
        assert chunk_bytes(self.fs)[chunks[-1]] == data

    @invariant()
    def acknowledged_records_survive(self):
        if self.writer is not None or not self.fs.exists(WAL) or not chunk_bytes(self.fs):
            return
        records, report = read_back(self.fs)
        assert report.exit_code in (0, 1), self._label([f.one_line() for f in report.findings])
        got = {r.sequence: (r.type_ordinal, r.memory_id, r.payload, r.timestamp_ms) for r in records}
        for s, ev in self.acked.items():
            if s > self.hwm:
                assert got.get(s) == ev, self._label(f"acknowledged seq {s} lost or changed")
        for s, ev in got.items():
            assert self.history.get(s) == ev, self._label(f"seq {s} holds something never written")
        # what did not survive was never acknowledged: forget it, its sequence may be handed out again
        top = max(got) if got else 0
        for s in [s for s in self.history if s > top]:
            assert s not in self.acked or s <= self.hwm, self._label(f"acknowledged seq {s} lost")
            del self.history[s]


TestWalStory = WalStory.TestCase
TestWalStory.settings = settings(max_examples=25, stateful_step_count=25, deadline=None,
                                 suppress_health_check=list(HealthCheck))


@pytest.mark.slow
def test_wal_story_long():
    from hypothesis import stateful

    stateful.run_state_machine_as_test(WalStory, settings=settings(max_examples=400, stateful_step_count=60,
                                                                    deadline=None,
                                                                    suppress_health_check=list(HealthCheck)))
