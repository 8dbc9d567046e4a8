"""import: export/import round trips in every form, idempotence, gaps, divergence, bad streams, and a
follower killed at any point that resumes without loss or duplication."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import HEALTHY_CASES, case_dir, load_expected, make_chunk, write_dir
from walctl.errors import WalctlError
from walctl.format import events as ev
from walctl.ops.wal.importer import import_stream, read_stream
from walctl.ops.wal.replay import ReplayOptions, replay

FORMS = (ev.FORM_JSONL, ev.FORM_MSGPACK, ev.FORM_SYNC)


def export(path, form=ev.FORM_JSONL, **kw) -> bytes:
    got: list[bytes] = []
    replay(str(path), got.extend, ReplayOptions(form=form, **kw))
    return b"".join(got)


def apply(directory, data: bytes, **kw):
    form, items = read_stream(io.BufferedReader(io.BytesIO(data)))
    return import_stream(str(directory), items, form, **kw)


def events_of(path) -> list[tuple]:
    return [(e["sequence"], e["type_ordinal"], e["memory_id_hex"], e["timestamp_ms"], e["payload_hex"])
            for e in map(json.loads, export(path).splitlines())]


def chunk_files(path) -> dict:
    return {n: open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path)) if n.endswith(".bin")}


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", HEALTHY_CASES)
def test_export_then_import_reproduces_the_source_exactly(tmp_path, case, form):
    dst = tmp_path / "dst"
    rep = apply(dst, export(case_dir(case), form))
    want = [(e["sequence"], e["type_ordinal"], e["memory_id_utf8_hex"], e["timestamp_ms"], e["payload_hex"])
            for e in load_expected(case)["replay_from_disk"]]
    assert events_of(dst) == want
    assert (rep.applied, rep.hwm_before, rep.hwm_after, rep.skipped_at_or_below_hwm) == (len(want), 0, want[-1][0], 0)
    # re-import is a no-op: nothing applied, chunk bytes unchanged
    before = chunk_files(dst)
    again = apply(dst, export(case_dir(case), form))
    assert (again.applied, again.skipped_at_or_below_hwm, again.hwm_after) == (0, len(want), want[-1][0])
    assert chunk_files(dst) == before


def test_imported_v2_is_what_java_would_have_written_for_the_same_events(tmp_path):
    """Same events, same writer settings as the Java run: the imported chunk is byte-identical."""
    dst = tmp_path / "dst"
    apply(dst, export(case_dir("basic"), ev.FORM_SYNC), sync="none")
    assert chunk_files(dst) == chunk_files(case_dir("basic"))


def test_incremental_import_continues_exactly(tmp_path):
    dst = tmp_path / "dst"
    apply(dst, export(case_dir("rolled"), to=33))
    rep = apply(dst, export(case_dir("rolled"), after=30))  # overlaps 31..33, checks 33 against local
    assert (rep.skipped_at_or_below_hwm, rep.applied, rep.checked_overlap, rep.hwm_after) == (3, 37, True, 70)
    assert events_of(dst) == events_of(case_dir("rolled"))


def test_gap_is_refused_and_what_came_before_stays(tmp_path, cli):
    dst = tmp_path / "dst"
    apply(dst, export(case_dir("rolled"), to=10))
    stream = export(case_dir("rolled"), to=12) + export(case_dir("rolled"), after=20, to=25)
    with pytest.raises(WalctlError) as e:
        apply(dst, stream)
    assert e.value.exit_code == 4 and "13..20 are missing" in e.value.reason
    assert [x[0] for x in events_of(dst)] == list(range(1, 13))


def test_empty_directory_takes_a_late_start_only_when_asked(tmp_path):
    stream = export(case_dir("rolled"), after=40)
    with pytest.raises(WalctlError) as e:
        apply(tmp_path / "a", stream)
    assert e.value.exit_code == 4 and not (tmp_path / "a").exists()  # refused before creating anything
    rep = apply(tmp_path / "b", stream, allow_initial_gap=True)
    assert (rep.first_applied, rep.hwm_after) == (41, 70)
    assert [x[0] for x in events_of(tmp_path / "b")] == list(range(41, 71))


def test_diverged_follower_is_refused(tmp_path):
    dst = write_dir(tmp_path / "dst", {0: make_chunk(range(1, 6), payload_for=lambda s: b"other-%d" % s)})
    src = write_dir(tmp_path / "src", {0: make_chunk(range(1, 9))})
    before = chunk_files(dst)
    with pytest.raises(WalctlError) as e:
        apply(dst, export(src, after=4))
    assert e.value.exit_code == 4 and "diverged" in e.value.reason
    assert chunk_files(dst) == before


def test_kind_mismatch_is_refused(tmp_path):
    from walctl.ops.wal.write import WalWriter

    seg = tmp_path / "seg"
    with WalWriter(str(seg), format="segments", sync="none") as w:
        w.append_entry("memory_add", {"a": 1}, timestamp=1)
    with pytest.raises(WalctlError) as e:
        apply(seg, export(case_dir("basic")))
    assert e.value.exit_code == 5


@pytest.mark.parametrize("form", (ev.FORM_JSONL, ev.FORM_MSGPACK))
def test_segments_round_trip_keeps_checksums(tmp_path, form):
    from walctl.ops.wal.write import WalWriter

    src = tmp_path / "src"
    with WalWriter(str(src), format="segments", sync="none", encoding="json") as w:
        for i in range(30):
            w.append_entry("state_update", {"k": i, "blob": "x" * i}, timestamp=1795300000.5 + i)
    dst = tmp_path / "dst"
    rep = apply(dst, export(src, form))
    assert rep.applied == 30 and rep.kind == "adr003-entries"
    a = [json.loads(x) for x in export(src).splitlines()]
    b = [json.loads(x) for x in export(dst).splitlines()]
    strip = [{k: v for k, v in e.items() if k not in ("file", "offset", "encoding")} for e in a]
    assert strip == [{k: v for k, v in e.items() if k not in ("file", "offset", "encoding")} for e in b]
    assert apply(dst, export(src, form)).applied == 0


def test_tampered_entry_is_refused(tmp_path):
    from walctl.ops.wal.write import WalWriter

    src = tmp_path / "src"
    with WalWriter(str(src), format="segments", sync="none") as w:
        for i in range(3):
            w.append_entry("memory_add", {"i": i}, timestamp=1)
    lines = export(src).splitlines()
    bad = json.loads(lines[1])
    bad["data"] = {"i": 999}
    with pytest.raises(WalctlError) as e:
        apply(tmp_path / "dst", b"\n".join([lines[0], json.dumps(bad).encode(), lines[2]]) + b"\n")
    assert e.value.exit_code == 3 and "checksum mismatch" in e.value.reason
    assert [json.loads(x)["sequence"] for x in export(tmp_path / "dst").splitlines()] == [1]


@pytest.mark.parametrize("stream,why", [
    (b'{"sequence": 1}\n', "missing key"),
    (b"{not json\n", "not JSON"),
    (b'[1, 2]\n', "JSON object"),
    (b"\x85\xa1a\x01", "stream ends inside an item"),
    (b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x7f\xff\xff\xff", "idLen"),
    (b"\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00", "ends inside"),
])
def test_bad_stream_is_one_line_exit_2(cli, tmp_path, stream, why):
    f = tmp_path / "s.bin"
    f.write_bytes(stream)
    r = cli("import", tmp_path / "dst", "--from", f)
    assert r.code == 2, r.err
    assert why in r.err and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def test_cli_pipe_show_hwm_and_json(tmp_path):
    dst = tmp_path / "dst"
    exe = [sys.executable, "-m", "walctl"]
    hwm = subprocess.run(exe + ["import", str(dst), "--show-hwm"], capture_output=True, text=True)
    assert (hwm.returncode, hwm.stdout.strip()) == (0, "0")
    rep = subprocess.run(exe + ["replay", case_dir("rolled"), "--to", "25", "--msgpack"], capture_output=True)
    imp = subprocess.run(exe + ["import", str(dst), "--json"], input=rep.stdout, capture_output=True)
    doc = json.loads(imp.stdout)
    assert (imp.returncode, doc["schema"], doc["applied"], doc["hwm_after"]) == (0, "walctl.import/1", 25, 25)
    hwm = subprocess.run(exe + ["import", str(dst), "--show-hwm"], capture_output=True, text=True)
    assert hwm.stdout.strip() == "25"


@pytest.mark.parametrize("form", FORMS)
def test_follower_cut_at_any_byte_of_the_stream_resumes_without_loss_or_duplication(tmp_path, form):
    """The stream breaks at an arbitrary byte (a killed leader, a dropped pipe): the import keeps the
    complete events before the break (durably), reports the break, and the next round, asking from the
    follower's HWM, completes the log exactly once."""
    src = case_dir("rolled")
    full = export(src, form)
    want = events_of(src)
    for cut in range(0, len(full), max(1, len(full) // 40)):
        dst = tmp_path / f"{form}-{cut}"
        try:
            apply(dst, full[:cut])
        except WalctlError as e:
            assert e.exit_code == 2
        from walctl.ops.wal.importer import local_hwm

        hwm = local_hwm(str(dst))
        apply(dst, export(src, form, after=hwm))
        assert events_of(dst) == want, cut


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs POSIX processes")
def test_follower_process_killed_at_random_moments_resumes_exactly(tmp_path):
    """SIGKILL the import process mid-stream at several moments; the next run (which repairs any torn
    tail it left, evidence kept) resumes from the HWM. The final log equals the source's."""
    import random

    from walctl.ops.wal.write import WalWriter

    src = tmp_path / "src"
    with WalWriter(str(src), sync="none", max_chunk_bytes=64 << 10) as w:
        for i in range(4000):
            w.append(i % 6, f"m{i % 50}", os.urandom(200), 1795300000000 + i)
    stream = export(src, ev.FORM_MSGPACK)
    dst = tmp_path / "dst"
    rng = random.Random(11)
    exe = [sys.executable, "-m", "walctl", "import", str(dst), "--sync", "always"]
    for attempt in range(4):
        p = subprocess.Popen(exe, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            p.stdin.write(stream)
            p.stdin.flush()
        except BrokenPipeError:
            pass
        time.sleep(rng.uniform(0.2, 0.6))
        p.send_signal(signal.SIGKILL)
        p.wait()
        try:
            p.stdin.close()
        except BrokenPipeError:
            pass
    from walctl.ops.wal.importer import local_hwm

    hwm = local_hwm(str(dst))
    apply(dst, export(src, ev.FORM_MSGPACK, after=hwm))
    assert events_of(dst) == events_of(src)


def test_a_stream_that_goes_back_is_refused_after_what_it_applied(tmp_path):
    evs = [ev.Event(s, 0, b"m", 1795300000000 + s, b"p%d" % s) for s in (1, 2, 3, 2, 4)]
    with pytest.raises(WalctlError) as e:
        apply(tmp_path / "d", b"".join(ev.encode_sync(x) for x in evs))
    assert e.value.exit_code == 4 and "goes back from 3 to 2" in e.value.reason
    assert [x[0] for x in events_of(tmp_path / "d")] == [1, 2, 3]
