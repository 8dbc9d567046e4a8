"""The failure rule (docs/json.md): a command that examined data prints its own document on failure too
(outcome, exit code, error, findings, what it tried); walctl.error/1 is for what could not start."""
from __future__ import annotations

import os
import shutil

import pytest

from conftest import tree_digest
from walctl import schemas

jsonschema = pytest.importorskip("jsonschema")
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _valid(doc):
    v = jsonschema.Draft202012Validator(schemas.load(doc["schema"]))
    errors = list(v.iter_errors(doc))
    assert not errors, errors[0].message
    return doc


def test_seal_on_a_damaged_ledger_prints_seals_own_document_and_seals_nothing(cli, tmp_path):
    d = tmp_path / "wal"
    shutil.copytree(os.path.join(EXAMPLES, "wal-healthy"), d)
    (d / ".walctl").mkdir()
    (d / ".walctl" / "ledger.jsonl").write_bytes(b"x" * (65 << 10))
    before = tree_digest(d / ".walctl")
    r = cli("seal", d, "--apply", "--json")
    doc = _valid(r.json())
    assert r.code == 3 and doc["schema"] == "walctl.seal/2" and doc["outcome"] == "failed" and doc["exit_code"] == 3
    assert doc["applied"] is False and doc["sealed"] == [] and "no newline" in doc["error"]
    assert [i["file"] for i in doc["items"] if i["action"] == "seal"] == ["wal-000000.bin", "wal-000001.bin"]
    assert [(f["class"], f["file"]) for f in doc["findings"]] == [("ledger-line", ".walctl/ledger.jsonl")]
    assert tree_digest(d / ".walctl") == before


def test_seal_and_accept_loss_that_could_not_start_are_walctl_error(cli, tmp_path):
    from walctl.ops.wal.write import WalWriter

    d = str(tmp_path / "wal")
    with WalWriter(d) as w:
        w.append(0, "m", b"x")
        for args in (("seal", d, "--apply"), ("repair", d, "--accept-loss", "5..6", "--reason", "x", "--apply")):
            r = cli(*args, "--json")
            doc = _valid(r.json())
            assert r.code == 6 and doc["schema"] == "walctl.error/1" and doc["error"]["reason"] == "locked", args
    r = cli("seal", tmp_path, "--json")  # not a log directory
    assert r.code == 5 and _valid(r.json())["schema"] == "walctl.error/1"


def test_workflow_refusals_are_walctl_error(cli, tmp_path):
    root = tmp_path / "flows"
    (root / "workflow-checkpoints").mkdir(parents=True)
    r = cli("workflow", "delete", root, "../x", "--apply", "--json")
    doc = _valid(r.json())
    assert r.code == 2 and doc["schema"] == "walctl.error/1" and doc["command"] == "workflow delete"
    outside = tmp_path / "outside"
    os.rename(root / "workflow-checkpoints", outside)
    os.symlink(outside, root / "workflow-checkpoints")
    r = cli("workflow", "cleanup", root, "--apply", "--json")
    doc = _valid(r.json())
    assert r.code == 7 and doc["schema"] == "walctl.error/1" and doc["outcome"] == "refused"
    assert "symbolic link" in doc["error"]["message"]
