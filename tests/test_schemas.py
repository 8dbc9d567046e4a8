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
from walctl import schemas  # noqa: E402
from walctl.cli import run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """(label, schema name, documents) for every case, run once, in order (later cases use earlier output)."""
    ws = str(tmp_path_factory.mktemp("ws"))
    json_cases.workspace(ws)
    got = []
    for label, argv, what, name in json_cases.cases(ws):
        text = json_cases.run_case(run, ws, argv)
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
    assert seen == set(schemas.names()), f"schemas no case exercises: {sorted(set(schemas.names()) - seen)}"


def test_the_schemas_reject_what_breaks_a_consumer(outputs):
    verify_doc = next(d[0] for label, n, w, d in outputs if label == "verify corrupt")
    v = _validator("walctl.verify/1")
    assert verify_doc["exit_code"] == 3 and not list(v.iter_errors(verify_doc))
    for mutate in (lambda d: d.update(exit_code="3"),                     # retyped
                   lambda d: d.pop("paths"),                               # removed
                   lambda d: d.update(schema="walctl.verify/2"),           # another version
                   lambda d: d["paths"][0].update(kind="spector-v3-dir"),  # an undocumented kind
                   lambda d: d["paths"][0]["findings"][0].pop("reason"),   # a finding without its reason
                   lambda d: d["paths"][0]["findings"][0].update(severity="fatal")):
        broken = copy.deepcopy(verify_doc)
        mutate(broken)
        assert list(v.iter_errors(broken)), mutate
    record = next(d[0] for label, n, w, d in outputs if label == "inspect v2")
    rv = _validator("walctl.record/1")
    assert not list(rv.iter_errors(dict(record, type=41)))  # an unknown type is its ordinal
    assert list(rv.iter_errors(dict(record, sequence="1")))


def test_verify_kinds_are_the_codes_kinds_and_format_md_lists_them_all():
    from walctl.ops import verify

    kinds = {getattr(verify, k) for k in dir(verify) if k.startswith("KIND_")}
    enum = schemas.load("walctl.verify/1")["properties"]["paths"]["items"]["properties"]["kind"]["enum"]
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
    for query in ("walctl.verify/1", "walctl.verify", "verify"):
        assert run(["schema", query]) == 0
        assert json.loads(capsys.readouterr().out)["properties"]["schema"]["const"] == "walctl.verify/1"
    assert run(["schema", "nope"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "no schema named 'nope'" in captured.err
