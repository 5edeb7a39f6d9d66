"""Small static SVG charts for the HTML page: the distribution of a
stage's call times, from the report's histogram of them, and a quantity
over the run's time (host RSS, GPU memory in use).

A histogram's buckets are log-spaced (about 1/32 of their value wide),
too fine to read: they are gathered into at most BINS bins, log-spaced
between the stage's fastest and slowest call, so that a bar's width is
the same ratio of time anywhere on the axis.
"""
from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, List, Sequence, Tuple

from .. import _core
from ..common.words import plural
from ..common.units import fmt_bytes, fmt_time

if TYPE_CHECKING:
    from ..model.report import StageStats

WIDTH, HEIGHT = 560, 150
_LEFT, _BOTTOM, _TOP = 60, 28, 10
BINS = 40


def _frame(inner: str, x_labels: Sequence[Tuple[float, str]],
           y_max: str) -> str:
    """Axes, labels under the x axis (at x in 0..1) and the top value of
    the y axis, around inner."""
    plot_w = WIDTH - _LEFT - 10
    base = HEIGHT - _BOTTOM
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" '
             f'width="100%" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'style="max-width:{WIDTH}px">',
             f'<line x1="{_LEFT}" y1="{base}" x2="{WIDTH - 10}" y2="{base}" '
             f'stroke="#888"/><line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" '
             f'y2="{base}" stroke="#888"/>',
             f'<text x="{_LEFT - 4}" y="{_TOP + 8}" text-anchor="end">'
             f'{html.escape(y_max)}</text>',
             f'<text x="{_LEFT - 4}" y="{base}" text-anchor="end">0</text>',
             inner]
    for at, label in x_labels:
        # the ends' labels stay inside the drawing
        anchor = "start" if at <= 0 else "end" if at >= 1 else "middle"
        parts.append(f'<text x="{_LEFT + at * plot_w:.1f}" y="{base + 16}" '
                     f'text-anchor="{anchor}">{html.escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def distribution_svg(stage: "StageStats") -> str:
    """The stage's call times as bars over a log time axis, with its
    p50 and p95 marked."""
    wall = stage.wall
    low, high = max(wall.min, 1e-9), max(wall.max, 1e-9)
    if high <= low * 1.0001:
        high = low * 1.5
    span = math.log(high / low)
    counts = [0] * BINS
    edges = _core.HIST_LOWER_NS
    for index, n in wall.buckets():
        mid = (int(edges[index]) + int(edges[index + 1])) / 2 * 1e-9
        mid = min(max(mid, low), high)
        counts[min(int(math.log(mid / low) / span * BINS), BINS - 1)] += n
    plot_w, plot_h = WIDTH - _LEFT - 10, HEIGHT - _BOTTOM - _TOP
    most = max(counts) or 1
    bar = plot_w / BINS
    parts = []
    for i, n in enumerate(counts):
        if not n:
            continue
        h = n / most * plot_h
        lo = low * math.exp(span * i / BINS)
        hi = low * math.exp(span * (i + 1) / BINS)
        parts.append(f'<rect x="{_LEFT + i * bar + 0.5:.1f}" '
                     f'y="{HEIGHT - _BOTTOM - h:.1f}" width="{bar - 1:.1f}" '
                     f'height="{h:.1f}" fill="#e4572e"><title>'
                     f'{plural(n, "call")} of {fmt_time(lo)} to '
                     f'{fmt_time(hi)}</title></rect>')
    for row, (q, value) in enumerate((("p50", wall.p50),
                                      ("p95", wall.p95))):
        at = math.log(min(max(value, low), high) / low) / span
        x = _LEFT + at * plot_w
        # right of its line, or left of it past the middle; one row
        # each, so that the two never overlap
        side = (f'x="{x + 3:.1f}"' if at < 0.6
                else f'x="{x - 3:.1f}" text-anchor="end"')
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{_TOP}" '
                     f'y2="{HEIGHT - _BOTTOM}" stroke="#333" '
                     f'stroke-dasharray="3 2"/><text {side} '
                     f'y="{_TOP + 10 + 13 * row}" class="q">{q} '
                     f'{fmt_time(value)}</text>')
    return _frame("".join(parts), [(0, fmt_time(low)), (1, fmt_time(high))],
                  plural(most, "call"))


def series_svg(points: Sequence[Tuple[float, float]], wall: float,
               unit: str = "bytes", steps: bool = False) -> str:
    """A line of (seconds from the run's start, value) points over the
    run's time, its highest value on the y axis; unit "bytes" prints
    values as sizes. With steps, each value holds until the next point,
    from 0 at the start to the run's end (memory in use after each
    allocation and free)."""
    if steps:
        held: List[Tuple[float, float]] = [(0.0, 0.0)]
        for t, v in points:
            held += [(t, held[-1][1]), (t, v)]
        points = held + [(wall, held[-1][1])]
    top = max((v for _, v in points), default=0.0) or 1.0
    plot_w, plot_h = WIDTH - _LEFT - 10, HEIGHT - _BOTTOM - _TOP
    span = wall if wall > 0 else max((t for t, _ in points), default=1.0)
    span = span or 1.0
    xy: List[str] = []
    for t, v in points:
        x = _LEFT + min(max(t / span, 0.0), 1.0) * plot_w
        xy.append(f"{x:.1f},{HEIGHT - _BOTTOM - v / top * plot_h:.1f}")
    label = fmt_bytes(int(top)) if unit == "bytes" else f"{top:g} {unit}"
    line = (f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" '
            f'points="{" ".join(xy)}"/>')
    return _frame(line, [(0, "0 s"), (1, fmt_time(span))], label)
