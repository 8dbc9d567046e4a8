"""One concept, one spelling, in every command (issue #26): the shared vocabulary checked against the typer
app itself, and the old spellings kept working as hidden aliases with a note."""
from __future__ import annotations

import json
import re

import pytest

from conftest import make_chunk, write_dir

# concept -> the spellings allowed for it, everywhere
SPELLINGS = {
    "sequence": {"--after", "--from", "--to", "--seq"},  # --after exclusive; --from/--to inclusive; --seq one
    "time": {"--since", "--until"},                      # inclusive; epoch ms or ISO-8601
    "json document": {"--json"},
    "json lines": {"--jsonl"},
}
# options whose words look like a concept but are not it, each with the reason
NOT_THE_CONCEPT = {
    ("write", "--timestamp-ms"): "the event's own stamp, named as the `timestamp_ms` key of the JSON lines it reads",
    ("agents set-aside", "--line"): "a line number, not a sequence",
    ("tasklog replay", "--to-line"): "a line number, not a sequence",
}
# how an option says what it is: its help text
_SEQUENCE = re.compile(r"\bsequences?\b|\bHWM\b")
_TIME = re.compile(r"epoch ms|ISO-8601")
_DURATION = re.compile(r"\b(durations?|seconds?|milliseconds|interval|timeout|this long|this often|older than|longest)\b",
                       re.IGNORECASE)


def options():
    """(command words, option) for every visible option of every command."""
    import typer
    from typer.core import TyperOption

    from walctl.cli import build_app

    out = []

    def walk(c, words):
        if hasattr(c, "commands"):
            for name, sub in c.commands.items():
                walk(sub, words + [name])
            return
        out.extend((" ".join(words), p) for p in c.params if isinstance(p, TyperOption) and not p.hidden)

    walk(typer.main.get_command(build_app()), [])
    return out


def _annotation(p) -> str:
    return str(p.type_descriptor.annotation)


def concept_of(cmd: str, p) -> str | None:
    name, text, ann = p.opts[0], p.help or "", _annotation(p)
    if (cmd, name) in NOT_THE_CONCEPT:
        return None
    if "bool" in ann:
        if "stderr" in text:  # --progress (=json): how progress is shown, not what stdout holds
            return None
        if re.search(r"JSON lines|JSON object per", text):
            return "json lines"
        return "json document" if re.search(r"\bJSON document\b", text) and "FILE" not in text else None
    if "int" in ann and _SEQUENCE.search(text):
        return "sequence"
    if _TIME.search(text):
        return "time"
    if _DURATION.search(text) or re.search(r"-(ms|seconds?)$", name):
        return "duration"
    return None


def test_every_option_with_a_vocabulary_meaning_uses_its_one_spelling():
    seen: dict[str, dict[str, list[str]]] = {}
    wrong = []
    for cmd, p in options():
        concept = concept_of(cmd, p)
        if concept is None:
            continue
        name = p.opts[0]
        seen.setdefault(concept, {}).setdefault(name, []).append(cmd)
        if concept == "duration":
            # a duration is text parsed by units.parse_duration (500ms, 1s, 2m, 0.5), never a bare float or a
            # number of some unit the name carries
            if "str" not in _annotation(p) or re.search(r"-(ms|seconds?)$", name) \
                    or re.search(r"\b(S|T) seconds|milliseconds", p.help or ""):
                wrong.append(f"{cmd} {name}: a duration must take 500ms/1s/2m/0.5 ({_annotation(p)})")
        elif name not in SPELLINGS[concept]:
            wrong.append(f"{cmd} {name}: a {concept} is spelled {' or '.join(sorted(SPELLINGS[concept]))}")
    assert not wrong, "\n".join(wrong)
    # the table is not vacuous: each concept was found where we know it is
    assert {"--from", "--to", "--after", "--seq"} <= set(seen["sequence"])
    assert set(seen["time"]) == {"--since", "--until"}
    assert {"--interval", "--timeout", "--max-age", "--older-than", "--batch-interval"} <= set(seen["duration"])
    assert "tasklog replay" in seen["json lines"]["--jsonl"] and "replay" in seen["json lines"]["--jsonl"]


def test_every_renamed_option_is_gone_and_its_new_spelling_is_there():
    from walctl.cli.aliases import RENAMED

    by_cmd: dict[str, set[str]] = {}
    for cmd, p in options():
        by_cmd.setdefault(cmd, set()).update(p.opts)
    for cmd, table in RENAMED.items():
        for old, new in table.items():
            assert new in by_cmd[cmd], (cmd, new)
            if old != "--json":  # tasklog replay's --json (which printed JSON lines) is --jsonl now
                assert old not in by_cmd[cmd], (cmd, old)


@pytest.mark.parametrize("args,want", [
    (["inspect", "d", "--from-seq", "3", "--to-seq=5"], ["inspect", "d", "--from", "3", "--to=5"]),
    (["compact", "d", "--before", "40", "--apply"], ["compact", "d", "--to", "40", "--apply"]),
    (["archive", "restore", "u", "o", "--to-time", "T"], ["archive", "restore", "u", "o", "--until", "T"]),
    (["write", "d", "--batch-ms", "5"], ["write", "d", "--batch-interval", "5ms"]),
    (["import", "d", "--batch-ms=250", "--form", "jsonl"], ["import", "d", "--batch-interval=250ms", "--format", "jsonl"]),
    (["inspect", "d", "--", "--from-seq"], ["inspect", "d", "--", "--from-seq"]),  # after --: an argument
    (["replay", "d", "--to", "5"], ["replay", "d", "--to", "5"]),  # replay's spellings were already the vocabulary
    (["verify", "d", "--before"], ["verify", "d", "--before"]),  # not renamed there: click says no such option
])
def test_old_spellings_are_rewritten_with_one_note_each(args, want):
    from walctl.cli.aliases import rewrite

    notes = []
    assert rewrite(args, lambda old, new: notes.append((old, new))) == want
    assert len(notes) == len({a.partition("=")[0] for a in args} & {n[0] for n in notes})


def _ids(r):
    return [json.loads(line)["sequence"] for line in r.out.splitlines()]


def test_old_and_new_spellings_give_identical_results(cli, tmp_path):
    d = write_dir(tmp_path / "wal", {"wal-000000.bin": make_chunk(range(1, 11)),
                                      "wal-000001.bin": make_chunk(range(11, 21))})
    new = cli("inspect", d, "--from", "3", "--to", "5", "--jsonl", "--payload", "none")
    old = cli("inspect", d, "--from-seq", "3", "--to-seq", "5", "--jsonl", "--payload", "none")
    assert new.code == old.code == 0 and _ids(new) == _ids(old) == [3, 4, 5]
    assert old.err.splitlines()[:2] == ["note: --from-seq is now --from", "note: --to-seq is now --to"]
    assert "note:" not in new.err
    # compact --before N always meant "sequences <= N are covered": --to N, the same plan
    new = cli("compact", d, "--to", "10", "--json")
    old = cli("compact", d, "--before", "10", "--json")
    assert new.code == old.code == 0 and new.json()["removals"] == old.json()["removals"]
    assert [r["file"] for r in new.json()["removals"]] == ["wal-000000.bin"]
    assert "note: --before is now --to" in old.err
    plan = cli("compact", d, "--before", "10")
    assert "compact " in plan.out and "--to 10 --apply" in plan.out and "--before" not in plan.out  # the advice


def _task_log(tmp_path):
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from test_tasklog import TID, happy, log

    p = tmp_path / f"{TID}.wal"
    p.write_bytes(log(happy()))
    return p


def test_tasklog_replay_until_is_a_time_and_lines_have_their_own_name(cli, tmp_path):
    p = _task_log(tmp_path)  # entries stamped 2026-11-21T10:00:01Z .. :09Z, one per line
    by_line = cli("tasklog", "replay", p, "--to-line", "4", "--jsonl")
    by_time = cli("tasklog", "replay", p, "--until", "2026-11-21T10:00:04Z", "--jsonl")
    assert by_line.code == by_time.code == 0
    assert [r["line"] for r in by_line.jsonl()] == [r["line"] for r in by_time.jsonl()] == [1, 2, 3, 4]
    ms = 1795255204000  # 2026-11-21T10:00:04Z in epoch ms, inclusive; a millisecond before drops line 4
    assert [r["line"] for r in cli("tasklog", "replay", p, "--until", str(ms), "--jsonl").jsonl()] == [1, 2, 3, 4]
    assert [r["line"] for r in cli("tasklog", "replay", p, "--until", str(ms - 1), "--jsonl").jsonl()] == [1, 2, 3]
    old = cli("tasklog", "replay", p, "--json")  # it printed JSON lines: --jsonl
    assert old.code == 0 and len(old.jsonl()) == 9 and "note: --json is now --jsonl" in old.err
    refused = cli("tasklog", "replay", p, "--until", "4")  # the old line number is refused, not read as 1970
    assert refused.code == 2 and "--to-line 4" in refused.err and refused.out == ""


def test_durations_everywhere_take_the_same_forms(cli, tmp_path):
    d = tmp_path / "w"
    r = cli("write", d, "--type", "REMEMBER", "--id", "a", "--payload", "x", "--batch-interval", "5ms")
    assert r.code == 0
    r = cli("write", d, "--type", "REMEMBER", "--id", "a", "--payload", "y", "--batch-ms", "5")
    assert r.code == 0 and "note: --batch-ms is now --batch-interval" in r.err
    r = cli("write", d, "--type", "REMEMBER", "--id", "a", "--payload", "y", "--batch-interval", "2h")
    assert r.code == 2 and "--batch-interval '2h': at most 3600s" in r.err
    assert [e["sequence"] for e in cli("inspect", d, "--jsonl").jsonl()] == [1, 2]
