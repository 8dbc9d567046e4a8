"""walctl: verify, inspect and mend write-ahead logs, checkpoints and JSON-lines logs.

The library API mirrors the CLI verbs; every function returns a frozen report and never prints.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .version import __version__

# The API is loaded on first use (PEP 562) so that `walctl verify` does not pay for inspect and stats.
# Type checkers and editors read the imports below; at run time `_API` (public name -> (module, name
# there)) resolves the same names lazily. tests/test_layers.py checks the two lists are the same.
if TYPE_CHECKING:
    from .errors import EnvironmentProblem, Refused, UnsupportedInput, UsageError, WalctlError, WorkflowConflict
    from .format.workflow import CheckpointState as WorkflowCheckpoint, PauseMetadata
    from .ops.archive.adapter import StorageAdapter
    from .ops.archive.prune import prune as archive_prune
    from .ops.archive.push import push as archive_push
    from .ops.archive.restore import restore as archive_restore
    from .ops.archive.verify import verify_archive as archive_verify
    from .ops.checkpoints.checkpoint import create as create_checkpoint, latest as latest_checkpoint
    from .ops.checkpoints.checkpointer import Checkpointer
    from .ops.wal.compact import compact
    from .ops.wal.follow import follow
    from .ops.wal.importer import import_stream, read_stream
    from .ops.wal.records import Record, RecordFilter, RecordWalk
    from .ops.checkpoints.recover import recover
    from .ops.wal.repair import repair
    from .ops.wal.replay import ReplayOptions, replay
    from .ops.wal.salvage import salvage
    from .ops.wal.stats import collect_stats
    from .ops.wal.verify import verify_path, verify_paths
    from .ops.workflow.store import DirectoryWorkflowStore, InMemoryWorkflowStore
    from .ops.workflow.steps import complete_workflow, pause_workflow, resume_workflow
    from .ops.wal.write import WalWriter

_API: dict[str, tuple[str, str]] = {
    "WalctlError": ("errors", "WalctlError"), "UsageError": ("errors", "UsageError"),
    "EnvironmentProblem": ("errors", "EnvironmentProblem"), "UnsupportedInput": ("errors", "UnsupportedInput"),
    "Refused": ("errors", "Refused"),
    "verify_path": ("ops.wal.verify", "verify_path"), "verify_paths": ("ops.wal.verify", "verify_paths"),
    "Record": ("ops.wal.records", "Record"), "RecordFilter": ("ops.wal.records", "RecordFilter"),
    "RecordWalk": ("ops.wal.records", "RecordWalk"),
    "collect_stats": ("ops.wal.stats", "collect_stats"),
    "WalWriter": ("ops.wal.write", "WalWriter"),
    "repair": ("ops.wal.repair", "repair"), "salvage": ("ops.wal.salvage", "salvage"), "compact": ("ops.wal.compact", "compact"),
    "create_checkpoint": ("ops.checkpoints.checkpoint", "create"), "latest_checkpoint": ("ops.checkpoints.checkpoint", "latest"),
    "recover": ("ops.checkpoints.recover", "recover"), "Checkpointer": ("ops.checkpoints.checkpointer", "Checkpointer"),
    "WorkflowCheckpoint": ("format.workflow", "CheckpointState"), "PauseMetadata": ("format.workflow", "PauseMetadata"),
    "InMemoryWorkflowStore": ("ops.workflow.store", "InMemoryWorkflowStore"),
    "DirectoryWorkflowStore": ("ops.workflow.store", "DirectoryWorkflowStore"),
    "pause_workflow": ("ops.workflow.steps", "pause_workflow"),
    "resume_workflow": ("ops.workflow.steps", "resume_workflow"),
    "complete_workflow": ("ops.workflow.steps", "complete_workflow"), "WorkflowConflict": ("errors", "WorkflowConflict"),
    "replay": ("ops.wal.replay", "replay"), "ReplayOptions": ("ops.wal.replay", "ReplayOptions"),
    "read_stream": ("ops.wal.importer", "read_stream"), "import_stream": ("ops.wal.importer", "import_stream"),
    "follow": ("ops.wal.follow", "follow"),
    "StorageAdapter": ("ops.archive.adapter", "StorageAdapter"), "archive_push": ("ops.archive.push", "push"),
    "archive_verify": ("ops.archive.verify", "verify_archive"),
    "archive_restore": ("ops.archive.restore", "restore"), "archive_prune": ("ops.archive.prune", "prune"),
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        import importlib

        module, attr = _API[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'walctl' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
