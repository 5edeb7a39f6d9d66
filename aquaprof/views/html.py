"""The report as an HTML page fragment for Jupyter: the stage table with a
bar per stage for its share of the run, the top bottlenecks and the
report's warnings. A run with many stage paths shows the top ones as a
tree and folds the rest under a <details> (no script needed), so the
table stays a screen or two tall and still holds every stage."""
from __future__ import annotations

import html
from typing import TYPE_CHECKING, List, Optional, Tuple

from ..common.units import fmt_bytes, fmt_rate, fmt_time, printable
from ..common.words import shorten_path
from .text import header_lines, overlap_note, recursion_note, \
    straggler_lines, warning_lines

if TYPE_CHECKING:
    from ..model.report import Report, StageStats

#: the share bar of a stage that took the whole run, px
BAR_PX = 60
#: past this many stages the table shows the top ones (and their
#: ancestors) and folds the rest under a <details>
SHOWN_STAGES = 50
#: levels of the tree indented; deeper rows say their depth instead, so
#: that a row's size does not grow with its depth (a recursive stage
#: thousands deep would make the table's size its depth squared, and
#: push its figures thousands of pixels to the right)
MAX_INDENT = 20
#: the most characters of a folded row's stage path: longer ones are cut
#: in the middle (their last stage kept) and say their depth, so that a
#: row's size does not grow with its depth either
PATH_CHARS = 160

_COLUMNS = ["stage", "share", "count", "total", "self", "mean", "p50",
            "p95", "max", "cpu", "mem delta", "items/s"]

# narrow enough for an output area beside JupyterLab's file browser;
# a wider table (long stage names) scrolls inside it, never past it
_STYLE = """<style>
.aquaprof { max-width: 100%; overflow-x: auto; }
.aquaprof table { border-collapse: collapse; font-size: 12px; }
.aquaprof th, .aquaprof td { padding: 2px 5px; text-align: right;
  white-space: nowrap; }
.aquaprof th { border-bottom: 1px solid #888; }
.aquaprof td.stage { text-align: left; font-family: monospace; }
.aquaprof .bar { display: inline-block; height: 9px; background: #e4572e;
  vertical-align: middle; margin-right: 4px; }
.aquaprof .warn { color: #b00; }
</style>"""


def _shown_stages(report: "Report"
                  ) -> Tuple[List["StageStats"], List["StageStats"]]:
    """The table's stages, in tree order: where there are more than
    SHOWN_STAGES, the SHOWN_STAGES that took the most of the run's clock
    (Report.top) and their ancestors, so the tree reads; and the rest."""
    stages = report.stages
    if len(stages) <= SHOWN_STAGES:
        return list(stages), []
    parent = {s.path: s.parent for s in stages}
    wanted = set()
    # a recursive stage ranks once: its levels are shown with it
    ranked = [level for s in report.top(SHOWN_STAGES)
              for level in report.recursion(s)][:SHOWN_STAGES]
    for s in ranked:
        path: Optional[str] = s.path
        while path is not None and path not in wanted:
            wanted.add(path)
            path = parent.get(path)
    shown = [s for s in stages if s.path in wanted]
    return shown, [s for s in stages if s.path not in wanted]


def _indented(s: "StageStats") -> str:
    """Its name, indented by its depth up to MAX_INDENT levels, deeper
    ones marked with their depth (as the text call tree does)."""
    indent = "&nbsp;" * 2 * min(s.depth, MAX_INDENT)
    if s.depth > MAX_INDENT:
        indent += f"[depth {s.depth}] "
    return f"{indent}{html.escape(printable(s.name))}"


def _full_path(s: "StageStats") -> str:
    """A folded row's label, or a bottleneck's: its path, past PATH_CHARS
    cut in the middle with its depth said (HTML)."""
    path = printable(s.path)
    if len(path) > PATH_CHARS:
        path = f"{shorten_path(path, PATH_CHARS)} (depth {s.depth})"
    return html.escape(path)


def _table(rows: List[str]) -> str:
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    return f"<table><tr>{head}</tr>\n" + "\n".join(rows) + "\n</table>"


def _row(s: "StageStats", label: str) -> str:
    """A stage's row, its first cell label (HTML)."""
    w = s.wall
    bar = max(0.0, min(s.share, 1.0)) * BAR_PX
    cells = [
        f'<td class="stage">{label}</td>',
        f'<td><span class="bar" style="width:{bar:.1f}px"></span>'
        f'{s.share * 100:.1f}%</td>',
    ] + [f"<td>{html.escape(v)}</td>" for v in (
        f"{s.count:,}", fmt_time(w.total), fmt_time(s.self_time),
        fmt_time(w.mean), fmt_time(w.p50), fmt_time(w.p95),
        fmt_time(w.max), fmt_time(s.cpu),
        fmt_bytes(s.mem_delta, signed=True) if s.mem_peak else "-",
        fmt_rate(s.throughput))]
    return "<tr>" + "".join(cells) + "</tr>"


def report_html(report: "Report") -> str:
    """The stage table (a bar per stage for its share of the run), the
    top bottlenecks and the report's warnings."""
    e = html.escape
    parts = [_STYLE, '<div class="aquaprof">']
    parts += [f"<div>{e(line)}</div>" for line in header_lines(report)]
    shown, rest = _shown_stages(report)
    parts.append(_table([_row(s, _indented(s)) for s in shown]))
    if rest:
        # the rest stays on the page, folded, so the tree above is the
        # page's first screen; each keeps its full path, as its parent
        # may be above
        parts.append(f"<details><summary>{len(rest):,} more stages"
                     f"</summary>"
                     + _table([_row(s, _full_path(s)) for s in rest])
                     + "</details>")
    if not report.stages:
        parts.append("<div>no stages were recorded (mark them with "
                     "aquaprof.stage)</div>")
    top = report.bottlenecks(3)
    if top:
        parts.append("<div><b>Top bottlenecks by self time:</b><ol>")
        parts += [f"<li>{_full_path(s)}: {fmt_time(ranked)}"
                  f"{e(overlap_note(s) + recursion_note(report, s))}</li>"
                  for s, ranked in top]
        parts.append("</ol></div>")
    stragglers = straggler_lines(report)
    if stragglers:
        parts.append(f"<div><b>{e(stragglers[0])}</b><ul>")
        parts += [f"<li>{e(line.strip())}</li>" for line in stragglers[1:]]
        parts.append("</ul></div>")
    parts += [f'<div class="warn">{e(line)}</div>'
              for line in warning_lines(report)]
    parts.append("</div>")
    return "\n".join(parts)
