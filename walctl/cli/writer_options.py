"""The writer's options, shared by every command that appends through WalWriter (write, import)."""
from __future__ import annotations

import typer

SYNC = typer.Option("batch", "--sync", metavar="[always|batch|none]", help="always (fdatasync per record), batch, or none.")
BATCH_RECORDS = typer.Option(100, "--batch-records", min=1, help="batch: sync every N records.")
BATCH_INTERVAL = typer.Option("1s", "--batch-interval", help="batch: and at least this often (1ms to 1h: 5ms, 1s).")
MAX_CHUNK_BYTES = typer.Option(8 << 20, "--max-chunk-bytes", min=64, help="Roll to a new chunk at this size.")
COMPRESS_THRESHOLD = typer.Option(None, "--compress-threshold", min=0,
                                  help="zlib-compress payloads longer than N bytes.")


def check_sync(sync: str) -> None:
    from ..errors import UsageError
    from ..store.appender import SYNC_POLICIES

    if sync not in SYNC_POLICIES:
        raise UsageError(f"--sync must be one of {', '.join(SYNC_POLICIES)} (got {sync!r})")


def batch_ms(interval: str) -> int:
    """--batch-interval as the writer's whole milliseconds."""
    from .units import parse_duration

    return max(1, round(parse_duration(interval, "--batch-interval", low=0.001, high=3600) * 1000))
