"""Every filter of `walctl inspect` either applies to what the path holds or is refused (exit 2, one line):
never silently ignored. On ADR-003 segments --from/--to, --type (the entry's operation), --since/--until
(its seconds x 1000) and --limit apply; --id, --hexdump and --payload are refused. With --follow only
--from/--to/--limit apply; with --seq/--around/--damaged no filter does; checkpoints hold no records."""
from __future__ import annotations

import json

import pytest

from walctl.format.segment import encode_frame, seal

T0 = 1795300000
OPS = ("memory_add", "tool_register", "state_update")


@pytest.fixture
def seg(tmp_path):
    d = tmp_path / "seg"
    d.mkdir()
    for n in range(2):
        (d / f"wal_{n + 1:08d}.log").write_bytes(b"".join(
            encode_frame(seal({"sequence": s, "timestamp": T0 + s // 2 + (0.5 if s % 5 == 0 else 0),
                               "operation": OPS[s % 3], "data": {"s": s}}))
            for s in range(1 + n * 20, 21 + n * 20)))
    return str(d)


def _ts(s: int) -> float:
    return T0 + s // 2 + (0.5 if s % 5 == 0 else 0)


APPLIED = {
    ("--from", "7"): lambda s: s >= 7,
    ("--to", "7"): lambda s: s <= 7,
    ("--type", "tool_register"): lambda s: OPS[s % 3] == "tool_register",
    ("--since", str((T0 + 10) * 1000 + 500)): lambda s: _ts(s) * 1000 >= (T0 + 10) * 1000 + 500,
    ("--until", str((T0 + 10) * 1000 + 500)): lambda s: _ts(s) * 1000 <= (T0 + 10) * 1000 + 500,
    ("--since", "2026-11-21T22:26:50Z"): lambda s: _ts(s) >= 1795300010,
    ("--limit", "3"): lambda s: s <= 3,
}


@pytest.mark.parametrize("opt", sorted(APPLIED), ids=lambda o: o[0])
def test_each_filter_applies_to_segment_entries(seg, cli, opt):
    r = cli("inspect", seg, "--jsonl", *opt)
    assert r.code == 0, r.err
    want = [s for s in range(1, 41) if APPLIED[opt](s)]
    assert [json.loads(x)["sequence"] for x in r.out.splitlines()] == want
    assert 0 < len(want) < 40


def test_the_iso_time_is_the_epoch_ms_time(seg, cli):
    ms = 1795300010000  # 2026-11-21T22:26:50Z
    assert T0 + 1 <= ms // 1000 <= T0 + 20
    a = cli("inspect", seg, "--jsonl", "--since", str(ms))
    b = cli("inspect", seg, "--jsonl", "--since", "2026-11-21T22:26:50Z")
    assert a.out == b.out and a.out


REFUSED = [
    (("--id", "m1"), "--id does not apply to ADR-003 entries"),
    (("--hexdump",), "--hexdump does not apply to ADR-003 entries"),
    (("--payload", "hex"), "--payload does not apply to ADR-003 entries"),
    (("--payload", "none"), "--payload does not apply to ADR-003 entries"),
    (("--follow", "--since", "1"), "--since does not apply with --follow"),
    (("--follow", "--type", "x"), "--type does not apply with --follow"),
    (("--follow", "--strict"), "--strict does not apply with --follow"),
    (("--follow", "--payload", "hex"), "--payload does not apply to ADR-003 entries"),
    (("--seq", "3", "--from", "2"), "--from does not apply with --seq, --around or --damaged"),
    (("--damaged", "--until", "5"), "--until does not apply with --seq, --around or --damaged"),
    (("--around", "wal_00000001.log:0", "--limit", "1"), "--limit does not apply with --seq, --around or --damaged"),
]


@pytest.mark.parametrize("args,message", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_a_filter_that_cannot_apply_is_refused_in_one_line(seg, cli, args, message):
    r = cli("inspect", seg, *args)
    assert r.code == 2 and r.out == ""
    assert r.err.strip().splitlines() == [r.err.strip()] and message in r.err, r.err


def test_filters_on_checkpoints_are_refused(cli):
    import os

    ck = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "checkpoints")
    r = cli("inspect", ck, "--since", "5")
    assert r.code == 2 and "--since does not apply to checkpoints" in r.err
    assert cli("inspect", ck).code in (0, 1, 3)
