from __future__ import annotations

from typing import Optional

import typer

from .progress import PROGRESS, Bar, path_bytes
from .render import emit, json_document, safe, seq_range
from .targets import existing_path

HELP = """Counts and bytes per event type, compression ratio, sequence and time ranges, per chunk. Read-only.

Counts cover the valid records; damaged bytes are counted per chunk. Exit code as for verify.

Example: walctl stats /var/lib/agent/wal --json | jq '.types[] | {type, records}'"""


def stats(
    path: str = typer.Argument(..., help="A chunk directory or one chunk file.", callback=existing_path),
    json_out: bool = typer.Option(False, "--json", help="One JSON document (schema walctl.stats/2) on stdout."),
    progress: Optional[bool] = PROGRESS,
) -> int:
    from ..ops.kinds import KINDS, VIEW_ENTRIES, VIEW_SUMMARY
    from ..ops.wal.stats import collect_stats
    from ..ops.wal.verify import detect_kind

    view = KINDS[detect_kind(path)].stats
    if view == VIEW_ENTRIES:
        return _segment_stats(path, json_out, progress)
    if view == VIEW_SUMMARY:
        return _summary_stats(path, json_out)
    with Bar("stats", path_bytes(path), progress) as bar:
        st = collect_stats(path, progress=bar.callback)
    if json_out:
        emit(json_document("walctl.stats/2", st.to_json()))
    else:
        _render(st)
    raise typer.Exit(st.report.exit_code)


def _ratio(st) -> str:
    r = st.compression_ratio
    return "no compressed records" if r is None else f"{r:.2f}x over {st.compressed_stored_bytes} stored bytes"


def _render(st) -> None:
    from ..format.hexdump import format_timestamp_ms
    from .render import plain_table, plural, say

    rep = st.report
    say(f"{safe(st.path)}: {rep.verdict} (exit {rep.exit_code}); {plural(st.records, 'record')} in "
         f"{plural(len(rep.chunks), 'chunk')}, {plural(sum(c.size for c in rep.chunks), 'byte')}")
    say(f"  sequences {seq_range(st.min_sequence, st.max_sequence)}; time "
         + (f"{format_timestamp_ms(st.min_timestamp_ms)} .. {format_timestamp_ms(st.max_timestamp_ms)}"
            if st.records else "-") + f"; compression {_ratio(st)}")
    rows = [[safe(t.type), t.type_ordinal, t.records, t.record_bytes, t.stored_bytes, t.payload_bytes,
             t.compressed_records] for t in (st.types[k] for k in sorted(st.types))]
    for line in plain_table(["type", "ordinal", "records", "record bytes", "stored payload", "payload",
                             "compressed"], rows, indent=""):
        emit(line)
    rows = []
    for c in rep.chunks:
        cs = st.chunks.get(c.file)
        rows.append([safe(c.file), c.size, cs.records if cs else 0,
                     seq_range(cs.first_sequence, cs.last_sequence) if cs else "-",
                     format_timestamp_ms(cs.first_timestamp_ms) if cs else "-",
                     format_timestamp_ms(cs.last_timestamp_ms) if cs else "-", c.damaged_bytes, c.verdict])
    for line in plain_table(["chunk", "bytes", "records", "sequences", "first (UTC)", "last (UTC)", "damaged",
                             "verdict"], rows, indent=""):
        emit(line)


def _segment_stats(path: str, json_out: bool, progress=None) -> int:
    from ..ops.wal.stats import segment_stats

    with Bar("stats", path_bytes(path), progress) as bar:
        st = segment_stats(path, progress=bar.callback)
    if json_out:
        emit(json_document("walctl.stats/2", st))
        raise typer.Exit(st["exit_code"])
    emit(f"{path}: {st['verdict']} (exit {st['exit_code']}); {st['entries']} entries in {len(st['segments'])} segments, "
         f"{st['bytes']} bytes; sequences {seq_range(*(st['sequence_range'] or (None, None)))}")
    from .render import plain_table

    for line in plain_table(["operation", "entries", "frame bytes", "json", "msgpack"],
                            [[o["operation"], o["entries"], o["bytes"], o["json"], o["msgpack"]] for o in st["operations"]]):
        emit(line)
    for line in plain_table(["segment", "bytes", "entries", "sequences", "verdict"],
                            [[c["file"], c["size"], c["entries"], seq_range(c["first_sequence"], c["last_sequence"]),
                              c["verdict"]] for c in st["segments"]]):
        emit(line)
    raise typer.Exit(st["exit_code"])


def _summary_stats(path: str, json_out: bool) -> int:
    """Other artifacts: counts per file from verify's view (checkpoints, task logs, agent roots, workflows)."""
    from ..ops.wal.verify import verify_path

    rep = verify_path(path)
    body = {"path": path, "kind": rep.kind, "verdict": rep.verdict, "exit_code": rep.exit_code,
            "files": len(rep.chunks), "records": rep.records, "bytes": sum(c.size for c in rep.chunks),
            "by_state": {}}
    for c in rep.chunks:
        body["by_state"][c.state] = body["by_state"].get(c.state, 0) + 1
    if json_out:
        emit(json_document("walctl.stats/2", body))
    else:
        emit(f"{path}: {rep.kind}, {rep.verdict} (exit {rep.exit_code}); {body['files']} files, {body['records']} "
             f"records, {body['bytes']} bytes; by state: {body['by_state']}")
    raise typer.Exit(rep.exit_code)
