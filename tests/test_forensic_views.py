"""issue #22, "Forensic views show where the damage is": what verify cannot see without a ledger is said
(and the command that fixes it runs as printed); a 0-byte first chunk ends in one run of repair or write."""
from __future__ import annotations

import json
import os
import shlex

import pytest

from conftest import make_chunk, write_dir
from walctl.ops.records import Record, RecordWalk
from walctl.ops.verify import verify_path


def seqs(d):
    return [r.sequence for r in RecordWalk(d) if isinstance(r, Record)]


def java_dir(path):
    """Three chunks as the Java writer leaves them: no ledger."""
    return write_dir(path, {0: make_chunk(range(1, 11)), 1: make_chunk(range(11, 21)), 2: make_chunk(range(21, 26))})


def test_no_ledger_verify_says_once_that_a_deleted_chunk_cannot_show_and_seal_as_printed_makes_it_so(tmp_path, cli):
    d = java_dir(tmp_path / "j")
    r = cli("verify", d)
    note = f"absence of a whole chunk is not detectable here (no ledger: a chunk deleted where its neighbours' " \
           f"sequences still meet leaves no trace); `walctl seal {d} --apply` makes it so"
    assert r.code == 0 and r.out.count("note:") == 1 and f"  note: {note}\n" in r.out
    doc = json.loads(cli("verify", d, "--json").out)
    assert doc["exit_code"] == 0 and doc["paths"][0]["ledger"]["note"] == note
    # a head chunk deleted without a ledger: the neighbours still meet (26.. is the end), nothing shows
    twin = java_dir(tmp_path / "twin")
    os.unlink(os.path.join(twin, "wal-000000.bin"))
    r = cli("verify", twin)
    assert r.code == 0 and "note: absence of a whole chunk is not detectable here" in r.out
    # the printed command, as printed
    printed = note.split("`")[1]
    assert cli(*shlex.split(printed)[1:]).code == 0
    r = cli("verify", d, "--json")
    ledger = json.loads(r.out)["paths"][0]["ledger"]
    assert "note" not in ledger and ledger["sealed"] == 2 and "note:" not in cli("verify", d).out
    # now the same deletion is a finding
    os.unlink(os.path.join(d, "wal-000000.bin"))
    rep = verify_path(d)
    f = [f for f in rep.findings if f.cls == "sealed-chunk-missing"]
    assert rep.exit_code == 3 and f[0].file == "wal-000000.bin" and tuple(f[0].sequence_range) == (1, 10)


def test_a_single_chunk_path_has_no_note(tmp_path, cli):
    d = java_dir(tmp_path / "j")
    r = cli("verify", os.path.join(d, "wal-000001.bin"), "--json")
    assert "note" not in (json.loads(r.out)["paths"][0]["ledger"] or {})


@pytest.mark.parametrize("first", ["repair", "write"])
def test_a_zero_byte_first_chunk_ends_in_one_run_of_repair_or_write(tmp_path, cli, first):
    d = str(tmp_path / "z")
    os.mkdir(d)
    open(os.path.join(d, "wal-000000.bin"), "wb").close()  # a crash (or ENOSPC) before the first header
    r = cli("verify", d, "--json")
    (f,) = json.loads(r.out)["paths"][0]["findings"]
    assert r.code == 1 and (f["class"], f["file"], f["torn"]) == ("short-chunk", "wal-000000.bin", True)
    if first == "repair":
        r = cli("repair", d, "--apply", "--json")
        doc = json.loads(r.out)
        assert r.code == 0 and doc["after"] == {"verdict": "clean", "exit_code": 0}
        (cut,) = doc["cuts"]
        assert (cut["file"], cut["action"], cut["length"]) == ("wal-000000.bin", "quarantine-chunk", 0)
        (ev,) = doc["evidence"]
        kept = os.path.join(d, ev["evidence"])
        assert os.path.getsize(kept) == 0 and not os.path.exists(os.path.join(d, "wal-000000.bin"))
        r = cli("verify", d, "--json")
        assert r.code == 0 and json.loads(r.out)["paths"][0]["kind"] == "spector-v2-dir"
        assert json.loads(r.out)["paths"][0]["summary"]["chunks"] == 0
    r = cli("write", d, "--type", "REMEMBER", "--id", "m1", "--payload", "hi", "--json")
    doc = json.loads(r.out)
    assert r.code == 0 and (doc["first_sequence"], doc["durable_sequence"], doc["active_chunk"]) == \
        (1, 1, "wal-000000.bin")
    if first == "write":  # the open cut it: the empty file is evidence
        assert doc["repaired_on_open"]["cuts"][0]["action"] == "quarantine-chunk"
    q = [n for n in os.listdir(os.path.join(d, ".quarantine")) if n != "MANIFEST.jsonl"]
    assert len(q) == 1 and os.path.getsize(os.path.join(d, ".quarantine", q[0])) == 0
    assert cli("verify", d).code == 0 and seqs(d) == [1]
    assert cli("write", d, "--type", "REMEMBER", "--id", "m2", "--payload", "again").code == 0
    assert seqs(d) == [1, 2] and verify_path(d).exit_code == 0
