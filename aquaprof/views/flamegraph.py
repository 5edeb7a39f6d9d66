"""Flamegraphs of a Report: Brendan Gregg's folded stacks, and a
self-contained interactive SVG (hover for name, time and share; click to
zoom; a search box), plain or differential.

A frame is a stage path, as wide as its total wall time; its children sit
on it, left to right by name, and the gap beside them is its self time.
Widths are thread time (threads that ran at once add up past the run's
wall time); shares are of the run's wall time, as in the table. A
differential flamegraph colours each stage by the verdict Report.compare
gives its self time per call, so that a parent is not painted for what
its sub-stages did.
Where the run was sampled, code frames (``function (file.py:line)``, in
cool colours) share out a stage's self time in proportion to the sampled
time of each call stack (views/code.py), and code sampled outside any
stage sits on the root, as wide as its sampled time.
"""
from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, \
    Union

from .._atomic import write_atomic
from .._units import fmt_time, printable
from .code import Chain, labels, weights
from .flamegraph_script import flamegraph_script
from .threads import threads_summary

if TYPE_CHECKING:
    from ..analysis.compare import StageChange
    from ..report import Report

FRAME_HEIGHT = 18
WIDTH = 1200
PAD = 10
_TOP = 60          # title, search and details lines


def folded_lines(report: "Report") -> List[str]:
    """``a;b;c <self ns>`` per stage path with self time, then a line per
    sampled code stack under it, its share of that self time; the values
    of a path and everything under it add up to its total. Code sampled
    outside any stage comes last, at its sampled time. Frames are stage
    names and code labels, ';' in a name written as ':', characters that
    are not printable escaped (_units.printable)."""
    code = weights(report)
    names = [n.replace(";", ":") for n in
             (labels(report.samples) if report.samples else [])]
    lines = []
    for stage in report.stages:
        frames = [printable(part).replace(";", ":")
                  for part in stage.path.split("/")]
        mine = code.get(stage.id, {})
        self_ns = round(stage.self_time * 1e9) - sum(mine.values())
        if self_ns > 0:
            lines.append(f"{';'.join(frames)} {self_ns}")
        lines += _code_lines(frames, mine, names)
    return lines + _code_lines([], code.get(-1, {}), names)


def _code_lines(frames: List[str], chains: Dict[Chain, int],
                names: Sequence[str]) -> List[str]:
    return [f"{';'.join(frames + [names[f] for f in chain])} {ns}"
            for chain, ns in chains.items()]


def write_folded(report: "Report", path: Union[str, os.PathLike]) -> Path:
    text = "\n".join(folded_lines(report))
    return write_atomic(path, (text + "\n" if text else "").encode("utf-8"))


# ------------------------------------------------------------------ SVG

class _Frame:
    __slots__ = ("path", "name", "depth", "total", "self_time", "x",
                 "children", "base", "code", "change", "calls")

    def __init__(self, path: str, name: str, depth: int, total: float,
                 self_time: float, code: bool = False):
        # shown as text and kept in XML attributes: escaped, since XML
        # allows no control character
        self.path, self.name = printable(path), printable(name)
        self.depth = depth
        self.total, self.self_time = total, self_time
        self.x = 0.0
        self.children: List["_Frame"] = []
        self.base: Optional[float] = None     # total in the base report
        self.code = code                      # sampled code, not a stage
        # a diff's verdicts on the stage: of its self time per call (its
        # colour), and of its whole calls (what compare says)
        self.change: Optional["StageChange"] = None
        self.calls: Optional["StageChange"] = None


def _add_code(parent: _Frame, chains: Dict[Chain, int],
              names: Sequence[str]) -> None:
    """The sampled code stacks (ns each) as frames above parent."""
    # by label: code objects that read the same are one frame
    made: Dict[Tuple[int, str], _Frame] = {}
    for chain, ns in chains.items():
        under = parent
        for f in chain:
            frame = made.get((id(under), names[f]))
            if frame is None:
                path = f"{under.path}/{names[f]}" if under.path \
                    else names[f]
                frame = _Frame(path, names[f], under.depth + 1, 0.0, 0.0,
                               code=True)
                made[(id(under), names[f])] = frame
                under.children.append(frame)
            frame.total += ns * 1e-9
            under = frame
        under.self_time += ns * 1e-9


def _frames(report: "Report") -> Tuple[_Frame, List[_Frame]]:
    """The root ("all") and every frame, laid out: x in seconds from the
    left edge. The root is the thread time of everything on it: threads
    that ran at once add up past the run's wall time."""
    by_path: Dict[str, _Frame] = {}
    root = _Frame("", "all", 0, 0.0, 0.0)
    for s in report.stages:                 # tree order: parents first
        frame = _Frame(s.path, s.name, s.depth + 1, s.wall.total,
                       s.self_time)
        by_path[s.path] = frame
        (by_path[s.parent] if s.parent else root).children.append(frame)
    code = weights(report)
    names = labels(report.samples) if report.samples else []
    for s in report.stages:
        if s.id in code:
            _add_code(by_path[s.path], code[s.id], names)
    _add_code(root, code.get(-1, {}), names)
    root.total = sum(f.total for f in root.children)
    ordered: List[_Frame] = []
    todo = [root]
    while todo:
        frame = todo.pop()
        ordered.append(frame)
        x = frame.x
        for child in sorted(frame.children, key=lambda f: f.name):
            child.x = x
            x += child.total
        todo.extend(reversed(sorted(frame.children, key=lambda f: f.name)))
    return root, ordered


def _fit(name: str, width: float) -> str:
    """The label that fits a frame of width px (7 px a character), as the
    script does when it zooms."""
    room = int((width - 6) // 7)
    if room >= len(name):
        return name
    return name[:room - 2] + ".." if room > 2 else ""


NEUTRAL = "rgb(200,200,200)"    # same, or not judged
NEW = "rgb(220,40,40)"
FULL_AT = 2.0                   # a diff's colour is deepest at 2x or 1/2x


def _kind(frame: _Frame) -> str:
    """A diff frame's class: its self-time verdict ("slower?" is slower
    and hedged), "unjudged" for the root and sampled code."""
    if frame.change is None:
        return "unjudged"
    word = frame.change.verdict
    return f"{word[:-1]} hedged" if word.endswith("?") else word


def _colour(frame: _Frame, diff: bool) -> str:
    """Warm hues by name for a plain graph's stages, cool ones for its
    code; for a diff, the frame's self-time verdict: red slower, blue
    faster, grey same or unjudged, deeper as the total moves further."""
    if not diff:
        h = sum(ord(c) for c in frame.name)
        if frame.code:
            return (f"rgb({40 + h % 60},{150 + (h * 7) % 80},"
                    f"{170 + (h * 3) % 60})")
        return f"rgb({205 + h % 50},{80 + (h * 7) % 120},{40 + (h * 3) % 50})"
    kind = _kind(frame).split()[0]
    if kind == "new":
        return NEW
    change = frame.change.change if frame.change else None
    if kind not in ("slower", "faster") or change is None:
        return NEUTRAL
    # by the ratio, so that 2x slower and 2x faster look alike; a called
    # change never fades to the grey of "same"
    ratio = math.log1p(max(change, -0.999)) / math.log(FULL_AT)
    fade = int(200 - 150 * min(0.3 + 0.7 * abs(ratio), 1.0))
    return (f"rgb(235,{fade},{fade})" if kind == "slower"
            else f"rgb({fade},{fade},235)")


def _details(frame: _Frame, report: "Report", diff: bool) -> str:
    """The hover text: time, share of the run's wall time (the table's
    share), self time, and for a diff the verdicts and the base."""
    wall = report.wall
    share = frame.total / wall * 100 if wall else 0.0
    if not frame.path:
        threads = len(report.threads)
        names = threads_summary(report.threads)
        text = (f"all: {fmt_time(frame.total)} of thread time on "
                f"{threads} thread{'s' if threads != 1 else ''}"
                f"{f' ({names})' if names else ''}, "
                f"{share:.1f} % of the run's {fmt_time(wall)} wall time")
    else:
        text = (f"{frame.path}: {fmt_time(frame.total)} ({share:.1f} % of "
                f"the run), self {fmt_time(frame.self_time)}"
                + ("; sampled code" if frame.code else ""))
    if not diff:
        return text
    if frame.change is not None:
        if frame.change.verdict == "new":
            return text + "; not in the base report"
        text += f"; self time: {frame.change.summary()}"
        if frame.calls is not None and any(not c.code
                                           for c in frame.children):
            text += (f"; whole calls, as compare judges them: "
                     f"{frame.calls.summary()}")
        return text
    if frame.base is None:
        return text + "; not in the base report"
    delta = frame.total - frame.base
    rel = f" ({delta / frame.base * 100:+.1f} %)" if frame.base else ""
    return (text + f"; base {fmt_time(frame.base)}, change "
            f"{'+' if delta >= 0 else '-'}{fmt_time(abs(delta))}{rel}"
            f"; not judged")


def legend_svg(diff: bool, threshold: float, alpha: float) -> str:
    """The lines under the title: what width and shares are, and for a
    diff what each colour says."""
    lines = ['<text class="legend" x="10" y="40">width: thread time '
             '(threads that ran at once add up); % of the run\'s wall '
             'time, as in the table; click to zoom</text>']
    if diff:
        key = [("slower", "rgb(235,95,95)"), ("same or noisy", NEUTRAL),
               ("faster", "rgb(95,95,235)"), ("new", NEW)]
        x = 10
        for word, fill in key:
            lines.append(f'<rect x="{x}" y="47" width="12" height="12" '
                         f'fill="{fill}"/><text class="legend" x="{x + 16}"'
                         f' y="57">{word}</text>')
            x += 22 + 7 * len(word)
        rule = [f"by its self time, judged as compare judges a stage: "
                f"its total or tail (p95 call) a run moved by more "
                f"than {threshold * 100:g} % at p < {alpha:g}",
                f"deeper = larger change, deepest at {FULL_AT:g}x; dashed: "
                f"too few calls to test; grey too: the root and sampled "
                f"code, not judged; hover for the change in %"]
        lines.append(f'<text class="legend" x="{x}" y="57">'
                     f'{html.escape(rule[0])}</text>')
        lines.append(f'<text class="legend" x="10" y="73">'
                     f'{html.escape(rule[1])}</text>')
    return "\n".join(lines)


def _judged(report: "Report", base: Optional["Report"], threshold: float,
            alpha: float) -> Tuple[_Frame, List[_Frame]]:
    """The frames laid out; with base, each with its base total and, for
    a stage, compare's verdicts on it."""
    root, frames = _frames(report)
    if base is not None:
        before = {f.path: f.total for f in _frames(base)[1]}
        # compare's own verdicts, through the report: one rule for both
        comparison = report.compare(base, threshold, alpha)
        # by the path as frames hold it, escaped (_Frame)
        own = {printable(c.path): c for c in comparison.own_changes}
        calls = {printable(c.path): c for c in comparison.changes}
        for frame in frames:
            frame.base = before.get(frame.path)
            if not frame.code and frame.path:
                frame.change = own[frame.path]
                frame.calls = calls[frame.path]
    return root, frames


def frame_groups(report: "Report", base: Optional["Report"] = None,
                 threshold: float = 0.05, alpha: float = 0.01,
                 top: int = 0) -> Tuple[str, int]:
    """The frames as SVG groups (class "f", data-x/w/d/path/details, a
    rect and a label each), laid out WIDTH wide under `top` pixels of
    header, and the height they fill down to."""
    root, frames = _judged(report, base, threshold, alpha)
    diff = base is not None
    depth = max(f.depth for f in frames) + 1
    height = top + depth * FRAME_HEIGHT + PAD
    scale = (WIDTH - 2 * PAD) / root.total if root.total > 0 else 0.0
    rects = []
    for f in frames:
        x = PAD + f.x * scale
        w = f.total * scale
        y = height - PAD - (f.depth + 1) * FRAME_HEIGHT
        details = html.escape(_details(f, report, diff), quote=True)
        label = html.escape(_fit(f.name, w))
        kind = "f c" if f.code else "f"       # c: sampled code
        verdict = ""
        if diff and not f.code:
            kind += f" {_kind(f)}"
            if f.change is not None:
                verdict = f' data-verdict="{f.change.verdict}"'
        rects.append(
            f'<g class="{kind}" data-x="{f.x!r}" data-w="{f.total!r}" '
            f'data-d="{f.depth}" data-path="{html.escape(f.path, True)}" '
            f'data-details="{details}"{verdict}>'
            f'<title>{details}</title>'
            f'<rect x="{x:.3f}" y="{y}" width="{w:.3f}" '
            f'height="{FRAME_HEIGHT - 1}" fill="{_colour(f, diff)}" rx="2"/>'
            f'<text x="{x + 3:.3f}" y="{y + FRAME_HEIGHT - 5}">{label}'
            f'</text></g>')
    return "\n".join(rects), height


def flamegraph_svg(report: "Report", title: str = "aquaprof flamegraph",
                   base: Optional["Report"] = None, threshold: float = 0.05,
                   alpha: float = 0.01) -> str:
    """The SVG text. With base, a differential flamegraph: frames as wide
    as in report, each stage coloured by the verdict compare gives its
    self time per call (threshold, alpha as in Report.compare); sampled
    code and the root are grey, their change only shown."""
    diff = base is not None
    top = _TOP + (32 if diff else 0)     # the diff's two legend lines
    frames, height = frame_groups(report, base, threshold, alpha, top)
    return _SVG.format(
        width=WIDTH, height=height, title=html.escape(title),
        legend=legend_svg(diff, threshold, alpha), frames=frames,
        box=WIDTH - PAD - 300, right=PAD + 300, below=top - 4,
        wall=repr(report.wall),
        script=flamegraph_script(PAD, FRAME_HEIGHT,
                                 "document.documentElement", True))


def write_flamegraph(report: "Report", path: Union[str, os.PathLike],
                     title: str = "aquaprof flamegraph",
                     base: Optional["Report"] = None, threshold: float = 0.05,
                     alpha: float = 0.01) -> Path:
    return write_atomic(path, flamegraph_svg(report, title, base, threshold,
                                             alpha).encode("utf-8"))


# the search box is an HTML input in a foreignObject: browsers show it in
# a standalone SVG; a viewer without scripts shows neither it nor zoom.
# What hangs on the right edge says how far from it (data-right): the
# script moves it when the drawing takes the window's width.
_SVG = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{width}" \
height="{height}" viewBox="0 0 {width} {height}">
<style>
text {{ font: 12px Verdana, sans-serif; fill: #000; pointer-events: none; }}
.f {{ cursor: pointer; }}
.c text {{ font-style: italic; }}
.hedged rect {{ stroke: #555; stroke-width: 1; stroke-dasharray: 3 2; }}
.f:hover rect {{ stroke: #000; stroke-width: 0.5; }}
.hit rect {{ fill: rgb(230,0,230) !important; }}
#title {{ font-size: 17px; }}
.details, .matched, .legend {{ font-size: 12px; fill: #333; }}
.button {{ fill: #06c; cursor: pointer; pointer-events: all; }}
.term {{ width: 290px; font: 12px Verdana, sans-serif; }}
.term.bad {{ outline: 2px solid #c00; }}
</style>
<rect width="100%" height="100%" fill="#f8f8f4"/>
<text id="title" x="50%" y="22" text-anchor="middle">{title}</text>
{legend}
<text class="reset button" x="10" y="{below}" visibility="hidden">\
Reset zoom</text>
<foreignObject x="{box}" data-right="{right}" y="6" width="300" \
height="24"><input xmlns="http://www.w3.org/1999/xhtml" id="term" \
class="term" type="search" \
placeholder="search: regular expression on stage paths" \
title="Ctrl-F or F3 here; Escape clears"/></foreignObject>
<text class="matched" x="{width}" dx="-10" data-right="0" y="40" \
text-anchor="end"></text>
<text class="details" x="110" y="{below}"> </text>
<g id="frames" data-wall="{wall}">
{frames}
</g>
<script type="text/ecmascript"><![CDATA[
{script}
]]></script>
</svg>
"""
