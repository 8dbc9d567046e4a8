"""verify --subset / --resume / --max-duration (issue #27): which sealed chunks a run reads, that N runs
read each exactly once (also with chunks appended between runs), that damage in what was read keeps its
exit code while what was not read is listed, that a deadline stops at a chunk boundary and --resume goes
on from there, after a clean stop, a SIGKILL or a crash at any step of the one write."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import flip_bit, tree_digest
from simfs import SimCrash, SimFS
from walctl.format import verifyruns as VR
from walctl.ops.wal import coverage as C
from walctl.ops.wal.verify import verify_path, verify_paths
from walctl.ops.wal.write import WalWriter
from walctl.store import ledger as SL

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def written(d, n=600, start=0, fs=None) -> str:
    kw = {"fs": fs} if fs is not None else {}
    with WalWriter(str(d), max_chunk_bytes=2048, **kw) as w:
        for i in range(start, start + n):
            w.append(1, "m-%d" % (i % 7), b"x" * 50)
    return str(d)


def sealed_names(d, fs=None) -> set:
    kw = {"fs": fs} if fs is not None else {}
    read = SL.read_ledger(d, **kw)
    return {ln.get("file") for ln in read.lines if ln.event == "seal"}


def read_by_hash(rep) -> list:
    return list(rep.ledger["verified_by_hash"])


def runs(d, fs=None):
    kw = {"fs": fs} if fs is not None else {}
    return SL.read_ledger(d, name=VR.RUNS_NAME, check=VR.check_run, **kw)


class Ticks:
    """A clock that moves one second each time it is read: a deadline of N seconds passes after N reads."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 1
        return self.t


def test_parse_subset_and_its_usage_errors():
    assert C.parse_subset("2/7")[1:3] == (2, 7) and C.parse_subset("10%").parts_per_million == 100_000
    assert C.parse_subset("0.5%").parts_per_million == 5_000
    for bad in ("0/3", "4/3", "3", "a/b", "0%", "101%", "%", "-1/3", "1/0", "nan%"):
        with pytest.raises(Exception) as e:
            C.parse_subset(bad)
        assert e.value.exit_code == 2, bad


def test_the_slices_of_n_partition_the_circle_exactly():
    for n in (1, 2, 3, 7, 1000):
        arcs = [C.arc(C.parse_subset(f"{k}/{n}"), 0) for k in range(1, n + 1)]
        assert arcs[0][0] == 0 and arcs[-1][1] == VR.CIRCLE
        assert all(a[1] == b[0] for a, b in zip(arcs, arcs[1:]))
    names = [f"wal-{i:06d}.bin" for i in range(500)]
    for n in (2, 5):
        hits = [sum(C.in_slice(x, C.parse_subset(f"{k}/{n}")) for k in range(1, n + 1)) for x in names]
        assert hits == [1] * len(names)


@pytest.mark.parametrize("jobs", [1, 2])
def test_n_runs_read_every_sealed_chunk_exactly_once_and_the_unsealed_every_time(tmp_path, jobs):
    d = written(tmp_path / "w")
    sealed = sealed_names(d)
    all_chunks = sorted(n for n in os.listdir(d) if n.endswith(".bin"))
    unsealed = set(all_chunks) - sealed
    assert len(sealed) >= 15 and len(unsealed) == 1
    before = tree_digest(d)
    seen = []
    for k in range(1, 6):
        rep = verify_path(d, jobs=jobs, cover=C.Request(C.parse_subset(f"{k}/5")))
        cov = rep.coverage
        assert rep.exit_code == 0 and rep.records == 600  # the whole log is judged; the seals stand in
        assert cov["subset"] == f"{k}/5" and cov["stopped"] == "complete" and cov["state"] is None
        assert cov["unsealed_checked"] == 1 and cov["sealed"] == len(sealed)
        assert set(read_by_hash(rep)) | set(cov["not_checked"]) == sealed
        assert not set(read_by_hash(rep)) & set(cov["not_checked"])
        assert cov["sealed_checked"] == len(read_by_hash(rep))
        seen += read_by_hash(rep)
    assert sorted(seen) == sorted(sealed)  # each exactly once
    assert tree_digest(d) == before  # no --resume, no --max-duration: nothing written


def test_chunks_appended_between_runs_move_no_other_chunk_and_are_read_at_most_once(tmp_path):
    d = written(tmp_path / "w", 400)
    first = sealed_names(d)
    seen = []
    for k in range(1, 6):
        if k == 3:
            written(d, 400, start=400)  # the writer goes on: new chunks sealed between runs 2 and 3
        rep = verify_path(d, cover=C.Request(C.parse_subset(f"{k}/5")))
        assert rep.exit_code == 0 and rep.records == (400 if k < 3 else 800)
        assert all(C.in_slice(n, C.parse_subset(f"{k}/5")) for n in read_by_hash(rep))  # by name alone
        seen += read_by_hash(rep)
    new = sealed_names(d) - first
    assert len(new) >= 10
    assert len(seen) == len(set(seen))  # nothing read twice
    assert first <= set(seen)  # every chunk there from the start read once
    late = {n for n in new if any(C.in_slice(n, C.parse_subset(f"{k}/5")) for k in (3, 4, 5))}
    assert set(seen) & new == late  # a new chunk is read when its slice's turn comes after it appeared


def test_damage_in_the_slice_keeps_its_exit_code_and_the_other_slices_say_it_was_not_read(tmp_path):
    d = written(tmp_path / "w")
    victim = sorted(sealed_names(d))[3]
    p = os.path.join(d, victim)
    with open(p, "rb") as f:
        data = f.read()
    with open(p, "wb") as f:
        f.write(flip_bit(data, len(data) // 2))
    codes = {}
    for k in range(1, 5):
        rep = verify_path(d, cover=C.Request(C.parse_subset(f"{k}/4")))
        mine = C.in_slice(victim, C.parse_subset(f"{k}/4"))
        codes[k] = rep.exit_code
        if mine:
            assert rep.exit_code == 3 and victim not in rep.coverage["not_checked"]
            assert ("seal-mismatch", victim) in [(f.cls, f.file) for f in rep.findings if f.exit_code == 3]
            assert {f.file for f in rep.findings if f.exit_code} == {victim}
        else:
            assert rep.exit_code == 0 and victim in rep.coverage["not_checked"]
    assert sorted(codes.values()) == [0, 0, 0, 3]
    os.remove(p)  # a sealed chunk gone is found by every run: absence needs no read
    for k in range(1, 5):
        rep = verify_path(d, cover=C.Request(C.parse_subset(f"{k}/4")))
        assert rep.exit_code == 3 and any(f.cls == "sealed-chunk-missing" and f.file == victim for f in rep.findings)


def test_percent_with_resume_walks_the_circle_once_then_starts_over(tmp_path):
    d = written(tmp_path / "w")
    sealed = sealed_names(d)
    seen, starts = [], []
    for _ in range(4):
        rep = verify_path(d, cover=C.Request(C.parse_subset("25%"), resume=True))
        starts.append(rep.coverage["resumed_at"])
        assert rep.coverage["state"] == C.STATE_FILE
        seen += read_by_hash(rep)
    assert starts == [0.0, 0.25, 0.5, 0.75] and rep.coverage["circle_done"]
    assert sorted(seen) == sorted(sealed)
    assert [ln.get("from") for ln in runs(d).lines] == [0, VR.CIRCLE // 4, VR.CIRCLE // 2, 3 * VR.CIRCLE // 4]
    again = verify_path(d, cover=C.Request(C.parse_subset("25%"), resume=True))
    assert again.coverage["resumed_at"] == 0.0 and sorted(read_by_hash(again)) == sorted(
        n for n in sealed if VR.point(n) < VR.CIRCLE // 4)


@pytest.mark.parametrize("jobs", [1, 2])
def test_max_duration_stops_at_a_chunk_boundary_and_resume_goes_on_from_there(tmp_path, jobs):
    d = written(tmp_path / "w")
    sealed = sealed_names(d)
    seen, stops = [], []
    for _ in range(20):
        rep = verify_paths([d], jobs=jobs, cover=C.Request(None, True, C.Deadline(4, Ticks()))).paths[0]
        cov = rep.coverage
        assert rep.exit_code == 0 and cov["unsealed_checked"] == 1
        got = read_by_hash(rep)
        assert got and set(got) | set(cov["not_checked"]) == sealed
        # what was read is exactly the arc [from, to) of the circle: a prefix in point order
        lo, hi = runs(d).lines[-1].get("from"), runs(d).lines[-1].get("to")
        assert sorted(got) == sorted(n for n in sealed if lo <= VR.point(n) < hi)
        seen += got
        stops.append(cov["stopped"])
        if cov["circle_done"]:
            break
    assert sorted(seen) == sorted(sealed)
    assert stops[-1] == "complete" and set(stops[:-1]) == {"max-duration"} and len(stops) > 2


def test_a_deadline_shorter_than_one_chunk_still_moves_on(tmp_path):
    d = written(tmp_path / "w", 200)
    r1 = verify_path(d, cover=C.Request(None, False, C.Deadline(0, Ticks())))
    r2 = verify_path(d, cover=C.Request(None, True, C.Deadline(0, Ticks())))
    assert len(read_by_hash(r1)) == len(read_by_hash(r2)) == 1 and read_by_hash(r1) != read_by_hash(r2)
    assert r1.coverage["stopped"] == "max-duration"


_CHILD = textwrap.dedent("""
    import os, signal, sys
    from walctl.ops.wal import coverage as C
    from walctl.ops.wal.verify import verify_paths
    seen = []
    def progress(n):
        seen.append(n)
        if len(seen) == int(sys.argv[2]):
            os.kill(os.getpid(), signal.SIGKILL)
    verify_paths([sys.argv[1]], jobs=1, progress=progress, cover=C.Request(None, True, None))
""")


def test_resume_after_a_sigkill_mid_run_reads_again_what_the_killed_run_had_not_recorded(tmp_path):
    d = written(tmp_path / "w")
    sealed = sealed_names(d)
    first = verify_path(d, cover=C.Request(None, True, C.Deadline(5, Ticks())))  # a clean stop, recorded
    assert first.coverage["stopped"] == "max-duration"
    state = open(os.path.join(d, C.STATE_FILE), "rb").read()
    child = subprocess.run([sys.executable, "-c", _CHILD, d, "4"], cwd=ROOT, capture_output=True)
    assert child.returncode == -9  # killed by SIGKILL after reading 4 chunks
    assert open(os.path.join(d, C.STATE_FILE), "rb").read() == state  # it recorded nothing
    rest = verify_path(d, cover=C.Request(None, True, None))
    assert rest.coverage["resumed_at"] == round(runs(d).lines[0].get("to") / VR.CIRCLE, 6)
    assert sorted(read_by_hash(first) + read_by_hash(rest)) == sorted(sealed) and rest.coverage["circle_done"]
    assert len(runs(d).lines) == 2 and not runs(d).bad


def _sim_dir(seed: int):
    fs = SimFS(seed)
    fs.makedirs_durable("/data")
    written("/data/w", 300, fs=fs)
    fs.settle()
    verify_path("/data/w", fs=fs, cover=C.Request(C.parse_subset("50%"), True))  # the first half, recorded
    fs.settle()
    return fs, "/data/w"


@pytest.mark.parametrize("seed", [0, 1])
def test_a_crash_at_every_step_of_the_state_write_leaves_a_state_the_next_resume_uses(seed):
    step = 1
    while True:
        fs, d = _sim_dir(seed)
        sealed = sealed_names(d, fs)
        half = runs(d, fs).lines[-1].get("to")
        fs.crash_at = fs.ops + step
        try:
            verify_path(d, fs=fs, cover=C.Request(C.parse_subset("50%"), True))
            crashed, fs.crash_at = False, None
        except SimCrash:
            crashed = True
            fs.crash()
        read = runs(d, fs)
        assert not read.bad and read.lines[0].get("to") == half and len(read.lines) in (1, 2)
        again = verify_path(d, fs=fs, cover=C.Request(C.parse_subset("50%"), True))  # one rerun goes on
        assert again.exit_code == 0
        read = runs(d, fs)
        assert not read.bad and read.torn_offset is None
        assert read.lines[1].get("from") == half
        if len(read.lines) == 2:  # the crashed run's line was lost (or torn, and cut): the second half now
            assert crashed and sorted(read_by_hash(again)) == sorted(n for n in sealed if VR.point(n) >= half)
        else:  # it was written: the circle was done, this run started over
            assert len(read.lines) == 3 and read.lines[2].get("from") == 0 and again.coverage["resumed_at"] == 0.0
        if not crashed:
            break
        step += 1
    assert step > 2


def test_refused_before_anything_is_checked_when_the_state_cannot_be_written(tmp_path, cli):
    d = written(tmp_path / "w", 200)
    os.symlink(str(tmp_path / "elsewhere"), os.path.join(d, C.STATE_FILE))
    before = tree_digest(d)
    r = cli("verify", d, "--resume")
    assert r.code == 7 and "cannot write .walctl/verify.jsonl" in r.err and r.out == ""
    assert not os.path.exists(tmp_path / "elsewhere") and tree_digest(d) == before
    os.remove(os.path.join(d, C.STATE_FILE))
    os.mkdir(os.path.join(d, C.STATE_FILE))
    r = cli("verify", d, "--max-duration", "1h", "--json")
    assert r.code == 6 and r.json()["schema"] == "walctl.error/1"
    assert cli("verify", d, "--subset", "1/2").code == 0  # without them verify writes nothing and runs


def test_cli_flags_text_json_and_usage_errors(tmp_path, cli):
    d = written(tmp_path / "w")
    r = cli("verify", d, "--subset", "1/3", "--json")
    doc = r.json()
    cov = doc["paths"][0]["coverage"]
    assert r.code == 0 and doc["schema"] == "walctl.verify/2"
    assert cov["subset"] == "1/3" and cov["window"] == [0.0, 0.333333] and cov["state"] is None
    assert cov["sealed_checked"] + len(cov["not_checked"]) == cov["sealed"]
    r = cli("verify", d, "--subset", "10%", "--resume")
    assert r.code == 0 and "coverage: " in r.out and "subset 10%" in r.out
    assert f"next: walctl verify {d} --subset 10% --resume" in r.out
    for args in (["--subset", "4/3"], ["--subset", "x"], ["--max-duration", "soon"], ["--max-duration", "-1s"]):
        r = cli("verify", d, *args)
        assert r.code == 2 and r.err.startswith("walctl: error: ") and "Traceback" not in r.err
    assert len(runs(d).lines) == 1  # only the --resume run wrote


def test_other_kinds_and_directories_without_a_ledger_are_read_in_full(tmp_path, cli):
    d = written(tmp_path / "w", 200)
    shutil.rmtree(os.path.join(d, ".walctl"))
    r = cli("verify", d, "--subset", "1/9", "--resume", "--json")
    cov = r.json()["paths"][0]["coverage"]
    assert r.code == 0 and cov["complete"] and cov["window"] is None and cov["unsealed_checked"] >= 5
    assert not os.path.exists(os.path.join(d, ".walctl"))  # nothing to resume: nothing written


@pytest.mark.skipif(not hasattr(os, "fork"), reason="--jobs forks")
def test_a_worker_that_dies_costs_its_chunk_only_and_a_stop_leaves_the_rest_unstarted(tmp_path, monkeypatch):
    """Workers are handed one chunk at a time (ops/parallel.py): a worker that dies mid-chunk leaves that
    chunk reported as not scanned (exit 6), and the other worker scans the rest."""
    from walctl.ops import parallel as P

    d = written(tmp_path / "w", 300)
    names = sorted(n for n in os.listdir(d) if n.endswith(".bin"))
    paths = [os.path.join(d, n) for n in names]
    real = P.scan_chunk_file
    monkeypatch.setattr(P, "scan_chunk_file", lambda p, fs, expect=None: os._exit(9) if p == paths[2] else
                        real(p, fs, expect=expect))
    out = P.parallel_scan(paths, [os.path.getsize(p) for p in paths], 2)
    assert out[2].scan is None and out[2].error.exit_code == 6 and "worker process died" in out[2].error.reason
    assert all(o.scan is not None and o.scan.records > 0 for i, o in enumerate(out) if i != 2 and i < len(out) - 1)
    order = list(range(len(paths)))
    out = P.parallel_scan(paths, [os.path.getsize(p) for p in paths], 2, order=order, stop=lambda k: k >= 5)
    assert [o is not None for o in out] == [i < 5 for i in range(len(paths))]  # a prefix of the order
    assert out[2].error is not None and all(out[i].scan is not None for i in (0, 1, 3, 4))


def test_sealed_segments_are_hashed_on_every_core_with_the_same_findings(tmp_path, monkeypatch):
    """Segments are scanned, and their seals checked by a hash besides (ops/wal/ledger_check.py): by one
    thread per core past AUTO_JOBS_BYTES, with the findings of one thread."""
    import walctl.ops.wal.chunkscan as CS

    d = str(tmp_path / "s")
    with WalWriter(d, format="segments", sync="none") as w:
        for i in range(20_003):
            w.append_entry("memory_add", {"i": i}, 1)
    with open(os.path.join(d, "wal_00000002.log"), "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0x20]))
    one = verify_path(d)
    monkeypatch.setattr(CS, "AUTO_JOBS_BYTES", 1)
    monkeypatch.setattr(CS.os, "cpu_count", lambda: 2)
    many = verify_path(d)
    assert one.exit_code == many.exit_code == 3 and one.findings == many.findings
    assert [(f.cls, f.file) for f in many.findings if f.cls == "seal-mismatch"] == [("seal-mismatch", "wal_00000002.log")]


def test_a_state_write_that_fails_after_the_check_keeps_the_report(tmp_path, monkeypatch, cli):
    from walctl.errors import EnvironmentProblem

    d = written(tmp_path / "w", 200)

    def full_disk(*a, **kw):
        raise EnvironmentProblem("no space left on device", d, kind="no-space")

    monkeypatch.setattr(C.SL, "append_lines", full_disk)
    r = cli("verify", d, "--resume", "--subset", "50%")
    assert r.code == 0 and "note: this run was not recorded in .walctl/verify.jsonl: no space left" in r.out
    assert not runs(d).lines  # nothing recorded: the next --resume starts over
