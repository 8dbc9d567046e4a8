"""Issue #15: a fuzz test per JSON reader. Whatever bytes a reader is given, the command ends with an exit
code of the contract, never "internal error", in bounded time (hypothesis' deadline). Few examples in the
default suite; many more under -m slow."""
from __future__ import annotations

import io
import json
import os
import shutil
import struct
import tempfile
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
TID = "3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77"
SID = "a" * 32
CONTRACT = {0, 1, 2, 3, 4, 5, 6, 7}

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


def _deep(depth: int, kind: str) -> bytes:
    return (kind * depth).encode()


_line = st.one_of(
    st.binary(max_size=200),
    _json_values.map(lambda v: json.dumps(v).encode()),
    st.builds(_deep, st.integers(200, 3000), st.sampled_from(["[", "{\"a\":", "[{\"k\":"])),
    st.sampled_from([b"null", b"[]", b"{}", b'"\\ud800"', b"NaN", b"1e999", b"\xef\xbb\xbf{}", b"{\"v\":1}\x0c",
                     b"{\"v\":1}\xc2\xa0"]),
)
# lines shaped like the reader's own, with one field replaced by anything
_field_swap = st.tuples(st.text(min_size=1, max_size=12), _json_values)

DEFAULT = settings(max_examples=12, deadline=timedelta(seconds=10), derandomize=True,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SLOW = settings(max_examples=300, deadline=timedelta(seconds=10),
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _check(r, what):
    assert r.code in CONTRACT, (what, r.code, r.err[-400:])
    assert "internal error" not in r.err and "Traceback" not in r.err, (what, r.err[-400:])
    assert "--help')" not in r.err, (what, r.err[-400:])  # a harness typo (a CLI usage error) proves nothing


def _base_entry(kind="InstructionStart"):
    return {"v": 1, "ts": "2026-11-21T10:00:00Z", "type": kind, "task_id": TID, "instruction": "go"}


def fuzz_tasklog(cli, lines, swap):
    with tempfile.TemporaryDirectory() as d:
        key, value = swap
        entry = dict(_base_entry(), **{key: value})
        try:
            shaped = json.dumps(entry).encode()
        except ValueError:
            shaped = b"{}"
        path = os.path.join(d, f"{TID}.wal")
        with open(path, "wb") as f:
            f.write(json.dumps(_base_entry()).encode() + b"\n" + b"\n".join(lines + [shaped]) + b"\n")
        for args in (("tasklog", "verify", path, "--json"), ("tasklog", "inspect", path),
                     ("tasklog", "replay", path), ("tasklog", "resume", path, "--json")):
            _check(cli(*args), args)


def fuzz_substrat(cli, lines, swap):
    with tempfile.TemporaryDirectory() as d:
        sd = os.path.join(d, "agents", SID)
        os.makedirs(sd)
        key, value = swap
        meta = {"id": SID, "state": "active", "provider_name": "p", "model": "m", "created_at": "x",
                "suspended_at": None, "provider_state": ""}
        meta[key] = value
        with open(os.path.join(sd, "session.json"), "wb") as f:
            f.write(lines[0] if lines and len(lines) % 3 == 0 else json.dumps(meta).encode())
        created = {"session_id": SID, "ts": "t", "event": "agent.created", "data": {"agent_id": "x", key: value}}
        with open(os.path.join(sd, "events.jsonl"), "wb") as f:
            f.write(json.dumps(created).encode() + b"\n" + b"\n".join(lines) + b"\n")
        for args in (("agents", "verify", d, "--json"), ("agents", "tree", d), ("agents", "pending", d),
                     ("agents", "recover", d, "--json"), ("verify", d, "--json")):
            _check(cli(*args), args)


def fuzz_workflow(cli, lines, swap):
    with tempfile.TemporaryDirectory() as d:
        wd = os.path.join(d, "workflow-checkpoints")
        os.makedirs(wd)
        key, value = swap
        doc = {"schema_version": 1, "checkpoint_id": "w1", "workflow_name": "n", "workflow_inputs": {},
               "execution_waves": [[]], "completed_waves": 0, "context": {},
               "created_at": "2026-11-21T10:00:00.000000Z", "pause_metadata": None, key: value}
        try:
            body = json.dumps(doc).encode()
        except ValueError:
            body = b"{"
        with open(os.path.join(wd, "w1.json"), "wb") as f:
            f.write(body)
        with open(os.path.join(wd, "w2.json"), "wb") as f:
            f.write(b"\n".join(lines))
        for args in (("workflow", "list", d, "--json"), ("workflow", "show", d, "w1"), ("workflow", "show", d, "w2"),
                     ("workflow", "delete", d, "w2"), ("workflow", "cleanup", d, "--json")):
            _check(cli(*args), args)


def fuzz_write_import(cli, lines, swap, monkeypatch):
    key, value = swap
    try:
        shaped = json.dumps({"type": "REMEMBER", "id": "m", "payload": "p", key: value}).encode()
    except ValueError:
        shaped = b"{"
    replay_line = {"sequence": 1, "type_ordinal": 0, "memory_id_hex": "6d", "timestamp_ms": 1, "payload_hex": "",
                   key: value}
    try:
        shaped_replay = json.dumps(replay_line).encode()
    except ValueError:
        shaped_replay = b"{"
    with tempfile.TemporaryDirectory() as d:
        for args, data in ((("write", os.path.join(d, "w")), lines + [shaped]),
                           (("write", os.path.join(d, "s"), "--format", "segments"), lines + [shaped]),
                           (("import", os.path.join(d, "i"), "--format", "jsonl"), [shaped_replay] + lines)):
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\n".join(data) + b"\n"),
                                                              errors="surrogateescape"))
            _check(cli(*args), args)


def fuzz_segments(cli, lines, swap):
    with tempfile.TemporaryDirectory() as d:
        seg = os.path.join(d, "seg")
        shutil.copytree(os.path.join(EXAMPLES, "segments"), seg)
        with open(os.path.join(seg, "wal_00000002.log"), "ab") as f:
            for body in lines:
                body = b"{" + body if not body.startswith(b"{") else body
                f.write(struct.pack(">I", len(body)) + body)
        for args in (("verify", seg, "--json"), ("inspect", seg, "--jsonl"), ("replay", seg, "--skip-damaged"),
                     ("stats", seg)):
            _check(cli(*args), args)


def fuzz_manifests(cli, lines, swap):
    with tempfile.TemporaryDirectory() as d:
        wal = os.path.join(d, "wal")
        from walctl.ops.wal.write import WalWriter

        with WalWriter(wal, sync="none", max_chunk_bytes=2048) as w:
            for i in range(20):
                w.append(0, f"m{i}", b"p" * 200)
        os.makedirs(os.path.join(wal, ".quarantine"))
        key, value = swap
        try:
            shaped = json.dumps({"action": "truncate", "source": "wal-000000.bin", "evidence": ".quarantine/x",
                                 key: value}).encode()
        except ValueError:
            shaped = b"{"
        with open(os.path.join(wal, ".quarantine", "MANIFEST.jsonl"), "wb") as f:
            f.write(b"\n".join(lines + [shaped]) + b"\n")
        url = "file://" + os.path.join(d, "a")
        _check(cli("archive", "push", wal, url, "--namespace", "n"), "push")
        with open(os.path.join(d, "a", "n", "MANIFEST.json"), "wb") as f:
            f.write(lines[0] if lines else shaped)
        for args in (("quarantine", "list", wal, "--json"), ("archive", "list", url, "--json"),
                     ("archive", "verify", url), ("archive", "prune", url, "--namespace", "n", "--max-age", "0s")):
            _check(cli(*args), args)


READERS = {"tasklog": fuzz_tasklog, "substrat": fuzz_substrat, "workflow": fuzz_workflow,
           "write-import": fuzz_write_import, "segments": fuzz_segments, "manifests": fuzz_manifests}


def _run(name, cli, monkeypatch, lines, swap):
    fn = READERS[name]
    if name == "write-import":
        fn(cli, lines, swap, monkeypatch)
    else:
        fn(cli, lines, swap)


@pytest.mark.parametrize("name", sorted(READERS))
@DEFAULT
@given(lines=st.lists(_line, min_size=1, max_size=4), swap=_field_swap)
def test_fuzz_reader_exit_codes_in_contract(name, cli, monkeypatch, lines, swap):
    _run(name, cli, monkeypatch, lines, swap)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(READERS))
@SLOW
@given(lines=st.lists(_line, min_size=1, max_size=8), swap=_field_swap)
def test_fuzz_reader_exit_codes_in_contract_long(name, cli, monkeypatch, lines, swap):
    _run(name, cli, monkeypatch, lines, swap)
