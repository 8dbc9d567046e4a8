"""The damage map as text: one line per chunk with a bar of its bytes, exactly as wide as the terminal.

Every line fits in `width` columns (chunk lines are exactly `width`); characters carry the meaning and
colour only repeats it, so piped output and NO_COLOR lose nothing.
"""
from __future__ import annotations

from ..ops import damagemap as M
from .render import seq_range
from .shown import shown

MIN_WIDTH = 40
MAX_WIDTH = 1000

# mark -> (bar character, colour, legend text). Order is the legend's.
STYLE = {
    M.MARK_MID_LOG: ("M", "red", "mid-log damage"),
    M.MARK_TORN: ("T", "yellow", "torn tail"),
    M.MARK_ZERO_FILL: ("Z", "yellow", "zero-filled tail"),
    M.MARK_CORRUPT_TAIL: ("C", "red", "corrupt tail"),
    M.MARK_UNDECODABLE: ("U", "red", "undecodable payload"),
    M.MARK_SHORT: ("S", "red", "short chunk"),
    M.MARK_UNSUPPORTED: ("X", "red", "unsupported/unreadable"),
    M.MARK_IN_PROGRESS: ("~", "cyan", "append in progress"),
    M.MARK_GAP: ("G", "cyan", "sequence gap starts"),
    M.MARK_REPEAT: ("R", "red", "sequence repeat/regression"),
    M.MARK_ANOMALY: ("!", "yellow", "anomaly"),
    M.MARK_NOTE: ("?", "dim", "note"),
    M.MARK_DAMAGED: ("D", "red", "damaged (see its class)"),
}
VALID = ("=", "green", "valid bytes")
POINT_MARKS = (M.MARK_GAP, M.MARK_REPEAT, M.MARK_ANOMALY)  # a position, not a byte range


def clamp_width(width: int) -> int:
    return max(MIN_WIDTH, min(MAX_WIDTH, width))


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 3)] + "..."


def _middle(text: str, width: int) -> str:
    """A name cut in the middle: its start and its distinguishing end both stay."""
    if len(text) <= width:
        return text
    keep = width - 3
    return text[:keep - keep // 2] + "..." + text[len(text) - keep // 2:]


def _wrap(text: str, width: int, indent: str = "     ", max_lines: int = 4) -> list[str]:
    import textwrap

    lines = textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=True,
                          break_on_hyphens=False, drop_whitespace=True) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = _fit(lines[-1] + " ...", width)
    lines[0] = text[:len(text) - len(text.lstrip())] + lines[0].lstrip() if text.startswith(" ") else lines[0]
    return [_fit(x, width) for x in lines]


def bar_cells(size: int, cells: int, regions) -> list[str | None]:
    """One mark (or None: valid) per cell; cell i covers bytes [i*size/cells, (i+1)*size/cells).
    Every region gets at least one cell. A point (gap, repeat, anomaly) at a byte outside every damaged
    range is drawn over a cell it shares with a damage boundary, but never hides a one-cell region."""
    out: list[str | None] = [None] * cells
    if cells <= 0:
        return out
    single: set[int] = set()  # cells that are the only cell of some damaged region
    ranges = []
    for r in M.drawing_order(regions, size):  # a whole-file finding first: the exact regions go over it
        if r.mark in POINT_MARKS:
            continue
        a, b = _cell_span(r, size, cells)
        if not M.whole_file(r.finding, size):  # (a point inside a whole-file finding is still drawn)
            ranges.append((r.finding.offset, r.finding.end_offset))
        if b - a == 1:
            single.add(a)
        for i in range(a, b):
            out[i] = r.mark
    for r in regions:
        f = r.finding
        if r.mark not in POINT_MARKS or f.offset is None:
            continue
        if any(o is not None and e is not None and o <= f.offset < e for o, e in ranges):
            continue  # inside damage: the damage says more
        a = _cell_span(r, size, cells)[0]
        if out[a] is not None and out[a] not in POINT_MARKS and (a in single or a + 1 >= cells):
            continue
        if out[a] is not None and out[a] not in POINT_MARKS:
            a += 1  # the cell is a damage boundary: the point goes just after it
            if out[a] is not None and out[a] not in POINT_MARKS:
                continue
        out[a] = r.mark
    return out


def _cell_span(r, size: int, cells: int) -> tuple[int, int]:
    f = r.finding
    if f.offset is None or size <= 0:
        return 0, cells  # the whole file (unreadable, unsupported without an offset)
    end = f.end_offset if f.end_offset is not None and r.mark not in POINT_MARKS else f.offset
    a = min(cells - 1, f.offset * cells // size)
    return a, max(a + 1, min(cells, -(-end * cells // size)))


def render_map(m: M.DamageMap, width: int, color: bool) -> list[str]:
    width = clamp_width(width)
    lines = _wrap(f"{shown(m.path)}: {m.verdict.upper()} (exit {m.exit_code}): {len(m.rows)} "
                  f"{'file' if len(m.rows) == 1 else 'files'}, seq "
                  f"{seq_range(m.report.first_sequence, m.report.last_sequence)}, "
                  f"{m.report.damaged_bytes} damaged bytes, {len(m.regions)} "
                  f"finding{'' if len(m.regions) == 1 else 's'}", width, "  ")
    names = [shown(r.file) for r in m.rows]
    seqs = [seq_range(r.first_sequence, r.last_sequence) for r in m.rows]
    sizes = [str(r.size) for r in m.rows]
    nw = min(max([len(n) for n in names] + [5]), 28)
    sw = min(max([len(s) for s in seqs] + [3]), 23)
    zw = max([len(s) for s in sizes] + [5])
    # columns: name seq size |bar|; shrink the text columns until the bar has room
    while nw + 1 + sw + 1 + zw + 1 + 2 + 10 > width and nw > 8:
        nw -= 1
    while nw + 1 + sw + 1 + zw + 1 + 2 + 10 > width and sw > 5:
        sw -= 1
    bar_w = width - (nw + 1 + sw + 1 + zw + 1) - 2
    head = f"{'file':<{nw}} {'seq':>{sw}} {'bytes':>{zw}} " + f"|{'0':<{bar_w - 3}}end|"[:bar_w + 2]
    lines.append(head[:width])
    gaps_after = {}
    for g in m.gaps:
        gaps_after.setdefault(g.after, []).append(g)
    for g in gaps_after.get(None, ()):
        lines.extend(_gap_lines(m, g, width))
    for k, row in enumerate(m.rows):
        regs = [m.regions[i] for i in row.regions]
        cells = bar_cells(row.size, bar_w, regs)
        bar = _bar(cells, color) if row.size else _paint("." * bar_w, "dim", color)
        name = _middle(names[k], nw)
        seq = _fit(seqs[k], sw)
        lines.append(f"{name:<{nw}} {seq:>{sw}} {sizes[k]:>{zw}} |{bar}|")
        for r in regs:
            wrapped = _wrap(_region_text(r), width)
            lines.append(_paint_mark(wrapped[0], r.mark, color))
            lines.extend(wrapped[1:])
        for g in gaps_after.get(k, ()):
            lines.extend(_gap_lines(m, g, width))
    loose = [r for r in m.regions if r.chunk is None and not M.at_gap(m, r)]
    for r in loose:
        lines.extend(_wrap(_region_text(r), width))
    if m.pieces:
        lines.append(_fit("set aside (.quarantine/MANIFEST.jsonl):", width))
        for p in m.pieces:
            lines.extend(_wrap("  " + piece_text(p), width))
    for p in m.problems:
        lines.extend(_wrap(f"  problem: {shown(p)}", width))
    lines.extend(legend(m, width, color))
    return lines


def _paint(text: str, colour: str | None, color: bool) -> str:
    if not color or not colour:
        return text
    from .render import colour as painted  # our colours pass SafeStream by its token; a file's never do

    return painted(text, colour)


def _bar(cells: list, color: bool) -> str:
    """The cells as characters; one colour code per run of equal marks, not per cell."""
    from itertools import groupby

    out = []
    for mark, run in groupby(cells):
        ch, colour, _ = VALID if mark is None else STYLE[mark]
        out.append(_paint(ch * len(list(run)), colour, color))
    return "".join(out)


def _paint_mark(text: str, mark: str, color: bool) -> str:
    ch, colour, _ = STYLE[mark]
    return text.replace(ch, _paint(ch, colour, color), 1) if color else text


def _region_text(r: M.Region) -> str:
    f = r.finding
    ch = STYLE[r.mark][0]
    where = ""
    if f.offset is not None:
        where = f"@{f.offset}" + (f"..{f.end_offset}" if f.end_offset not in (None, f.offset) else "")
    bits = [f"   {ch} {where} {r.mark}" if where else f"   {ch} {r.mark}"]
    lost = f.lost_or_missing
    if lost:
        bits.append(f"seq {seq_range(*lost)} missing")
    elif f.repeated:
        bits.append(f"seq {seq_range(*f.repeated)} twice")
    elif f.sequence_range:
        bits.append(f"seq {seq_range(*f.sequence_range)}")
    if f.extra.get("next_good_sequence") is not None:
        bits.append(f"resumes at seq {f.extra['next_good_sequence']}")
    bits.append(shown(f.reason))
    if r.chunk is None and f.file:
        bits.insert(1, shown(f.file))
    return ": ".join([bits[0], "; ".join(bits[1:])])


def _gap_lines(m: M.DamageMap, g: M.Gap, width: int) -> list[str]:
    parts = []
    if g.missing:
        parts.append(f"seq {seq_range(*g.missing)} missing")
    if g.absent_indices:
        a, b = g.absent_indices
        parts.append(f"chunk index {a}" + (f"..{b}" if b != a else "") + " absent")
    text = "   ~~ gap: " + "; ".join(parts) if parts else "   ~~ gap: a file that belonged here is not there"
    held = [m.pieces[i] for i in g.pieces]
    if held:
        text += "; set aside: " + ", ".join(f"{shown(p.name or p.evidence)} ({shown(p.action)})" for p in held)
    lines = _wrap(text, width)
    for i in g.absent:  # the finding about the file that belonged here, where it belonged
        lines.extend(_wrap(_region_text(m.regions[i]), width))
    return lines


def piece_text(p) -> str:
    where = f"bytes {p.offset}..{p.end} of {shown(p.source)}" if p.kind != "chunk" else f"was {shown(p.source)}"
    seq = ""
    if p.first_sequence is not None:
        rng = seq_range(p.first_sequence, p.last_sequence) if p.last_sequence is not None else f"{p.first_sequence}.."
        seq = f", seq {rng}" + ("" if p.sequence_checked else " (claimed)")
    state = {"missing": " [file missing]", "elsewhere": f" [at {shown(p.evidence)}]"}.get(p.kind, "")
    return f"{shown(p.name or p.evidence)}: {shown(p.action)}, {where}{seq}{state}"


def legend(m: M.DamageMap, width: int, color: bool) -> list[str]:
    used = {r.mark for r in m.regions}
    items = [f"{_paint(VALID[0], VALID[1], color)} {VALID[2]}"]
    plain = [f"{VALID[0]} {VALID[2]}"]
    for mark, (ch, colour, text) in STYLE.items():
        if mark in used or mark in (M.MARK_MID_LOG, M.MARK_TORN, M.MARK_ZERO_FILL, M.MARK_UNDECODABLE,
                                    M.MARK_ANOMALY):
            items.append(f"{_paint(ch, colour, color)} {text}")
            plain.append(f"{ch} {text}")
    out, cur, cur_len = [], "legend:", len("legend:")
    for item, p in zip(items, plain):
        if cur_len + 2 + len(p) > width:
            out.append(cur)
            cur, cur_len = "       ", 7
        cur += "  " + item
        cur_len += 2 + len(p)
    out.append(cur)
    return out
