"""merge: the CRDT join is commutative, associative and idempotent (by property), Spector's own rule is
not, folding follows the documented event rules, and the CLI's output does not depend on input order."""
from __future__ import annotations

import json
import os

from hypothesis import given, settings, strategies as st

from conftest import case_dir
from walctl.format import memstate as ms
from walctl.ops.wal.write import WalWriter

ts = st.integers(min_value=0, max_value=50)  # a small range: ties are the interesting case
states = st.builds(ms.MemoryState, timestamp_ms=ts, tags=st.integers(0, 255),
                   importance=st.sampled_from([0.0, -0.0, 0.5, 1.0, 7.25]), recall_count=st.integers(0, 5),
                   valence_ts=ts, valence=st.integers(-128, 127), present=st.booleans(), tombstone=st.booleans(),
                   consolidated=st.booleans(), pinned=st.booleans()).map(ms.normalized)


def same(a: ms.MemoryState, b: ms.MemoryState) -> bool:
    """Equal, and equal as JSON (-0.0 and 0.0 must not both survive as spellings)."""
    return a == b and json.dumps(ms.state_to_json(a)) == json.dumps(ms.state_to_json(b))


@settings(max_examples=400, deadline=None)
@given(states, states)
def test_join_is_commutative(a, b):
    assert same(ms.join(a, b), ms.join(b, a))


@settings(max_examples=400, deadline=None)
@given(states, states, states)
def test_join_is_associative(a, b, c):
    assert same(ms.join(ms.join(a, b), c), ms.join(a, ms.join(b, c)))


@settings(max_examples=200, deadline=None)
@given(states, states)
def test_join_is_idempotent_and_an_upper_bound(a, b):
    j = ms.join(a, b)
    assert same(ms.join(a, a), a)
    assert same(ms.join(j, a), j) and same(ms.join(j, b), j)


def spector_merge(local, remote):
    """CrdtMergeStrategy.merge as the reference implements it (valence: remote wins ties)."""
    remote_newer = remote.timestamp_ms >= local.timestamp_ms
    return (max(local.timestamp_ms, remote.timestamp_ms), remote.valence if remote_newer else local.valence)


def test_spector_rule_is_not_commutative_and_ours_is():
    a = ms.MemoryState(timestamp_ms=10, valence_ts=10, valence=5)
    b = ms.MemoryState(timestamp_ms=10, valence_ts=10, valence=-3)
    assert spector_merge(a, b) != spector_merge(b, a)  # the bug the issue names
    assert ms.join(a, b) == ms.join(b, a) and ms.join(a, b).valence == 5
    # a later unrelated event (a recall at t=20) must not make an older valence win
    c = ms.MemoryState(timestamp_ms=20, recall_count=1, valence_ts=3, valence=-100)
    d = ms.MemoryState(timestamp_ms=10, valence_ts=10, valence=40)
    assert spector_merge(d, c)[1] == -100  # Spector: the newer *memory* wins the valence
    assert ms.join(c, d).valence == 40 and ms.join(d, c).valence == 40


def test_fold_rules():
    s = ms.EMPTY
    for typ, t, payload in [(0, 5, b"text"), (4, 6, b"\x01\x00"), (4, 7, b"\x00\x10"), (2, 8, b"\xf6"),
                            (5, 9, b""), (5, 9, b""), (3, 4, b"cycle"), (2, 8, b"\x01"), (6, 99, b"ignored")]:
        s = ms.fold_event(s, typ, t, payload)
    assert s == ms.MemoryState(timestamp_ms=99, tags=0x0110, importance=0.0, recall_count=2, valence_ts=8,
                               valence=1, present=True, tombstone=False, consolidated=True, pinned=False)
    assert ms.fold_event(s, 1, 100, b"").tombstone
    assert ms.state_from_json(ms.state_to_json(s)) == s


def write_wal(path, events):
    with WalWriter(str(path), sync="none") as w:
        for typ, mid, t, payload in events:
            w.append(typ, mid, payload, t)
    return str(path)


def test_cli_merge_order_does_not_matter_and_is_idempotent(cli, tmp_path):
    a = write_wal(tmp_path / "a", [(0, "m1", 10, b"x"), (2, "m1", 20, b"\x05"), (4, "m2", 11, b"\x01"),
                                   (5, "m1", 21, b"")])
    b = write_wal(tmp_path / "b", [(0, "m1", 10, b"x"), (2, "m1", 20, b"\xfd"), (4, "m2", 12, b"\x02"),
                                   (1, "m3", 13, b""), (3, "m2", 14, b"")])
    r1 = cli("merge", a, b, "--out", tmp_path / "ab", "--json")
    r2 = cli("merge", b, a, "--out", tmp_path / "ba")
    assert r1.code == 0 and r2.code == 0
    ab, ba = (tmp_path / "ab" / "state.json").read_text(), (tmp_path / "ba" / "state.json").read_text()
    strip = lambda t: {k: v for k, v in json.loads(t).items() if k != "sources"}  # noqa: E731
    assert strip(ab) == strip(ba)
    mem = json.loads(ab)["memories"]
    assert mem["m1"]["valence"] == 5 and mem["m1"]["recall_count"] == 1  # tie at t=20: the higher value
    assert mem["m2"]["tags"] == "0x3" and mem["m2"]["consolidated"] is True
    assert mem["m3"]["tombstone"] is True
    doc = r1.json()
    assert doc["changes"]["added"] == ["m3"]
    assert set(doc["changes"]["changed"]["m2"]) == {"timestamp_ms", "tags", "consolidated"}
    # merging the result with either input again changes nothing
    r3 = cli("merge", tmp_path / "ab" / "state.json", a, "--json")
    assert r3.json()["changes"] == {"added": [], "changed": {}}
    # never over an existing state.json
    r4 = cli("merge", a, b, "--out", tmp_path / "ab")
    assert r4.code == 7 and "never overwrites" in r4.err


def test_merge_of_java_vectors_and_damaged_input(cli):
    r = cli("merge", case_dir("basic"), case_dir("reopened"), "--json")
    assert r.code == 0
    doc = r.json()
    assert doc["memories"] == len(doc["state"]) and doc["inputs"][0]["events"] == 49
    r = cli("merge", case_dir("payload-bitflip-midlog"), case_dir("basic"), "--json")
    assert r.code == 3 and "folded only up to damage" in r.err
    assert r.json()["inputs"][0]["events"] == 24
    assert cli("merge", case_dir("basic")).code == 2
    assert not os.path.exists(os.path.join(case_dir("basic"), "state.json"))


def test_merge_refuses_what_is_not_a_v2_wal(cli, tmp_path):
    seg = tmp_path / "seg"
    with WalWriter(str(seg), format="segments", sync="none") as w:
        w.append_entry("memory_add", {"a": 1}, timestamp=1)
    r = cli("merge", case_dir("basic"), seg)
    assert r.code == 5 and "V2" in r.err and len(r.err.strip().splitlines()) == 1
    junk = tmp_path / "junk.json"
    junk.write_text('{"schema": "something else"}')
    r = cli("merge", case_dir("basic"), junk)
    assert r.code == 2 and "not a merge state file" in r.err
