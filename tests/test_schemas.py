"""Documented JSON: every --json document and --jsonl record that walctl prints validates against the JSON
Schema it ships (walctl/schemas/), every schema name in the code has a file, and `walctl schema` serves them."""
from __future__ import annotations

import copy
import json
import os
import re

import pytest

jsonschema = pytest.importorskip("jsonschema")

import json_cases  # noqa: E402
import json_damage  # noqa: E402
from walctl import schemas  # noqa: E402
from walctl.cli import run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """(label, schema name, documents) for every case, run once, in order (later cases use earlier output)."""
    ws = str(tmp_path_factory.mktemp("ws"))
    json_cases.workspace(ws)
    json_damage.workspace(ws)
    got = []
    for label, argv, what, name in json_cases.cases(ws) + json_damage.cases(ws):
        text = json_cases.run_case(run, ws, argv)
        text.encode("utf-8")  # strict: no unpaired surrogate (a name that is not UTF-8) in any document
        got.append((label, name, what, json_cases.documents(what, text)))
    return got


def _validator(name):
    schema = schemas.load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_every_schema_file_is_a_valid_draft_2020_12_schema_named_after_itself():
    assert len(schemas.names()) >= 36
    for name in schemas.names():
        s = schemas.load(name)
        assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema", name
        jsonschema.Draft202012Validator.check_schema(s)
        if "schema" in s.get("properties", {}):
            assert s["properties"]["schema"]["const"] == name
            assert "schema" in s["required"] and "walctl_version" in s["required"]


def test_every_schema_name_in_the_code_has_a_schema_file():
    used = set()
    for base, _, files in os.walk(os.path.join(ROOT, "walctl")):
        for f in files:
            if f.endswith(".py"):
                text = open(os.path.join(base, f), encoding="utf-8").read()
                used |= set(re.findall(r'"(walctl\.[a-z0-9-]+/\d+)"', text))
    assert len(used) >= 34
    missing = used - set(schemas.names())
    assert not missing, f"no schema file for {sorted(missing)}"


def test_real_output_of_every_command_validates(outputs):
    seen = set()
    for label, name, what, docs in outputs:
        assert docs, f"{label}: printed nothing"
        v = _validator(name)
        for doc in docs:
            if what == "doc":
                assert doc["schema"] == name, label
            errors = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
            assert not errors, f"{label}: {errors[0].message} at {list(errors[0].path)}"
        seen.add(name)
    newest = {schemas.resolve(n.rpartition("/")[0]) for n in schemas.names()}
    assert seen == newest, f"schemas no case exercises: {sorted(newest - seen)}"
    assert len(outputs) >= 150 and sum(len(d) for *_, d in outputs) >= 400


def test_a_file_name_that_is_not_utf8_is_readable_text_with_its_bytes_beside_it(outputs):
    """A real file named b"wal-\\xff\\xfe.bin" in a WAL directory (tests/json_damage.py): verify and map name
    it as text with U+FFFD and give its bytes in hex in `file_hex`; nothing else gains a _hex key."""
    docs = {label: d for label, n, w, d in outputs}
    found = [f for f in docs["verify d-names"][0]["paths"][0]["findings"] if "file_hex" in f]
    assert [(f["file"], bytes.fromhex(f["file_hex"]), f["class"]) for f in found] == \
        [("wal-\ufffd\ufffd.bin", json_damage.NOT_UTF8, "foreign-file")]
    regions = [r for r in docs["map d-names"][0]["regions"] if "file_hex" in r]
    assert [bytes.fromhex(r["file_hex"]) for r in regions] == [json_damage.NOT_UTF8]
    assert "_hex\"" not in json.dumps(docs["verify d-torn"]).replace("memory_id_hex", "").replace("payload_hex", "")


def test_stored_and_computed_are_text_whatever_was_checked(outputs):
    """walctl.verify/2 and the other /2 documents: one type per field; value_kind says what the text is."""
    kinds = {}

    def walk(o):
        if isinstance(o, dict):
            if "value_kind" in o and "stored" in o:
                assert all(o[k] is None or isinstance(o[k], str) for k in ("stored", "computed")), o
                assert (o["value_kind"] is None) == (o["stored"] is None and o["computed"] is None), o
                if o["value_kind"]:
                    kinds.setdefault(o["value_kind"], o["stored"])
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    for label, name, what, docs in outputs:
        walk(docs)
    assert {"crc32", "sha256", "size", "magic"} <= set(kinds), kinds
    assert len(kinds["crc32"]) == 8 and len(kinds["sha256"]) == 64 and kinds["size"].isdigit()


def test_the_schemas_reject_what_breaks_a_consumer(outputs):
    verify_doc = next(d[0] for label, n, w, d in outputs if label == "verify corrupt")
    v = _validator("walctl.verify/2")
    assert verify_doc["exit_code"] == 3 and not list(v.iter_errors(verify_doc))
    for mutate in (lambda d: d.update(exit_code="3"),                     # retyped
                   lambda d: d.pop("paths"),                               # removed
                   lambda d: d.update(schema="walctl.verify/1"),           # another version
                   lambda d: d["paths"][0].update(kind="spector-v3-dir"),  # an undocumented kind
                   lambda d: d["paths"][0]["findings"][0].pop("reason"),   # a finding without its reason
                   lambda d: d["paths"][0]["findings"][0].update(severity="fatal"),
                   lambda d: d["paths"][0]["findings"][0].update(stored=1234),             # a CRC as an integer
                   lambda d: d["paths"][0]["findings"][0].update(stored="1234", value_kind=None)):  # unsaid
        broken = copy.deepcopy(verify_doc)
        mutate(broken)
        assert list(v.iter_errors(broken)), mutate
    record = next(d[0] for label, n, w, d in outputs if label == "inspect v2")
    rv = _validator("walctl.record/1")
    assert not list(rv.iter_errors(dict(record, type=41)))  # an unknown type is its ordinal
    assert list(rv.iter_errors(dict(record, sequence="1")))


def test_verify_kinds_are_the_codes_kinds_and_format_md_lists_them_all():
    from walctl.ops.wal import verify

    kinds = {getattr(verify, k) for k in dir(verify) if k.startswith("KIND_")}
    enum = schemas.load("walctl.verify/2")["properties"]["paths"]["items"]["properties"]["kind"]["enum"]
    assert set(enum) == kinds | {None}
    text = open(os.path.join(ROOT, "docs", "format.md"), encoding="utf-8").read()
    table = text[text.index("<!-- verify-kinds -->"):].split("\n\n")[1]
    assert set(re.findall(r"^\| `([a-z0-9-]+)` \|", table, re.M)) == kinds


def test_json_md_indexes_every_schema():
    text = open(os.path.join(ROOT, "docs", "json.md"), encoding="utf-8").read()
    for name in schemas.names():
        assert f"`{name}`" in text, name
    assert "bumps" in text  # the versioning rule


def test_walctl_schema_lists_and_prints(capsys):
    assert run(["schema"]) == 0
    listed = capsys.readouterr().out
    assert all(n in listed for n in schemas.names())
    for query in ("walctl.verify/2", "walctl.verify", "verify"):
        assert run(["schema", query]) == 0
        assert json.loads(capsys.readouterr().out)["properties"]["schema"]["const"] == "walctl.verify/2"
    assert run(["schema", "walctl.verify/1"]) == 0  # the earlier version stays served (docs/json.md)
    assert json.loads(capsys.readouterr().out)["properties"]["schema"]["const"] == "walctl.verify/1"
    assert run(["schema", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "no schema named 'nope'" in captured.err
