"""Issue #24, "Anomalies the reference reader cannot survive": a CRC-valid record typed 16..255 stays an
anomaly (spec rule 3: exit 0, 3 under --strict), and its words say what it means for the operator."""
from __future__ import annotations

import json

import pytest

from conftest import make_record, write_dir
from walctl.format.v2 import encode_file_header


@pytest.mark.parametrize("ordinal", [16, 200, 255])
def test_unknown_type_words_and_strict_exit(tmp_path, cli, ordinal):
    d = write_dir(tmp_path / "d", {0: encode_file_header() + make_record(1) + make_record(2, type_ordinal=ordinal)
                                   + make_record(3)})
    r = cli("verify", d, "--json")
    assert r.code == 0
    doc = json.loads(r.out)
    (f,) = doc["paths"][0]["findings"]
    assert (f["class"], f["code"], f["severity"], f["sequence_range"], f["offset"]) == \
        ("anomaly", "unknown-type", "warning", [2, 2], 8 + len(make_record(1)))
    assert f"type ordinal {ordinal} is outside 0..15" in f["reason"]
    assert "the reference Java reader cannot open this directory at all" in f["reason"]
    assert doc["paths"][0]["summary"]["records"] == 3  # walctl still reads every record

    strict = cli("verify", d, "--strict")
    assert strict.code == 3
    assert "reference Java reader cannot open this directory" in strict.out
    # the strict reasons name it, in --help and in the man page
    assert "type ordinal 16..255" in " ".join(cli("verify", "--help").out.split())


def test_strict_help_and_man_page_list_the_unknown_type():
    import os

    man = open(os.path.join(os.path.dirname(__file__), "..", "man", "walctl-verify.1"), encoding="utf-8").read()
    strict = man.split(".B \\-\\-strict", 1)[1].split(".TP", 1)[0]
    assert "type ordinal 16..255" in strict and "reference Java reader cannot open" in strict
