"""Tiffany task logs: every rule of docs/format.md section 9, the fold into TaskState, resume and append,
and a crash at every step of an append."""
from __future__ import annotations

import json
import os

import pytest

from simfs import SimCrash, SimFS
from walctl.errors import NotClean, Refused, UsageError
from walctl.format.tasklog import read_log
from walctl.format.tasklog_entry import encode_entry
from walctl.ops.tasklog.logs import append, read_task, resume

TID = "3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77"
SHA0, SHA1, SHA2 = "0" * 40, "1" * 40, "2" * 64


def E(kind, i=None, **kw):
    e = {"v": 1, "ts": f"2026-11-21T10:00:{i or 0:02d}Z", "type": kind, "task_id": TID}
    e.update(kw)
    return e


PLAN = [{"index": 0, "description": "edit"}, {"index": 1, "description": "test"}, {"index": 2, "description": "docs"}]


def happy(upto=None):
    entries = [E("InstructionStart", 1, instruction="add validation", base_sha=SHA0),
               E("LLMPlan", 2, steps=PLAN),
               E("StepStart", 3, step_index=0), E("ToolResult", 4, step_index=0, tool="edit", success=True, output="ok"),
               E("PatchPreview", 5, step_index=0, diff="--- a", files={"m.rs": "fn x() {}"}),
               E("Commit", 6, step_index=0, sha=SHA1, message="step 0"),
               E("StepStart", 7, step_index=1), E("ToolResult", 8, step_index=1, tool="cargo", success=False, error="boom"),
               E("PatchPreview", 9, step_index=1, diff="--- b", base_sha=SHA1)]
    return entries[:upto] if upto else entries


def log(entries, tail=b"") -> bytes:
    return b"".join(encode_entry(e) for e in entries) + tail


def read(data):
    return read_log(data, TID)


def test_interrupted_task_state_and_resume_point():
    r = read(log(happy()))
    s = r.state
    assert r.status == "interrupted" and r.problems == () and r.torn is None
    assert (s.instruction, s.last_started, s.last_confirmed, s.last_sha) == ("add validation", 1, 0, SHA1)
    assert s.resume_step_index() == 1 and s.in_flight_step_index == 1
    assert s.canvas_snapshot() == {"step_index": 1, "diff": "--- b", "base_sha": SHA1, "recoverable": True}
    assert s.tool_results == {0: [{"tool": "edit", "success": True, "output": "ok"}],
                              1: [{"tool": "cargo", "success": False, "error": "boom"}]}


def test_completed_failed_stopped_clean_and_empty():
    done = happy() + [E("Commit", 10, step_index=1, sha=SHA2, message="1"), E("TaskComplete", 11, success=True, final_sha=SHA2)]
    r = read(log(done))
    assert r.status == "completed" and r.state.last_sha == SHA2 and r.state.canvas is None
    assert read(log(happy() + [E("TaskComplete", 10, success=False, error="x")])).status == "failed"
    r = read(log(happy() + [E("ShutdownMarker", 10, reason="sigterm")]))
    assert r.status == "stopped_clean" and r.state.resume_step_index() == 1  # still resumable
    assert read(b"").status == "empty"


@pytest.mark.parametrize("tail", [b'{"v":1,"ts":"2026', bytes(64), log([E("StepStart", 10, step_index=2)])[:-1]])
def test_torn_tail_is_never_folded_and_exit_1(tail, tmp_path):
    path = tmp_path / f"{TID}.wal"
    path.write_bytes(log(happy()) + tail)
    rep = read_task(str(path))
    assert rep.exit_code == 1 and rep.read.status == "interrupted" and rep.read.torn[1] == len(tail)
    assert rep.read.state.last_started == 1  # the complete-looking StepStart 2 without its \n is not folded


def test_corrupt_middle_line_is_corruption_even_as_last_line():
    entries = happy()
    data = log(entries[:3]) + b'{"v":1,"ts":"bad"}\n' + log(entries[3:])
    r = read(data)
    assert r.status == "invalid" and [(p.code, p.kind, p.line) for p in r.problems] == [(3, "corrupt-line", 4)]
    assert r.state.last_confirmed == 0  # the other entries are folded
    r = read(log(entries) + b"not json\n")
    assert [(p.code, p.line) for p in r.problems] == [(3, 10)] and r.torn is None


@pytest.mark.parametrize("line, why", [
    (b"\n", "blank line"), (b"\xff\xfe\n", "not UTF-8"), (b"[1,2]\n", "not an object"),
    (b'{"v":1,"ts":"2026-11-21T10:00:00Z","type":"Nope","task_id":"%s"}\n' % TID.encode(), "unknown type"),
    (b'{"v":1,"ts":"2026-11-21T10:00:00Z","type":"ShutdownMarker","task_id":"other"}\n', "task_id"),
    (b'{"v":1,"ts":"2026-11-21T10:00:00+00:00","type":"ShutdownMarker","task_id":"%s"}\n' % TID.encode(), "ts"),
    (b'{"v":1,"ts":"2026-11-21T10:00:00Z","type":"Commit","task_id":"%s","step_index":0,"sha":"xyz","message":"m"}\n'
     % TID.encode(), "40 or 64 hex"),
    (b'{"v":1,"ts":"2026-11-21T10:00:00Z","type":"StepStart","task_id":"%s","step_index":NaN}\n' % TID.encode(), "JSON"),
])
def test_invalid_lines_say_why(line, why):
    r = read(log(happy(2)) + line)
    (p,) = r.problems
    assert p.code == 3 and why in p.reason


def test_unknown_entry_version_is_unsupported():
    r = read(log(happy(2)) + encode_entry(dict(E("ShutdownMarker"), v=2)))
    assert [(p.code, p.kind) for p in r.problems] == [(5, "unsupported-version")] and r.status == "invalid"


@pytest.mark.parametrize("entries, why", [
    ([E("LLMPlan", steps=PLAN)], "not InstructionStart"),
    (happy(2) + [E("InstructionStart", instruction="again")], "InstructionStart"),
    ([E("InstructionStart", instruction="x"), E("StepStart", step_index=0)], "before any LLMPlan"),
    (happy(2) + [E("StepStart", step_index=7)], "outside the plan"),
    (happy(6) + [E("StepStart", step_index=0)], "goes back before"),
    (happy(3) + [E("Commit", step_index=1, sha=SHA1, message="m")], "latest StepStart is 0"),
    (happy(6) + [E("StepStart", step_index=2), E("Commit", step_index=2, sha=SHA1, message="m"),
                 E("StepStart", step_index=1), E("Commit", step_index=1, sha=SHA1, message="m")], "below an earlier"),
    (happy(2) + [E("TaskComplete", success=True), E("StepStart", step_index=0)], "after TaskComplete"),
])
def test_rule_violations_are_corruption_and_still_folded(entries, why):
    r = read(log(entries))
    assert r.status == "invalid" and any(p.code == 3 and why in p.reason for p in r.problems), r.problems


def test_seq_gaps_are_sequence_findings_and_ts_backwards_an_anomaly(tmp_path):
    entries = [dict(e, seq=i) for i, e in enumerate(happy(4))]
    entries[3]["seq"] = 5
    r = read(log(entries))
    assert [(p.code, p.line) for p in r.problems] == [(4, 4)]
    back = happy(3)
    back[2]["ts"] = "2026-11-21T09:00:00Z"
    path = tmp_path / f"{TID}.wal"
    path.write_bytes(log(back))
    rep = read_task(str(path))
    assert rep.read.status == "interrupted" and rep.exit_code == 0 and rep.findings[0].cls == "ts-backwards"
    assert read_task(str(path), strict=True).exit_code == 3


def test_replan_resets_progress_but_keeps_results_and_sha():
    entries = happy() + [E("LLMPlan", 10, steps=PLAN[:2]), E("StepStart", 11, step_index=0)]
    r = read(log(entries))
    s = r.state
    assert r.problems == () and s.last_confirmed is None and s.canvas is None and s.last_sha == SHA1
    assert s.resume_step_index() == 0 and s.in_flight_step_index == 0 and len(s.tool_results) == 2


def test_canvas_recoverable_only_with_files_or_matching_base():
    assert read(log(happy(5))).state.canvas_snapshot()["recoverable"] is True
    entries = happy(8) + [E("PatchPreview", 9, step_index=1, diff="--- b", base_sha=SHA0)]
    assert read(log(entries)).state.canvas_snapshot()["recoverable"] is False


def test_resume_cuts_torn_tail_with_evidence_and_refuses_invalid(tmp_path, cli):
    path = tmp_path / f"{TID}.wal"
    good = log(happy())
    path.write_bytes(good + b'{"v":1,"ts')
    dry = resume(str(path))
    assert "would cut 10 torn bytes" in dry.message and path.read_bytes() == good + b'{"v":1,"ts'
    done = resume(str(path), apply=True)
    assert path.read_bytes() == good and done.report.exit_code == 0
    with open(tmp_path / done.cut["evidence"], "rb") as f:
        assert f.read() == b'{"v":1,"ts'
    r = cli("tasklog", "resume", str(path))
    assert r.code == 0 and json.loads(r.out)["resume_step_index"] == 1
    path.write_bytes(good + b"junk\n")
    with pytest.raises(NotClean):
        resume(str(path))
    assert resume(str(path), force=True).report.exit_code == 3
    path.write_bytes(log(happy(2) + [E("TaskComplete", success=True)]))
    assert resume(str(path)).message == "nothing to resume: the task is completed"


def test_append_validates_and_keeps_the_rules(tmp_path):
    path = str(tmp_path / f"{TID}.wal")
    ts = iter(f"2026-11-21T10:00:{i:02d}.000000Z" for i in range(60))
    append(path, [{"type": "InstructionStart", "instruction": "go"}, {"type": "LLMPlan", "steps": PLAN}],
           now=lambda: next(ts))
    with pytest.raises(Refused):
        append(path, [{"type": "Commit", "step_index": 0, "sha": SHA1, "message": "m"}], now=lambda: next(ts))
    with pytest.raises(UsageError):
        append(path, [{"type": "StepStart"}], now=lambda: next(ts))
    append(path, [{"type": "StepStart", "step_index": 0}], now=lambda: next(ts))
    line = open(path, encoding="utf-8").read().splitlines()[-1]
    assert line.startswith('{"v":1,"ts":"2026-11-21T10:00:') and line.endswith(
        '"type":"StepStart","task_id":"%s","step_index":0}' % TID)  # the writer's key order, compact
    with open(path, "ab") as f:
        f.write(b'{"v"')
    with pytest.raises(Refused, match="torn"):
        append(path, [{"type": "ShutdownMarker"}])
    rep = read_task(path)
    assert rep.read.state.in_flight_step_index == 0 and rep.exit_code == 1


def test_crash_at_every_step_of_append_leaves_a_valid_prefix():
    entries = [{"type": "InstructionStart", "instruction": "go"}, {"type": "LLMPlan", "steps": PLAN},
               {"type": "StepStart", "step_index": 0}, {"type": "ShutdownMarker"}]
    path = f"/t/{TID}.wal"

    def run(fs):
        for e in entries:
            append(path, [e], fs=fs, now=lambda: "2026-11-21T10:00:00.000000Z")

    probe = SimFS()
    probe.makedirs_durable("/t")
    run(probe)
    total = probe.ops
    for n in range(1, total + 1):
        fs = SimFS(seed=n, crash_at=n)
        fs.makedirs_durable("/t")
        with pytest.raises(SimCrash):
            run(fs)
        fs.crash()
        if not fs.exists(path):
            continue
        with fs.map_read(path) as buf:
            r = read_log(buf, TID)
        assert [p for p in r.problems] == [], n
        assert r.state.valid_entries <= len(entries)
        types = [e["type"] for e in entries][:r.state.valid_entries]
        assert r.status in ("empty", "interrupted", "stopped_clean"), n
        assert r.state.instruction == ("go" if types else None)


def test_directory_summary_and_verify_recognises_task_logs(tmp_path, cli):
    (tmp_path / f"{TID}.wal").write_bytes(log(happy()))
    other = "0f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e70"
    (tmp_path / f"{other}.wal").write_bytes(log([dict(e, task_id=other) for e in happy(2)]) + b"xx")
    r = cli("tasklog", "inspect", str(tmp_path))
    assert TID in r.out and other in r.out and r.code == 1
    assert cli("verify", str(tmp_path)).code == 1
    doc = cli("verify", "--json", str(tmp_path / f"{TID}.wal")).json()
    assert doc["paths"][0]["kind"] == "tasklog" and doc["exit_code"] == 0
    assert os.path.exists(tmp_path / f"{TID}.wal")


def test_resume_apply_and_append_take_the_directory_lock_and_change_nothing_without_it(tmp_path, cli):
    from walctl.errors import EnvironmentProblem
    from walctl.store.fs import DEFAULT_FS
    from walctl.store.lock import DirectoryLock

    path = tmp_path / f"{TID}.wal"
    torn = log(happy()) + b'{"v":1,"ts'
    path.write_bytes(torn)
    with DirectoryLock(str(tmp_path), "pid 1 on test: walctl write", DEFAULT_FS):
        with pytest.raises(EnvironmentProblem, match="locked by a live writer"):
            resume(str(path), apply=True)
        with pytest.raises(EnvironmentProblem):
            append(str(path), [{"type": "ShutdownMarker"}])
        r = cli("tasklog", "resume", "--apply", str(path))
        assert r.code == 6 and "locked" in r.err
        assert "would cut 10 torn bytes" in resume(str(path)).message  # the dry run needs no lock
        assert path.read_bytes() == torn and not (tmp_path / ".quarantine").exists()
    assert resume(str(path), apply=True).applied and path.read_bytes() == log(happy())


# --- issue #15: the edges of task logs -------------------------------------------------------------------


def _with_ts(entries, stamps):
    return [dict(e, ts=t) for e, t in zip(entries, stamps)]


def test_ts_is_compared_as_an_instant_not_a_string():
    base = happy(3)
    fwd = read(log(_with_ts(base, ["2026-11-21T10:00:00Z", "2026-11-21T10:00:00.500Z", "2026-11-21T10:00:00.5000Z"])))
    assert fwd.problems == ()  # .500 after 00 is later; .5000 is the same instant again
    back = read(log(_with_ts(base, ["2026-11-21T10:00:00.500Z", "2026-11-21T10:00:00Z", "2026-11-21T10:00:01Z"])))
    assert [(p.kind, p.line, p.code) for p in back.problems] == [("ts-backwards", 2, 0)]
    assert "2026-11-21T10:00:00Z is before the previous entry's 2026-11-21T10:00:00.500Z" in back.problems[0].reason
    # 0.05 s is before 0.5 s although "05" > "5" would not be the way to compare
    back2 = read(log(_with_ts(base, ["2026-11-21T10:00:00.5Z", "2026-11-21T10:00:00.05Z", "2026-11-21T10:00:01Z"])))
    assert [(p.kind, p.line) for p in back2.problems] == [("ts-backwards", 2)]


@pytest.mark.parametrize("ts", ["2026-13-01T10:00:00Z", "2026-02-30T10:00:00Z", "2026-11-21T24:00:00Z",
                                "2026-11-21T10:60:00Z", "2026-11-2\u0661T10:00:00Z", "\uff12026-11-21T10:00:00Z",
                                "2026-11-21T10:00:00.Z", "2026-11-21 10:00:00Z"])
def test_ts_must_be_a_real_rfc3339_date_time(ts):
    entries = happy(2)
    entries[1] = dict(entries[1], ts=ts)
    r = read(log(entries))
    assert [(p.kind, p.line, p.offset, p.code) for p in r.problems] == [
        ("corrupt-line", 2, len(encode_entry(entries[0])), 3)]
    assert "RFC 3339" in r.problems[0].reason and r.state.valid_entries == 1


def test_leap_day_and_leap_second_are_real_date_times():
    entries = _with_ts(happy(2), ["2024-02-29T10:00:00Z", "2024-02-29T23:59:60Z"])
    assert read(log(entries)).problems == ()


def test_first_seq_rule_applies_to_the_first_line_that_has_a_seq():
    entries = happy(4)
    entries[2] = dict(entries[2], seq=5)  # lines 1-2 carry no seq; line 3 is the first with one
    entries[3] = dict(entries[3], seq=6)
    r = read(log(entries))
    assert [(p.kind, p.line, p.code, p.reason) for p in r.problems] == [("sequence", 3, 4, "seq 5, expected 0")]
    entries[2], entries[3] = dict(entries[2], seq=0), dict(entries[3], seq=1)
    assert read(log(entries)).problems == ()


@pytest.mark.parametrize("after, ok", [(b" \t\r", True), (b"\xc2\xa0", False), (b"\x0c", False), (b"\x0b", False),
                                       (b"\xe2\x80\x83", False)])
def test_only_json_whitespace_may_follow_the_object(after, ok):
    first, second = encode_entry(happy(1)[0]), encode_entry(happy(2)[1])
    data = first + second[:-1] + after + b"\n"
    r = read(data)
    if ok:
        assert r.problems == () and r.state.valid_entries == 2
    else:
        assert [(p.kind, p.line, p.offset, p.end) for p in r.problems] == [
            ("corrupt-line", 2, len(first), len(data))]
        assert r.state.valid_entries == 1 and "not JSON" in r.problems[0].reason


def test_deep_nesting_and_lone_surrogates_are_corrupt_lines_not_crashes(tmp_path, cli):
    good = log(happy(2))
    deep = b"[" * 100_000 + b"\n"
    surrogate = encode_entry(E("StepStart", 3, step_index=0))[:-2] + b',"note":"\\ud800"}\n'
    path = tmp_path / f"{TID}.wal"
    path.write_bytes(good + deep + surrogate)
    r = read_task(str(path))
    assert [(p.line, p.offset, p.code) for p in r.read.problems] == [
        (3, len(good), 3), (4, len(good) + len(deep), 3)]
    assert "nested deeper than 256" in r.read.problems[0].reason
    assert "lone surrogate" in r.read.problems[1].reason
    for args in (("tasklog", "inspect", path), ("tasklog", "verify", path, "--json"), ("verify", path)):
        out = cli(*args)
        assert out.code == 3 and "internal error" not in out.err, args
    res = cli("tasklog", "resume", path, "--force")
    assert res.code == 3 and json.loads(res.out)["valid_entries"] == 2 and "internal error" not in res.err
    assert path.read_bytes() == good + deep + surrogate


def test_append_is_all_or_nothing(tmp_path, cli):
    path = tmp_path / f"{TID}.wal"
    ts = iter(f"2026-11-21T10:00:{i:02d}.000000Z" for i in range(60))
    append(str(path), [{"type": "InstructionStart", "instruction": "go"}], now=lambda: next(ts))
    before = path.read_bytes()
    # the third entry breaks a rule (a Commit for a step never started): the first two are not written either
    with pytest.raises(Refused, match="entry 3 breaks a rule.*nothing was written"):
        append(str(path), [{"type": "LLMPlan", "steps": PLAN}, {"type": "StepStart", "step_index": 0},
                           {"type": "Commit", "step_index": 1, "sha": SHA1, "message": "m"}], now=lambda: next(ts))
    assert path.read_bytes() == before
    with pytest.raises(UsageError, match="entry 2 is not JSON text"):
        append(str(path), [{"type": "LLMPlan", "steps": PLAN}, {"type": "StepStart", "step_index": 0,
                                                                "x": float("nan")}], now=lambda: next(ts))
    assert path.read_bytes() == before
    r = cli("tasklog", "append", path, "--entry", '{"type":"LLMPlan","steps":%s}' % json.dumps(PLAN),
            "--entry", '{"type":"StepStart","step_index":NaN}')
    assert r.code == 2 and "entry 2 is not JSON text" in r.err and path.read_bytes() == before
    r = cli("tasklog", "append", path, "--entry", "[" * 100_000)
    assert r.code == 2 and "nested deeper" in r.err and path.read_bytes() == before
    r = cli("tasklog", "append", path, "--entry", '{"type":"ShutdownMarker","reason":"\\udc00"}')
    assert r.code == 2 and "lone surrogate" in r.err and path.read_bytes() == before
    written = append(str(path), [{"type": "LLMPlan", "steps": PLAN}, {"type": "StepStart", "step_index": 0}],
                     now=lambda: next(ts))
    assert len(written) == 2
    rep = read_task(str(path))
    assert rep.exit_code == 0 and rep.read.lines == 3 and rep.read.state.in_flight_step_index == 0


def test_resume_json_document_and_no_step_none(tmp_path, cli):
    path = tmp_path / f"{TID}.wal"
    path.write_bytes(log(happy(1)) + b'{"v"')
    r = cli("tasklog", "resume", path, "--json")
    doc = r.json()
    assert r.code == 1 and doc["schema"] == "walctl.tasklog-resume/2" and doc["outcome"] == "dry-run"
    assert doc["applied"] is False and doc["state"]["resume_step_index"] is None
    assert doc["message"] == "dry run: would cut 4 torn bytes (kept as evidence); resume before planning: the log " \
                             "has no plan yet" and "None" not in doc["message"]
    assert [f["offset"] for f in doc["findings"]] == [len(log(happy(1)))]
    r = cli("tasklog", "resume", path, "--json", "--apply")
    doc = r.json()
    assert r.code == 0 and doc["outcome"] == "applied" and doc["evidence"].startswith(".quarantine/")
    assert path.read_bytes() == log(happy(1))
    entries = happy(2)
    for i in range(3):
        entries += [E("StepStart", 3, step_index=i), E("Commit", 4, step_index=i, sha=SHA1, message="m")]
    path.write_bytes(log(entries))
    r = cli("tasklog", "resume", path)
    assert r.code == 0 and "every step of the plan (3) is committed" in r.err and "None" not in r.err
    path.write_bytes(log(happy(2)) + b"junk\n")
    r = cli("tasklog", "resume", path, "--json")
    doc = r.json()
    assert r.code == 3 and doc["outcome"] == "refused" and doc["exit_code"] == 3 and doc["applied"] is False
    assert path.read_bytes() == log(happy(2)) + b"junk\n"


def test_ts_date_check_agrees_with_the_calendar_for_every_day():
    import datetime

    from walctl.format.tasklog_entry import parse_line

    for year in (1900, 2000, 2023, 2024):
        for month in range(0, 14):
            for day in range(0, 33):
                ts = f"{year:04d}-{month:02d}-{day:02d}T23:59:59.5Z"
                try:
                    datetime.date(year, month, day)
                    real = True
                except ValueError:
                    real = False
                e = dict(E("ShutdownMarker"), ts=ts)
                _, _, problem = parse_line(encode_entry(e)[:-1], TID)
                assert (problem is None) == real, ts
