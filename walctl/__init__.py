"""walctl: verify, inspect and mend write-ahead logs, checkpoints and JSON-lines logs.

The library API mirrors the CLI verbs; every function returns a frozen report and never prints.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

# The API is loaded on first use (PEP 562) so that `walctl verify` does not pay for inspect and stats.
# Type checkers and editors read the imports below; at run time `_API` (public name -> (module, name
# there)) resolves the same names lazily. tests/test_layers.py checks the two lists are the same.
if TYPE_CHECKING:
    from .errors import EnvironmentProblem, Refused, UnsupportedInput, UsageError, WalctlError, WorkflowConflict
    from .format.workflow import CheckpointState as WorkflowCheckpoint, PauseMetadata
    from .ops.archive_adapter import StorageAdapter
    from .ops.archive_prune import prune as archive_prune
    from .ops.archive_push import push as archive_push
    from .ops.archive_restore import restore as archive_restore
    from .ops.archive_verify import verify_archive as archive_verify
    from .ops.checkpoint import create as create_checkpoint, latest as latest_checkpoint
    from .ops.checkpointer import Checkpointer
    from .ops.compact import compact
    from .ops.follow import follow
    from .ops.importer import import_stream, read_stream
    from .ops.records import Record, RecordFilter, RecordWalk
    from .ops.recover import recover
    from .ops.repair import repair
    from .ops.replay import ReplayOptions, replay
    from .ops.salvage import salvage
    from .ops.stats import collect_stats
    from .ops.verify import verify_path, verify_paths
    from .ops.workflow import DirectoryWorkflowStore, InMemoryWorkflowStore
    from .ops.workflow_steps import complete_workflow, pause_workflow, resume_workflow
    from .ops.write import WalWriter

_API: dict[str, tuple[str, str]] = {
    "WalctlError": ("errors", "WalctlError"), "UsageError": ("errors", "UsageError"),
    "EnvironmentProblem": ("errors", "EnvironmentProblem"), "UnsupportedInput": ("errors", "UnsupportedInput"),
    "Refused": ("errors", "Refused"),
    "verify_path": ("ops.verify", "verify_path"), "verify_paths": ("ops.verify", "verify_paths"),
    "Record": ("ops.records", "Record"), "RecordFilter": ("ops.records", "RecordFilter"),
    "RecordWalk": ("ops.records", "RecordWalk"),
    "collect_stats": ("ops.stats", "collect_stats"),
    "WalWriter": ("ops.write", "WalWriter"),
    "repair": ("ops.repair", "repair"), "salvage": ("ops.salvage", "salvage"), "compact": ("ops.compact", "compact"),
    "create_checkpoint": ("ops.checkpoint", "create"), "latest_checkpoint": ("ops.checkpoint", "latest"),
    "recover": ("ops.recover", "recover"), "Checkpointer": ("ops.checkpointer", "Checkpointer"),
    "WorkflowCheckpoint": ("format.workflow", "CheckpointState"), "PauseMetadata": ("format.workflow", "PauseMetadata"),
    "InMemoryWorkflowStore": ("ops.workflow", "InMemoryWorkflowStore"),
    "DirectoryWorkflowStore": ("ops.workflow", "DirectoryWorkflowStore"),
    "pause_workflow": ("ops.workflow_steps", "pause_workflow"),
    "resume_workflow": ("ops.workflow_steps", "resume_workflow"),
    "complete_workflow": ("ops.workflow_steps", "complete_workflow"), "WorkflowConflict": ("errors", "WorkflowConflict"),
    "replay": ("ops.replay", "replay"), "ReplayOptions": ("ops.replay", "ReplayOptions"),
    "read_stream": ("ops.importer", "read_stream"), "import_stream": ("ops.importer", "import_stream"),
    "follow": ("ops.follow", "follow"),
    "StorageAdapter": ("ops.archive_adapter", "StorageAdapter"), "archive_push": ("ops.archive_push", "push"),
    "archive_verify": ("ops.archive_verify", "verify_archive"),
    "archive_restore": ("ops.archive_restore", "restore"), "archive_prune": ("ops.archive_prune", "prune"),
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
