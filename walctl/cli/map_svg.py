"""The damage map as a self-contained SVG for an incident ticket: chunks as bars, damage coloured,
a `<title>` (hover text) on every region with its offsets and reason. No scripts, no external links.

All text is escaped twice over: control characters through `shown` (XML 1.0 cannot carry most of them
even as entities), then XML-escaped for element text and attributes.
"""
from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

from ..ops import damagemap as M
from .map_text import POINT_MARKS, STYLE, piece_text
from .render import seq_range
from .shown import shown

FILL = {
    M.MARK_MID_LOG: "#d62728", M.MARK_TORN: "#ff9f1c", M.MARK_ZERO_FILL: "#bcbd22",
    M.MARK_CORRUPT_TAIL: "#8b0000", M.MARK_UNDECODABLE: "#9467bd", M.MARK_SHORT: "#e377c2",
    M.MARK_UNSUPPORTED: "#7f7f7f", M.MARK_IN_PROGRESS: "#17becf", M.MARK_GAP: "#1f77b4",
    M.MARK_REPEAT: "#ff00ff", M.MARK_ANOMALY: "#ffd700", M.MARK_NOTE: "#c7c7c7", M.MARK_DAMAGED: "#a0522d",
}
assert set(FILL) == set(M.MARKS), "every mark has its colour"
VALID_FILL = "#2ca02c"
EMPTY_FILL = "#eeeeee"

LABEL_W = 330
BAR_W = 900
ROW_H = 26
BAR_H = 16
PAD = 12


def _t(text) -> str:
    return escape(shown(text))


def _a(text) -> str:
    return quoteattr(shown(text))


def render_svg(m: M.DamageMap) -> str:
    body: list[str] = []
    y = PAD
    title = (f"{m.path}: {m.verdict.upper()} (exit {m.exit_code}), {len(m.rows)} files, seq "
             f"{seq_range(m.report.first_sequence, m.report.last_sequence)}, {m.report.damaged_bytes} damaged bytes")
    body.append(f'<text x="{PAD}" y="{y + 14}" class="h">{_t(title)}</text>')
    y += 30
    gaps_after: dict = {}
    for g in m.gaps:
        gaps_after.setdefault(g.after, []).append(g)
    for g in gaps_after.get(None, ()):
        y = _gap_row(body, y, m, g)
    for k, row in enumerate(m.rows):
        y = _chunk_row(body, y, m, row)
        for g in gaps_after.get(k, ()):
            y = _gap_row(body, y, m, g)
    y = _notes(body, y, m)
    y = _legend(body, y + 8, m)
    return _document(m, body, y)


def _gap_row(body: list[str], y: int, m: M.DamageMap, g: M.Gap) -> int:
    """A dashed line for a gap between chunks: what is missing and what was set aside from it."""
    parts = []
    if g.missing:
        parts.append(f"seq {seq_range(*g.missing)} missing")
    if g.absent_indices:
        parts.append(f"chunk index {seq_range(*g.absent_indices)} absent")
    held = [m.pieces[i] for i in g.pieces]
    if held:
        parts.append("set aside: " + ", ".join(f"{p.name or p.evidence} ({p.action})" for p in held))
    text = "gap: " + ("; ".join(parts) if parts else "a file that belonged here is not there")
    x0 = PAD + LABEL_W
    body.append(f'<g class="gap"><title>{_t(text)}</title>'
                f'<text x="{PAD}" y="{y + 12}" class="g">~~ gap</text>'
                f'<text x="{x0 + 4}" y="{y + 11}" class="g">{_t(text)}</text>'
                f'<line x1="{x0}" y1="{y + 18}" x2="{x0 + BAR_W}" y2="{y + 18}" '
                f'stroke="{FILL[M.MARK_GAP]}" stroke-width="3" stroke-dasharray="8 5"/></g>')
    y += ROW_H
    for i in g.absent:  # the finding about the file that belonged here, at the gap
        y = _note_row(body, y, m, m.regions[i], "absent")
    return y


def _note_row(body: list[str], y: int, m: M.DamageMap, r: M.Region, cls: str = "note") -> int:
    body.append(f'<text x="{PAD}" y="{y + 12}" class="l" data-kind="{cls}" data-mark="{r.mark}">'
                f'{_t(f"{r.finding.file or m.path}: {r.mark}: {r.finding.reason}")}'
                f'<title>{_t(r.finding.reason)}</title></text>')
    return y + ROW_H


def _chunk_row(body: list[str], y: int, m: M.DamageMap, row) -> int:
    """One file: its label, its bar, and a rectangle (with hover text) for each region in it."""
    label = f"{row.file}  seq {seq_range(row.first_sequence, row.last_sequence)}  {row.size} B"
    x0 = PAD + LABEL_W
    body.append(f'<g class="chunk" data-file={_a(row.file)}>')
    body.append(f'<text x="{PAD}" y="{y + 13}" class="l">{_t(label)}</text>')
    body.append(f'<rect x="{x0}" y="{y}" width="{BAR_W}" height="{BAR_H}" '
                f'fill="{VALID_FILL if row.size else EMPTY_FILL}"><title>{_t(row.file)}: bytes 0..{row.size}, '
                f'{row.records} valid records, seq {seq_range(row.first_sequence, row.last_sequence)}, '
                f'{_t(row.verdict)}</title></rect>')
    regs = [m.regions[i] for i in row.regions]
    # points first, then damage from the widest (a whole-file finding) to the narrowest: exact regions on top
    for r in sorted(M.drawing_order(regs, row.size), key=lambda r: r.mark not in POINT_MARKS):
        x, w = _span(r, row.size)
        f = r.finding
        where = "" if f.offset is None else f" offset {f.offset}" + (
            f"..{f.end_offset}" if f.end_offset not in (None, f.offset) else "")
        tip = f"{row.file}{where}: {r.mark} ({f.cls}, exit {f.exit_code}): {f.reason}"
        lost = f.lost_or_missing
        if lost:
            tip += f"; seq {seq_range(*lost)} missing"
        body.append(f'<rect class="region" data-mark="{r.mark}" data-offset="{f.offset}" '
                    f'data-end="{f.end_offset}" x="{x0 + x:.2f}" y="{y - 2}" width="{w:.2f}" '
                    f'height="{BAR_H + 4}" fill="{FILL[r.mark]}" stroke="#000" stroke-width="0.5">'
                    f'<title>{_t(tip)}</title></rect>')
    body.append("</g>")
    return y + ROW_H


def _notes(body: list[str], y: int, m: M.DamageMap) -> int:
    """Below the bars: findings tied to no file, the pieces set aside, and problems reading the map."""
    for r in (r for r in m.regions if r.chunk is None and not M.at_gap(m, r)):
        y = _note_row(body, y, m, r)
    if m.pieces:
        body.append(f'<text x="{PAD}" y="{y + 12}" class="h2">set aside (.quarantine/MANIFEST.jsonl)</text>')
        y += 20
        for p in m.pieces:
            body.append(f'<text x="{PAD + 10}" y="{y + 12}" class="l">{_t(piece_text(p))}'
                        f'<title>{_t(f"{p.action} at {p.time}: {p.reason}")}</title></text>')
            y += 18
    for p in m.problems:
        body.append(f'<text x="{PAD}" y="{y + 12}" class="l">problem: {_t(p)}</text>')
        y += 18
    return y


def _legend(body: list[str], y: int, m: M.DamageMap) -> int:
    """A swatch for valid bytes and for each mark the map uses."""
    x = PAD
    used = {r.mark for r in m.regions}
    entries = [("valid bytes", VALID_FILL)] + [(STYLE[k][2], FILL[k]) for k in STYLE if k in used]
    for text, colour in entries:
        body.append(f'<rect x="{x}" y="{y}" width="14" height="14" fill="{colour}" stroke="#000" stroke-width="0.5"/>'
                    f'<text x="{x + 18}" y="{y + 12}" class="l">{_t(text)}</text>')
        x += 26 + 7 * len(text)
    return y + 14 + PAD


def _document(m: M.DamageMap, body: list[str], height: int) -> str:
    total_w = PAD * 2 + LABEL_W + BAR_W
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{height}" '
           f'viewBox="0 0 {total_w} {height}" font-family="monospace" font-size="12">',
           f"<title>{_t('walctl map: ' + m.path)}</title>",
           "<style>.h{font-weight:bold;font-size:14px}.h2{font-weight:bold}.l{fill:#222}.g{fill:#1f77b4}"
           "</style>",
           f'<rect width="{total_w}" height="{height}" fill="#ffffff"/>']
    out.extend(body)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _span(r: M.Region, size: int) -> tuple[float, float]:
    """(x, width) of a region on a BAR_W-wide bar; at least 3 px so one damaged byte stays visible."""
    f = r.finding
    if f.offset is None or size <= 0:
        return 0.0, float(BAR_W)
    end = f.offset if r.mark in POINT_MARKS or f.end_offset is None else f.end_offset
    x = min(BAR_W - 3.0, f.offset * BAR_W / size)
    w = max(3.0, (end - f.offset) * BAR_W / size)
    return x, min(w, BAR_W - x)
