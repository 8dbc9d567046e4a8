"""The names of the artifact kinds walctl reads, defined once (they are the JSON's "kind" values).

ops/verify.py: detect_kind says which one a path is.
"""
from __future__ import annotations

KIND_DIR = "spector-v2-dir"
KIND_CHUNK = "spector-v2-chunk"
KIND_SEGMENTS, KIND_SEGMENT = "adr003-segments", "adr003-segment"
KIND_CHECKPOINTS, KIND_CHECKPOINT = "checkpoint-dir", "checkpoint"
KIND_TASKLOGS, KIND_TASKLOG = "tasklog-dir", "tasklog"
KIND_SUBSTRAT, KIND_WORKFLOWS = "substrat-root", "workflow-store"
