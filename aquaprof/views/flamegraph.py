"""Flamegraphs of a Report: Brendan Gregg's folded stacks, and a
self-contained interactive SVG (hover for name, time and share; click to
zoom; search), plain or differential.

A frame is a stage path, as wide as its total wall time; its children sit
on it, left to right by name, and the gap beside them is its self time.
Where the run was sampled, code frames (``function (file.py:line)``, in
cool colours) share out a stage's self time in proportion to the sampled
time of each call stack (views/code.py), and code sampled outside any
stage sits on the root, as wide as its sampled time.
"""
from __future__ import annotations

import html
import os
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple, \
    Union

from .._atomic import write_atomic
from .._units import fmt_time, printable
from .code import Chain, labels, weights

if TYPE_CHECKING:
    from ..report import Report

FRAME_HEIGHT = 18
WIDTH = 1200
_PAD = 10
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
                 "children", "base", "code")

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
    left edge."""
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


def _colour(frame: _Frame, diff: bool) -> str:
    """Warm hues by name for a plain graph's stages, cool ones for its
    code; for a diff, red where the frame got slower, blue where faster,
    by how much."""
    if not diff:
        h = sum(ord(c) for c in frame.name)
        if frame.code:
            return (f"rgb({40 + h % 60},{150 + (h * 7) % 80},"
                    f"{170 + (h * 3) % 60})")
        return f"rgb({205 + h % 50},{80 + (h * 7) % 120},{40 + (h * 3) % 50})"
    if frame.base is None:              # new in this report
        return "rgb(220,40,40)"
    if frame.base <= 0:
        return "rgb(220,220,220)"
    change = (frame.total - frame.base) / frame.base
    strength = min(abs(change), 1.0)
    fade = int(230 - 180 * strength)
    return (f"rgb(235,{fade},{fade})" if change > 0
            else f"rgb({fade},{fade},235)")


def _details(frame: _Frame, root_total: float, diff: bool) -> str:
    share = frame.total / root_total * 100 if root_total else 0.0
    text = (f"{frame.path or 'all'}: {fmt_time(frame.total)} "
            f"({share:.1f} %), self {fmt_time(frame.self_time)}"
            + ("; sampled code" if frame.code else ""))
    if diff:
        if frame.base is None:
            text += "; not in the base report"
        else:
            delta = frame.total - frame.base
            rel = f" ({delta / frame.base * 100:+.1f} %)" if frame.base else ""
            text += (f"; base {fmt_time(frame.base)}, change "
                     f"{'+' if delta >= 0 else '-'}{fmt_time(abs(delta))}"
                     f"{rel}")
    return text


def flamegraph_svg(report: "Report", title: str = "aquaprof flamegraph",
                   base: Optional["Report"] = None) -> str:
    """The SVG text. With base, a differential flamegraph: frames as wide
    as in report, coloured by the change from base."""
    root, frames = _frames(report)
    diff = base is not None
    if base is not None:
        before = {f.path: f.total for f in _frames(base)[1]}
        for frame in frames:
            frame.base = before.get(frame.path)
    depth = max(f.depth for f in frames) + 1
    height = _TOP + depth * FRAME_HEIGHT + _PAD
    scale = (WIDTH - 2 * _PAD) / root.total if root.total > 0 else 0.0
    rects = []
    for f in frames:
        x = _PAD + f.x * scale
        w = f.total * scale
        y = height - _PAD - (f.depth + 1) * FRAME_HEIGHT
        details = html.escape(_details(f, root.total, diff), quote=True)
        label = html.escape(_fit(f.name, w))
        kind = "f c" if f.code else "f"       # c: sampled code
        rects.append(
            f'<g class="{kind}" data-x="{f.x!r}" data-w="{f.total!r}" '
            f'data-d="{f.depth}" data-path="{html.escape(f.path, True)}" '
            f'data-details="{details}">'
            f'<title>{details}</title>'
            f'<rect x="{x:.3f}" y="{y}" width="{w:.3f}" '
            f'height="{FRAME_HEIGHT - 1}" fill="{_colour(f, diff)}" rx="2"/>'
            f'<text x="{x + 3:.3f}" y="{y + FRAME_HEIGHT - 5}">{label}'
            f'</text></g>')
    legend = ("red: slower than the base, blue: faster, deeper = more"
              if diff else "width: wall time; click to zoom, Ctrl-F or "
                           "the search box to find")
    return _SVG.format(
        width=WIDTH, height=height, title=html.escape(title),
        legend=html.escape(legend), frames="\n".join(rects),
        script=_SCRIPT.replace("@PAD@", str(_PAD)).replace(
            "@WIDTH@", str(WIDTH)))


def write_flamegraph(report: "Report", path: Union[str, os.PathLike],
                     title: str = "aquaprof flamegraph",
                     base: Optional["Report"] = None) -> Path:
    return write_atomic(path, flamegraph_svg(report, title, base)
                        .encode("utf-8"))


_SVG = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{width}" \
height="{height}" viewBox="0 0 {width} {height}" onload="init(evt)">
<style>
text {{ font: 12px Verdana, sans-serif; fill: #000; pointer-events: none; }}
.f {{ cursor: pointer; }}
.c text {{ font-style: italic; }}
.f:hover rect {{ stroke: #000; stroke-width: 0.5; }}
.hit rect {{ fill: rgb(230,0,230) !important; }}
#title {{ font-size: 17px; }}
#details, #matched, #legend {{ font-size: 12px; fill: #333; }}
.button {{ fill: #06c; cursor: pointer; pointer-events: all; }}
</style>
<rect width="100%" height="100%" fill="#f8f8f4"/>
<text id="title" x="50%" y="22" text-anchor="middle">{title}</text>
<text id="legend" x="10" y="40">{legend}</text>
<text id="reset" class="button" x="10" y="56" visibility="hidden">\
Reset zoom</text>
<text id="search" class="button" x="{width}" dx="-10" y="22" \
text-anchor="end">Search</text>
<text id="matched" x="{width}" dx="-10" y="40" text-anchor="end"></text>
<text id="details" x="110" y="56"> </text>
<g id="frames">
{frames}
</g>
<script type="text/ecmascript"><![CDATA[
{script}
]]></script>
</svg>
"""

_SCRIPT = r"""
var PAD = @PAD@, WIDTH = @WIDTH@, frames, details, reset, matched;
function init(evt) {
  frames = Array.prototype.slice.call(document.querySelectorAll(".f"));
  details = document.getElementById("details");
  reset = document.getElementById("reset");
  matched = document.getElementById("matched");
  frames.forEach(function (g) {
    g.addEventListener("mouseover", function () {
      details.textContent = g.getAttribute("data-details"); });
    g.addEventListener("mouseout", function () {
      details.textContent = " "; });
    g.addEventListener("click", function () { zoom(g); });
  });
  reset.addEventListener("click", function () { zoom(frames[0]); });
  document.getElementById("search").addEventListener("click", search);
  window.addEventListener("keydown", function (e) {
    if (e.keyCode === 114 || (e.ctrlKey && e.keyCode === 70)) {
      e.preventDefault(); search(); }
  });
  zoom(frames[0]);
}
function num(g, key) { return parseFloat(g.getAttribute("data-" + key)); }
function fit(g, x, w) {
  var rect = g.querySelector("rect"), text = g.querySelector("text");
  rect.setAttribute("x", x); rect.setAttribute("width", Math.max(w, 0));
  text.setAttribute("x", x + 3);
  var name = g.getAttribute("data-path").split("/").pop() || "all";
  var room = Math.floor((w - 6) / 7);
  text.textContent = room >= name.length ? name
    : room > 2 ? name.substring(0, room - 2) + ".." : "";
}
function zoom(target) {
  var x0 = num(target, "x"), w0 = num(target, "w"), d0 = num(target, "d");
  var path = target.getAttribute("data-path");
  var scale = w0 > 0 ? (WIDTH - 2 * PAD) / w0 : 0;
  frames.forEach(function (g) {
    var p = g.getAttribute("data-path"), d = num(g, "d");
    var inside = path === "" || p === path || p.indexOf(path + "/") === 0;
    var above = d < d0 && (p === "" || path.indexOf(p + "/") === 0);
    if (inside || above) {
      g.style.display = "";
      if (above) { fit(g, PAD, WIDTH - 2 * PAD); }
      else { fit(g, PAD + (num(g, "x") - x0) * scale, num(g, "w") * scale); }
      g.style.opacity = above ? 0.6 : 1;
    } else { g.style.display = "none"; }
  });
  reset.setAttribute("visibility", path === "" ? "hidden" : "visible");
}
function search() {
  var term = prompt("Search stages (regular expression)", "");
  frames.forEach(function (g) { g.classList.remove("hit"); });
  matched.textContent = "";
  if (!term) { return; }
  var re = new RegExp(term), total = num(frames[0], "w"), hits = 0;
  var counted = [];
  frames.forEach(function (g) {
    var p = g.getAttribute("data-path");
    if (p && re.test(p.split("/").pop())) {
      g.classList.add("hit");
      var nested = counted.some(function (c) {
        return p.indexOf(c + "/") === 0; });
      if (!nested) { hits += num(g, "w"); counted.push(p); }
    }
  });
  matched.textContent = "matched " +
    (total > 0 ? (100 * hits / total).toFixed(1) : "0") + " %";
}
"""
