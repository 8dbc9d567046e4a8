"""walctl map: the regions are verify's findings, placed in the right chunk at the right position; the
text fits the terminal exactly; piped output is plain; the SVG is well-formed, escaped, and shows them."""
from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET

import pytest

from conftest import flip_bit, make_chunk, record_offsets, tree_digest, truncate_to, write_dir, zero_fill

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
EXAMPLE_DIRS = ("wal-healthy", "wal-torn-tail", "wal-midlog-corrupt", "wal-sequence-gap", "wal-legacy-v1",
                "segments", "checkpoints", "tasks")
ANSI = re.compile(r"\x1b\[")
KEYS = ("class", "exit_code", "file", "offset", "end_offset", "sequence_range", "reason")


def _regions_match_findings(cli, path):
    v = cli("verify", "--json", path)
    m = cli("map", "--json", path)
    assert m.code == v.code
    doc = m.json()
    assert doc["schema"] == "walctl.map/2"
    findings = v.json()["paths"][0]["findings"]
    regions = doc["regions"]
    assert [{k: r[k] for k in KEYS} for r in regions] == [{k: f[k] for k in KEYS} for f in findings]
    names = [c["file"] for c in doc["chunks"]]
    for r in regions:  # each region sits on the row of its file
        assert r["chunk"] == (names.index(r["file"]) if r["file"] in names else None)
    return doc


@pytest.mark.parametrize("name", EXAMPLE_DIRS)
def test_map_regions_match_verify_findings_on_every_bundled_example(cli, name):
    doc = _regions_match_findings(cli, os.path.join(EXAMPLES, name))
    if name == "wal-midlog-corrupt":
        (r,) = doc["regions"]
        assert (r["mark"], r["file"], r["offset"], r["end_offset"], r["lost_sequence_range"]) == \
            ("mid-log", "wal-000000.bin", 744, 872, [10, 10])
    if name == "wal-torn-tail":
        (r,) = doc["regions"]
        assert (r["mark"], r["file"], r["offset"], r["end_offset"], r["chunk"]) == ("torn", "wal-000001.bin", 2800, 2829, 1)
    if name == "wal-sequence-gap":
        (g,) = doc["gaps"]
        assert g["missing"] == [41, 80] and g["absent_indices"] == [1, 1] and g["after_chunk"] == 0
    if name == "wal-healthy":
        assert doc["regions"] == [] and doc["gaps"] == [] and doc["exit_code"] == 0


def _damaged_dir(tmp_path):
    """Chunk 0: a bit flip in record 3's payload (mid-log); chunk 1 missing (a gap of 5..8);
    chunk 2: torn mid-record; every sequence and offset known."""
    c0 = make_chunk(range(1, 5))
    offs0 = record_offsets(c0)
    c0 = flip_bit(c0, offs0[2] + 45)
    c2 = make_chunk(range(9, 13))
    offs2 = record_offsets(c2)
    c2 = truncate_to(c2, offs2[3] + 20)
    d = write_dir(tmp_path / "wal", {0: c0, 2: c2})
    return d, offs0, offs2


def test_generated_damage_is_placed_in_the_right_chunk_at_the_right_offsets(cli, tmp_path):
    d, offs0, offs2 = _damaged_dir(tmp_path)
    doc = _regions_match_findings(cli, d)
    marks = [(r["mark"], r["file"], r["offset"], r["end_offset"]) for r in doc["regions"]]
    assert marks == [("mid-log", "wal-000000.bin", offs0[2], offs0[3]),
                     ("gap", "wal-000002.bin", 8, None),
                     ("torn", "wal-000002.bin", offs2[3], offs2[3] + 20)]
    assert doc["regions"][0]["lost_sequence_range"] == [3, 3]
    assert doc["regions"][1]["missing"] == [5, 8]
    assert doc["gaps"] == [{"after_chunk": 0, "missing": [5, 8], "absent_indices": [1, 1], "pieces": [],
                            "region": 1, "absent_regions": []}]
    assert doc["exit_code"] == 3


def test_zero_filled_tail_and_bit_flip_marks(cli, tmp_path):
    c = make_chunk(range(1, 9))
    size = len(c)
    d = write_dir(tmp_path / "wal", {0: zero_fill(c, 4096)})
    doc = _regions_match_findings(cli, d)
    (r,) = doc["regions"]
    assert (r["mark"], r["offset"], r["end_offset"], r["tail_kind"]) == ("zero-fill", size, size + 4096, "zero-fill")


def test_a_quarantined_chunk_is_listed_in_its_gap_with_its_sequences(cli, tmp_path):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 5)), 1: make_chunk(range(5, 9)),
                                     2: make_chunk(range(9, 12))})
    r = cli("quarantine", "move", d, "wal-000001.bin", "--reason", "bit rot", "--apply")
    assert r.code == 0, r.err
    doc = _regions_match_findings(cli, d)
    (piece,) = doc["pieces"]
    assert (piece["name"], piece["action"], piece["source"], piece["kind"], piece["sequence_range"],
            piece["sequence_checked"]) == ("wal-000001.bin", "move", "wal-000001.bin", "chunk", [5, 8], True)
    (gap,) = doc["gaps"]
    assert gap["missing"] == [5, 8] and gap["absent_indices"] == [1, 1] and gap["pieces"] == [0]
    text = cli("map", "--width", "100", d).out
    assert "gap: seq 5..8 missing; chunk index 1 absent; set aside: wal-000001.bin (move)" in text
    assert "wal-000001.bin: move, was wal-000001.bin, seq 5..8" in text


def test_a_repair_cut_is_listed_with_its_offsets_and_claimed_sequence(cli, tmp_path):
    c = make_chunk(range(1, 5))
    offs = record_offsets(c)
    d = write_dir(tmp_path / "wal", {0: truncate_to(c, offs[3] + 29)})
    assert cli("repair", d, "--apply").code == 0
    doc = cli("map", "--json", d).json()
    (piece,) = doc["pieces"]
    assert (piece["kind"], piece["source"], piece["offset"], piece["length"], piece["sequence_range"],
            piece["sequence_checked"]) == ("cut", "wal-000000.bin", offs[3], 29, [4, 4], False)
    assert doc["regions"] == [] and doc["exit_code"] == 0


def test_bad_manifest_lines_are_reported_and_never_followed(cli, tmp_path):
    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 3))})
    os.makedirs(os.path.join(d, ".quarantine"))
    sha = "0" * 64
    lines = [{"action": "move", "source": "../../etc/passwd", "offset": 0, "length": 1, "evidence": ".quarantine/x",
              "sha256": sha},
             {"action": "move", "source": "wal-000009.bin", "offset": -5, "length": 1, "evidence": ".quarantine/y",
              "sha256": sha},
             {"action": "move", "source": "wal-000009.bin", "offset": 0, "length": 1, "evidence": ".quarantine/../z",
              "sha256": sha}]
    with open(os.path.join(d, ".quarantine", "MANIFEST.jsonl"), "w") as f:
        f.write("".join(json.dumps(x) + "\n" for x in lines))
    before = tree_digest(d)
    doc = cli("map", "--json", d).json()
    assert doc["pieces"] == []
    assert [p.split(":")[0] for p in doc["problems"]] == ["MANIFEST.jsonl line 1", "MANIFEST.jsonl line 2",
                                                          "MANIFEST.jsonl line 3"]
    assert "source" in doc["problems"][0] and "offset -5" in doc["problems"][1]
    assert tree_digest(d) == before


@pytest.mark.parametrize("width", [80, 120, 200])
def test_text_fits_the_terminal_exactly_and_bars_put_damage_at_its_position(cli, tmp_path, width, monkeypatch):
    d, offs0, offs2 = _damaged_dir(tmp_path)
    monkeypatch.setenv("COLUMNS", str(width))
    r = cli("map", d)
    assert r.code == 3
    lines = r.out.splitlines()
    assert all(len(line) <= width for line in lines), [len(x) for x in lines]
    rows = [line for line in lines if line.startswith("wal-")]
    assert len(rows) == 2 and all(len(x) == width for x in rows)
    bar0 = rows[0][rows[0].index("|") + 1:-1]
    size0 = os.path.getsize(os.path.join(d, "wal-000000.bin"))
    cells = len(bar0)
    first_m = offs0[2] * cells // size0
    assert bar0[first_m] == "M" and bar0.count("M") >= 1
    assert set(bar0) == {"=", "M"} and bar0.index("M") == first_m
    bar2 = rows[1][rows[1].index("|") + 1:-1]
    size2 = os.path.getsize(os.path.join(d, "wal-000002.bin"))
    assert bar2.index("G") == 8 * len(bar2) // size2 and bar2.count("G") == 1
    assert bar2.index("T") == offs2[3] * len(bar2) // size2 and bar2.endswith("T")
    assert not ANSI.search(r.out)  # piped: plain characters
    assert "legend:" in r.out and "M mid-log damage" in r.out


def test_colour_only_when_asked_and_never_with_no_color(tmp_path, monkeypatch):
    from walctl.cli.map_text import render_map
    from walctl.ops.damagemap import damage_map

    d, _, _ = _damaged_dir(tmp_path)
    m = damage_map(d)
    import io

    plain = render_map(m, 80, color=False)
    out = io.StringIO()
    from walctl.cli import render

    stream = render.SafeStream(out)
    for line in render_map(m, 80, color=True):
        stream.write(line + "\n")
    coloured = out.getvalue().splitlines()
    assert not any(ANSI.search(x) for x in plain) and any(ANSI.search(x) for x in coloured)
    assert [re.sub(r"\x1b\[[0-9;]*m", "", x) for x in coloured] == plain
    monkeypatch.setenv("NO_COLOR", "1")
    assert render.use_color() is False


def test_verify_map_shows_the_same_map_after_the_report(cli, tmp_path, monkeypatch):
    d, _, _ = _damaged_dir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    v = cli("verify", "--map", d)
    m = cli("map", d)
    assert v.code == m.code == 3
    assert v.out.endswith(m.out)
    j = cli("verify", "--map", "--json", d).json()
    assert [r["offset"] for r in j["paths"][0]["map"]["regions"]] == [f["offset"] for f in j["paths"][0]["findings"]]


def test_svg_is_well_formed_shows_every_region_and_is_never_overwritten(cli, tmp_path):
    d, offs0, offs2 = _damaged_dir(tmp_path)
    # a hostile reason in the manifest must come out escaped
    os.makedirs(os.path.join(d, ".quarantine"))
    with open(os.path.join(d, ".quarantine", "MANIFEST.jsonl"), "w") as f:
        f.write(json.dumps({"action": "compact-archive", "source": "wal-000001.bin", "offset": 0, "length": 10,
                            "evidence": "/archive/wal-000001.bin", "reason": "<script>alert(1)</script>\x1b[2J",
                            "time": "2026-01-01T00:00:00Z", "sha256": "0" * 64}) + "\n")
    before = tree_digest(d)
    out = tmp_path / "map.svg"
    r = cli("map", d, "--svg", out)
    assert r.code == 3 and out.exists()
    assert tree_digest(d) == before  # only the SVG was written, outside the directory
    text = out.read_text()
    assert "<script" not in text and "\x1b" not in text
    root = ET.fromstring(text.encode())
    ns = {"s": "http://www.w3.org/2000/svg"}
    regions = root.findall(".//s:rect[@class='region']", ns)
    assert [(x.get("data-mark"), x.get("data-offset"), x.get("data-end")) for x in regions] == [
        ("mid-log", str(offs0[2]), str(offs0[3])), ("gap", "8", "None"), ("torn", str(offs2[3]), str(offs2[3] + 20))]
    titles = [x.find("s:title", ns).text for x in regions]
    assert f"offset {offs0[2]}..{offs0[3]}" in titles[0] and "payload CRC mismatch" in titles[0]
    assert "&lt;script&gt;" in text
    again = cli("map", d, "--svg", out)
    assert again.code == 7 and "already exists" in again.err
    assert out.read_text() == text


def test_map_of_a_missing_path_is_exit_6_with_one_json_document(cli, tmp_path):
    r = cli("map", "--json", tmp_path / "nope")
    doc = r.json()
    assert r.code == 6 and doc["exit_code"] == 6 and doc["schema"] == "walctl.error/1"
    assert doc["error"]["reason"] == "not-found" and doc["error"]["path"] == str(tmp_path / "nope")


def test_svg_refusal_with_json_is_still_one_document(cli, tmp_path):
    d, _, _ = _damaged_dir(tmp_path)
    out = tmp_path / "taken.svg"
    out.write_text("mine")
    r = cli("map", "--json", d, "--svg", out)
    doc = r.json()
    assert r.code == 7 and doc["exit_code"] == 7 and "already exists" in doc["error"]["reason"]
    assert len(doc["regions"]) == 3 and out.read_text() == "mine"


def test_quarantined_chunks_beyond_the_scan_budget_give_their_first_sequence_only(tmp_path, monkeypatch):
    from walctl.ops.wal import pieces
    from walctl.ops.damagemap import damage_map
    from walctl.ops.wal.quarantine import move

    d = write_dir(tmp_path / "wal", {0: make_chunk(range(1, 4)), 1: make_chunk(range(4, 7)),
                                     2: make_chunk(range(7, 10)), 3: make_chunk(range(10, 12))})
    move(d, "wal-000001.bin", reason="a", apply=True)
    move(d, "wal-000002.bin", reason="b", apply=True)
    monkeypatch.setattr(pieces, "SCAN_BUDGET_BYTES", os.path.getsize(os.path.join(d, ".quarantine", "wal-000001.bin")))
    m = damage_map(d)
    got = [(p.name, p.first_sequence, p.last_sequence, p.sequence_checked) for p in m.pieces]
    assert got == [("wal-000001.bin", 4, 6, True), ("wal-000002.bin", 7, None, False)]
    (gap,) = m.gaps
    assert gap.missing == (4, 9) and gap.absent_indices == (1, 2) and gap.pieces == (0, 1)


@pytest.mark.parametrize("case", ["payload-bitflip-midlog", "torn-tail-mid-payload", "wrong-file-magic"])
def test_map_regions_match_verify_on_the_java_damaged_vectors(cli, case):
    from conftest import case_dir

    doc = _regions_match_findings(cli, case_dir(case))
    assert doc["regions"], case


def test_undecodable_payload_and_anomaly_marks(cli, tmp_path):
    from walctl.format.v2 import encode_file_header, encode_record
    from conftest import make_record

    r1 = make_record(1)
    bad = encode_record(2, 0, b"m", 1, b"\x78\x9c\xff\xff\xff\xff", 1)
    odd = make_record(3, type_ordinal=40)  # unknown type: an anomaly, still valid
    d = write_dir(tmp_path / "wal", {0: encode_file_header() + r1 + bad + odd})
    doc = _regions_match_findings(cli, d)
    marks = [(r["mark"], r["offset"]) for r in doc["regions"]]
    assert marks == [("undecodable", 8 + len(r1)), ("anomaly", 8 + len(r1) + len(bad))]
    text = cli("map", "--width", "80", d).out
    row = next(line for line in text.splitlines() if line.startswith("wal-000000.bin"))
    assert "U" in row and "!" in row and row.index("U") < row.index("!")


def test_svg_of_every_mark_and_of_a_name_that_is_not_utf8(tmp_path, cli):
    """Every mark has its colour (a checkpoint directory's regions are `damaged`), and a file name that is
    not UTF-8 is escaped, not a crash."""
    import shutil
    import xml.dom.minidom

    ex = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
    ck = tmp_path / "ck"
    shutil.copytree(os.path.join(ex, "checkpoints"), ck)
    r = cli("map", str(ck), "--svg", str(tmp_path / "ck.svg"))
    assert r.code in (0, 3) and "internal" not in r.err
    xml.dom.minidom.parse(str(tmp_path / "ck.svg"))
    wal = tmp_path / "wal"
    shutil.copytree(os.path.join(ex, "wal-torn-tail"), wal)
    open(os.fsencode(str(wal)) + b"/\xff\xfebad", "wb").close()
    r = cli("map", str(wal), "--svg", str(tmp_path / "w.svg"))
    assert r.code == 1 and "internal" not in r.err
    text = open(tmp_path / "w.svg", encoding="utf-8").read()
    assert "\\udcff\\udcfebad" in text
    xml.dom.minidom.parse(str(tmp_path / "w.svg"))
