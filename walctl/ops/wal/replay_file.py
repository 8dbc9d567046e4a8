"""replay --out FILE | --sync-blob --out DIR, and --report FILE: durable creates around ops/wal/replay.py.

The stream gathers in a staged OUT.tmp and is renamed into place (for the sync blob, under the name its
last sequence gives) only when the replay has finished, so an interrupted replay leaves no partial OUT."""
from __future__ import annotations

import os

from ...errors import UsageError
from ...store.fs import DEFAULT_FS


def replay_to_file(path: str, out: str, opts, progress=None, fs=DEFAULT_FS):
    """(report, the file written or None when a sync blob had no events to hold)."""
    from ...format import events as ev
    from ...store import durable
    from .replay import replay

    if opts.form == ev.FORM_SYNC:
        if not os.path.isdir(out):
            raise UsageError(f"--out {out}: --sync-blob writes into a directory (the file is named after its "
                             "last sequence)")
        staged = durable.Staged(os.path.join(out, ".replay-sync-blob"), fs.beneath(out))  # renamed at the end, never over a blob
    else:
        if os.path.isdir(out):
            raise UsageError(f"--out {out} is a directory; give a file name")
        staged = durable.Staged(out, fs.beneath(os.path.dirname(os.path.abspath(out))))
    with staged:
        report = replay(path, lambda pieces: staged.write(b"".join(pieces)), opts, fs=fs, out_fd=staged.fd,
                        progress=progress)
        if opts.form == ev.FORM_SYNC and report.events == 0:
            return report, None
        final = staged.commit(os.path.join(out, ev.sync_blob_name(report.last_sequence))
                              if opts.form == ev.FORM_SYNC else None)
    return report, final


def write_report_file(report_path: str, document: str, fs=DEFAULT_FS) -> None:
    """--report FILE: the JSON report, durably, replacing an older one."""
    from ...store import durable

    durable.create_file(report_path, (document + "\n").encode(),
                        fs.beneath(os.path.dirname(os.path.abspath(report_path))), replace=True)
