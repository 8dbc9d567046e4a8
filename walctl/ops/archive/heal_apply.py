"""heal: the use case (plan in ops/archive/heal.py). Dry run unless `apply`; refuses while a live writer holds the
directory (exit 6, also for the dry run, as repair does).

Order of one step, each durable, so that a crash anywhere is finished by one rerun:
  1. download into NAME.tmp beside the target (store/durable.Staged), hashing as the bytes arrive;
  2. check the copy: SHA-256 (each live piece's too), size, a full scan, the sequences the manifest
     gives, continuity with its neighbours, and that it begins with the records the local file holds;
  3. keep the damaged original's bytes in .quarantine/ (durable create, then its manifest line:
     store/quarantine.keep_bytes, which a rerun reuses instead of copying twice);
  4. fsync NAME.tmp, rename it over NAME, fsync the directory; a `restored` ledger line when the ledger
     had the file moved away.
The file is never absent: a crash before 4 leaves the original in place (the rerun downloads again and
finds its evidence already kept), after it the copy. No ledger line is written for a sealed file: its
copy has exactly its sealed bytes.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...version import __version__
from ...errors import REASON_LOCKED, EnvironmentProblem, Refused
from ...store import durable, quarantine
from ...store import ledger as SL
from ...store.fs import DEFAULT_FS
from ...store.lock import DirectoryLock, holder_text
from ...store.objstore import open_store
from ...store.oserror import require_dir
from .objects import CHECKPOINTS, CHUNKS, SEGMENTS, HashingSink, read_manifest
from ..clock import utc_now
from .heal import BY_SEAL, HEALED, PLANNED, REFUSED, REPLACE, RESTORE, Plan, choose_namespace, \
    continuity_problem, make_plan, object_kind, seals
from ..report import PathReport
from ..wal.verify import verify_path

HEAL_ACTION = "heal"  # the quarantine manifest's action for a damaged original a heal replaced


class HealReport(NamedTuple):
    path: str
    kind: str | None
    destination: str
    namespace: str
    applied: bool
    plan: Plan
    before: PathReport
    after: PathReport | None
    downloaded_bytes: int
    endpoint_url: str | None = None  # given on the command line: the steps it advises carry it

    @property
    def exit_code(self) -> int:
        return (self.after or self.before).exit_code

    @property
    def heals(self) -> int:
        """How many files the plan puts back (or put back)."""
        return sum(s.outcome in (PLANNED, HEALED) for s in self.plan.steps)

    @property
    def damaged_bytes(self) -> int:
        """The bytes the plan puts back (or put back): the damaged files' sizes, and the absent files'."""
        sizes = {c.file: c.size for c in self.before.chunks}
        return sum(sizes.get(s.file, s.size) if s.action == REPLACE else s.size for s in self.plan.steps
                   if s.outcome in (PLANNED, HEALED))

    def next_steps(self) -> list:
        """The plan's apply step; after it, verify while something is left (ops/advice.py Steps)."""
        from ..advice import step

        where = ("--endpoint-url", self.endpoint_url) if self.endpoint_url else ()
        path = os.path.abspath(self.path)  # as every next step: it runs from anywhere
        if not self.applied and any(s.outcome == PLANNED for s in self.plan.steps):
            return [step("heal", path, "--from", self.destination, "--namespace", self.namespace, *where,
                         "--apply")]
        if self.applied and self.exit_code:
            return [step("verify", path)]  # what is left after the heal
        return []

    def advice(self) -> list[str]:
        return [s.text() for s in self.next_steps()]

    def to_json(self) -> dict:
        return {"path": self.path, "kind": self.kind, "destination": self.destination, "namespace": self.namespace,
                "applied": self.applied, "exit_code": self.exit_code,
                "steps": [s.to_json() for s in self.plan.steps], "left": [x.to_json() for x in self.plan.left],
                "lost": [list(r) for r in self.plan.lost], "downloaded_bytes": self.downloaded_bytes,
                "damaged_bytes": self.damaged_bytes,
                "before": {"verdict": self.before.verdict, "exit_code": self.before.exit_code},
                "after": None if self.after is None else {"verdict": self.after.verdict,
                                                          "exit_code": self.after.exit_code},
                "advice": self.advice(), "next_steps": [s.to_json() for s in self.next_steps()]}


def heal(path: str, dest: str, *, namespace: str | None = None, apply: bool = False,
         endpoint_url: str | None = None, jobs: int | None = None, transfers: int = 4,
         fs=DEFAULT_FS) -> HealReport:
    """`jobs`: verify's; `transfers`: downloads side by side. The archive is opened and its manifest read in a thread while the directory is verified (the
    S3 client's start-up and the hashing of sealed chunks overlap)."""
    from concurrent.futures import ThreadPoolExecutor

    from ..wal.verify import detect_kind

    fs = fs.beneath(path)
    require_dir(path, fs)  # a missing or wrong path is exit 6
    holder = fs.probe_writer(path)
    if holder:
        raise EnvironmentProblem(f"locked by a live writer ({holder}); nothing was changed", path, kind=REASON_LOCKED)
    okind = object_kind(detect_kind(path, fs))  # unsupported: exit 5, before any lock file exists
    with ThreadPoolExecutor(1) as pool:
        archive = pool.submit(open_archive, dest, path, namespace, endpoint_url)
        if not apply:
            before = verify_path(path, fs=fs, lock_held_by_us=True, jobs=jobs)
            return _planned(before, *archive.result(), okind, fs)._replace(endpoint_url=endpoint_url)
        with DirectoryLock(path, holder_text("heal"), fs):
            before = verify_path(path, fs=fs, lock_held_by_us=True, jobs=jobs)
            report = _planned(before, *archive.result(), okind, fs)
            done, downloaded = apply_steps(path, report, archive.result()[0], fs, okind, transfers)
            _finish_restored(path, fs)
            after = verify_path(path, fs=fs, lock_held_by_us=True, jobs=jobs, quick=True)
    return report._replace(applied=True, plan=report.plan._replace(steps=tuple(done)), after=after,
                           downloaded_bytes=downloaded, endpoint_url=endpoint_url)


def open_archive(dest: str, path: str, namespace: str | None, endpoint_url: str | None):
    """(the store, the namespace, its manifest). Asked after DIR is known to be something heal mends, so
    that an empty DIR is exit 5 whatever DEST is; a file:// DEST that is not a directory is exit 6."""
    store = open_store(dest, endpoint_url)
    root = getattr(store, "root", None)
    if root is not None:
        require_dir(root)
    ns = choose_namespace(store, path, namespace)
    return store, ns, read_manifest(store, ns)


def _planned(report: PathReport, store, ns: str, man, okind: str, fs) -> HealReport:
    plan = make_plan(report, man, okind, seals(report.path, fs.beneath(report.path)))
    return HealReport(report.path, report.kind, store.url, ns, False, plan, report, None, 0)


def plan_for(report: PathReport, dest: str, *, namespace: str | None = None, endpoint_url: str | None = None,
             fs=DEFAULT_FS) -> HealReport:
    """The dry run on a verify report already made (verify, map and repair ask it for their advice)."""
    okind = object_kind(report.kind)
    return _planned(report, *open_archive(dest, report.path, namespace, endpoint_url), okind, fs)


def apply_steps(path, report, store, fs, okind, transfers: int = 4) -> tuple[list, int]:
    """(every step as it ended, bytes downloaded). The copies are downloaded side by side (`transfers`
    at a time), each into its own NAME.tmp; then, one by one, each is checked and put in place."""
    from contextlib import ExitStack

    steps = report.plan.steps
    todo = [s for s in steps if s.outcome == PLANNED]
    with ExitStack() as stack:
        staged = [stack.enter_context(durable.Staged(os.path.join(path, s.file), fs, replace=True)) for s in todo]
        jobs = [(s, st) for s, st in zip(todo, staged)]
        if transfers > 1 and len(jobs) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(transfers, len(jobs))) as pool:
                fetched = list(pool.map(lambda j: _fetch(store, *j), jobs))
        else:
            fetched = [_fetch(store, *j) for j in jobs]
        ended = {s.file: place(path, s, st, why, store, fs, report.before, steps, okind)
                 for (s, st), (_, why) in zip(jobs, fetched)}
    return [ended.get(s.file, s) for s in steps], sum(n for n, _ in fetched)


def place(path, step, st, why, store, fs, before, steps, okind):
    """Checks the downloaded copy (unless `why` already refuses it), sets the original aside, renames
    the copy into place: the step healed, or refused with the reason (nothing changed)."""
    target = os.path.join(path, step.file)
    if why is None and step.matched_by == BY_SEAL:
        # The seal's own bytes: clean without a scan, as verify judges a sealed file whose SHA-256
        # matches (ledger rule 3); its sequences are the seal's, checked against its neighbours' by the plan.
        rng = step.sequence_range
    elif why is None:
        rng, why = CHECKS[okind](st.tmp, fs)
        why = why or _range_problem(step, rng) or _prefix_problem(fs, target, st.tmp, step.keep_prefix) \
            or continuity_problem(step, rng, steps, before)
    if why is None and step.action == RESTORE and fs.exists(target):
        why = f"{step.file} is there now: a file is never overwritten"
    if why is not None:
        return step._replace(outcome=REFUSED, reason=why)
    now, evidence = utc_now(), None
    if fs.exists(target):  # its bytes go to .quarantine/ first (line and all); the rename then replaces it
        data = fs.read_range(target, 0, fs.stat(target).size)
        line = quarantine.keep_bytes(path, step.file, 0, data, action=HEAL_ACTION, now=now, version=__version__,
                                     fs=fs, reason=f"{step.finding}: replaced from {store.url}/{step.objects[0][0]}")
        evidence = line["evidence"]
        if fs.read_range(target, 0, len(data) + 1) != data:
            raise Refused(f"{step.file} changed while healing; nothing was replaced", target)
    st.commit(target)
    SL.record_restored(path, step.file, now, fs)
    return step._replace(outcome=HEALED, evidence=evidence)


def _fetch(store, step, st) -> tuple[int, str | None]:
    """Downloads the step's objects, in order, into the staged file; each object's SHA-256 and size are
    checked as it arrives (and the whole copy's, against the seal or manifest)."""
    whole = HashingSink()
    total = 0
    for key, sha, size in step.objects:
        sink = HashingSink(st)
        n = store.get_to(key, _Tee(sink, whole))
        total += n
        if n != size or sink.hexdigest() != sha:
            return total, (f"{key}: the archived copy has {n} bytes, SHA-256 {sink.hexdigest()}; "
                           f"its manifest says {size} bytes, SHA-256 {sha}")
    if step.sha256 is not None and whole.hexdigest() != step.sha256:
        return total, f"the copy's SHA-256 {whole.hexdigest()} is not the expected {step.sha256}"
    return total, None


class _Tee:
    def __init__(self, *sinks):
        self.sinks = sinks

    def write(self, b) -> None:
        for s in self.sinks:
            s.write(b)


def _range_problem(step, rng) -> str | None:
    if step.sequence_range is not None and rng != tuple(step.sequence_range):
        return f"holds {rng[0]}..{rng[1]}, the archive's manifest says {step.sequence_range[0]}..{step.sequence_range[1]}"
    return None


def _prefix_problem(fs, target: str, tmp: str, keep: int) -> str | None:
    """A copy replaces a file without a seal only if it begins with the bytes of the records the file
    still holds: an archived file of another history (same name, other bytes) is refused."""
    if not keep:
        return None
    if fs.read_range(tmp, 0, keep) != fs.read_range(target, 0, keep):
        return f"does not begin with the {keep} bytes of records {os.path.basename(target)} still holds"
    return None


def _check_chunk(tmp: str, fs):
    from ...format.scan import HEADER_OK
    from ...store.chunkread import scan_chunk_file

    o = scan_chunk_file(tmp, fs)
    s = o.scan
    if s is None:
        return None, f"unreadable copy: {o.error}"
    if s.header != HEADER_OK:
        return None, f"not a V2 chunk (file header {s.header})"
    if s.damage:
        return None, f"{s.damage[0].kind} damage at offset {s.damage[0].offset} of the copy"
    if len(s.runs) != 1:
        return None, "the copy's sequences do not rise by one" if s.runs else "the copy holds no record"
    return (s.first_seq, s.last_seq), None


def _check_segment(tmp: str, fs):
    from ..wal.segments import verify_segments

    rep = verify_segments(tmp, fs=fs, lock_held_by_us=True)
    bad = [f for f in rep.findings if f.exit_code]
    if bad or rep.first_sequence is None:
        return None, f"the copy does not verify: {bad[0].one_line() if bad else 'no entry'}"
    return (rep.first_sequence, rep.last_sequence), None


def _check_checkpoint(tmp: str, fs):
    from ..checkpoints.checkpoint import check_path

    rep = check_path(tmp, fs=fs, check_canonical=False)
    if not rep.checked.ok:
        return None, f"the copy does not verify: {rep.findings[0].reason}"
    return (rep.header.wal_sequence, rep.header.wal_sequence), None


CHECKS = {CHUNKS: _check_chunk, SEGMENTS: _check_segment, CHECKPOINTS: _check_checkpoint}


def _finish_restored(path: str, fs) -> None:
    """A rerun after a crash between placing a file the ledger had moved away and its `restored` line:
    the file is back with its sealed bytes, so the line is written now."""
    from ...format import ledger as L

    read = SL.read_ledger(path, fs)
    if read is None:
        return
    sealed = seals(path, fs)
    for name in L.fold(read.lines).moved:
        p = os.path.join(path, name)
        seal = sealed.get(name)
        if seal is not None and fs.exists(p) and fs.stat(p).size == seal.get("size") \
                and SL.sha256_file(p, fs)[0] == seal.get("sha256"):
            SL.record_restored(path, name, utc_now(), fs)
