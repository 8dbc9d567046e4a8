"""Recovery tells automation the truth (issue 22): a recovery that passed over a checkpoint file has its own
outcome (recovered-with-fallback), lists the files it passed over, exits 3 under --strict; a recovery that
failed after reading the checkpoints or the log prints recover's own document of what it tried."""
from __future__ import annotations

import json
import os

from test_recover import independent_fold, random_entries, write_segments
from walctl.ops.checkpoints import checkpoint as C


def _setup(tmp_path, rot=("newest",)):
    """A log of 60 entries and checkpoints at 20 and 40; `rot` truncates the named ones to 100 bytes."""
    entries = random_entries(60, seed=7)
    log = write_segments(str(tmp_path / "log"), entries, per_segment=25)
    ck = str(tmp_path / "ck")
    made = {}
    for name, w in (("older", 20), ("newest", 40)):
        made[name] = C.create(ck, independent_fold(entries[:w]), w, timestamp=1_795_300_000 + w).path
        made[name] = os.path.basename(made[name])
    for name in rot:
        path = os.path.join(ck, made[name])
        with open(path, "r+b") as f:
            f.truncate(100)
    return entries, log, ck, made


def test_a_clean_recovery_keeps_its_outcome_and_strict_does_not_change_it(cli, tmp_path):
    entries, log, ck, made = _setup(tmp_path, rot=())
    r = cli("recover", "--checkpoints", ck, "--log", log, "--strict", "--json")
    doc = r.json()
    assert r.code == 0 and doc["outcome"] == "checkpoint+replay" and doc["passed_over"] == []
    assert doc["checkpoint"]["file"] == made["newest"] and doc["entries_replayed"] == 20


def test_passing_over_a_truncated_checkpoint_is_recovered_with_fallback(cli, tmp_path):
    entries, log, ck, made = _setup(tmp_path)
    out = tmp_path / "state.json"
    r = cli("recover", "--checkpoints", ck, "--log", log, "--out", out, "--json")
    doc = r.json()
    assert r.code == 0 and doc["exit_code"] == 0 and doc["outcome"] == "recovered-with-fallback"
    assert doc["checkpoint"]["file"] == made["older"] and doc["entries_replayed"] == 40
    (passed,) = doc["passed_over"]
    assert passed["path"] == os.path.join(ck, made["newest"]) and passed["file"] == made["newest"]
    assert passed["as"] == "rejected" and passed["why"].startswith("step 1: ")
    with open(out) as f:
        assert json.load(f) == independent_fold(entries)  # the state is complete: exit 0 is right
    text = cli("recover", "--checkpoints", ck, "--log", log)
    assert text.code == 0 and text.out.startswith("outcome: recovered-with-fallback; final sequence 60")
    assert f"rejected: {made['newest']}: step 1: " in text.out
    assert "recovered with fallback: 1 checkpoint file passed over; the state is complete (--strict exits 3)" \
        in text.out


def test_strict_exits_3_on_a_fallback_and_still_writes_the_complete_state(cli, tmp_path):
    entries, log, ck, made = _setup(tmp_path)
    out = tmp_path / "state.json"
    r = cli("recover", "--checkpoints", ck, "--log", log, "--out", out, "--strict", "--json")
    assert r.code == 3 and r.json()["exit_code"] == 3 and r.json()["outcome"] == "recovered-with-fallback"
    assert r.json()["state_written"] == str(out)
    with open(out) as f:
        assert json.load(f) == independent_fold(entries)
    assert "(exit 3: --strict)" in cli("recover", "--checkpoints", ck, "--log", log, "--strict").out


def test_every_checkpoint_rotten_replays_from_empty_with_fallback(cli, tmp_path):
    entries, log, ck, made = _setup(tmp_path, rot=("newest", "older"))
    r = cli("recover", "--checkpoints", ck, "--log", log, "--json")
    doc = r.json()
    assert r.code == 0 and doc["outcome"] == "recovered-with-fallback" and doc["checkpoint"] is None
    assert doc["entries_replayed"] == 60 and doc["final_sequence"] == 60
    assert sorted(p["file"] for p in doc["passed_over"]) == sorted(made.values())
    assert cli("recover", "--checkpoints", ck, "--log", log, "--strict").code == 3


def test_a_fallback_through_the_library_too(tmp_path):
    from walctl.ops.checkpoints.recover import OUTCOME_FALLBACK, recover

    entries, log, ck, made = _setup(tmp_path)
    rep = recover(ck, log)
    assert (rep.outcome, rep.exit_code) == (OUTCOME_FALLBACK, 0) and rep.state == independent_fold(entries)
    assert recover(ck, log, strict=True).exit_code == 3


def test_damage_after_the_checkpoint_is_recovers_own_failed_document(cli, tmp_path):
    entries, log, ck, made = _setup(tmp_path)
    seg = os.path.join(log, sorted(os.listdir(log))[1])  # entries 26..50: damage at 26..., after W = 20
    with open(seg, "r+b") as f:
        f.seek(10)
        b = f.read(1)
        f.seek(10)
        f.write(bytes([b[0] ^ 0xFF]))
    out = tmp_path / "state.json"
    r = cli("recover", "--checkpoints", ck, "--log", log, "--out", out, "--json")
    doc = r.json()
    assert r.code == 3 and doc["schema"] == "walctl.recover/2" and doc["outcome"] == "failed"
    assert doc["exit_code"] == 3 and "damaged after sequence 20" in doc["error"]
    assert doc["checkpoint"]["file"] == made["older"] and [p["file"] for p in doc["passed_over"]] == [made["newest"]]
    (f,) = doc["findings"]
    assert f["class"] == "mid-log-damage" and f["file"] == os.path.basename(seg) and f["offset"] == 0
    assert doc["state_written"] is None and not out.exists()
    assert r.err.startswith("walctl: error: ") and r.err.count("\n") == 1


def test_what_could_not_start_stays_walctl_error(cli, tmp_path):
    r = cli("recover", "--checkpoints", tmp_path / "nope", "--json")
    assert r.code == 6 and r.json()["schema"] == "walctl.error/1" and r.json()["error"]["reason"] == "not-found"


def test_a_fallbacks_next_step_sets_the_rotten_checkpoint_aside_and_pastes(cli, tmp_path):
    import shlex

    entries, log, ck, made = _setup(tmp_path)
    r = cli("recover", "--checkpoints", ck, "--log", log)
    (line,) = [x.strip()[len("next: "):] for x in r.out.splitlines() if x.strip().startswith("next: ")]
    step = shlex.split(line, comments=True)
    assert step == cli("recover", "--checkpoints", ck, "--log", log, "--json").json()["next_steps"][0]
    assert step[:5] == ["walctl", "quarantine", "move", ck, made["newest"]] and step[-1] == "--apply"
    assert cli(*step[1:]).code == 0
    assert os.listdir(os.path.join(ck, ".quarantine")) == ["MANIFEST.jsonl", made["newest"]] or \
        sorted(os.listdir(os.path.join(ck, ".quarantine"))) == sorted(["MANIFEST.jsonl", made["newest"]])
    again = cli("recover", "--checkpoints", ck, "--log", log, "--strict", "--json").json()
    assert again["outcome"] == "checkpoint+replay" and again["exit_code"] == 0 and again["next_steps"] == []
    assert cli("verify", ck).code == 0


def test_a_failed_recoverys_next_step_is_verify_of_the_log(cli, tmp_path):
    entries, log, ck, made = _setup(tmp_path, rot=())
    seg = os.path.join(log, sorted(os.listdir(log))[2])  # entries 51..60, after W = 40
    with open(seg, "r+b") as f:
        f.seek(10)
        f.write(b"\xff")
    doc = cli("recover", "--checkpoints", ck, "--log", log, "--json").json()
    assert doc["outcome"] == "failed" and doc["next_steps"] == [["walctl", "verify", log]]
    v = cli("verify", log, "--json")
    assert v.code == 3 and v.json()["paths"][0]["findings"][0]["file"] == os.path.basename(seg)
