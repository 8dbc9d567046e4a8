"""--metrics-file (issue 26, "Signals for monitoring"): every file walctl writes is read back with the
Prometheus project's own text-format parser, and its values are checked against what the run found."""
from __future__ import annotations

import os
import shutil

import pytest

from conftest import tree_digest
from json_damage import flip
from walctl.cli import run
from walctl.ops import classes as K

parser = pytest.importorskip("prometheus_client.parser")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def read_metrics(path: str) -> dict:
    """{(name, frozenset of labels): value}, through prometheus_client's parser; every family typed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    out = {}
    for fam in parser.text_string_to_metric_families(text):
        assert fam.type == "gauge" and fam.documentation, fam.name
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(m: dict, name: str, **labels) -> float | None:
    hits = [v for (n, ls), v in m.items() if n == name and set(labels.items()) <= ls]
    assert len(hits) <= 1, (name, labels, hits)
    return hits[0] if hits else None


def copy(tmp_path, example: str, name: str | None = None) -> str:
    dst = str(tmp_path / (name or example))
    shutil.copytree(os.path.join(EXAMPLES, example), dst)
    return dst


def test_verify_metrics_say_the_exit_code_every_class_bytes_records_and_keep_the_last_success(tmp_path, capsys):
    wal = copy(tmp_path, "wal-healthy")
    prom = tmp_path / "textfile" / "walctl.prom"
    prom.parent.mkdir()
    assert run(["verify", wal, "--metrics-file", str(prom), "-q"]) == 0
    m = read_metrics(prom)
    t = {"command": "verify", "target": wal}
    size = sum(os.path.getsize(os.path.join(wal, n)) for n in os.listdir(wal))
    assert value(m, "walctl_exit_code", **t) == 0
    assert value(m, "walctl_checked_bytes", **t) == size and value(m, "walctl_checked_records", **t) == 80
    assert value(m, "walctl_last_sequence", **t) == 80
    classes = {dict(ls)["class"]: v for (n, ls), v in m.items() if n == "walctl_findings"}
    assert set(classes) == set(K.CLASSES) and not any(classes.values())  # every class, 0: alerts need no absent()
    ok_at = value(m, "walctl_last_success_timestamp_seconds", **t)
    assert ok_at == value(m, "walctl_last_run_timestamp_seconds", **t) and value(m, "walctl_run_duration_seconds", **t) >= 0
    # damage: exit 3, the class counted, and the last success is still the clean run's
    chunk = os.path.join(wal, "wal-000000.bin")
    flip(chunk, os.path.getsize(chunk) // 2)
    assert run(["verify", wal, "--metrics-file", str(prom), "-q"]) == 3
    m = read_metrics(prom)
    assert value(m, "walctl_exit_code", **t) == 3
    assert value(m, "walctl_findings", **t, **{"class": K.MID_LOG_DAMAGE}) == 1
    assert value(m, "walctl_last_success_timestamp_seconds", **t) == ok_at
    assert value(m, "walctl_last_run_timestamp_seconds", **t) >= ok_at
    assert sorted(os.listdir(prom.parent)) == ["walctl.prom"]  # the temp file was renamed, none is left


def test_several_targets_a_missing_one_and_a_name_that_is_not_utf8(tmp_path):
    good = copy(tmp_path, "wal-healthy")
    odd = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"wal-\xff"))
    shutil.copytree(os.path.join(EXAMPLES, "wal-torn-tail"), odd)
    gone = str(tmp_path / "gone")
    prom = tmp_path / "m.prom"
    assert run(["verify", good, odd, gone, "--metrics-file", str(prom), "-q"]) == 6
    m = read_metrics(prom)  # the parser reads it: a name that is not UTF-8 is printed with U+FFFD
    codes = {dict(ls)["target"]: v for (n, ls), v in m.items() if n == "walctl_exit_code"}
    assert codes == {good: 0, odd.encode("utf-8", "surrogateescape").decode("utf-8", "replace"): 1, gone: 6}
    assert value(m, "walctl_findings", target=gone, **{"class": K.UNREADABLE}) == 1


def test_a_metrics_file_inside_a_target_is_refused_and_nothing_is_written(tmp_path, capsys):
    wal = copy(tmp_path, "wal-healthy")
    ckpts = copy(tmp_path, "checkpoints")
    before = tree_digest(str(tmp_path))
    for argv in (["verify", wal, "--metrics-file", os.path.join(wal, "walctl.prom")],
                 ["verify", os.path.join(wal, "wal-000000.bin"), "--metrics-file", os.path.join(wal, "x.prom")],
                 ["recover", "--checkpoints", ckpts, "--log", wal, "--metrics-file", os.path.join(ckpts, "r.prom")],
                 ["checkpoint", "create", ckpts, "--log", wal, "--metrics-file", os.path.join(ckpts, "c.prom")],
                 ["archive", "push", wal, "file://" + str(tmp_path / "arch"), "--metrics-file",
                  str(tmp_path / "arch" / "p.prom")]):
        assert run(argv) == 2, argv
        assert "--metrics-file" in capsys.readouterr().err
    assert tree_digest(str(tmp_path)) == before


def test_recover_and_checkpoint_create_metrics(tmp_path):
    log = copy(tmp_path, "segments")
    ckpts = copy(tmp_path, "checkpoints")
    prom = tmp_path / "r.prom"
    assert run(["recover", "--checkpoints", ckpts, "--log", log, "--metrics-file", str(prom)]) == 0
    m = read_metrics(prom)
    t = {"command": "recover", "target": log}
    assert value(m, "walctl_exit_code", **t) == 0 and value(m, "walctl_last_sequence", **t) > 0
    assert value(m, "walctl_checked_records", **t) >= 0
    # damage in the replayed log: recover fails (its own exit code) and the file says so
    flip(os.path.join(log, "wal_00000002.log"), 10)
    code = run(["recover", "--checkpoints", ckpts, "--log", log, "--metrics-file", str(prom)])
    m = read_metrics(prom)
    assert code != 0 and value(m, "walctl_exit_code", **t) == code
    assert sum(v for (n, ls), v in m.items() if n == "walctl_findings") >= 1
    assert value(m, "walctl_last_success_timestamp_seconds", **t) is not None  # the first run's, kept
    out = tmp_path / "new-ckpts"
    prom2 = tmp_path / "c.prom"
    assert run(["checkpoint", "create", str(out), "--log", copy(tmp_path, "segments", "seg2"),
                "--metrics-file", str(prom2)]) == 0
    m = read_metrics(prom2)
    t = {"command": "checkpoint create", "target": str(out)}
    assert value(m, "walctl_exit_code", **t) == 0 and value(m, "walctl_last_sequence", **t) > 0
    assert value(m, "walctl_checked_records", **t) > 0


def test_archive_push_metrics_last_shipped_sequence_and_lag(tmp_path):
    wal = copy(tmp_path, "wal-sequence-gap")
    dest = "file://" + str(tmp_path / "archive")
    prom = tmp_path / "p.prom"
    assert run(["archive", "push", wal, dest, "--metrics-file", str(prom)]) == 0
    m = read_metrics(prom)
    t = {"command": "archive push", "target": wal}
    assert value(m, "walctl_exit_code", **t) == 0
    assert value(m, "walctl_archive_uploaded_bytes", **t) > 0
    shipped = value(m, "walctl_archive_last_shipped_sequence", **t)
    from walctl.ops.archive.listing import list_archive

    s = list_archive(dest, namespace="wal-sequence-gap", wal_dir=wal).namespaces[0]
    assert shipped == s["last_sequence"] and value(m, "walctl_archive_lag_sequences", **t) == s["lag"]["sequences"]


def test_push_follow_refreshes_the_file_while_it_runs(tmp_path):
    from walctl.ops.archive.follow import push_follow
    from walctl.cli.metrics_opt import Recording
    from walctl.cli.archive_cmd import _metrics_refresh

    wal = copy(tmp_path, "wal-healthy")
    prom = tmp_path / "f.prom"
    seen = []
    rec = Recording(str(prom), "archive push", [wal])
    refresh = _metrics_refresh(rec, wal, 0.0)

    def on_poll(sh):
        refresh(sh)
        seen.append(read_metrics(prom))
        if len(seen) == 3:
            os.kill(os.getpid(), __import__("signal").SIGTERM)  # stop it as systemd does

    rep = push_follow(wal, "file://" + str(tmp_path / "arch"), interval=0.01, on_poll=on_poll, sleep=lambda s: None)
    assert rep.exit_code == 0 and len(seen) == 3
    t = {"command": "archive push", "target": wal}
    for m in seen:  # each refresh a whole file: exit 0 (running), what is shipped, nothing waiting
        assert value(m, "walctl_exit_code", **t) == 0
        assert value(m, "walctl_archive_last_shipped_sequence", **t) == rep.shipped_through == 80
        assert value(m, "walctl_archive_lag_sequences", **t) == 0


def test_the_cli_follow_writes_its_final_state(tmp_path):
    wal = copy(tmp_path, "wal-healthy")
    prom = tmp_path / "f.prom"
    assert run(["archive", "push", wal, "file://" + str(tmp_path / "arch"), "--follow", "--timeout", "0",
                "--metrics-file", str(prom)]) == 0
    m = read_metrics(prom)
    t = {"command": "archive push", "target": wal}
    assert value(m, "walctl_exit_code", **t) == 0 and value(m, "walctl_archive_lag_seconds", **t) == 0


@pytest.mark.parametrize("crash_at", range(1, 12))
def test_a_crash_at_any_step_leaves_the_old_file_or_the_new_one(crash_at):
    from simfs import SimCrash, SimFS
    from walctl.ops import metrics
    from walctl.store import durable

    fs = SimFS(0, None)
    fs.makedirs_durable("/tf")
    confined = fs.beneath("/tf")
    durable.create_file("/tf/w.prom", b"# old\n", confined)
    fs.crash_at, fs.ops = fs.ops + crash_at, fs.ops
    targets = [metrics.Target("/srv/wal", 0, {})]
    try:
        metrics.write("/tf/w.prom", "verify", targets, 0.5, now=1000.0, fs=confined)
    except SimCrash:
        fs.crash()
    got = fs.read_durable("/tf/w.prom")
    new = metrics.render("verify", targets, 0.5, 1000.0).encode()
    assert got in (b"# old\n", new), crash_at
    assert set(e.name for e in fs.listdir("/tf")) <= {"w.prom", "w.prom.tmp"}  # a leftover .tmp: never read


def test_metrics_code_is_not_imported_without_the_flag():
    import subprocess
    import sys

    code = ("import sys; from walctl.cli import run; run(['verify', sys.argv[1], '-q']); "
            "print(sorted(m for m in sys.modules if 'metrics' in m or 'promtext' in m))")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(EXAMPLES, "wal-healthy")], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "['walctl.cli.metrics_opt']"  # the option's declaration only (typer, no more)


def test_the_example_alert_rules_name_only_metrics_walctl_writes_and_the_units_the_flag():
    import re

    yaml = pytest.importorskip("yaml")
    from walctl.ops import metrics

    written = set(re.findall(r"^(walctl_[a-z_]+)\{", metrics.render("x", [metrics.Target(
        "/w", 3, {}, 1, 1, 1, 1, 1, 1.0, 1)], 0.1, 1.0, "walctl_last_success_timestamp_seconds"
        '{command="x",target="/w"} 1\n'), re.M))
    rules = yaml.safe_load(open(os.path.join(EXAMPLES, "prometheus", "walctl.rules.yml")))["groups"][0]["rules"]
    used = {n for r in rules for n in re.findall(r"walctl_[a-z_]+", r["expr"])}
    assert len(rules) >= 5 and used and used <= written, used - written
    classes = {c for r in rules for c in re.findall(r'class="([a-z-]+)"', r["expr"])}
    assert classes <= set(K.CLASSES)
    for unit in ("systemd/walctl-verify@.service", "walctl-archive.service"):
        text = open(os.path.join(EXAMPLES, unit)).read()
        assert "--metrics-file /var/lib/node_exporter/textfile/" in text and "ReadWritePaths=/var/lib/node_exporter" in text
    assert "OnUnitActiveSec=" in open(os.path.join(EXAMPLES, "systemd", "walctl-verify@.timer")).read()


def test_a_metrics_directory_reached_through_a_link_is_not_a_target_of_the_run(tmp_path, capsys):
    import json

    wal = copy(tmp_path, "wal-healthy")
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "textfile")
    assert run(["verify", wal, "--json", "--metrics-file", str(tmp_path / "textfile" / "v.prom")]) == 0
    out = capsys.readouterr()
    assert "targets" not in json.loads(out.out) and "target:" not in out.err
    assert value(read_metrics(tmp_path / "real" / "v.prom"), "walctl_exit_code", target=wal) == 0
