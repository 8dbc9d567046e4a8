"""`--metrics-file FILE`: what a run tells a monitoring system, in the Prometheus text format, written the
node_exporter textfile-collector way (docs/contract.md, "Metrics for monitoring"; docs/json.md, "Metrics").

One sample set per target (`target` label: the path made absolute; `command`: verify, recover, checkpoint create,
archive push). Every finding class of ops/classes.py has its sample, 0 when absent, so an alert reads
`walctl_findings{class="mid-log-damage"} > 0` without `absent()`. `walctl_last_success_timestamp_seconds`
is carried over from the file's previous contents when this run did not succeed, so "no success for a
day" is one expression whatever the last run did.

Written whole to FILE.tmp in FILE's directory, fsynced, renamed over FILE, the directory fsynced
(store/durable.py): a collector reads the old file or the new one, never half of one. The textfile
collector reads only `*.prom`, so FILE.tmp is never read."""
from __future__ import annotations

import os
import time
from typing import NamedTuple

from ..format.promtext import Family, encode, labels_text, read_values
from ..store.fs import DEFAULT_FS
from . import classes as K

LAST_SUCCESS = "walctl_last_success_timestamp_seconds"


class Target(NamedTuple):
    """What one target of a run measured; None: the command does not measure it (no sample)."""
    path: str
    exit_code: int
    classes: dict  # finding class -> count
    bytes_checked: int | None = None
    records_checked: int | None = None
    last_sequence: int | None = None
    shipped_sequence: int | None = None  # archive push: the last sequence in the archive
    lag_sequences: int | None = None
    lag_seconds: float | None = None
    bytes_uploaded: int | None = None


def count_classes(findings) -> dict:
    """{class: count} of findings (Finding objects or their JSON)."""
    out: dict = {}
    for f in findings:
        cls = f["class"] if isinstance(f, dict) else f.cls
        out[cls] = out.get(cls, 0) + 1
    return out


_GAUGES = (
    ("walctl_checked_bytes", "Bytes of the target read and checked by the run.", "bytes_checked"),
    ("walctl_checked_records", "Records (entries, events) of the target read and checked by the run.",
     "records_checked"),
    ("walctl_last_sequence", "The last valid sequence of the target's log (verify, recover).", "last_sequence"),
    ("walctl_archive_last_shipped_sequence", "archive push: the last sequence the archive holds, verified.",
     "shipped_sequence"),
    ("walctl_archive_lag_sequences", "archive push: sequences of the local log not yet in the archive.",
     "lag_sequences"),
    ("walctl_archive_lag_seconds", "archive push: how far the archive trails the local log, in seconds: the "
     "newest local record's time minus the newest archived record's (--follow: how long the oldest record not "
     "yet shipped has waited; 0 when all is shipped).", "lag_seconds"),
    ("walctl_archive_uploaded_bytes", "archive push: bytes uploaded by the run (--follow: so far).",
     "bytes_uploaded"),
)


def render(command: str, targets, seconds: float, now: float, previous: str = "") -> str:
    """The whole file for one run. `previous`: the file's old text (for the last success time)."""
    lab = [(("command", command), ("target", os.path.abspath(t.path))) for t in targets]
    carried = read_values(previous, LAST_SUCCESS)
    success = []
    for labels, t in zip(lab, targets):
        if t.exit_code == 0:
            success.append((labels, now))
        elif labels_text(labels) in carried:
            success.append((labels, carried[labels_text(labels)]))
    fams = [
        Family("walctl_exit_code", "The exit code of the last run for the target (0 clean, 1 torn tail, 3 "
               "corruption, 4 sequence, 5 unsupported, 6 environment, 7 refused; docs/contract.md).",
               tuple((labels, t.exit_code) for labels, t in zip(lab, targets))),
        Family("walctl_last_run_timestamp_seconds", "When the last run ended (Unix time).",
               tuple((labels, now) for labels in lab)),
        Family(LAST_SUCCESS, "When a run last ended with exit code 0 for the target (Unix time; kept from the "
               "file's previous contents while runs fail; absent until one succeeds).", tuple(success)),
        Family("walctl_run_duration_seconds", "How long the last run took.", tuple((labels, seconds) for labels in lab)),
        Family("walctl_findings", "Findings of the last run by class (ops/classes.py; 0 when none).",
               tuple((labels + (("class", cls),), t.classes.get(cls, 0))
                     for labels, t in zip(lab, targets) for cls in _classes(t))),
    ]
    for name, help_text, field in _GAUGES:
        fams.append(Family(name, help_text, tuple((labels, getattr(t, field)) for labels, t in zip(lab, targets)
                                                  if getattr(t, field) is not None)))
    return encode(fams)


def _classes(t: Target) -> list:
    # every class of the table, and any a finding carried that the table does not name (never dropped)
    return list(K.CLASSES) + sorted(set(t.classes) - set(K.CLASSES))


def write(path: str, command: str, targets, seconds: float, now: float | None = None, fs=None,
          base=DEFAULT_FS) -> None:
    """`fs`: a file system confined to the file's directory; without one, `base` is confined to it here."""
    from ..errors import WalctlError
    from ..store import durable

    if fs is None:
        # the operator's directory for it, the one place written; resolved first, so that a link on its way
        # is not noted as a followed *target* of the run (store/root.FOLLOWED: the JSON's `targets`)
        path = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
        fs = base.beneath(os.path.dirname(path))
    try:  # the last success time lives in the file itself (a file of another origin: its lines are skipped)
        previous = fs.read_head(path, 1 << 20).decode("utf-8", "replace") if fs.exists(path) else ""
    except (OSError, WalctlError):
        previous = ""
    text = render(command, targets, seconds, time.time() if now is None else now, previous)
    durable.create_file(path, text.encode("utf-8"), fs, replace=True)


# ---- what each command measured --------------------------------------------------------------------

def verify_targets(report) -> list:
    return [Target(p.path, p.exit_code, count_classes(p.findings), _bytes_checked(p), p.records, p.last_sequence)
            for p in report.paths]


def _bytes_checked(p) -> int:
    """--subset/--resume/--max-duration read part of the sealed chunks: what was read, as `coverage` says."""
    if p.coverage is not None and p.coverage.get("bytes_checked") is not None:
        return p.coverage["bytes_checked"]
    return sum(c.size for c in p.chunks)


def failed_targets(paths, exit_code: int, examined: dict | None = None) -> list:
    """A run that ended in an error: its code, and the findings its own document carried."""
    found = count_classes((examined or {}).get("findings", []))
    return [Target(p, exit_code, found) for p in paths]


def recover_targets(path: str, rep) -> list:
    return [Target(path, rep.exit_code, count_classes(rep.findings), records_checked=rep.entries_replayed,
                   last_sequence=rep.final_sequence)]


def checkpoint_targets(path: str, made, records: int | None) -> list:
    return [Target(path, 0, {}, records_checked=records, last_sequence=made.wal_sequence)]


def push_targets(wal_dir: str, rep, endpoint_url: str | None = None) -> list:
    """The push's outcome and, read back from the archive's manifest, how far it trails the local log
    (archive list --dir's `lag`)."""
    from ..errors import WalctlError
    from .archive.listing import list_archive

    shipped = lag_seq = lag_s = None
    try:
        s = list_archive(rep.destination, namespace=rep.namespace, wal_dir=wal_dir,
                         endpoint_url=endpoint_url).namespaces[0]
        shipped, lag_seq, lag_s = s["last_sequence"], s["lag"].get("sequences"), s["lag"].get("seconds")
    except (WalctlError, OSError):  # the lag stays unknown: no sample, never a wrong one
        pass
    return [Target(wal_dir, rep.exit_code, count_classes(rep.held_back), shipped_sequence=shipped,
                   lag_sequences=lag_seq, lag_seconds=lag_s, bytes_uploaded=rep.bytes_uploaded)]


def follow_targets(wal_dir: str, sh, exit_code: int = 0) -> list:
    """A running follower (ops/archive/follow.Shipper): what it shipped and what waits in its buffer."""
    if not hasattr(sh, "buf"):  # a shipper of whole files (task logs, an agent root): no buffer to measure
        return [Target(wal_dir, exit_code, {}, shipped_sequence=getattr(sh, "shipped_through", None),
                       bytes_uploaded=getattr(sh, "bytes_uploaded", None))]
    waiting = bool(sh.buf) and sh.buf_last is not None
    base = sh.shipped_through or 0
    return [Target(wal_dir, exit_code, {}, shipped_sequence=sh.shipped_through,
                   lag_sequences=max(0, sh.buf_last - base) if waiting else 0,
                   lag_seconds=max(0.0, sh.clock() - sh.buf_since) if waiting else 0.0,
                   bytes_uploaded=sh.bytes_uploaded)]
