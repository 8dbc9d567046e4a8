"""An archive namespace's `MANIFEST.json` as a document (docs/format.md section 13): what a valid one
holds, checked before any of it is used. Pure. The manifest is read from a store anyone with write
access to the bucket can change: a field of the wrong type or an impossible value makes the document
invalid (named by object number and field), and readers then rebuild it from the objects themselves
(ops/archive/objects.py: read_manifest). Nothing in an invalid manifest is acted on; nothing prints `1..None`.
"""
from __future__ import annotations

import re
from typing import NamedTuple

from .fields import COUNT, INT, ISO, SHA256, STR, Field, check, shown
from .jsonload import check_text, loads
from .livepiece import parse_piece_name
from .names import CHECKPOINT_SUFFIX, is_plain_name, parse_chunk_name, parse_segment_name

CHUNKS, SEGMENTS, CHECKPOINTS, LIVE = "chunks", "segments", "checkpoints", "live"
TASKLOGS, AGENTS = "tasklogs", "agents"  # file versions: whole files (complete lines), named by their SHA-256
WAL_KINDS = (CHUNKS, SEGMENTS)
FILE_KINDS = (TASKLOGS, AGENTS)
KINDS = (CHUNKS, SEGMENTS, CHECKPOINTS, LIVE, TASKLOGS, AGENTS)

# A file version's object name says which file it is and its SHA-256 (and, for an agent root's file, the
# time its bytes stood, ms): `<task_id>.wal.<sha256>`, `<session_id>.<file>.<ms>.<sha256>`. Restore makes
# the file's path from these parts only: the task id a plain name, the session id 32 hex digits, the file
# one of Substrat's three names.
AGENT_FILES = ("session.json", "events.jsonl", "events.pending")
_SHA = re.compile(r"[0-9a-f]{64}")
_SID = re.compile(r"[0-9a-f]{32}")


class Version(NamedTuple):
    path: tuple[str, ...]  # the file's path below the archived directory, as plain names
    sha256: str
    as_of_ms: int | None  # agent roots: when the file stood so (its mtime when it was read)


def version_name(kind: str, path: tuple[str, ...], sha256: str, as_of_ms: int | None = None) -> str:
    if kind == TASKLOGS:
        return f"{path[-1]}.{sha256}"
    return f"{path[1]}.{path[2]}.{as_of_ms}.{sha256}"


def parse_version_name(kind, name) -> Version | None:
    """The version an object name of a file kind describes, or None unless spelled as version_name spells it."""
    if not isinstance(name, str) or not is_plain_name(name) or name.count(".") < 2:
        return None
    head, sha = name.rsplit(".", 1)
    if not _SHA.fullmatch(sha):
        return None
    if kind == TASKLOGS:
        ok = head.endswith(".wal") and len(head) > 4 and is_plain_name(head)
        return Version((head,), sha, None) if ok else None
    sid, _, rest = head.partition(".")
    file, _, ms = rest.rpartition(".")
    if kind != AGENTS or not _SID.fullmatch(sid) or file not in AGENT_FILES or not (ms.isascii() and ms.isdigit()):
        return None
    return Version(("agents", sid, file), sha, int(ms))

# An object kind -> whether a name is one of its own shape (untrusted: it becomes a local file name).
NAME_RULES = {
    CHUNKS: lambda name: parse_chunk_name(name) is not None,
    SEGMENTS: lambda name: parse_segment_name(name) is not None,
    CHECKPOINTS: lambda name: name.endswith(CHECKPOINT_SUFFIX) and len(name) > len(CHECKPOINT_SUFFIX),
    LIVE: lambda name: parse_piece_name(name) is not None,
    TASKLOGS: lambda name: parse_version_name(TASKLOGS, name) is not None,
    AGENTS: lambda name: parse_version_name(AGENTS, name) is not None,
}

# One typed spec per manifest entry (format/fields.py).
ENTRY_SPEC = {
    "name": Field(STR), "kind": Field(STR), "size": Field(COUNT), "sha256": Field(SHA256),
    "first_sequence": Field(COUNT, null=True), "last_sequence": Field(COUNT, null=True), "uploaded_at": Field(ISO),
    "wal_sequence": Field(COUNT, required=False, null=True), "checkpoint_time": Field(INT, required=False, null=True),
    "last_time_ms": Field(INT, required=False, null=True), "as_of_ms": Field(INT, required=False, null=True),
}


def valid_object(kind, name) -> bool:
    """Whether `name` is an object name of `kind`'s own shape: object keys and manifest lines are
    untrusted, and these names become local file names on download and restore."""
    rule = NAME_RULES.get(kind) if isinstance(kind, str) else None
    return rule is not None and is_plain_name(name) and rule(name)


def entry_problem(obj) -> str | None:
    """Why `obj` is not a manifest entry, or None: ENTRY_SPEC's types, then what no push can have
    written (a range with one end null or ending before it starts, a checkpoint without its WAL
    sequence, a name not of its kind's shape)."""
    why = check(obj, ENTRY_SPEC, "a manifest entry (an object)")
    if why:
        return why
    first, last, kind = obj["first_sequence"], obj["last_sequence"], obj["kind"]
    if kind not in KINDS:
        return f"kind {shown(kind)} is not one of {', '.join(KINDS)}"
    if not valid_object(kind, obj["name"]):
        return f"name {shown(obj['name'])} is not a {kind} object name"
    if kind == CHECKPOINTS:
        if obj.get("wal_sequence") is None:
            return "wal_sequence is null, a checkpoint's WAL sequence (an integer >= 0) is needed"
        if first is not None or last is not None:
            return "a checkpoint holds no sequence range: first_sequence and last_sequence must be null"
        return None
    if kind in FILE_KINDS:
        if first is not None or last is not None:
            return f"a {kind} object holds no sequence range: first_sequence and last_sequence must be null"
        if parse_version_name(kind, obj["name"]).sha256 != obj["sha256"]:
            return "sha256 differs from the one its name carries"
    if obj.get("wal_sequence") is not None:
        return f"wal_sequence is set on a {kind} object (only checkpoints have one)"
    if (first is None) != (last is None):
        return f"first_sequence {shown(first)} and last_sequence {shown(last)}: one end of the range is null"
    if kind == LIVE and first is None:
        return "a live piece holds records: first_sequence is null"
    if first is not None and first > last:
        return f"first_sequence {first} is above last_sequence {last}"
    return None


def parse_objects(raw: bytes, schema: str) -> list[dict]:
    """The manifest's objects, each checked; ValueError naming the first problem (by object number)."""
    doc = loads(raw)  # lone surrogates are refused below, where the object holding one can be named
    if not isinstance(doc, dict) or not isinstance(doc.get("objects"), list):
        raise ValueError("not a manifest object with an objects list")
    if doc.get("schema") != schema:
        raise ValueError(f"schema {shown(doc.get('schema'))}")
    for i, o in enumerate(doc["objects"], 1):
        why = entry_problem(o)
        if why:
            name = o.get("name") if isinstance(o, dict) and isinstance(o.get("name"), str) else None
            raise ValueError(f"object {i}{f' ({shown(name)})' if name else ''}: {why}")
    check_text(doc)  # the rest of the document (its namespace, times...) is text too
    return doc["objects"]
