"""Issue #24, "Every reader takes only what its format allows": one typed validation per untrusted document.
A field of the wrong type or an impossible value (null where a number is needed, a time that is not ISO
8601, a lone surrogate escape in any string, bytes that are not UTF-8) makes the line or document bad:
reported by number and field in one line, never acted on, never printed as `None`, never a traceback.

Each reader gets a table fuzz (every field of a valid document replaced by each wrong value; a sample in
the default suite, all of them under -m slow), and the stdin readers run in child processes under the
locales and encodings an operator has (C.UTF-8, C, PYTHONIOENCODING=utf-8)."""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from walctl.format import fields as F
from walctl.format import ledger as L

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
TID = "3f2a9c1e-0b7d-4e55-9a51-6d0c2f1b8e77"
BAD = [None, "\ud800", "x", True, -1, 1.5, [], {}, "2026-13-45T99:00:00Z", 2 ** 70]
FEW = settings(max_examples=10, deadline=timedelta(seconds=20), derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
MANY = settings(max_examples=150, deadline=timedelta(seconds=20), derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def clean(r, what):
    """No traceback, no internal error, an exit code of the contract, and no Python `None` shown."""
    assert r.code in range(8), (what, r.code, r.err[-300:])
    assert "internal error" not in r.err and "Traceback" not in r.err, (what, r.err[-300:])
    assert "None" not in r.out + r.err, (what, [x for x in (r.out + r.err).splitlines() if "None" in x][:2])


def tree_digest(path) -> dict:
    out = {}
    for base, _, files in os.walk(path):
        for n in files:
            p = os.path.join(base, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, path)] = hashlib.sha256(f.read()).hexdigest()
    return out


# ---- the field spec itself ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind, good, bad", [
    (F.COUNT, [0, 7, 2 ** 62], [None, -1, True, 1.0, "1", 2 ** 63]),
    (F.SEQ, [1, 9], [0, -3, False, "2"]),
    (F.ISO, ["2026-11-27T09:03:42Z", "2026-11-27T09:03:42.220Z", "2026-11-27T09:03:42.123456+01:00"],
     ["yesterday", "2026-11-27 09:03:42Z", "2026-11-27T09:03:42", "2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z",
      "2026-11-27T25:00:00Z", "2026-11-27T09:03:42+24:00", 1795300000, None]),
    (F.SHA256, ["0" * 64, "ab" * 32], ["0" * 63, "AB" * 32, None, 5]),
    (F.STR, ["", "x"], [None, 1, []]),
])
def test_field_kinds(kind, good, bad):
    spec = {"k": F.Field(kind)}
    assert [F.check({"k": v}, spec) for v in good] == [None] * len(good)
    for v in bad:
        why = F.check({"k": v}, spec)
        assert why and why.startswith("k") and "None" not in why, (v, why)


def test_field_spec_names_the_field_and_refuses_lone_surrogates():
    spec = {"size": F.Field(F.COUNT), "note": F.Field(F.STR, required=False, null=True)}
    assert F.check({"size": None}, spec) == "size is null, an integer >= 0 is needed"
    assert F.check({}, spec) == "size is missing"
    assert F.check({"size": 1, "note": None}, spec) is None
    assert "lone surrogate" in F.check({"size": 1, "note": "\ud800"}, spec)
    assert "lone surrogate" in F.check({"size": 1, "extra": ["\udfff"]}, spec)  # in any string, any key
    assert F.check([], spec) == "not a JSON object"
    assert F.iso_to_ms("1970-01-01T00:00:01.5Z") == 1500 and F.iso_to_ms("1970-01-01T01:00:00+01:00") == 0


# ---- ledger lines ------------------------------------------------------------------------------------

def _ledger_line(obj: dict) -> bytes:
    """A line with the CRC it would have if it could be computed (a lone surrogate has no UTF-8 form)."""
    obj = dict(obj)
    try:
        obj["crc32c"] = f"{L.crc32c(L._compact(obj)):08x}"
    except UnicodeEncodeError:
        obj["crc32c"] = "00000000"
    return json.dumps(obj, sort_keys=True).encode() + b"\n"


@pytest.fixture(scope="module")
def gapped(tmp_path_factory):
    """Chunks holding 1..20 and the ledger their writer kept."""
    from walctl.ops.wal.write import WalWriter

    d = str(tmp_path_factory.mktemp("gapped") / "wal")
    with WalWriter(d, sync="none", max_chunk_bytes=2048) as w:
        for i in range(20):
            w.append(0, f"m{i}", b"p" * 200)
    return d


# A loss accepted by a line (21..30, above what the directory holds): each field in turn made wrong
ACCEPT = {"v": 1, "ts": "2026-11-21T10:00:00.000Z", "event": "accept-loss", "first_seq": 21, "last_seq": 30,
          "reason": "r"}


def _ledger_case(cli, tmp_path, gapped, key, value):
    d = str(tmp_path / "wal")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(gapped, d)
    ledger = os.path.join(d, ".walctl", "ledger.jsonl")
    number = open(ledger, "rb").read().count(b"\n") + 1
    with open(ledger, "ab") as f:
        f.write(_ledger_line(dict(ACCEPT, **{key: value})))
    before = tree_digest(d)
    r = cli("verify", d, "--json")
    clean(r, "verify")
    doc = json.loads(r.out)
    bad = [f for f in doc["paths"][0]["findings"] if f["class"] == "ledger-line"]
    assert r.code == 3 and len(bad) == 1 and f"ledger line {number}:" in bad[0]["reason"], bad
    assert not any(f["class"] == "accepted-loss" for f in doc["paths"][0]["findings"])  # the line is not used
    r = cli("map", d)
    clean(r, "map")
    assert r.code == 3 and tree_digest(d) == before  # read-only commands changed nothing
    for args in (("seal", d), ("archive", "push", d, "file://" + str(tmp_path / "a")),
                 ("compact", d, "--to", "3"), ("repair", d, "--accept-loss", "50..51", "--reason", "x")):
        clean(cli(*args), args)
    r = cli("write", d, "--type", "0", "--id", "m", "--payload", "x")
    clean(r, "write")
    assert r.code == 3 and f"ledger line {number}" in r.err and len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["\ud800", "ok\udfffok"])
def test_a_lone_surrogate_in_a_ledger_line_is_a_bad_line_for_every_command(cli, tmp_path, gapped, value):
    _ledger_case(cli, tmp_path, gapped, "reason", value)


@FEW
@given(key=st.sampled_from(sorted(ACCEPT)), value=st.sampled_from(BAD))
def test_ledger_lines_fuzz(cli, tmp_path, gapped, key, value):
    if key == "reason" and isinstance(value, str) and value != "\ud800":
        value = 5  # any other text is a reason
    if ACCEPT[key] == value:
        value = "t"
    _ledger_case(cli, tmp_path, gapped, key, value)


def test_a_wrongly_typed_accept_loss_never_hides_a_gap(cli, tmp_path):
    from conftest import make_chunk, write_dir

    d = write_dir(tmp_path / "g", {0: make_chunk([1, 2]), 1: make_chunk([5, 6])})
    os.makedirs(os.path.join(d, ".walctl"))
    with open(os.path.join(d, ".walctl", "ledger.jsonl"), "wb") as f:
        f.write(_ledger_line(dict(ACCEPT, first_seq=3, last_seq=None)))
    doc = json.loads(cli("verify", d, "--json").out)
    classes = {f["class"]: f for f in doc["paths"][0]["findings"]}
    assert classes["sequence-gap"]["missing"] == [3, 4] and classes["sequence-gap"]["exit_code"] == 4
    assert "ledger line 1: accept-loss: last_seq is not an integer" in classes["ledger-line"]["reason"]
    r = cli("repair", d, "--accept-loss", "3..4", "--reason", "bad\udcff", "--apply")
    assert r.code == 2 and r.err.strip() == "walctl: error: --reason is not UTF-8 text"


# ---- the archive manifest ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    from walctl.ops.archive.push import push
    from walctl.ops.checkpoints.checkpoint import create
    from walctl.ops.wal.write import WalWriter

    base = str(tmp_path_factory.mktemp("archived"))
    wal = os.path.join(base, "wal")
    with WalWriter(wal, sync="none", max_chunk_bytes=2048) as w:
        for i in range(20):
            w.append(0, f"m{i}", b"p" * 200)
    create(os.path.join(base, "ck"), {"memory_blocks": [], "wal_sequence_hint": 12}, 12)
    push(wal, "file://" + os.path.join(base, "a"), namespace="n", checkpoints=os.path.join(base, "ck"))
    return base


def _manifest_case(cli, tmp_path, archived, index, key, value):
    a = str(tmp_path / "a")
    shutil.rmtree(a, ignore_errors=True)
    shutil.copytree(os.path.join(archived, "a"), a)
    url = "file://" + a
    mp = os.path.join(a, "n", "MANIFEST.json")
    doc = json.load(open(mp))
    wal = [o for o in doc["objects"] if o["kind"] == "chunks"]
    archived_range = (min(o["first_sequence"] for o in wal), max(o["last_sequence"] for o in wal))
    objects = sorted(doc["objects"], key=lambda o: (o["kind"] != "checkpoints", o["name"]))
    target = objects[index % len(objects)]
    number = doc["objects"].index(target) + 1
    target[key] = value
    from walctl.format.archive_manifest import entry_problem

    if entry_problem(target) is None:  # still an entry (a null range on a checkpoint...): make it a wrong one
        target[key] = "x"
    with open(mp, "w") as f:
        f.write(json.dumps(doc))
    objects_before = {k: v for k, v in tree_digest(a).items() if not k.endswith("MANIFEST.json")}
    words = f"MANIFEST.json does not parse (object {number}"
    r = cli("archive", "list", url, "--json")
    clean(r, "list")
    assert r.code == 0 and words in r.err
    ns = json.loads(r.out)["namespaces"][0]
    assert (ns["first_sequence"], ns["last_sequence"]) == archived_range and ns["checkpoints"][0]["wal_sequence"] == 12
    r = cli("archive", "verify", url, "--json")
    clean(r, "verify")
    got = json.loads(r.out)
    assert r.code == 3 and [f["class"] for f in got["findings"]] == ["manifest-invalid"], got["findings"]
    assert words in got["findings"][0]["reason"] and got["findings"][0]["file"] == "n/MANIFEST.json"
    r = cli("archive", "restore", url, tmp_path / "r", "--json")
    clean(r, "restore")
    rep = json.loads(r.out)
    assert r.code == 0 and rep["last_sequence"] == archived_range[1] and rep["checkpoint_wal_sequence"] == 12
    assert any(words in w for w in rep["warnings"])
    shutil.rmtree(tmp_path / "r")
    r = cli("archive", "prune", url, "--namespace", "n", "--keep", "1", "--max-age", "0s", "--apply", "--json")
    clean(r, "prune")
    assert json.loads(r.out)["delete"] == [] and {k: v for k, v in tree_digest(a).items()
                                                   if not k.endswith("MANIFEST.json")} == objects_before


@pytest.mark.parametrize("index, key, value", [
    (1, "last_sequence", None), (1, "first_sequence", None), (0, "wal_sequence", None), (2, "uploaded_at", "yesterday"),
    (1, "name", "\ud800"), (1, "size", "big"), (0, "wal_sequence", -1), (2, "sha256", None),
])
def test_a_manifest_with_null_or_wrong_fields_is_invalid_and_never_used(cli, tmp_path, archived, index, key, value):
    _manifest_case(cli, tmp_path, archived, index, key, value)


@pytest.mark.slow
@MANY
@given(index=st.integers(0, 5), key=st.sampled_from(["name", "kind", "size", "sha256", "first_sequence",
                                                      "last_sequence", "uploaded_at", "wal_sequence"]),
       value=st.sampled_from(BAD))
def test_manifest_fuzz_long(cli, tmp_path, archived, index, key, value):
    _manifest_case(cli, tmp_path, archived, index, key, value)


# ---- quarantine manifest, workflow documents, Substrat events, task logs ------------------------------

QLINE = {"time": "2026-11-21T10:00:00Z", "action": "truncate", "source": "wal-000000.bin", "offset": 8, "length": 10,
         "sha256": hashlib.sha256(b"y" * 10).hexdigest(), "evidence": ".quarantine/x", "reason": "r",
         "walctl_version": "0.1.0"}


def _quarantine_case(cli, tmp_path, gapped, key, value):
    d = str(tmp_path / "q")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(gapped, d)
    os.makedirs(os.path.join(d, ".quarantine"))
    with open(os.path.join(d, ".quarantine", "x"), "wb") as f:
        f.write(b"y" * 10)
    with open(os.path.join(d, ".quarantine", "MANIFEST.jsonl"), "wb") as f:
        f.write(json.dumps(dict(QLINE, **{key: value})).encode() + b"\n")
    before = tree_digest(d)
    r = cli("quarantine", "list", d, "--json")
    clean(r, "list")
    assert any(p.startswith("MANIFEST.jsonl line 1: ") and "ignored (never acted on)" in p
               for p in json.loads(r.out)["problems"]), r.out
    for args in (("quarantine", "show", d, "x"), ("quarantine", "restore", d, "x", "--apply"), ("verify", d)):
        clean(cli(*args), args)
    assert tree_digest(d) == before  # the file it describes was not moved back on the line's word


@FEW
@given(key=st.sampled_from(["time", "source", "offset", "length", "sha256", "evidence", "reason"]),
       value=st.sampled_from(BAD))
def test_quarantine_lines_fuzz(cli, tmp_path, gapped, key, value):
    if key in ("evidence", "source") and value == "x":
        value = 5  # "x" is a plain name: a valid source
    _quarantine_case(cli, tmp_path, gapped, key, value)


WDOC = {"schema_version": 1, "checkpoint_id": "w1", "workflow_name": "n", "workflow_inputs": {},
        "execution_waves": [[]], "completed_waves": 0, "context": {}, "created_at": "2026-11-21T10:00:00.000000Z",
        "pause_metadata": None}


@FEW
@given(key=st.sampled_from(sorted(WDOC)), value=st.sampled_from(BAD))
def test_workflow_documents_fuzz(cli, tmp_path, key, value):
    if key == "pause_metadata" and value is None or key == "execution_waves" and value == []:
        value = "x"
    d = str(tmp_path / "wf")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "workflow-checkpoints"))
    path = os.path.join(d, "workflow-checkpoints", "w1.json")
    with open(path, "w") as f:
        f.write(json.dumps(dict(WDOC, **{key: value})))
    r = cli("workflow", "list", d, "--json")
    clean(r, "list")
    assert r.code == 3 and json.loads(r.out)["problems"][0]["file"] == "w1.json"
    for args in (("workflow", "show", d, "w1"), ("workflow", "cleanup", d, "--apply")):
        clean(cli(*args), args)
    assert os.path.exists(path)  # a document that is not one is never judged stale and deleted


SID = "1860aabdf4444c9ca26cda431ac886de"


@FEW
@given(line=st.integers(0, 2), key=st.sampled_from(["session_id", "ts", "event", "data"]), value=st.sampled_from(BAD))
def test_substrat_events_fuzz(cli, tmp_path, line, key, value):
    root = str(tmp_path / "s")
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(os.path.join(EXAMPLES, "agents-crashed"), root)
    path = os.path.join(root, "agents", SID, "events.jsonl")
    lines = open(path, "rb").read().splitlines()
    e = json.loads(lines[line])
    if key == "data" and isinstance(value, dict) or key == "data" and value is None:
        value = {"agent_id": "\ud800"}
    if key == "event" and isinstance(value, str) and value != "\ud800":
        value = 5  # an event name walctl does not know is Substrat's business: not a bad line
    e[key] = value
    lines[line] = json.dumps(e).encode()
    with open(path, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    r = cli("agents", "verify", root, "--json")
    clean(r, "verify")
    reasons = [f["reason"] for f in json.loads(r.out)["findings"]]
    assert any(x.startswith(f"line {line + 1}: ") for x in reasons), reasons
    for args in (("agents", "tree", root), ("agents", "pending", root), ("agents", "recover", root)):
        clean(cli(*args), args)


@FEW
@given(line=st.integers(0, 6), key=st.sampled_from(["v", "ts", "type", "task_id", "step_index", "base_sha", "sha"]),
       value=st.sampled_from(BAD))
def test_task_log_entries_fuzz(cli, tmp_path, line, key, value):
    src = os.path.join(EXAMPLES, "tasks", f"{TID}.wal")
    lines = open(src, "rb").read().splitlines()[:7]
    e = json.loads(lines[line])
    e[key] = value
    lines[line] = json.dumps(e).encode()
    path = str(tmp_path / f"{TID}.wal")
    with open(path, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    before = open(path, "rb").read()
    for args in (("tasklog", "verify", path, "--json"), ("tasklog", "inspect", path), ("tasklog", "replay", path),
                 ("tasklog", "resume", path, "--apply")):
        clean(cli(*args), args)
    assert open(path, "rb").read() == before or key in ("step_index", "sha", "base_sha")  # resume may cut a tail


# ---- JSON-lines input, under the operator's locales --------------------------------------------------

LOCALES = [{"LC_ALL": "C.UTF-8"}, {"LC_ALL": "C"}, {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}]


def walctl(args, stdin: bytes, env: dict):
    full = dict(os.environ, **env)
    full.pop("WALCTL_DEBUG", None)
    args = [a if isinstance(a, bytes) else str(a) for a in args]
    return subprocess.run([sys.executable, "-m", "walctl", *args], input=stdin, capture_output=True,
                          env=full, timeout=60)


@pytest.mark.parametrize("env", LOCALES, ids=["C.UTF-8", "C", "PYTHONIOENCODING"])
def test_stdin_bytes_that_are_not_utf8_name_the_line_under_every_locale(tmp_path, env):
    good = b'{"type":"REMEMBER","id":"m","payload":"ok"}\n'
    r = walctl(["write", tmp_path / "w"], b"\n" + b'{"type":"REMEMBER","id":"m","payload":"\xff"}\n' + good, env)
    assert r.returncode == 2 and b"Traceback" not in r.stderr
    assert r.stderr.decode().strip() == ("walctl: error: stdin line 2: not UTF-8 text (byte 0xff at offset 39); "
                                         "nothing was written")
    assert not (tmp_path / "w").exists()
    r = walctl(["write", tmp_path / "w"], good + b'{"type":"REMEMBER","id":"\\ud800","payload":"x"}\n', env)
    assert r.returncode == 2 and "stdin line 2: a string holds a lone surrogate escape" in r.stderr.decode()
    assert "the records before it were written" in r.stderr.decode()
    log = tmp_path / f"{TID}.wal"
    r = walctl(["tasklog", "append", log], b'{"type":"InstructionStart","instruction":"go"}\n'
               b'{"type":"StepStart","step_index":0,"note":"\xfe"}\n', env)
    assert r.returncode == 2 and r.stderr.decode().strip() == (
        "walctl: error: stdin line 2 is not JSON text: not UTF-8 text (byte 0xfe at offset 43); nothing was written")
    assert not log.exists()
    r = walctl(["tasklog", "append", log, "--entry", '{"type":"InstructionStart","instruction":"go\udcff"}'
                .encode("utf-8", "surrogateescape")], b"", env)
    assert r.returncode == 2 and "entry 1 is not JSON text: a string holds a lone surrogate" in r.stderr.decode()
    r = walctl(["import", tmp_path / "i", "--format", "jsonl"],
               b'{"sequence":1,"type_ordinal":0,"memory_id_hex":null,"timestamp_ms":1,"payload_hex":""}\n', env)
    assert r.returncode == 2 and "line 1" in r.stderr.decode() and "memory_id_hex null is not a string" in \
        r.stderr.decode() and "None" not in r.stderr.decode()


@pytest.mark.parametrize("env", LOCALES[:2], ids=["C.UTF-8", "C"])
def test_ledger_and_manifest_readers_under_both_locales(tmp_path, gapped, archived, env):
    d = str(tmp_path / "wal")
    shutil.copytree(gapped, d)
    with open(os.path.join(d, ".walctl", "ledger.jsonl"), "ab") as f:
        f.write(_ledger_line(dict(ACCEPT, reason="\ud800")))
    r = walctl(["verify", d], b"", env)
    assert r.returncode == 3 and b"Traceback" not in r.stderr and b"internal error" not in r.stderr
    assert "a string holds a lone surrogate escape" in r.stdout.decode()
    a = str(tmp_path / "a")
    shutil.copytree(os.path.join(archived, "a"), a)
    mp = os.path.join(a, "n", "MANIFEST.json")
    doc = json.load(open(mp))
    doc["objects"][0]["last_sequence" if doc["objects"][0]["kind"] != "checkpoints" else "wal_sequence"] = None
    with open(mp, "w") as f:
        json.dump(doc, f)
    r = walctl(["archive", "list", "file://" + a], b"", env)
    assert r.returncode == 0 and b"None" not in r.stdout + r.stderr and b"MANIFEST.json does not parse (object 1" \
        in r.stderr and b" 1..1" in r.stdout


@FEW
@given(key=st.sampled_from(["type", "id", "payload", "timestamp_ms", "data", "timestamp"]), value=st.sampled_from(BAD))
def test_write_input_fuzz(cli, tmp_path, monkeypatch, key, value):
    for fmt, doc in (("v2", {"type": "REMEMBER", "id": "m", "payload": "p"}),
                     ("segments", {"operation": "memory_add", "data": {"x": 1}})):
        d = tmp_path / f"w-{fmt}"
        shutil.rmtree(d, ignore_errors=True)
        line = json.dumps(dict(doc, **{key: value})).encode() + b"\n"
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(line)))
        r = cli("write", d, "--format", fmt)
        clean(r, fmt)
        if r.code != 0:
            assert r.code == 2 and r.err.startswith("walctl: error: stdin line 1: ") and not d.exists(), r.err
