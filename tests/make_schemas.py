"""Regenerate walctl/schemas/*.json on request: `python tests/make_schemas.py`.

Runs every case of tests/json_cases.py (real commands on copies of examples/), merges the shapes seen
per schema, and writes a JSON Schema (draft 2020-12) with the titles, field descriptions and enums below.
The rules that make the schemas safe to publish under the versioning rule of cli-contract.md:
- objects never forbid additional properties (adding a field is not a breaking change);
- only a document's top-level keys seen in every sample are required, plus a finding's core keys;
- an object whose keys are data (ids, file names, sequence numbers) is a map, not a list of properties.
Review the diff: a removed or retyped field means the schema's number must go up.
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import json_cases  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "walctl", "schemas")

TITLES = {
    "walctl.verify/2": ("walctl verify --json (also checkpoint verify --json)",
                        "Per-path and per-chunk verdicts and every finding."),
    "walctl.map/2": ("walctl map --json", "Where the damage is: per chunk, its byte regions marked by class, the "
                     "gaps between chunks and the quarantined pieces."),
    "walctl.record/1": ("inspect --jsonl / replay --jsonl record (Spector V2)",
                        "One valid V2 record, in directory order (docs/contract.md, JSON)."),
    "walctl.entry/1": ("inspect --jsonl / replay --jsonl record (ADR-003 segments)",
                       "One valid ADR-003 entry, in directory order."),
    "walctl.stats/2": ("walctl stats --json", "Counts and bytes per event type or operation, per chunk or "
                       "segment; for other kinds, the verify summary."),
    "walctl.write/1": ("walctl write --json", "What was appended and the durable high-water mark."),
    "walctl.repair/2": ("walctl repair --json", "The plan (dry run) or what was cut, with the evidence kept."),
    "walctl.heal/1": ("walctl heal --json", "The plan (dry run) or what was put back from the archive, per file, "
                      "with what was refused, what the archive cannot heal and what stays lost."),
    "walctl.fingerprint/1": ("walctl fingerprint --json", "The SHA-256 of the canonical folded state at a "
                             "sequence, the canonical form's name, and how the state was reached."),
    "walctl.cut/1": ("walctl cut --json", "Records kept through a point, the rest set aside in .quarantine/ and "
                     "the cut recorded in the ledger (or the plan)."),
    "walctl.seal/2": ("walctl seal --json", "Closed chunks sealed in the directory ledger (or the plan)."),
    "walctl.tasklog-resume/2": ("walctl tasklog resume --json", "Where the task resumes, and the torn line cut."),
    "walctl.workflow-delete/1": ("walctl workflow delete --json", "One workflow checkpoint set aside (or the plan)."),
    "walctl.agents-set-aside/1": ("walctl agents set-aside --json", "An unreadable line or session.json set aside "
                                  "(or the plan, or why not)."),
    "walctl.salvage/1": ("walctl salvage --json", "Records copied, sequences and byte ranges lost."),
    "walctl.migrate/1": ("walctl migrate --json", "Records converted from V1 or copied from V2, per source chunk "
                         "with the damage and the checks V1 allowed; sequences lost."),
    "walctl.compact/2": ("walctl compact --json", "Chunks at or below the HWM moved aside (or the plan)."),
    "walctl.quarantine/1": ("walctl quarantine list --json", "Quarantined files with their manifest lines."),
    "walctl.quarantine-show/1": ("walctl quarantine show --json", "What one quarantined file holds."),
    "walctl.quarantine-move/1": ("walctl quarantine move --json", "A chunk moved into .quarantine/ (or the plan)."),
    "walctl.quarantine-restore/1": ("walctl quarantine restore --json", "A quarantined file put back (or the plan)."),
    "walctl.quarantine-purge/1": ("walctl quarantine purge --json", "Old evidence deleted (or the plan)."),
    "walctl.checkpoint-create/1": ("walctl checkpoint create --json", "The checkpoint written."),
    "walctl.checkpoint-inspect/2": ("walctl checkpoint inspect --json", "Header fields, sizes, the state's keys."),
    "walctl.checkpoint-list/2": ("walctl checkpoint list --json", "Checkpoints newest first, each valid or why not."),
    "walctl.checkpoint-prune/2": ("walctl checkpoint prune --json", "Checkpoints moved aside (or the plan)."),
    "walctl.recover/2": ("walctl recover --json", "The checkpoint used, the replay after it, the outcome."),
    "walctl.replay/1": ("walctl replay --report FILE", "How the stream ended, what was skipped, the verdict."),
    "walctl.import/1": ("walctl import --json", "Events received, applied and skipped; the HWM before and after."),
    "walctl.merge/1": ("walctl merge --json", "The sources, the merged state's summary."),
    "walctl.memory-state/1": ("OUT/state.json written by walctl merge", "Spector memory state."),
    "walctl.archive-push/2": ("walctl archive push --json", "Objects uploaded, already archived, held back."),
    "walctl.archive-follow/1": ("walctl archive push --follow --json", "Live pieces and sealed files shipped, "
                                "pieces deleted after their seal, how the shipper stopped."),
    "walctl.archive-manifest/1": ("<namespace>/MANIFEST.json in an archive", "Every archived object."),
    "walctl.archive-list/1": ("walctl archive list --json", "Namespaces, objects, sequence ranges, gaps, live "
                              "pieces, lag."),
    "walctl.archive-verify/1": ("walctl archive verify --json", "Every archived object checked."),
    "walctl.archive-restore/2": ("walctl archive restore --json", "What was restored, to which point."),
    "walctl.archive-restore-files/1": ("walctl archive restore --json (task logs, a Substrat root)",
                                       "The files rebuilt in OUT as the directory was at --until, per file its "
                                       "archived version and bytes."),
    "walctl.archive-prune/1": ("walctl archive prune --json", "Objects deleted (or the plan)."),
    "walctl.workflow-list/1": ("walctl workflow list --json", "Workflow checkpoints, sorted by (created_at, id)."),
    "walctl.workflow-cleanup/1": ("walctl workflow cleanup --json", "Expired checkpoints set aside (or the plan)."),
    "walctl.workflow-pause/1": ("walctl workflow pause --json", "The checkpoint paused (pause_metadata recorded), "
                                "or why not (outcome failed, the state found)."),
    "walctl.workflow-resume/1": ("walctl workflow resume --json", "The pause cleared, the response recorded, and the "
                                 "state to continue from (next_wave); or why not (outcome failed, the state found)."),
    "walctl.workflow-complete/1": ("walctl workflow complete --json", "The finished workflow's checkpoint set aside "
                                   "(or the plan), or why not (outcome failed, the state found)."),
    "walctl.tasklog-verify/2": ("walctl tasklog verify --json", "Each task log's rules and verdict."),
    "walctl.tasklog-inspect/2": ("walctl tasklog inspect --json", "Each task's state from its log."),
    "walctl.agents-verify/2": ("walctl agents verify --json", "Session files, event lines and the agent tree."),
    "walctl.agents-tree/1": ("walctl agents tree --json", "The agent tree with pending-message counts."),
    "walctl.agents-pending/2": ("walctl agents pending --json", "Undelivered messages per agent."),
    "walctl.agents-recover/2": ("walctl agents recover --json", "The recovery plan or what was done."),
    "walctl.error/1": ("any --json command that ended in an error or refusal before its own document",
                       "The outcome, the exit code and the error: its reason word (not-found, not-a-directory, "
                       "locked, permission, io, usage, refused, corrupt, sequence, unsupported, internal), "
                       "message, path and offset."),
}

FIELDS = {
    "schema": "The schema of this document; a change that breaks consumers bumps the number.",
    "walctl_version": "The walctl that wrote the document.",
    "exit_code": "The documented exit code (0 clean, 1 torn tail, 2 usage, 3 corruption, 4 sequence, "
                 "5 unsupported, 6 environment, 7 refused).",
    "verdict": "clean, torn, corrupt, discontinuous, unsupported or environment (a chunk may be header-only; "
               "other commands use their own words, listed in their man page).",
    "path": "The path as given.", "file": "A file name inside the path.",
    "offset": "A byte offset in `file`.", "end_offset": "The byte offset where the range ends (exclusive).",
    "length": "Bytes.", "sequence": "A log sequence number.", "sequence_range": "[first, last] sequences.",
    "first_sequence": "The first valid sequence.", "last_sequence": "The last valid sequence.",
    "reason": "What is wrong, in words.", "class": "The finding's class (docs/format.md, Damage classes).",
    "severity": "error, torn, warning or note.", "stored": "The value stored in the file (CRC, magic...).",
    "computed": "The value walctl computed.", "findings": "Every finding, each with file, offset, sequences, "
                                                        "class, reason, stored and computed values.",
    "kind": "What the path holds (docs/format.md, 3).", "damaged_bytes": "Bytes in damaged ranges.",
    "sha256": "SHA-256 of the bytes, hex.", "evidence": "Where the removed bytes were kept (.quarantine/).",
    "warnings": "Anomalies that do not change the exit code.", "applied": "Whether --apply was given.",
    "timestamp_ms": "Milliseconds since the epoch.", "type": "The event type name (the ordinal when unknown).",
    "type_ordinal": "The event type's ordinal.", "memory_id": "The memoryId (invalid UTF-8 replaced by U+FFFD).",
    "memory_id_hex": "The memoryId's bytes, hex.", "compressed": "Whether the stored payload is zlib-compressed.",
    "payload_hex": "The decoded (inflated) payload, hex; absent under --payload none (never inflated).", "stored_len": "The payload's stored length.",
    "wal_sequence": "The last log sequence a checkpoint reflects.",
    "hwm": "The high-water mark: the last durable sequence.",
}

ENUMS_VERIFY = {
    "kind": ["spector-v2-dir", "spector-v2-chunk", "adr003-segments", "adr003-segment", "checkpoint-dir",
             "checkpoint", "tasklog-dir", "tasklog", "substrat-root", "workflow-store", None],
    "severity": ["error", "torn", "warning", "note"],
}

# walctl.error/1: error.reason (walctl/errors.py REASON_* and the words of the other exit codes).
ERROR_REASONS = ["not-found", "not-a-directory", "locked", "permission", "io", "usage", "refused", "corrupt",
                 "sequence", "unsupported", "torn", "internal"]

# A workflow checkpoint as stored (docs/format.md, 8): the samples show one workflow's own data (its
# context, inputs and blocks), which is not the contract; the document's fields are.
WORKFLOW_DOCUMENT = {
    "description": "The checkpoint document as stored now (docs/format.md, 8).", "type": "object",
    "required": ["checkpoint_id", "completed_waves", "context", "created_at", "execution_waves", "pause_metadata",
                 "schema_version", "workflow_inputs", "workflow_name"],
    "properties": {
        "schema_version": {"const": 1}, "checkpoint_id": {"type": "string"}, "workflow_name": {"type": "string"},
        "workflow_inputs": {"type": "object"}, "execution_waves": {"type": "array", "items": {"type": "array"}},
        "completed_waves": {"description": "The wave in which execution paused; it continues at the next.",
                            "type": "integer", "minimum": 0},
        "context": {"type": "object"},
        "created_at": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$"},
        "pause_metadata": {"type": ["object", "null"], "required": ["block_id", "prompt", "response"],
                           "properties": {"block_id": {"type": "string"}, "prompt": {"type": "string"},
                                          "response": {"type": ["string", "null"]}}}}}
WORKFLOW_STATES = {"description": "The checkpoint's state: running (pause_metadata null) or paused; null when "
                                  "the document does not validate.", "type": ["string", "null"],
                   "enum": ["running", "paused", None]}

# Fields whose type the samples cannot show: the record's `type` is the ordinal when the name is unknown.
TYPES = {"type": ["integer", "string"], "live_writer": ["null", "string"],
         # archive list lag / push --follow: null when there is no record (yet) to measure from
         "local_sequence": ["integer", "null"], "local_time_ms": ["integer", "null"],
         "archived_sequence": ["integer", "null"], "newest_uploaded_at": ["string", "null"],
         "shipped_through": ["integer", "null"], "live_pieces": "integer", "done": "integer",
         "next_wave": "integer"}
_INT_KEY = re.compile(r"offset|sequence|size|bytes|exit_code|records|count|length|index|_ms$|entries|events|"
                      r"version|hwm|step|chunks|objects|lines|findings|ordinal|applied|received|skipped|level|"
                      r"duplicates|uploaded|removed|kept|rank|total|start|end|stored|computed|time")
_DATA_KEY = re.compile(r"^\d|\d{4,}|[.\-]|^[0-9a-f]{16,}$")


def _type_of(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def infer(values: list, key: str | None = None) -> dict:
    types = sorted({_type_of(v) for v in values})
    if "integer" in types and ("number" in types or not (key and _INT_KEY.search(key))):
        types = sorted(set(types) - {"integer"} | {"number"})  # a count is an integer; a measure may not be
    if key in TYPES:
        types = TYPES[key]
    out: dict = {}
    if key in FIELDS:
        out["description"] = FIELDS[key]
    if types != ["null"]:  # seen only as null: not constrained by one sample
        out["type"] = types[0] if len(types) == 1 else types
    objs = [v for v in values if isinstance(v, dict)]
    if objs:
        keys = {k for o in objs for k in o}
        if keys and all(_DATA_KEY.search(k) for k in keys):
            out["additionalProperties"] = infer([x for o in objs for x in o.values()])
        elif keys:
            out["properties"] = {k: infer([o[k] for o in objs if k in o], k) for k in sorted(keys)}
    arrays = [v for v in values if isinstance(v, list)]
    if arrays:
        items = [x for a in arrays for x in a]
        if items:
            out["items"] = infer(items)
    return out


def _finding_core(schema: dict) -> None:
    """Walk the schema: every `findings` array's items need the core keys."""
    if not isinstance(schema, dict):
        return
    for k, sub in (schema.get("properties") or {}).items():
        if k == "findings" and isinstance(sub.get("items"), dict) and "properties" in sub["items"]:
            props = sub["items"]["properties"]
            sub["items"]["required"] = [c for c in ("class", "exit_code", "reason") if c in props]
            if "severity" in props:
                props["severity"]["enum"] = ENUMS_VERIFY["severity"]
        _finding_core(sub)
    _finding_core(schema.get("items"))
    _finding_core(schema.get("additionalProperties"))


def build(name: str, docs: list, what: str) -> dict:
    title, desc = TITLES.get(name, (name, ""))
    body = infer(docs)
    body.pop("description", None)
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "$id": f"https://walctl.invalid/schemas/{name.replace('/', '-')}.json",
              "title": title, "description": desc + (" One JSON object per line." if what == "jsonl" else "")}
    schema.update(body)
    props = schema.get("properties", {})
    if "schema" in props:
        props["schema"]["const"] = name
    schema["required"] = sorted(k for k in props if all(k in d for d in docs))
    _finding_core(schema)
    if name == "walctl.error/1":
        err = props["error"]
        err["required"] = ["reason", "message", "path"]
        err["properties"]["reason"] = {"description": "A word a script can branch on.", "type": "string",
                                       "enum": ERROR_REASONS}
        err["properties"]["message"]["description"] = "What is wrong, in words (the stderr line's text)."
        props["outcome"]["enum"] = ["error", "refused"]
    if name == "walctl.verify/2":
        paths = props["paths"]["items"]["properties"]
        paths["kind"]["enum"] = ENUMS_VERIFY["kind"]
        paths["kind"]["type"] = ["string", "null"]
    if name in ("walctl.workflow-pause/1", "walctl.workflow-resume/1", "walctl.workflow-complete/1"):
        if "document" in props:
            props["document"] = WORKFLOW_DOCUMENT
        props["state"] = WORKFLOW_STATES
    if name == "walctl.archive-list/1":  # lag: null when there is no record to measure from
        lag = props["namespaces"]["items"]["properties"]["lag"]["properties"]
        lag["seconds"]["type"] = ["number", "null"]
        lag["archived_time_ms"]["type"] = ["integer", "null"]
    if name == "walctl.heal/1":
        _heal(props)
    return schema


def _heal(props: dict) -> None:
    """What the samples cannot show: the words of a step, fields that are null for some steps, and a
    `left` entry (the archive cannot heal it)."""
    step = props["steps"]["items"]["properties"]
    step["action"]["enum"] = ["replace", "restore"]
    step["outcome"]["enum"] = ["planned", "healed", "refused"]
    step["matched_by"]["enum"] = ["ledger-seal", "manifest", "live-pieces"]
    step["reason"] = {"description": "Why the copy was refused (null otherwise).", "type": ["string", "null"]}
    step["sha256"]["type"] = ["string", "null"]
    step["sha256"]["description"] = "The copy's expected SHA-256 (null: live pieces, each checked on its own)."
    step["sequence_range"]["type"] = ["array", "null"]
    step["objects"]["description"] = "The object keys under the destination the copy is made of, in order."
    seq = {"type": ["array", "null"], "items": {"type": "integer"}, "description": "[first, last] sequences."}
    props["left"]["items"] = {"type": "object", "required": ["file", "finding", "reason"], "properties": {
        "file": {"type": ["string", "null"], "description": "A file name inside the path."},
        "finding": {"type": "string", "description": "The class of the finding the archive cannot heal."},
        "reason": {"type": "string", "description": "Why not, in words."}, "sequence_range": seq}}
    props["lost"]["description"] = "[first, last] ranges no archived object holds: they stay lost."


def samples() -> dict:
    from walctl.cli import run

    got: dict = {}
    kinds: dict = {}
    with tempfile.TemporaryDirectory() as ws:
        json_cases.workspace(ws)
        for label, argv, what, name in json_cases.cases(ws):
            text = json_cases.run_case(run, ws, argv)
            docs = json_cases.documents(what, text)
            got.setdefault(name, []).extend(docs)
            kinds[name] = "jsonl" if what in ("jsonl",) or (isinstance(what, tuple) and what[0] == "jsonl-file") \
                else "doc"
    return got, kinds


def main() -> None:
    got, kinds = samples()
    for name, docs in sorted(got.items()):
        schema = build(name, docs, kinds[name])
        with open(os.path.join(OUT, name.replace("/", "-") + ".json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
        print(f"{name}: {len(docs)} samples")


if __name__ == "__main__":
    main()
