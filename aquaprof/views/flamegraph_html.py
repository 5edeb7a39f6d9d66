"""The interactive flamegraph as an HTML fragment, for notebooks
(JupyterLab, classic Notebook, VS Code) and for the HTML page.

A fragment is a container <div> with an id of its own (a new one each
time it is rendered), its style, a toolbar of real HTML controls (search
box, reset button, the details of the frame under the mouse), the frames
as inline SVG as wide as the container, and one inline script bound to
that container (flamegraph_script.py): no global, no onload, so that
several on one page, or the same one shown twice, stay independent.
"""
from __future__ import annotations

import html
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Union

from .flamegraph import FRAME_HEIGHT, PAD, WIDTH, frame_groups, \
    legend_svg, write_flamegraph
from .flamegraph_script import flamegraph_script

if TYPE_CHECKING:
    from ..report import Report

# one set of rules for every fragment, each scoped to .aqp-flame: a second
# copy on the page changes nothing
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
  text-overflow: ellipsis; }
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
</style>"""


def flamegraph_html(report: "Report", title: str = "aquaprof flamegraph",
                    base: Optional["Report"] = None, threshold: float = 0.05,
                    alpha: float = 0.01) -> str:
    """The fragment, with a fresh id; base, threshold and alpha as for
    flamegraph_svg (a differential flamegraph)."""
    uid = f"aqp-flame-{uuid.uuid4().hex[:12]}"
    diff = base is not None
    # 4 px above the deepest frame: the margin the script keeps there
    frames, height = frame_groups(report, base, threshold, alpha, top=4)
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
        f'<div class="bar"><button class="reset" type="button" '
        f'style="visibility:hidden">Reset zoom</button>'
        f'<span class="details"> </span></div>',
        f'<svg class="frames" xmlns="http://www.w3.org/2000/svg" '
        f'width="100%" viewBox="0 0 {WIDTH} {height}" '
        f'preserveAspectRatio="xMinYMin meet">'
        f'<g data-wall="{report.wall!r}">{frames}</g></svg>',
        f'<script>{flamegraph_script(PAD, FRAME_HEIGHT, root, False)}'
        f'</script>',
        '</div>'])


class Flamegraph:
    """A report's interactive flamegraph, as Report.flamegraph() gives it:
    a notebook shows it (_repr_html_, a fresh fragment each time), html()
    gives the fragment and save(path) writes the standalone SVG file."""

    def __init__(self, report: "Report", title: str = "aquaprof flamegraph",
                 base: Optional["Report"] = None, threshold: float = 0.05,
                 alpha: float = 0.01):
        self.report, self.title, self.base = report, title, base
        self.threshold, self.alpha = threshold, alpha

    def html(self) -> str:
        """The HTML fragment (flamegraph_html), with a fresh id."""
        return flamegraph_html(self.report, self.title, self.base,
                               self.threshold, self.alpha)

    def _repr_html_(self) -> str:
        return self.html()

    def save(self, path: Union[str, os.PathLike]) -> Path:
        """The standalone SVG file (write_flamegraph)."""
        return write_flamegraph(self.report, path, self.title, self.base,
                                self.threshold, self.alpha)

    def __repr__(self) -> str:
        kind = "differential " if self.base is not None else ""
        return (f"<{kind}flamegraph of {len(self.report)} stage paths: "
                f"display it in a notebook, or save(path) for an SVG>")
