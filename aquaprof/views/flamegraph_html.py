"""The interactive flamegraph as an HTML fragment, for notebooks
(JupyterLab, classic Notebook, VS Code) and for the HTML page.

A fragment is a container <div> with an id of its own (a new one each
time it is rendered), its style, a toolbar of real HTML controls (search
box, the wall/CPU switch, the idle threads' toggle, reset button, the
details of the frame under the mouse), the frames as inline SVG as wide
as the container, and one inline script bound to that container
(flamegraph_script.py): no global, no onload, so that several on one
page, or the same one shown twice, stay independent.
"""
from __future__ import annotations

import html
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

from .flamegraph import (
    FRAME_HEIGHT, MIN_SHARE, PAD, WIDTH, Drawing, fold_labels, frame_groups,
    legend_svg, write_flamegraph)
from .flamegraph_script import flamegraph_script

if TYPE_CHECKING:
    from ..model.report import Report

# one set of rules for every fragment, each scoped to .aqp-flame: a second
# copy on the page changes nothing. The bars keep one line whatever the
# hovered frame's details say: a bar that grew would move the frames
# under the mouse, whose details would change it back, and so on
_STYLE = """<style>
.aqp-flame { font: 12px Verdana, sans-serif; color: #222;
  background: #f8f8f4; padding: 6px 0; border-radius: 4px; }
.aqp-flame .bar { display: flex; align-items: center; gap: 10px;
  padding: 2px 10px; min-height: 22px; }
.aqp-flame .title { font-size: 15px; font-weight: bold; flex: 1; }
.aqp-flame .term { width: 300px; font: 12px Verdana, sans-serif; }
.aqp-flame .term.bad { outline: 2px solid #c00; }
.aqp-flame .matched, .aqp-flame .details { color: #333; }
.aqp-flame .details { overflow: hidden; white-space: nowrap;
  text-overflow: ellipsis; flex: 1; min-width: 0; }
.aqp-flame .reset { flex: none; white-space: nowrap; }
.aqp-flame svg { display: block; }
.aqp-flame svg text { font: 12px Verdana, sans-serif; fill: #000;
  pointer-events: none; }
.aqp-flame svg .legend { fill: #333; }
.aqp-flame .f { cursor: pointer; }
.aqp-flame .c text { font-style: italic; }
.aqp-flame .hedged rect { stroke: #555; stroke-width: 1;
  stroke-dasharray: 3 2; }
.aqp-flame .f:hover rect { stroke: #000; stroke-width: 0.5; }
.aqp-flame .hit rect { fill: rgb(230,0,230) !important; }
.aqp-flame .switches > * { flex: none; white-space: nowrap; }
.aqp-flame .switches button { font: 12px Verdana, sans-serif; }
.aqp-flame .mode.on { font-weight: bold; }
.aqp-flame .switches .note { flex: 1; min-width: 0; color: #666;
  overflow: hidden; text-overflow: ellipsis; }
</style>"""


def flamegraph_html(report: "Report", title: str = "aquaprof flamegraph",
                    base: Optional["Report"] = None, threshold: float = 0.05,
                    alpha: float = 0.01, min_share: float = MIN_SHARE) -> str:
    """The fragment, with a fresh id; base, threshold, alpha and
    min_share as for flamegraph_svg (a differential flamegraph, the code
    frames merged into the frame under them)."""
    uid = f"aqp-flame-{uuid.uuid4().hex[:12]}"
    diff = base is not None
    # 4 px above the deepest frame: the margin the script keeps there
    drawing = frame_groups(report, base, threshold, alpha, 4, min_share)
    # the legend's lines sit 28 px down in the SVG file, under its title
    legend_height = 50 if diff else 18
    legend = (f'<svg class="legend" width="100%" height="{legend_height}">'
              f'<g transform="translate(0,-28)">'
              f'{legend_svg(diff, threshold, alpha)}</g></svg>')
    root = (f'(function () {{ var s = document.currentScript, '
            f'el = s && s.parentNode; return el && el.id === "{uid}" ? el '
            f': document.getElementById("{uid}"); }})()')
    return "\n".join([
        _STYLE,
        f'<div class="aqp-flame" id="{uid}">',
        f'<div class="bar"><span class="title">{html.escape(title)}</span>'
        f'<span class="matched"></span>'
        f'<input class="term" type="search" aria-label="search" '
        f'placeholder="search: regular expression on stage paths" '
        f'title="a regular expression on full stage paths (a/b); Escape '
        f'clears"/></div>',
        legend,
        _controls(drawing),
        f'<div class="bar"><button class="reset" type="button" '
        f'style="visibility:hidden">Reset zoom</button>'
        f'<span class="details"> </span></div>',
        f'<svg class="frames" xmlns="http://www.w3.org/2000/svg" '
        f'width="100%" viewBox="0 0 {WIDTH} {drawing.height}" '
        f'preserveAspectRatio="xMinYMin meet">'
        f'<g data-wall="{report.wall!r}">{drawing.groups}</g></svg>',
        f'<script>{flamegraph_script(PAD, FRAME_HEIGHT, root, False)}'
        f'</script>',
        '</div>'])


def _controls(drawing: Drawing) -> str:
    """The bar of switches: widths by wall or CPU time, the idle
    threads' toggle, and what the drawing folds and merges."""
    parts = ['<div class="bar switches"><span>widths: '
             '<button class="mode on" type="button" data-mode="wall" '
             'aria-pressed="true">wall</button>'
             '<button class="mode" type="button" data-mode="cpu" '
             'aria-pressed="false">CPU</button></span>']
    if drawing.idle_threads:
        show, fold = fold_labels(drawing.idle_threads)
        parts.append(f'<button class="fold" type="button" '
                     f'data-show="{show}" data-fold="{fold}">{show}</button>')
    if drawing.notes:
        note = html.escape("; ".join(drawing.notes), quote=True)
        parts.append(f'<span class="note" title="{note}">{note}</span>')
    return "".join(parts) + "</div>"


class Flamegraph:
    """A report's interactive flamegraph, as Report.flamegraph() gives it:
    a notebook shows it (_repr_html_, a fresh fragment each time), html()
    gives the fragment and save(path) writes the standalone SVG file."""

    def __init__(self, report: "Report", title: str = "aquaprof flamegraph",
                 base: Optional["Report"] = None, threshold: float = 0.05,
                 alpha: float = 0.01, min_share: float = MIN_SHARE):
        self.report, self.title, self.base = report, title, base
        self.threshold, self.alpha = threshold, alpha
        self.min_share = min_share

    def html(self) -> str:
        """The HTML fragment (flamegraph_html), with a fresh id."""
        return flamegraph_html(self.report, self.title, self.base,
                               self.threshold, self.alpha, self.min_share)

    def _repr_html_(self) -> str:
        return self.html()

    def save(self, path: Union[str, os.PathLike]) -> Path:
        """The standalone SVG file (write_flamegraph)."""
        return write_flamegraph(self.report, path, self.title, self.base,
                                self.threshold, self.alpha, self.min_share)

    def __repr__(self) -> str:
        kind = "differential " if self.base is not None else ""
        return (f"<{kind}flamegraph of {len(self.report)} stage paths: "
                f"display it in a notebook, or save(path) for an SVG>")
