"""Advice that works when pasted (issue 22): every command walctl prints for the operator -- a `next:` line,
a dry run's "to do it" line, a command between backquotes in a message or an error -- is run here exactly
as printed (split as a shell splits it, comments dropped) and does what it says. The directories are named
with a space and a quote, so a word that is not shell-quoted breaks the paste."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from conftest import case_dir, flip_bit, make_chunk, record_offsets, tree_digest, write_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
_TICKS = re.compile(r"`(walctl [^`]*)`")


def printed_commands(text: str) -> list[list[str]]:
    """Every walctl command in `text`: between backquotes anywhere, or running to the end of a line from a
    line's start, after `next:` or after ": " (`to do it: walctl ...`). Split as a shell would."""
    out = []
    for line in text.splitlines():
        out += [shlex.split(m, comments=True) for m in _TICKS.findall(line)]
        rest = _TICKS.sub("", line)
        m = re.search(r"(?:^\s*|next:\s+|: )(walctl .*)$", rest)
        if m:
            out.append(shlex.split(m.group(1), comments=True))
    return out


def run_printed(cli, argv):
    assert argv[0] == "walctl", argv
    return cli(*argv[1:])


def odd_dir(tmp_path, name="my wal's dir") -> str:
    return str(tmp_path / name)


def copy_example(tmp_path, example) -> str:
    d = odd_dir(tmp_path)
    shutil.copytree(os.path.join(EXAMPLES, example), d)
    return d


def test_the_extractor_reads_what_walctl_prints():
    text = ("  next: walctl repair 'a b' --apply   # cuts 3 bytes\n        walctl map 'a b'\n"
            "dry run: nothing was changed; to do it: walctl seal 'x y' --apply\n"
            "walctl: error: d: refusing (see `walctl inspect d --damaged`)\nwalctl: warning: none here")
    assert printed_commands(text) == [["walctl", "repair", "a b", "--apply"], ["walctl", "map", "a b"],
                                      ["walctl", "seal", "x y", "--apply"], ["walctl", "inspect", "d", "--damaged"]]


def test_verify_next_lines_on_a_torn_tail_each_do_what_they_say(cli, tmp_path):
    d = copy_example(tmp_path, "wal-torn-tail")
    r = cli("verify", d)
    seal, *steps = printed_commands(r.out)  # the no-ledger note's seal comes first (test_ledger runs it)
    assert seal == ["walctl", "seal", d, "--apply"] and "not detectable here" in r.out
    assert r.code == 1 and [s[1] for s in steps] == ["inspect", "map", "repair", "repair"]
    assert steps == cli("verify", d, "--json").json()["paths"][0]["next_steps"]
    before = tree_digest(d)
    look, where, plan, cut = steps
    seen = run_printed(cli, look)
    assert seen.code == 1 and "tail-damage" in seen.out
    assert run_printed(cli, where).code == 1
    p = run_printed(cli, plan)
    assert p.code == 1 and "would cut wal-000001.bin" in p.out and tree_digest(d) == before  # a dry run
    assert printed_commands(p.out) == [cut]  # the plan's own next step is the apply
    assert run_printed(cli, cut).code == 0 and cli("verify", d).code == 0


def test_repair_help_example_applies_when_pasted_into_a_shell(tmp_path):
    from walctl.cli.repair_cmd import HELP

    d = copy_example(tmp_path, "wal-torn-tail")
    line = next(x for x in HELP.splitlines() if x.startswith("Example: walctl repair /var/lib/agent/wal"))
    script = line[len("Example: "):].replace("/var/lib/agent/wal", shlex.quote(d))
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    subprocess.run(["sh", "-c", script], env=env, capture_output=True, timeout=60)
    from walctl.ops.wal.verify import verify_path

    assert verify_path(d).exit_code == 0  # the example cut the tail (the dry run's exit 1 did not stop it)


def test_repair_on_mid_log_damage_advice_runs(cli, tmp_path):
    c = make_chunk(range(1, 6))
    o = record_offsets(c)
    d = write_dir(odd_dir(tmp_path), {0: flip_bit(c, o[1] + 44), 1: make_chunk(range(6, 8))})
    r = cli("repair", d)
    steps = printed_commands(r.out)
    assert r.code == 3 and [s[1:3] for s in steps] == [["inspect", d], ["salvage", d], ["quarantine", "move"]]
    assert steps == cli("repair", d, "--json").json()["next_steps"]
    look, salvage, move = steps
    assert run_printed(cli, look).code == 3
    s = run_printed(cli, salvage)
    assert s.code == 4 and cli("verify", d + ".salvaged", "--json").json()["paths"][0]["summary"]["records"] == 6
    before = tree_digest(d)
    m = run_printed(cli, move)
    assert m.code == 0 and "would move" in m.out and tree_digest(d) == before  # a plan, as its note says
    again = printed_commands(m.out)
    assert again == [move + ["--apply"]]
    assert run_printed(cli, again[0]).code == 0 and not os.path.exists(os.path.join(d, "wal-000000.bin"))


def test_repair_of_a_directory_that_is_not_a_wal_advises_nothing_that_fails(cli, tmp_path):
    d = odd_dir(tmp_path)
    os.mkdir(d)
    with open(os.path.join(d, "notes.txt"), "w") as f:
        f.write("hello")
    r = cli("repair", d)
    assert r.code == 5 and printed_commands(r.out + r.err) == []
    assert "quarantine move" not in r.out and r.json if False else True
    assert cli("repair", d, "--json").json()["next_steps"] == []


def test_a_legacy_v1_chunk_names_the_path_inspect_can_read(cli, tmp_path):
    d = copy_example(tmp_path, "wal-legacy-v1")
    r = cli("verify", d)
    (read,) = [s for s in printed_commands(r.out) if s[1] == "inspect" and "--damaged" not in s]
    assert read == ["walctl", "inspect", os.path.join(d, "wal-000000.bin")]
    shown = run_printed(cli, read)
    assert "5 records shown" in shown.err and "mem-0005" in shown.out


def test_sequences_no_file_holds_accept_loss_hint_runs(cli, tmp_path):
    from walctl.ops.wal.write import WalWriter

    d = odd_dir(tmp_path)
    with WalWriter(d, max_chunk_bytes=300) as w:
        for i in range(30):
            w.append(0, f"m{i}", b"x" * 20)
    chunks = sorted(n for n in os.listdir(d) if n.endswith(".bin") and os.path.getsize(os.path.join(d, n)) > 8)
    os.remove(os.path.join(d, chunks[-1]))  # the ledger's hwm says more was issued
    r = cli("verify", d)
    ticks = [shlex.split(m) for m in _TICKS.findall(r.out)]
    assert ticks and all(t[1:3] == ["repair", d] and "--accept-loss" in t for t in ticks)
    w = cli("write", d, "--type", "REMEMBER", "--id", "m", "--payload", "x")
    hints = printed_commands(w.err)
    assert w.code == 3 and [h[1] for h in hints] == ["inspect", "repair"] and hints[1] == ticks[0]
    assert run_printed(cli, hints[0]).code == 3
    assert run_printed(cli, ticks[0]).code == 0 and cli("verify", d).code == 0
    assert cli("write", d, "--type", "REMEMBER", "--id", "m", "--payload", "x").code == 0


def test_write_refusing_a_gap_prints_commands_that_run(cli, tmp_path):
    d = write_dir(odd_dir(tmp_path), {0: make_chunk(range(1, 6)), 2: make_chunk(range(9, 12))})
    w = cli("write", d, "--type", "REMEMBER", "--id", "m", "--payload", "x")
    steps = printed_commands(w.err)
    assert w.code == 4 and [s[1] for s in steps] == ["inspect", "repair"]
    assert run_printed(cli, steps[0]).code == 4
    assert run_printed(cli, steps[1]).code == 0 and cli("write", d, "--type", "REMEMBER", "--id", "m").code == 0


def test_compact_refusal_names_a_verify_that_shows_the_repeat(cli, tmp_path):
    d = write_dir(odd_dir(tmp_path), {0: make_chunk(range(1, 6)), 1: make_chunk(range(5, 9)),
                                      2: make_chunk(range(9, 12))})
    r = cli("compact", d, "--to", "3")
    (see,) = printed_commands(r.err)
    assert r.code == 4 and see == ["walctl", "verify", d]
    doc = cli("compact", d, "--to", "3", "--json").json()  # it read the directory: its own document
    assert doc["schema"] == "walctl.compact/2" and doc["outcome"] == "failed" and doc["exit_code"] == 4
    assert doc["removals"] == [] and doc["applied"] is False and doc["error"].startswith("refusing to compact")
    assert [f["class"] for f in doc["findings"]] == ["sequence-repeat"]
    v = run_printed(cli, see)
    assert v.code == 4 and "sequence-repeat" in v.out


def test_quarantine_list_show_and_put_back_lines_run(cli, tmp_path):
    d = copy_example(tmp_path, "wal-healthy")
    assert cli("quarantine", "move", d, "wal-000001.bin", "--reason", "x", "--apply").code == 0
    (show,) = printed_commands(cli("quarantine", "list", d).out)
    s = run_printed(cli, show)
    records, put_back = printed_commands(s.out)
    assert s.code == 0 and records[1] == "inspect" and put_back[1:3] == ["quarantine", "restore"]
    assert run_printed(cli, records).code == 0
    assert run_printed(cli, put_back).code == 0 and cli("verify", d).code == 0  # put back, as it says
    wrong = cli("quarantine", "show", d, "nope.bin")
    (lst,) = printed_commands(wrong.err)
    assert wrong.code == 2 and run_printed(cli, lst).code == 0


def test_a_quarantined_chunks_sequences_advise_putting_it_back(cli, tmp_path):
    d = copy_example(tmp_path, "wal-healthy")
    cli("quarantine", "move", d, "wal-000001.bin", "--reason", "x", "--apply")
    r = cli("inspect", d, "--seq", "50")
    (back,) = printed_commands(r.out + r.err)
    assert back == ["walctl", "quarantine", "restore", d, "wal-000001.bin", "--apply"]  # never accept-loss
    assert back in printed_commands(cli("verify", d).out)
    assert run_printed(cli, back).code == 0
    got = cli("inspect", d, "--seq", "50")
    assert got.code == 0 and printed_commands(got.out + got.err) == [] and cli("verify", d).code == 0


def test_salvage_lines_run(cli, tmp_path):
    d = odd_dir(tmp_path)
    shutil.copytree(case_dir("payload-bitflip-midlog"), d)
    out = odd_dir(tmp_path, "salvaged 'copy'")
    r = cli("salvage", d, "--out", out)
    accept, check, look = printed_commands(r.out)
    assert accept[:5] == ["walctl", "repair", out, "--accept-loss", "25..25"] and accept[-1] == "--apply"
    assert look == ["walctl", "inspect", d, "--damaged"] and check == ["walctl", "verify", out]
    assert r.code == 4 and run_printed(cli, check).code == r.code  # seq 25 is missing from the copy
    assert run_printed(cli, look).code == 3
    assert run_printed(cli, accept).code == 0 and run_printed(cli, check).code == 0  # loss on record: clean


def test_inspect_damaged_more_bytes_line_runs(cli, tmp_path):
    from test_forensics import _damaged

    d, o0, size1 = _damaged(tmp_path)
    r = cli("inspect", d, "--damaged", "--context", "8")
    (around,) = printed_commands(r.out)
    assert around[1] == "inspect" and "--around" in around
    more = run_printed(cli, around)
    assert more.code == 1 and f"offset {around[-1]} +/- " in more.out  # the next window of that tail


@pytest.mark.parametrize("argv", [
    ["seal", "{d}"],
    ["repair", "{gap}", "--accept-loss", "41..80", "--reason", "gone for good"],
    ["checkpoint", "prune", "{ck}", "--max-age", "0", "--keep", "1"],
])
def test_dry_run_lines_run_and_do_it(cli, tmp_path, argv):
    d = copy_example(tmp_path, "wal-healthy")
    gap = odd_dir(tmp_path, "gap 'dir'")
    shutil.copytree(os.path.join(EXAMPLES, "wal-sequence-gap"), gap)
    ck = odd_dir(tmp_path, "ck 'dir'")
    shutil.copytree(os.path.join(EXAMPLES, "checkpoints"), ck)
    argv = [a.format(d=d, gap=gap, ck=ck) for a in argv]
    target = argv[1] if argv[0] != "checkpoint" else argv[2]
    r = cli(*argv)
    (again,) = printed_commands(r.out)
    assert again == ["walctl", *argv, "--apply"]
    before = tree_digest(target)
    assert run_printed(cli, again).code == 0 and tree_digest(target) != before
    assert printed_commands(cli(*argv).out) == []  # done: nothing left to do


def test_repair_refused_by_the_bound_names_an_inspect_that_runs(cli, tmp_path):
    d = copy_example(tmp_path, "wal-torn-tail")
    r = cli("repair", d, "--apply", "--max-drop-bytes", "1")
    (look,) = printed_commands(r.err)
    assert r.code == 7 and look == ["walctl", "inspect", d, "--damaged"] and run_printed(cli, look).code == 1


def _crash_after_line(d, action):
    """A crash between a manifest line and its act: the line says restore (or purge), the file is still in
    .quarantine/ (what store/quarantine.py's order leaves behind)."""
    import json

    path = os.path.join(d, ".quarantine", "MANIFEST.jsonl")
    with open(path) as f:
        line = json.loads(f.readline())
    said = {"restore": "file", "reason": f"moved back to {line['source']}"} if action == "restore" else {}
    with open(path, "a") as f:  # the line as ops/wal/quarantine.py writes it before the act
        f.write(json.dumps(dict(line, action=action, **said)) + "\n")


@pytest.mark.parametrize("action", ["restore", "purge"])
def test_quarantine_list_names_the_command_that_finishes_an_interrupted_act(cli, tmp_path, action):
    d = copy_example(tmp_path, "wal-healthy")
    assert cli("quarantine", "move", d, "wal-000001.bin", "--reason", "x", "--apply").code == 0
    _crash_after_line(d, action)
    finish = [c for c in printed_commands(cli("quarantine", "list", d).out) if "--apply" in c]
    assert len(finish) == 1 and finish[0][1:3] == ["quarantine", action]
    assert run_printed(cli, finish[0]).code == 0
    assert not os.path.exists(os.path.join(d, ".quarantine", "wal-000001.bin"))
    if action == "restore":
        assert cli("verify", d).code == 0  # it is back


def test_quarantine_list_advises_no_restore_for_a_restore_line_walctl_did_not_write(cli, tmp_path):
    """A last line saying `restore` without what it put back (no `restore` field: not walctl's) is no
    restore to finish: list must not print a command that restore then refuses."""
    import json

    d = copy_example(tmp_path, "wal-healthy")
    assert cli("quarantine", "move", d, "wal-000001.bin", "--reason", "x", "--apply").code == 0
    path = os.path.join(d, ".quarantine", "MANIFEST.jsonl")
    with open(path) as f:
        line = json.loads(f.readline())
    with open(path, "a") as f:
        f.write(json.dumps(dict(line, action="restore")) + "\n")
    listed = cli("quarantine", "list", d)
    assert [c for c in printed_commands(listed.out + listed.err) if "--apply" in c] == []
    assert os.path.exists(os.path.join(d, ".quarantine", "wal-000001.bin"))  # nothing acted on it


def test_quarantine_dry_run_lines_do_it(cli, tmp_path):
    d = copy_example(tmp_path, "wal-healthy")
    (move,) = printed_commands(cli("quarantine", "move", d, "wal-000001.bin", "--reason", "it's bad").out)
    assert run_printed(cli, move).code == 0 and not os.path.exists(os.path.join(d, "wal-000001.bin"))
    (back,) = printed_commands(cli("quarantine", "restore", d, "wal-000001.bin").out)
    assert run_printed(cli, back).code == 0 and cli("verify", d).code == 0
    cli("quarantine", "move", d, "wal-000001.bin", "--reason", "again", "--apply")
    (purge,) = printed_commands(cli("quarantine", "purge", d, "--older-than", "0").out)
    assert run_printed(cli, purge).code == 0 and os.listdir(os.path.join(d, ".quarantine")) == ["MANIFEST.jsonl"]


def test_quarantine_purge_points_at_the_listing_for_an_unrecorded_file(cli, tmp_path):
    d = copy_example(tmp_path, "wal-torn-tail")
    cli("repair", d, "--apply")
    with open(os.path.join(d, ".quarantine", "stray.bin"), "wb") as f:
        f.write(b"?")
    r = cli("quarantine", "purge", d, "--older-than", "0")
    (lst,) = printed_commands(r.out)[:1]
    assert lst == ["walctl", "quarantine", "list", d]
    listed = run_printed(cli, lst)
    assert listed.code == 0 and "stray.bin" in listed.out and "UNRECORDED" in listed.out


def test_workflow_cleanup_dry_run_line_does_it(cli, tmp_path):
    from datetime import datetime, timedelta, timezone

    from walctl.format.workflow import CheckpointState, PauseMetadata
    from walctl.ops.workflow.store import DirectoryWorkflowStore

    root = odd_dir(tmp_path)
    store = DirectoryWorkflowStore(root)
    store.save(CheckpointState("old", "deploy", {}, [[{"id": "a"}]], 1, {}, datetime.now(timezone.utc)
                               - timedelta(days=3), PauseMetadata("ask", "Go?", None)))
    (again,) = printed_commands(cli("workflow", "cleanup", root, "--max-age", "1d").out)
    assert run_printed(cli, again).code == 0 and store.list() == []


def test_tasklog_append_to_a_torn_log_names_the_resume_that_lets_it(cli, tmp_path):
    import json

    os.mkdir(odd_dir(tmp_path))
    path = os.path.join(odd_dir(tmp_path), "t1.wal")
    r = cli("tasklog", "append", path, "--entry", json.dumps({"type": "InstructionStart", "instruction": "drill",
                                                               "base_sha": "0" * 40}))
    assert r.code == 0, r.err
    entry = json.dumps({"type": "LLMPlan", "steps": [{"index": 0, "description": "edit"}]})
    with open(path, "ab") as f:
        f.write(b'{"type": "step_st')
    r = cli("tasklog", "append", path, "--entry", entry)
    (resume,) = printed_commands(r.err)
    assert r.code == 7 and resume == ["walctl", "tasklog", "resume", path, "--apply"]
    assert run_printed(cli, resume).code == 0
    assert cli("tasklog", "append", path, "--entry", entry).code == 0  # the append it refused goes through now


@pytest.mark.parametrize("argv, page", [(["verify", "--bogus"], ["verify", "--help"]),
                                        (["quarantine", "purge", "x", "--bogus"], ["quarantine", "purge", "--help"]),
                                        (["schema", "nope"], ["schema"]), (["help", "nope"], ["--help"])])
def test_usage_errors_name_a_help_that_runs(cli, argv, page):
    r = cli(*argv)
    quoted = re.findall(r"'(walctl [^']*)'", r.err)
    assert r.code == 2 and [shlex.split(q) for q in quoted] == [["walctl", *page]]
    assert cli(*page).code == 0


def test_inspect_seq_of_a_record_cut_into_quarantine_names_the_piece_to_read(cli, tmp_path):
    d = copy_example(tmp_path, "wal-torn-tail")
    assert cli("repair", d, "--apply").code == 0
    from walctl.ops.wal.pieces import read_pieces

    (piece,) = read_pieces(d).pieces
    seq = piece.first_sequence
    if seq is None:
        pytest.skip("the cut tail holds no sequence header")
    r = cli("inspect", d, "--seq", seq)
    (look,) = printed_commands(r.out + r.err)
    assert look[:3] == ["walctl", "inspect", os.path.join(d, piece.evidence)]
    shown = run_printed(cli, look)
    assert shown.code == 0 and f"sequence             {seq}" in shown.out  # the cut bytes, decoded


def test_restore_of_an_unknown_name_points_at_the_listing(cli, tmp_path):
    d = copy_example(tmp_path, "wal-healthy")
    cli("quarantine", "move", d, "wal-000001.bin", "--reason", "x", "--apply")
    r = cli("quarantine", "restore", d, "nope.bin", "--apply")
    (lst,) = printed_commands(r.err)
    listed = run_printed(cli, lst)
    assert r.code == 2 and lst == ["walctl", "quarantine", "list", d] and "wal-000001.bin" in listed.out


def test_next_steps_name_absolute_paths_so_they_run_from_anywhere(cli, tmp_path, monkeypatch):
    shutil.copytree(os.path.join(EXAMPLES, "wal-torn-tail"), tmp_path / "rel wal")
    monkeypatch.chdir(tmp_path)
    steps = cli("verify", "rel wal", "--json").json()["paths"][0]["next_steps"]
    assert steps[-1] == ["walctl", "repair", str(tmp_path / "rel wal"), "--apply"]
    seal, *printed = printed_commands(cli("verify", "rel wal").out)
    assert printed == steps and seal == ["walctl", "seal", str(tmp_path / "rel wal"), "--apply"]
    monkeypatch.chdir(os.path.dirname(ROOT))  # a script that moved elsewhere
    assert run_printed(cli, steps[-1]).code == 0 and cli("verify", tmp_path / "rel wal").code == 0


def test_verify_resume_next_line_pasted_goes_on_where_the_run_stopped(cli, tmp_path):
    """verify --max-duration prints `next: walctl verify DIR ... --resume`; pasted, it reads the rest."""
    from walctl.ops.wal.write import WalWriter

    d = odd_dir(tmp_path)
    with WalWriter(d, max_chunk_bytes=2048) as w:
        for i in range(400):
            w.append(1, "m-%d" % (i % 7), b"x" * 50)
    r = cli("verify", d, "--subset", "20%", "--max-duration", "1h")  # read the first fifth, recorded
    nexts = [c for c in printed_commands(r.out) if "--resume" in c]
    assert r.code == 0 and nexts == [["walctl", "verify", d, "--subset", "20%", "--max-duration", "1h", "--resume"]]
    again = run_printed(cli, nexts[0])
    assert again.code == 0 and "arc 0.200000..0.400000" in again.out
