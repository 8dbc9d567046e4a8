""""What to do next": the one place walctl builds the commands it advises, naming the real directory, chunk
and range. A step is an argv (`("walctl", "salvage", "/srv/wal", "--out", "/srv/wal.salvaged")`) and a note;
the text renders it with shlex.join (so it pastes as printed: `walctl salvage /srv/wal --out ...   # why`)
and `--json` prints the argv itself (`next_steps`), so a script follows exactly what a person reads. Pure:
the CLI prints them.

Each source of advice is one function over a report (`next_steps` after verify, `after_repair`,
`after_recover`), built from small rules (`_torn_steps`, `_missing_steps`...) that each return a list of
steps: a new rule (a heal step when an archive is known) is one more function in its source's table
(`VERIFY_RULES`) or one more line in its source.
"""
from __future__ import annotations

import os
import shlex
from typing import NamedTuple

from ..format.names import movable_kind
from . import classes as K
from . import findings as F


class Step(NamedTuple):
    argv: tuple[str, ...]  # ("walctl", WORD, ...): what to run, as is
    note: str = ""          # why, or what it does; shown after the command as a shell comment

    @property
    def command(self) -> str:
        """The command alone, shell-quoted: what a message puts between backquotes."""
        return shlex.join(self.argv)

    def text(self) -> str:
        """The command as a shell line (`# note` after it: a comment, so the line still pastes)."""
        return f"{self.command}   # {self.note}" if self.note else self.command

    def to_json(self) -> list[str]:
        return list(self.argv)


def step(*words, note: str = "") -> Step:
    return Step(("walctl",) + tuple(str(w) for w in words), note)


def cmd(*words) -> str:
    """`walctl WORD...` with every word shell-quoted (for a command inside a message)."""
    return step(*words).command


def steps_json(steps) -> list[list[str]]:
    return [s.to_json() for s in steps]


def _unique(steps) -> list[Step]:
    seen, out = set(), []
    for s in steps:
        if s.argv not in seen:
            seen.add(s.argv)
            out.append(s)
    return out


def salvage_out(directory: str) -> str:
    """Where advice suggests salvaging to: beside the directory, never inside it."""
    return os.path.normpath(directory).rstrip(os.sep) + ".salvaged"


def no_ledger_note(directory: str) -> str:
    """verify's one note on a V2 directory without a ledger (written by the Java writer, say)."""
    return (f"absence of a whole chunk is not detectable here (no ledger: a chunk deleted where its neighbours' "
            f"sequences still meet leaves no trace); `{cmd('seal', os.path.abspath(directory), '--apply')}` makes "
            "it so")  # absolute, as next_steps are: it runs from anywhere


def legacy_v1(chunk: str) -> str:
    """What reads a legacy V1 chunk, and what rewrites its directory as V2 (beside it, named after it)."""
    wal = os.path.normpath(os.path.dirname(chunk) or ".")
    wal = os.path.abspath(wal) if wal in (".", "..") else wal  # (`wal.v2` beside it needs a name)
    return (f"`{cmd('inspect', chunk)}` can read it; `{cmd('migrate', wal, '--out', wal + '.v2')}` rewrites it "
            "as V2 in a new directory")


def no_ledger(directory: str) -> dict:
    """What the ledger part of verify's report says of a V2 directory that has none, with its note."""
    return {"lines": 0, "sealed": 0, "verified_by_hash": [], "trusted_by_stat": [], "note": no_ledger_note(directory)}


def chunk_path(directory: str, chunk: str) -> str:
    return os.path.join(directory, chunk)


# ---- after verify ----------------------------------------------------------------------------------

def next_steps(report) -> list[Step]:
    """After verify: the commands that take an operator from the alert to the bytes, then to a clean
    directory (or a recorded loss), for this path."""
    if report.exit_code == 0 or report.kind is None:
        return []
    report = report._replace(path=os.path.abspath(report.path))  # a step runs from any directory
    return _unique([s for rule in VERIFY_RULES for s in rule(report)])


def look_steps(report) -> list[Step]:
    from .kinds import kind_of

    out = [step("inspect", report.path, "--damaged", note="the damaged bytes, annotated")]
    k = kind_of(report.kind)
    if k is None or not k.whole_files:  # a checkpoint is checked whole: no map to draw
        out.append(step("map", report.path, note="where the damage lies"))
    return out


def _mends(report) -> bool:
    """Salvage and the chunk moves act on it (Spector V2 chunk directories)."""
    from .kinds import kind_of

    k = kind_of(report.kind)
    return k is not None and k.mend


def _cuts(report) -> bool:
    """repair cuts its torn tails: a log directory, of chunks or of segments (the kinds with a ledger)."""
    from .kinds import kind_of

    k = kind_of(report.kind)
    return k is not None and k.ledger


def _torn_steps(report) -> list[Step]:
    from ..errors import EXIT_TORN

    if report.exit_code != EXIT_TORN or not _cuts(report):
        return []
    return [step("repair", report.path, note="dry run: shows the cut"),
            step("repair", report.path, "--apply", note="cuts the torn tail, keeping it in .quarantine/")]


MISSING = frozenset(K.with_absent())  # sequences no file holds


def _missing_steps(report) -> list[Step]:
    """Sequences no file holds: put back what `.quarantine/` keeps (a ledger line says it went there),
    else record the loss once the operator knows it is final (the ledger's accept-loss)."""
    from .kinds import kind_of

    if not kind_of(report.kind).ledger:
        return []
    restore, accept = [], []
    for f in report.findings:
        rng = f.missing or f.sequence_range
        if f.cls not in MISSING or f.exit_code == 0 or not rng:
            continue
        s = missing_step(report.path, rng[0], rng[1], f.extra)
        (restore if "restore" in s.argv else accept).append(s)
    return restore or accept  # restoring may close the gap; the loss is decided after it


def missing_step(directory: str, first: int, last: int, extra) -> Step:
    """For sequences no file holds: put back the chunk the ledger or the manifest says went to
    .quarantine/ (`extra`: the finding's, with `explained_by`), else record the loss."""
    moved = _quarantined_as(extra)
    if moved:
        return step("quarantine", "restore", directory, moved, "--apply",
                    note=f"puts seq {first}..{last} back from .quarantine/")
    return accept_loss_step(directory, first, last)


def _quarantined_as(extra) -> str | None:
    ex = extra.get("explained_by") if isinstance(extra, dict) else None
    to = ex.get("to") if isinstance(ex, dict) else None
    prefix = ".quarantine/"
    if isinstance(to, str) and to.startswith(prefix) and "/" not in to[len(prefix):]:
        return to[len(prefix):]
    return None


def accept_loss_step(directory: str, first: int, last: int) -> Step:
    """Recording a loss: the reason names what is recorded (the operator may give a better one)."""
    return step("repair", directory, "--accept-loss", f"{first}..{last}", "--reason",
                f"seq {first}..{last} held by no file", "--apply",
                note="only once these sequences are known to be lost for good")


CORRUPT_DAMAGE = K.acted_on_by(K.SALVAGE)  # bytes a copy reads past
DISCONTINUITY = K.acted_on_by(K.DISCONTINUITY)  # a gap, repeat or regression


def _corrupt_steps(report) -> list[Step]:
    from ..errors import EXIT_CORRUPT

    if not _mends(report) or not any(f.cls in CORRUPT_DAMAGE and f.exit_code == EXIT_CORRUPT
                                     for f in report.findings):
        return []
    out = salvage_out(report.path)
    return [step("salvage", report.path, "--out", out, note="copies every valid record into a new directory")]


def _rotten_checkpoint_steps(report) -> list[Step]:
    """A checkpoint that does not verify: recovery passes over it, but it stays a candidate in every
    listing; setting it aside (kept in .quarantine/) leaves a directory that verifies clean."""
    from ..errors import EXIT_CORRUPT
    from .kinds import kind_of

    if not kind_of(report.kind).is_dir:
        return []
    return [step("quarantine", "move", report.path, f.file, "--reason", f"{f.cls}: {f.reason}"[:200], "--apply",
                 note="sets the rotten checkpoint aside (kept in .quarantine/)")
            for f in report.findings
            if f.exit_code == EXIT_CORRUPT and f.file and movable_kind(f.file) == "checkpoint"]


# The rules of verify's advice, in the order their steps are printed: looking first, then what mends
# (a torn tail cut, a chunk put back, a loss recorded, a copy salvaged, a rotten checkpoint set aside).
VERIFY_RULES = (look_steps, _torn_steps, _missing_steps, _corrupt_steps, _rotten_checkpoint_steps)


# ---- after recover ---------------------------------------------------------------------------------

def after_recover(rep) -> list[Step]:
    """After a recovery that passed over checkpoint files: set each aside (recovery passes over it anyway;
    kept in .quarantine/, it stops being a candidate and its directory verifies clean). After a failure:
    verify of the log, whose own next steps start the way back."""
    out = []
    if rep.error is not None and rep.findings and rep.log:
        out.append(step("verify", os.path.abspath(rep.log), note="what stopped the recovery, and what to do about it"))
    for f in rep.passed_over():
        if movable_kind(f["file"]) == "checkpoint" and rep.checkpoints:
            out.append(step("quarantine", "move", os.path.abspath(rep.checkpoints), f["file"], "--reason",
                            f"passed over by recover: {f['why']}"[:200], "--apply",
                            note="sets the rotten checkpoint aside (kept in .quarantine/)"))
    return out


# ---- after repair ----------------------------------------------------------------------------------

def after_repair(rep) -> list[Step]:
    """After a repair (a plan or a cut): the apply step of a plan, then what repair leaves alone."""
    d = os.path.abspath(rep.path)
    out = []
    if rep.cuts and not rep.applied:
        out.append(step("repair", d, "--apply", note=f"cuts {rep.drop_bytes} bytes, keeping them in .quarantine/"))
    damage = [f for f in rep.left_alone if f.cls in CORRUPT_DAMAGE] if _mends(rep.before) else []
    if damage:
        out.append(step("inspect", d, "--damaged", note="look at the damaged bytes"))
        out.append(step("salvage", d, "--out", salvage_out(d),
                        note="corruption is left alone: copies every valid record into a clean directory"))
    for f in damage:
        rng = f"bytes {f.offset}..{f.end_offset}" if f.offset is not None and f.end_offset is not None else ""
        lost = f.lost_sequence_range or f.sequence_range
        what = ", ".join(x for x in (rng, f"seq {lost[0]}..{lost[1]}" if lost else "") if x)
        out.append(step("quarantine", "move", d, f.file, "--reason", f.cls + (" " + rng if rng else ""),
                        note=f"the plan to set {f.file} aside ({f.cls}{': ' + what if what else ''}); --apply does it"))
    missing = _missing_steps(rep.before._replace(path=d)) if rep.before.kind is not None else []
    if not missing and any(f.cls in DISCONTINUITY for f in rep.left_alone):
        out.append(step("quarantine", "list", d, note="sequences cannot be mended in place: is a chunk there?"))
    out += missing
    for f in rep.left_alone:  # an unsupported chunk in a log directory (never the directory itself)
        if f.cls == F.UNSUPPORTED and rep.before.kind is not None and f.file and movable_kind(f.file):
            out.append(step("quarantine", "move", d, f.file, "--reason", "unsupported chunk",
                            note=f"{f.file} is not a V2 chunk and is left alone: the plan to set it aside; "
                                 "--apply does it"))
    return _unique(out)


# ---- after cut -------------------------------------------------------------------------------------

def after_cut(rep) -> list[Step]:
    """A plan: its apply. A cut: verify, then the way back (what cut set aside, the cut bytes first: they go
    back onto the end they came from, then the files in order), while no writer has gone on from the cut."""
    d = os.path.abspath(rep.path)
    if rep.nothing:
        return []
    if not rep.applied:
        return [step("cut", d, "--after", rep.after, "--apply",
                     note=f"keeps sequences through {rep.after}; {rep.cut_bytes} bytes go to .quarantine/")]
    out = [step("verify", d, note="clean, and says where the cut was")]
    pieces = sorted(rep.evidence, key=lambda e: (e.get("offset") == 0, e.get("source", "")))
    for e in pieces:
        out.append(step("quarantine", "restore", d, e["evidence"].split("/", 1)[1], "--apply",
                        note="the way back, before a writer goes on from the cut"))
    return out
