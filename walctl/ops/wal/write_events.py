"""`walctl write`: events from options or JSON lines, appended through one WalWriter, and the report.

The first line is parsed before the writer opens, so a bad first line creates nothing; a bad later line
stops the append with the records before it durable (their sequences are in the report)."""
from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

from ...errors import EXIT_OK, EXIT_USAGE, EnvironmentProblem, UsageError

FORMATS = ("v2", "segments")
ENCODINGS = ("msgpack", "json")


class WriteReport(NamedTuple):
    directory: str
    records: int
    first_sequence: int | None
    last_sequence: int | None
    error: str | None
    opened: bool = False  # False: refused before the writer created anything
    durable_sequence: int | None = None
    sync: str | None = None
    chunks_created: int = 0
    active_chunk: str | None = None
    continued_chunk: bool = False
    repair: object = None  # the RepairReport of a torn tail cut on open, or None
    error_code: int = EXIT_USAGE  # the exit code of `error` (6 for a disk that filled up)
    error_path: str | None = None  # the file an I/O error was about

    @property
    def exit_code(self) -> int:
        return self.error_code if self.error else EXIT_OK

    def to_json(self) -> dict:
        if not self.opened:
            return {"directory": self.directory, "records": 0, "first_sequence": None, "last_sequence": None,
                    "error": self.error, "exit_code": self.exit_code}
        return {"directory": self.directory, "records": self.records, "first_sequence": self.first_sequence,
                "last_sequence": self.last_sequence, "durable_sequence": self.durable_sequence, "sync": self.sync,
                "chunks_created": self.chunks_created, "active_chunk": self.active_chunk,
                "continued_chunk": self.continued_chunk,
                "repaired_on_open": self.repair.to_json() if self.repair else None,
                "error": self.error, "error_path": self.error_path, "exit_code": self.exit_code}


def check_format(fmt: str, encoding: str) -> None:
    if fmt not in FORMATS or encoding not in ENCODINGS:
        raise UsageError("--format is v2 or segments; --encoding is msgpack or json")


def event_from_options(type_: str, memory_id: str, payloads: dict, timestamp_ms: int | None) -> tuple:
    """One V2 event from --type/--id/--payload*/--timestamp-ms; payloads maps payload/payload_hex/payload_b64
    to a value or None."""
    from .write import parse_event

    one = {"type": int(type_) if type_.isascii() and type_.isdigit() else type_, "id": memory_id}
    for key, value in payloads.items():
        if value is not None:
            one[key] = value
    if timestamp_ms is not None:
        one["timestamp_ms"] = timestamp_ms
    try:
        return parse_event(one)
    except ValueError as e:
        raise UsageError(str(e)) from None


def parse_lines(lines: Iterable, fmt: str) -> Iterator[tuple[int, object]]:
    """(line number, parsed event or entry) per non-blank line (bytes, decoded here as UTF-8, or str); a bad
    line (not UTF-8, not JSON, a lone surrogate escape, a wrong field) yields (n, its error) and ends."""
    from ...format.jsonload import loads
    from .write import parse_entry_line, parse_event

    parse = parse_entry_line if fmt == "segments" else parse_event
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield n, parse(loads(line, allow_lone_surrogates=False))
        except ValueError as e:  # json.JSONDecodeError is a ValueError
            yield n, str(e)
            return


def write_events(directory: str, events: Iterable[tuple[int, object]], *, fmt: str = "v2", **writer) -> WriteReport:
    """Appends (line number, event) items until the first (n, error string); `writer`: WalWriter options."""
    from .write import WalWriter

    source = iter(events)
    head = next(source, None)
    if head is not None and isinstance(head[1], str):  # refused before the writer creates anything
        return WriteReport(directory, 0, None, None, f"stdin line {head[0]}: {head[1]}; nothing was written")
    error, first, failed = None, None, None
    w = WalWriter(directory, format=fmt, **writer)  # a refusal or a failure to open propagates: nothing written
    try:
        with w:
            put = w.append_entry if fmt == "segments" else w.append
            for line_no, item in _chain(head, source):
                if isinstance(item, str):
                    error = f"stdin line {line_no}: {item}; the records before it were written"
                    break
                seq = put(*item)
                first = seq if first is None else first
    except EnvironmentProblem as e:  # a disk that filled up, an I/O error: say how far the log is durable
        failed = e
    durable = w.durable_sequence
    if failed is not None:
        error = f"{failed}; {_durable_through(durable)}"
    return WriteReport(directory, w.records_written, first, w.last_sequence if first is not None else None, error,
                       True, durable, writer.get("sync"), w.chunks_created, w.active_chunk,
                       w.opened.continued, w.opened.repair, *((failed.exit_code, failed.path) if failed else ()))


def _durable_through(seq: int) -> str:
    if seq <= 0:
        return "no record is durable here; nothing was acknowledged"
    return f"durable through seq {seq}; nothing after it was acknowledged"


def _chain(head, rest):
    if head is not None:
        yield head
        yield from rest
