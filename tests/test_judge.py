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


# ADR-003 segments (judge.SEGMENTS, fed through ops/wal/segment_items.py): items are (item, in last file).
def _judge_segments(items):
    j = J.Judge(J.SEGMENTS)
    out = []
    for pos, (item, last_file) in enumerate(items):
        out.extend(j.feed(pos, item, last_file))
    return out + j.end()


SEGMENT_CASES = [
    # (name, [(item, in the last segment)], verdicts in the order the judge gives them)
    ("tail in the last segment is torn", [(run(1, 1), True), (tail(), True)], ["RNone:first", "T1:torn:None"]),
    ("tail before the last segment is corrupt even when the next continues (unlike V2)",
     [(run(1, 1), False), (tail(), False), (run(2, 2), True)], ["RNone:first", "T1:corrupt:None", "R1:continues"]),
    ("tail before an empty last segment: nothing follows, still corrupt", [(run(1, 1), False), (tail(), False)],
     ["RNone:first", "T1:corrupt:None"]),
    ("a gap after the tail is its lost range", [(run(1, 1), False), (tail(INCOMPLETE), False), (run(5, 5), True)],
     ["RNone:first", "T1:corrupt:(2, 4)", "R1:gap"]),
    ("a step back is judged at once and dropped: the sequence and the pending damage stay",
     [(run(1, 3), False), (mid(), False), (run(2, 2), False), (run(6, 6), False)],
     ["RNone:first", "R3:regression", "D3:(4, 5)", "R3:gap"]),
    ("a repeat is dropped: the next entry continues from before it",
     [(run(1, 3), True), (run(3, 3), True), (run(4, 4), True)], ["RNone:first", "R3:repeat", "R3:continues"]),
    ("legacy segment (unsupported barrier) then a gap", [(run(1, 1), False), (J.Barrier(J.UNSUPPORTED), False), (run(4, 4), True)],
     ["RNone:first", "B1:(2, 3)", "R1:gap"]),
]


@pytest.mark.parametrize("name,items,expected", SEGMENT_CASES, ids=[c[0] for c in SEGMENT_CASES])
def test_judge_segment_policy_table(name, items, expected):
    got = _judge_segments(items)
    assert [summary(j) for j in got] == expected
    assert sorted(j.index for j in got) == list(range(len(items)))  # each item judged exactly once


def test_a_rejected_step_back_carries_the_pending_damage_so_a_stream_stops_there():
    j = J.Judge(J.SEGMENTS)
    j.feed(0, run(1, 5))
    t = tail()
    assert j.feed(0, t) == []
    (v,) = j.feed(1, run(5, 5))  # judged now; the tail stays pending
    assert v.continuity == J.Continuity.REPEAT and v.after == ((0, t),) and j.prev_last == 5
    assert J.stream_block(v, J.no_ledger) == (0, t)
    assert [summary(x) for x in j.feed(1, run(6, 6))] == ["T5:corrupt:None", "R5:continues"]


@pytest.mark.parametrize("item,last_file,writer,expected", [
    (tail(INCOMPLETE), True, "pid 7", True),
    (tail(INCOMPLETE), True, None, False),  # no live writer: a torn tail
    (tail(INCOMPLETE), False, "pid 7", False),  # not the end of the log
    (tail(CHECKSUM), True, "pid 7", False),  # a whole record failing its check is not an append in flight
    (mid(), True, "pid 7", False),
    (run(1, 1), True, "pid 7", False),
], ids=["incomplete-last-live", "no-writer", "not-last", "checksum", "mid-log", "run"])
def test_live_writer_context(item, last_file, writer, expected):
    assert J.in_progress(item, last_file, writer) is expected


def test_resumed_judge_starts_from_the_known_sequence():
    j = J.Judge(last=41)
    assert [summary(v) for v in j.feed(0, run(42, 43))] == ["R41:continues"]
    assert [summary(v) for v in J.Judge(last=41).feed(0, run(45, 45))] == ["R41:gap"]


def _follow(events):
    """Follow feeding: ("roll", bytes) is the tail a follower leaves on a roll (tail.Tail.roll), a Run the
    records of a poll. Returns what judge.stream_block says for each run: "go", "tail" or "sequence"."""
    from walctl.ops.wal.tail import Tail

    j, out = J.Judge(), []
    t = Tail("/nonexistent", "c1", "records")
    for ev in events:
        if type(ev) is tuple:
            t.pending, t.base = ev[1], 64
            left = t.roll("c2")
            assert left.kind == TAIL and (left.offset, left.end) == (64, 64 + len(ev[1]))
            assert left.reason == f"{len(ev[1])} bytes at c1 offset 64" and (t.current, t.pending) == ("c2", b"")
            j.feed("c1", left)
            t.current = "c1"
            continue
        v = j.feed("c2", ev)[-1]
        b = J.stream_block(v, J.no_ledger)
        out.append("go" if b is None else "sequence" if b is v else "tail")
    return out


@pytest.mark.parametrize("events,expected", [
    ([run(1, 3), run(4, 9)], ["go", "go"]),
    ([run(1, 3), ("roll", b"\0" * 9), run(4, 4), run(5, 5)], ["go", "go", "go"]),  # writer restarted
    ([run(1, 3), ("roll", b"x"), run(7, 7)], ["go", "tail"]),  # a gap after bytes left behind
    ([run(1, 3), ("roll", b"x"), run(3, 3)], ["go", "tail"]),  # a step back after bytes left behind
    ([run(1, 3), run(7, 7)], ["go", "sequence"]),  # a bare gap: no ledger accepts it
    ([run(1, 3), ("roll", b"x"), run(4, 4), run(9, 9)], ["go", "go", "sequence"]),  # the tail was proved torn
    ([("roll", b"x"), run(5, 5)], ["go"]),  # nothing before the tail: the first run is the first
], ids=["continues", "roll-then-continues", "roll-then-gap", "roll-then-repeat", "gap", "tail-cleared", "first"])
def test_follow_feeding_table(events, expected):
    assert _follow(events) == expected


def test_feed_next_is_feed_for_a_continuing_record_and_refuses_everything_else():
    """The segment walk's fast path (judge.feed_next) may only take what feed() would judge CONTINUES with
    nothing to flush; anything else is left untouched for feed()."""
    fast, slow = J.Judge(J.SEGMENTS), J.Judge(J.SEGMENTS)
    assert not fast.feed_next(1)  # nothing before: FIRST, a verdict of its own
    fast.feed(0, Run(1, 1, 1, 0, 10))
    slow.feed(0, Run(1, 1, 1, 0, 10))
    assert fast.feed_next(2) and slow.feed(1, Run(2, 2, 1, 10, 20))[-1].continuity == J.Continuity.CONTINUES
    assert (fast.prev_last, fast.count) == (slow.prev_last, slow.count) == (2, 2)
    assert not fast.feed_next(4) and not fast.feed_next(2) and not fast.feed_next(1)  # gap, repeat, regression
    assert (fast.prev_last, fast.count) == (2, 2)
    fast.feed(2, Damage(TAIL, 20, 30, "cut", tail_kind=INCOMPLETE), last_file=True)
    assert not fast.feed_next(3) and fast.count == 3  # damage pending: its verdict comes with the next run
    (d, r) = fast.feed(3, Run(3, 3, 1, 30, 40))
    assert d.torn is True and r.continuity == J.Continuity.CONTINUES and fast.feed_next(4)


# The complete verdict (#25): torn or corrupt, the exit code, the lost range, whether a gap belongs to the
# damage before it, in progress, and whether a stream may go on. Readers render these and decide none.

def verdict(j: J.Judged) -> str:
    """<kind>:<code>[:torn|corrupt][:lost a-b][:owned|:break][:live]"""
    kind = "R" if type(j.item) is Run else "B" if type(j.item) is J.Barrier else j.item.kind[0].upper()
    parts = [kind, str(j.code)]
    if j.torn is not None:
        parts.append("torn" if j.torn else "corrupt")
    if j.lost is not None:
        parts.append(f"lost {j.lost[0]}-{j.lost[1]}")
    if type(j.item) is Run:
        parts += ["owned"] if j.owns_gap else ["break"] if j.sequence_break else []
    if j.live:
        parts.append("live")
    return ":".join(parts)


VERDICTS = [
    # (name, items, last position, writer, expected verdicts in feed order)
    ("clean", [run(1, 5), run(6, 9)], 1, None, ["R:0", "R:0"]),
    ("bare gap: a sequence finding (4)", [run(1, 5), run(8, 9)], 1, None, ["R:0", "R:4:break"]),
    ("repeat: 4", [run(1, 5), run(5, 9)], 1, None, ["R:0", "R:4:break"]),
    ("regression after damage: still its own finding", [run(1, 5), mid(), run(2, 9)], 1, None,
     ["R:0", "M:3", "R:4:break"]),
    ("torn tail at the end: 1", [run(1, 5), tail()], 0, None, ["R:0", "T:1:torn"]),
    ("tail continued by the next chunk: torn, 1", [run(1, 5), tail(), run(6, 7)], 1, None,
     ["R:0", "T:1:torn", "R:0"]),
    ("tail then gap: corrupt (3), the gap is its lost range and no finding of its own",
     [run(1, 5), tail(), run(9, 10)], 1, None, ["R:0", "T:3:corrupt:lost 6-8", "R:0:owned"]),
    ("mid-log then gap: 3, lost range, gap owned", [run(1, 5), mid(9), run(9, 12)], 0, None,
     ["R:0", "M:3:lost 6-8", "R:0:owned"]),
    ("undecodable: 3", [run(1, 5), undecodable(), run(7, 7)], 0, None, ["R:0", "U:3:lost 6-6", "R:0:owned"]),
    ("short chunk not last: corrupt (3); the tail before it too", [run(1, 5), tail(), J.Barrier(J.SHORT),
                                                                    run(6, 6)], {0: 0, 1: 0, 2: 1, 3: 2}, None,
     ["R:0", "T:3:corrupt", "B:3:corrupt", "R:0"]),
    ("short last chunk: torn (1), and the tail before it", [run(1, 5), tail(), J.Barrier(J.SHORT)],
     {0: 0, 1: 0, 2: 1}, None, ["R:0", "T:1:torn", "B:1:torn"]),
    ("short last chunk with a live writer: in progress (0)", [run(1, 5), J.Barrier(J.SHORT)],
     {0: 0, 1: 1}, "pid 7", ["R:0", "B:0:torn:live"]),
    ("incomplete tail in the last chunk with a live writer: 0", [run(1, 5), tail(INCOMPLETE)], 0, "pid 7",
     ["R:0", "T:0:torn:live"]),
    ("checksum tail with a live writer: torn all the same (1)", [run(1, 5), tail()], 0, "pid 7",
     ["R:0", "T:1:torn"]),
    ("unreadable: the environment's code", [run(1, 5), J.Barrier(J.UNREADABLE, code=6), run(6, 6)],
     {0: 0, 1: 1, 2: 2}, None, ["R:0", "B:6", "R:0"]),
    ("unsupported then gap: 5, its lost range", [run(1, 5), J.Barrier(J.UNSUPPORTED), run(9, 9)],
     {0: 0, 1: 1, 2: 2}, None, ["R:0", "B:5:lost 6-8", "R:0:owned"]),
]


@pytest.mark.parametrize("name,items,positions,writer,expected", VERDICTS, ids=[v[0] for v in VERDICTS])
def test_complete_verdict_table(name, items, positions, writer, expected):
    pos = positions if isinstance(positions, dict) else {i: 0 for i in range(len(items))}
    last = max(pos.values()) if isinstance(positions, dict) else positions
    got = J.judge_all([(pos[i], item) for i, item in enumerate(items)], last, writer)
    assert [verdict(j) for j in got] == expected


def test_lost_range_is_the_one_plus_one_rule():
    assert J.lost_range(5, 6) is None and J.lost_range(5, 5) is None and J.lost_range(5, 2) is None
    assert J.lost_range(5, 9) == (6, 8) and J.lost_range(5, 7) == (6, 6)
    assert J.lost_range(None, 9) is None and J.lost_range(5, None) is None
    assert J.continues(None, 7) and J.continues(5, 6) and not J.continues(5, 5) and not J.continues(5, 8)
    judged, _ = _block([run(1, 5), run(9, 9)])
    assert judged.gap == J.lost_range(5, 9)


def test_stream_may_go_on():
    t, s = tail(), J.Barrier(J.SHORT)
    # what waits for the next run (tail, short file) and what stops a stream at once
    assert J.waits(t) and J.waits(s)
    assert not any(J.waits(x) for x in (mid(), undecodable(), UNREAD, J.Barrier(J.UNSUPPORTED), run(1, 1)))
    # the stop's exit code: the damage the run does not continue is corrupt, the discontinuity a sequence finding
    judged, block = _block([run(1, 5), t, run(9, 9)])
    assert block == (1, t) and J.stop_code(block, judged) == 3
    judged, block = _block([run(1, 5), run(9, 9)])
    assert block is judged and J.stop_code(block, judged) == 4
    # ADR-003 streams stop at corrupt or worse; a torn tail (1) and notes (0) go on
    assert [J.stream_stops(c) for c in range(7)] == [False, False, False, True, True, True, True]


def test_segment_verdicts_carry_the_code_and_the_live_writer():
    j = J.Judge(J.SEGMENTS, writer="pid 7")
    j.feed("a", run(1, 1))
    j.feed("a", tail(INCOMPLETE), last_file=False)  # a closed segment's tail: corrupt whatever follows
    out = j.feed("b", run(2, 2))
    assert [verdict(v) for v in out] == ["T:3:corrupt", "R:0"]
    j.feed("b", tail(INCOMPLETE), last_file=True)
    assert [verdict(v) for v in j.end()] == ["T:0:torn:live"]
