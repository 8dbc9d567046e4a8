"""walctl: verify, inspect and mend write-ahead logs, checkpoints and JSON-lines logs.

The library API mirrors the CLI verbs; every function returns a frozen report and never prints.
"""
from __future__ import annotations

__version__ = "0.1.0"

# The API is loaded on first use (PEP 562) so that `walctl verify` does not pay for inspect and stats.
_API = {
    "WalctlError": "errors", "UsageError": "errors", "EnvironmentProblem": "errors",
    "UnsupportedInput": "errors", "Refused": "errors",
    "verify_path": "ops.verify", "verify_paths": "ops.verify",
    "Record": "ops.records", "RecordFilter": "ops.records", "RecordWalk": "ops.records",
    "collect_stats": "ops.stats",
    "WalWriter": "ops.write",
    "repair": "ops.repair", "salvage": "ops.salvage", "compact": "ops.compact",
    "create_checkpoint": ("ops.checkpoint", "create"), "latest_checkpoint": ("ops.checkpoint", "latest"),
    "recover": "ops.recover", "Checkpointer": "ops.checkpointer",
    "WorkflowCheckpoint": ("format.workflow", "CheckpointState"), "PauseMetadata": "format.workflow",
    "InMemoryWorkflowStore": "ops.workflow", "DirectoryWorkflowStore": "ops.workflow",
    "replay": "ops.replay", "ReplayOptions": "ops.replay", "read_stream": "ops.importer",
    "import_stream": "ops.importer", "follow": "ops.follow",
    "StorageAdapter": "ops.archive", "archive_push": ("ops.archive_push", "push"),
    "archive_verify": ("ops.archive_verify", "verify_archive"), "archive_restore": ("ops.archive_restore", "restore"),
    "archive_prune": ("ops.archive_prune", "prune"),
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        import importlib

        module, attr = _API[name] if isinstance(_API[name], tuple) else (_API[name], name)
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'walctl' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
