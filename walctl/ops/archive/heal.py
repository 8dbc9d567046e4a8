"""heal: put back, from the archive, what a log directory lost (the plan; applying it: ops/archive/heal_apply.py).

Like PostgreSQL's restore_command, but checked. For each chunk, segment or checkpoint that verify finds
missing, damaged, or changed since its ledger seal, and for each acknowledged range lost to a torn or
quarantined tail, the plan names the archived object (or the live pieces) that holds it:

  a file with a ledger seal   the archived object with the seal's SHA-256 and size (nothing else will do)
  a file without a seal       the archived object of that name (its manifest SHA-256), or the file's
                              live pieces from byte 0; its sequences must continue its neighbours'
  a range no file holds       the archived objects, absent here, whose manifest range overlaps it

A copy is refused, never placed, when it does not continue its neighbours' sequences (checked on the
manifest's ranges here and again on the downloaded bytes), and a torn tail is only replaced by a copy
that holds more than the local file (else `repair` cuts it). Healthy files are never a target.
What no archived object holds stays lost, and the plan says so.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from ...errors import EXIT_TORN, UnsupportedInput, UsageError
from ...format import ledger as L
from ...format.names import parse_chunk_name, parse_segment_name
from ...store import ledger as SL
from .. import classes as K
from .. import findings as F
from .objects import CHECKPOINTS, CHUNKS, LIVE, SEGMENTS, object_key
from ..kinds import KIND_CHECKPOINTS, KIND_DIR, KIND_SEGMENTS

# The directory kinds heal mends, and the archive's object kind for their files.
HEAL_OBJECTS = {KIND_DIR: CHUNKS, KIND_SEGMENTS: SEGMENTS, KIND_CHECKPOINTS: CHECKPOINTS}
# Findings that say a file's own bytes are damaged (a checkpoint's: any of its eleven steps).
DAMAGE = K.acted_on_by(K.HEAL)
# Findings that say sequences are absent: the field that holds the range.
ABSENT = K.with_absent()
REPLACE, RESTORE = "replace", "restore"
PLANNED, HEALED, REFUSED = "planned", "healed", "refused"
BY_SEAL, BY_MANIFEST, BY_PIECES = "ledger-seal", "manifest", "live-pieces"


class Step(NamedTuple):
    """One file put back: what replaces it (or fills its absence), from which objects, checked how."""
    file: str
    action: str  # replace (a damaged file, moved to .quarantine/ first) | restore (an absent file)
    finding: str  # the class of the finding it heals
    objects: tuple  # ((object key, sha256, size), ...): one sealed object, or the file's live pieces in order
    sha256: str | None  # the whole copy's expected SHA-256 (the seal's or the manifest's); None: pieces
    size: int
    sequence_range: tuple | None  # the sequences the copy holds (a checkpoint: its WAL sequence)
    matched_by: str  # ledger-seal | manifest | live-pieces
    keep_prefix: int = 0  # the local bytes the copy must begin with (records the file still holds)
    outcome: str = PLANNED  # planned | healed | refused
    reason: str = ""
    evidence: str | None = None  # where the damaged original went (.quarantine/NAME)

    def to_json(self) -> dict:
        return {"file": self.file, "action": self.action, "finding": self.finding, "outcome": self.outcome,
                "objects": [k for k, _, _ in self.objects], "sha256": self.sha256, "size": self.size,
                "sequence_range": list(self.sequence_range) if self.sequence_range else None,
                "matched_by": self.matched_by, "reason": self.reason or None, "evidence": self.evidence}


class Left(NamedTuple):
    """Damage the archive cannot heal, and why."""
    file: str | None
    finding: str
    reason: str
    sequence_range: tuple | None = None

    def to_json(self) -> dict:
        return {"file": self.file, "finding": self.finding, "reason": self.reason,
                "sequence_range": list(self.sequence_range) if self.sequence_range else None}


class Plan(NamedTuple):
    steps: tuple
    left: tuple
    lost: tuple  # (first, last) ranges that stay lost once every step is done


def object_kind(kind: str | None) -> str:
    if kind not in HEAL_OBJECTS:
        raise UnsupportedInput("heal mends Spector V2 chunk directories, ADR-003 segment directories and "
                               "checkpoint directories", None)
    return HEAL_OBJECTS[kind]


def file_index(name: str) -> int:
    n = parse_chunk_name(name)
    n = parse_segment_name(name) if n is None else n
    return -1 if n is None else n


def choose_namespace(store, directory: str, namespace: str | None) -> str:
    """--namespace, else the directory's name when the archive holds it (archive push's default), else the
    archive's only namespace."""
    from .objects import check_namespace
    from .listing import namespaces

    if namespace is not None:
        check_namespace(namespace)
        return namespace
    nss = namespaces(store)
    base = os.path.basename(os.path.normpath(directory))
    if base in nss:
        return base
    if len(nss) == 1:
        return nss[0]
    if not nss:
        raise UnsupportedInput("no archive here: no namespaces at this destination", store.url)
    raise UsageError(f"give --namespace: this destination holds {len(nss)} namespaces ({', '.join(nss)})")


def seals(directory: str, fs) -> dict:
    """file -> its last seal line, even when a later `moved` line took it away (a heal's rerun brings it
    back to exactly those bytes); a `cut` after the seal voids it (the file changed on purpose)."""
    read = SL.read_ledger(directory, fs)
    out: dict = {}
    for line in read.lines if read is not None else ():
        if line.event == L.SEAL:
            out[line.get("file")] = line
        elif line.event == L.CUT:
            out.pop(line.get("file"), None)
    return out


def units(man, okind: str) -> dict:
    """name -> (Entry, objects) for each file the archive can give back whole: sealed objects, and for a
    chunk or segment with no sealed object, its contiguous live pieces from byte 0."""
    from .pieces import contiguous_pieces, live_files, wal_units

    present = [e for e in man.entries.values() if e.name not in man.missing_objects]
    ns = man.namespace
    out = {e.name: (e, ((object_key(ns, e.kind, e.name), e.sha256, e.size),))
           for e in present if e.kind == okind}
    if okind == CHECKPOINTS:
        return out
    live = live_files(present)
    for e in wal_units(present):
        if e.sha256 == "" and e.kind == okind:
            used = contiguous_pieces(live[e.name])[0]
            out[e.name] = (e, tuple((object_key(ns, LIVE, p.name), p.sha256, p.size) for p in used))
    return out


def make_plan(report, man, okind: str, sealed: dict) -> Plan:
    """The steps that put back what the archive holds, what it cannot heal, and what stays lost."""
    got = units(man, okind)
    present = {c.file: c for c in report.chunks}
    by_file: dict = {}
    for f in report.findings:
        if f.file in present and f.cls in DAMAGE:
            by_file.setdefault(f.file, []).append(f)
    steps, left = [], []
    for name, fs_ in by_file.items():
        s = _replace_step(name, fs_, present[name], sealed.get(name), got, report.path)
        (steps if isinstance(s, Step) else left).append(s)
    missing = _absent_ranges(report)
    taken = {s.file for s in steps} | {x.file for x in left}
    for f in report.findings:
        if f.cls == F.SEALED_MISSING and f.file not in taken:
            s = _restore_step(f.file, f.cls, sealed.get(f.file), got, f.sequence_range)
            (steps if isinstance(s, Step) else left).append(s)
            taken.add(f.file)
    steps += _range_steps(report, missing, got, sealed, present, taken)
    steps = [s if s.outcome == REFUSED else _refuse_if_apart(s, steps, report) for s in steps]
    steps.sort(key=lambda s: (file_index(s.file), s.file))
    lost = _subtract(missing + [r for f in report.findings if f.file in by_file and f.lost_sequence_range
                                for r in [f.lost_sequence_range]],
                     [s.sequence_range for s in steps if s.outcome == PLANNED and okind != CHECKPOINTS])
    return Plan(tuple(steps), tuple(left), tuple(lost))


def _pick(name: str, seal, got: dict):
    """(Entry, objects, matched_by) for a file: by its seal's SHA-256 and size when it has one."""
    if seal is not None:
        sha, size = seal.get("sha256"), seal.get("size")
        same = got.get(name)
        if same is not None and same[0].sha256 == sha and same[0].size == size:
            return same[0], same[1], BY_SEAL
        for e, objs in got.values():
            if e.sha256 == sha and e.size == size:
                return e, objs, BY_SEAL
        return None
    if name not in got:
        return None
    e, objs = got[name]
    return e, objs, BY_MANIFEST if e.sha256 else BY_PIECES


def _step(name, action, finding, pick, keep_prefix=0, seal=None) -> Step:
    """A step from a pick; matched by a seal, its sequences are the seal's (the bytes it vouches for)."""
    e, objs, how = pick
    rng = (e.first_sequence, e.last_sequence) if e.first_sequence is not None else (
        (e.wal_sequence, e.wal_sequence) if e.wal_sequence is not None else None)
    if seal is not None and seal.get("first_seq") is not None:
        rng = (seal.get("first_seq"), seal.get("last_seq"))
    return Step(name, action, finding, objs, e.sha256 or None, e.size, rng, how, keep_prefix)


def _replace_step(name, findings, row, seal, got, directory):
    cls = findings[0].cls
    pick = _pick(name, seal, got)
    torn_only = all(f.exit_code == EXIT_TORN for f in findings)
    if torn_only and seal is None and (pick is None or pick[0].last_sequence is None or (
            row.last_sequence is not None and pick[0].last_sequence <= row.last_sequence)):
        from ..advice import cmd

        return Left(name, cls, f"a torn tail that no archived copy holds more of: {cmd('repair', directory)} "
                               "shows the cut (then add --apply)")
    if pick is None:
        why = (f"no archived object has the SHA-256 of its ledger seal ({seal.get('sha256')[:16]}...)" if seal
               else "the archive holds no copy of it")
        return Left(name, cls, why, findings[0].lost_sequence_range or findings[0].sequence_range)
    offsets = [f.offset for f in findings if f.offset is not None and f.cls != F.SEAL_MISMATCH]
    keep = 0 if seal is not None or not offsets or row.first_sequence is None else min(offsets)
    return _step(name, REPLACE, cls, pick, keep, seal)


def _restore_step(name, cls, seal, got, rng):
    pick = _pick(name, seal, got)
    if pick is None:
        return Left(name, cls, "no archived object holds it" + (" with its sealed SHA-256" if seal else ""), rng)
    return _step(name, RESTORE, cls, pick, seal=seal)


def _absent_ranges(report) -> list:
    return [tuple(getattr(f, ABSENT[f.cls])) for f in report.findings
            if f.cls in ABSENT and getattr(f, ABSENT[f.cls])]


def _overlaps(rng, ranges) -> bool:
    return rng is not None and rng[0] is not None and any(a <= rng[1] and rng[0] <= b for a, b in ranges)


def _range_steps(report, missing, got, sealed, present, taken) -> list:
    """Archived files absent here whose sequences fill a missing range; and the last file, when its
    archived copy (sealed or live pieces) holds the lost tail after it."""
    out = []
    for name, (e, _) in sorted(got.items(), key=lambda kv: (file_index(kv[0]), kv[0])):
        rng = (e.first_sequence, e.last_sequence)
        if name in taken or not _overlaps(rng, missing):
            continue
        row = present.get(name)
        if row is None:
            pick = _pick(name, sealed.get(name), got)
            if pick is not None:
                out.append(_step(name, RESTORE, _absent_class(report, rng), pick, seal=sealed.get(name)))
        elif row.last_sequence is not None and e.last_sequence > row.last_sequence \
                and e.first_sequence == row.first_sequence and sealed.get(name) is None:
            out.append(_step(name, REPLACE, _absent_class(report, rng), _pick(name, None, got), row.size))
        taken.add(name)
    return out


def _absent_class(report, rng) -> str:
    return next((f.cls for f in report.findings if f.cls in ABSENT and _overlaps(rng, [getattr(f, ABSENT[f.cls])])),
                F.SEQUENCE_MISSING)


def _refuse_if_apart(step: Step, steps: list, report) -> Step:
    why = continuity_problem(step, step.sequence_range, steps, report)
    return step._replace(outcome=REFUSED, reason=why) if why else step


def continuity_problem(step: Step, rng, steps, report) -> str | None:
    """Why a copy holding `rng` does not fit between its neighbours in the directory after the plan (the
    files left in place and the other copies), or None. Adjacent files must continue each other exactly;
    across a missing file, they must not overlap. A checkpoint has no neighbours."""
    if rng is None or step.file.endswith(".ckpt"):
        return None
    replaced = {s.file for s in steps if s.outcome != REFUSED}
    damaged = {f.file for f in report.findings if f.cls in DAMAGE}
    layout = [(file_index(c.file), c.first_sequence, c.last_sequence, c.file not in damaged, c.file)
              for c in report.chunks if c.file not in replaced and c.first_sequence is not None]
    layout += [(file_index(s.file), s.sequence_range[0], s.sequence_range[1], True, s.file)
               for s in steps if s.outcome != REFUSED and s.file != step.file and s.sequence_range]
    me = file_index(step.file)
    before = max((x for x in layout if x[0] < me), default=None)
    after = min((x for x in layout if x[0] > me), default=None)
    if before is not None:
        exact = me - before[0] == 1 and before[3]
        if (exact and before[2] + 1 != rng[0]) or before[2] >= rng[0]:
            return f"holds {rng[0]}..{rng[1]}, which does not continue {before[4]} (last sequence {before[2]})"
    if after is not None:
        exact = after[0] - me == 1 and after[3]
        if (exact and rng[1] + 1 != after[1]) or rng[1] >= after[1]:
            return f"holds {rng[0]}..{rng[1]}, which {after[4]} (first sequence {after[1]}) does not continue"
    return None


def _subtract(ranges, covered) -> list:
    """The parts of `ranges` no range of `covered` holds, merged, in order."""
    out = []
    for a, b in sorted(set(r for r in ranges if r)):
        pieces = [(a, b)]
        for c in covered:
            if not c:
                continue
            pieces = [p for x, y in pieces for p in ((x, min(y, c[0] - 1)), (max(x, c[1] + 1), y)) if p[0] <= p[1]]
        out += pieces
    merged: list = []
    for a, b in sorted(out):
        if merged and a <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged
