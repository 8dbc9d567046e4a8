"""ops/judge.py as a table: item sequences in, verdicts out."""
from __future__ import annotations

import pytest

from walctl.format.scan import CHECKSUM, INCOMPLETE, MID_LOG, TAIL, UNDECODABLE, Damage, Run
from walctl.ops import judge as J

_off = iter(range(0, 1 << 30, 64))


def run(a, b):
    o = next(_off)
    return Run(a, b, b - a + 1, o, o + 64)


def tail(kind=CHECKSUM):
    o = next(_off)
    return Damage(TAIL, o, o + 64, "t", tail_kind=kind)


def mid(resync=None):
    o = next(_off)
    return Damage(MID_LOG, o, o + 64, "m", resync_sequence=resync)


def undecodable():
    o = next(_off)
    return Damage(UNDECODABLE, o, o + 64, "u")


def short(torn):
    return J.Barrier(J.SHORT, torn)


UNREAD = J.Barrier(J.UNREADABLE)


def summary(j: J.Judged):
    """R:<continuity> | T:<torn>/<lost> | D:<lost> | B:<lost>, with the last sequence before."""
    if type(j.item) is Run:
        return f"R{j.last_before}:{j.continuity}"
    if type(j.item) is J.Barrier:
        return f"B{j.last_before}:{j.lost}"
    if j.item.kind == TAIL:
        return f"T{j.last_before}:{'torn' if j.torn else 'corrupt'}:{j.lost}"
    return f"D{j.last_before}:{j.lost}"


CASES = [
    # (name, items, expected verdicts in feed order)
    ("clean", [run(1, 5), run(6, 9)], ["RNone:first", "R5:continues"]),
    ("gap", [run(1, 5), run(8, 9)], ["RNone:first", "R5:gap"]),
    ("repeat", [run(1, 5), run(5, 9)], ["RNone:first", "R5:repeat"]),
    ("regression", [run(1, 5), run(3, 9)], ["RNone:first", "R5:regression"]),
    ("tail at the end is torn", [run(1, 5), tail()], ["RNone:first", "T5:torn:None"]),
    ("tail then continuing run: writer restarted", [run(1, 5), tail(), run(6, 7)],
     ["RNone:first", "T5:torn:None", "R5:continues"]),
    ("tail then gap: corrupt, the gap is its lost range", [run(1, 5), tail(), run(9, 10)],
     ["RNone:first", "T5:corrupt:(6, 8)", "R5:gap"]),
    ("tail then repeat: corrupt, no lost range", [run(1, 5), tail(), run(5, 10)],
     ["RNone:first", "T5:corrupt:None", "R5:repeat"]),
    ("tail first in the directory", [tail(INCOMPLETE), run(7, 8)], ["TNone:torn:None", "RNone:first"]),
    ("tail then torn short chunk", [run(1, 5), tail(), short(True)], ["RNone:first", "T5:torn:None", "B5:None"]),
    ("tail then closed short chunk", [run(1, 5), tail(), short(False), run(6, 6)],
     ["RNone:first", "T5:corrupt:None", "B5:None", "R5:continues"]),
    ("tail then unreadable chunk", [run(1, 5), tail(), UNREAD], ["RNone:first", "T5:corrupt:None", "B5:None"]),
    ("mid-log: the gap is its lost range", [run(1, 5), mid(9), run(9, 12)],
     ["RNone:first", "D5:(6, 8)", "R5:gap"]),
    ("lost range goes to the first of several", [run(1, 5), mid(), undecodable(), run(9, 12)],
     ["RNone:first", "D5:(6, 8)", "D5:None", "R5:gap"]),
    ("barrier then gap", [run(1, 5), UNREAD, run(11, 12)], ["RNone:first", "B5:(6, 10)", "R5:gap"]),
    ("nothing but damage", [mid(), tail()], ["DNone:None", "TNone:torn:None"]),
]


@pytest.mark.parametrize("name,items,expected", CASES, ids=[c[0] for c in CASES])
def test_judge_table(name, items, expected):
    got = J.judge_all(enumerate(items))
    assert [summary(j) for j in got] == expected
    assert [j.index for j in got] == list(range(len(items)))  # each item judged once, in order
    assert [j.item for j in got] == items


def test_incremental_feed_judges_damage_when_the_next_run_arrives():
    j = J.Judge()
    assert [summary(v) for v in j.feed(0, run(1, 3))] == ["RNone:first"]
    t = tail()
    assert j.feed(0, t) == []  # torn or not depends on what follows
    out = j.feed(1, run(4, 4))
    assert [summary(v) for v in out] == ["T3:torn:None", "R3:continues"]
    assert out[1].after == ((0, t),) and j.prev_last == 4
    assert j.end() == []




def _block(items, accepted=lambda a, b: False):
    j = J.Judge()
    judged = None
    for pos, item in enumerate(items):
        out = j.feed(pos, item)
        if out and type(out[-1].item) is Run:
            judged = out[-1]
    return judged, J.stream_block(judged, accepted)


def test_stream_block_table():
    t = tail()
    # continuing after a tail: stream it
    assert _block([run(1, 5), t, run(6, 6)])[1] is None
    # a gap after a tail stops the stream at the tail
    assert _block([run(1, 5), t, run(9, 9)])[1] == (1, t)
    # the last pending tail or short chunk is the one named
    s = short(False)
    assert _block([run(1, 5), t, s, run(9, 9)])[1] == (2, s)
    # a gap after skipped mid-log damage: its records were the gap
    assert _block([run(1, 5), mid(9), run(9, 9)])[1] is None
    # a bare gap stops at the run itself, unless the ledger accepted it
    judged, block = _block([run(1, 5), run(9, 9)])
    assert block is judged and judged.gap == (6, 8)
    assert _block([run(1, 5), run(9, 9)], lambda a, b: (a, b) == (6, 8))[1] is None
    # an accepted gap does not excuse a pending tail
    assert _block([run(1, 5), t, run(9, 9)], lambda a, b: True)[1] == (1, t)
    # a repeat is never accepted
    judged, block = _block([run(1, 5), run(5, 6)], lambda a, b: True)
    assert block is judged and judged.gap is None
