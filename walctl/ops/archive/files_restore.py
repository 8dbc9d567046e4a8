"""archive restore of task-log directories and Substrat roots (file versions, ops/archive/files.py): OUT
rebuilt as the directory was at --until T (default: its newest archived state), then verified.

Each file's path in OUT is made from the parts of its version's name (format/archive_manifest.py:
parse_version_name, which admits only plain names: a task id, a 32-hex session id, one of Substrat's
three file names), never from a manifest's text; everything is staged beside OUT, checked against its
SHA-256 and renamed in (ops/archive/restore_undo.py: Made, which takes back what this run made on a failure or
Ctrl-C, as a WAL restore does).
"""
from __future__ import annotations

import os
from typing import Callable, NamedTuple

from ...errors import EXIT_CORRUPT, EXIT_SEQUENCE, NotClean, UsageError
from ...format.archive_manifest import AGENTS, TASKLOGS, parse_version_name
from ...store.fs import DEFAULT_FS
from .objects import Manifest, _download, object_key
from .files import at_or_before, tasklog_lines


class FilesRestoreReport(NamedTuple):
    destination: str
    namespace: str
    out: str
    kind: str  # tasklogs | agents
    until_ms: int | None
    files: tuple[dict, ...]  # {"path", "object", "bytes"} per file written, in path order
    verdict: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return dict(self._asdict(), files=list(self.files), exit_code=0)


def restore_tasklogs(store, ns, man: Manifest, out_dir, to_seq, until_ms, scratch, made,
                     fs=DEFAULT_FS) -> FilesRestoreReport:
    """Each task log's newest version (the longest: a log only grows), cut before its first entry stamped
    after T; a log with no entry at or before T did not exist yet and is left out."""
    def choose(versions):
        return max(versions, key=lambda e: (e.size, e.uploaded_at, e.name))

    def cut(path, v):
        if until_ms is None:
            return None
        end = 0
        with fs.map_read(path) as buf:
            for off, nl, entry, _, _ in tasklog_lines(buf, v.path[0][:-4]):
                if entry is None or not at_or_before(entry["ts"], until_ms):
                    break
                end = nl
        return end

    return _restore(store, ns, man, out_dir, to_seq, until_ms, scratch, made, TASKLOGS, choose, cut)


def restore_agents(store, ns, man: Manifest, out_dir, to_seq, until_ms, scratch, made) -> FilesRestoreReport:
    """Each file as it stood at T: its newest version whose bytes stood at or before T."""
    def choose(versions):
        vs = [e for e in versions if until_ms is None or e.as_of_ms is None or e.as_of_ms <= until_ms]
        return max(vs, key=lambda e: (e.as_of_ms or 0, e.uploaded_at, e.name)) if vs else None

    return _restore(store, ns, man, out_dir, to_seq, until_ms, scratch, made, AGENTS, choose, lambda p, v: None)


def _restore(store, ns, man, out_dir, to_seq, until_ms, scratch, made, kind, choose: Callable,
             cut: Callable) -> FilesRestoreReport:
    from ..wal.verify import verify_path

    if to_seq is not None:
        raise UsageError(f"{ns} holds {kind} (file versions, no sequences): restore them to a time with --until")
    by_file: dict = {}
    for e in man.entries.values():
        if e.kind == kind and e.name not in man.missing_objects:
            by_file.setdefault(parse_version_name(kind, e.name).path, []).append(e)
    chosen = {p: c for p, vs in sorted(by_file.items()) if (c := choose(vs)) is not None}
    made.dir(out_dir)
    written = []
    for path, e in chosen.items():
        sha = _download(store, object_key(ns, kind, e.name), scratch, hashed=True)
        if sha != e.sha256:
            raise NotClean(f"{ns}/{kind}/{e.name} is corrupt in the archive (sha256 {sha}, pushed as {e.sha256})",
                           store.url, code=EXIT_CORRUPT)
        end = cut(scratch.path(e.name), parse_version_name(kind, e.name))
        if end == 0:
            scratch.remove(e.name)  # no entry at or before T: the log did not exist yet
            continue
        if end is not None:
            scratch.truncate(e.name, end)
        for i in range(1, len(path)):
            made.dir(os.path.join(out_dir, *path[:i]))
        made.adopt(scratch.path(e.name), os.path.join(out_dir, *path))
        written.append({"path": "/".join(path), "object": e.name,
                        "bytes": e.size if end is None else end})
    if not written:
        raise NotClean(f"no archived {kind} file is at or before that time" if until_ms is not None else
                       f"no {kind} objects archived under {ns}", store.url, code=EXIT_SEQUENCE)
    check = verify_path(out_dir, fs=made.fs)  # what was written, read back as `walctl verify` reads it
    if check.exit_code >= EXIT_CORRUPT:
        raise NotClean(f"the restored directory does not verify ({check.verdict})", out_dir, code=check.exit_code)
    return FilesRestoreReport(store.url, ns, out_dir, kind, until_ms, tuple(written), check.verdict, man.warnings)


def files_kind(man: Manifest):
    """The kinds-table entry whose file versions the namespace holds, or None (a WAL namespace)."""
    from ..kinds import ARCHIVED

    kinds = {ARCHIVED[e.kind] for e in man.entries.values() if e.kind in ARCHIVED}
    return next((k for k in kinds if k.restore is not None), None)
