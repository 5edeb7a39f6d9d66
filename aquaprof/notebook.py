"""Jupyter: the report as an HTML table with inline bars, the report as a
pandas DataFrame, and the ``%%aquaprof`` cell magic
(``%load_ext aquaprof``)."""
from __future__ import annotations

import html
import shlex
from typing import TYPE_CHECKING, Any

from ._format import fmt_bytes, fmt_rate, fmt_time

if TYPE_CHECKING:
    from .report import Report

_STYLE = """<style>
.aquaprof table { border-collapse: collapse; font-size: 12px; }
.aquaprof th, .aquaprof td { padding: 2px 8px; text-align: right;
  white-space: nowrap; }
.aquaprof th { border-bottom: 1px solid #888; }
.aquaprof td.stage { text-align: left; font-family: monospace; }
.aquaprof .bar { display: inline-block; height: 9px; background: #e4572e;
  vertical-align: middle; margin-right: 4px; }
.aquaprof .warn { color: #b00; }
</style>"""


def report_html(report: "Report") -> str:
    """The stage table (a bar per stage for its share of the run), the
    top bottlenecks and the report's warnings."""
    from ._format import _header, _warnings
    e = html.escape
    parts = [_STYLE, '<div class="aquaprof">']
    parts += [f"<div>{e(line)}</div>" for line in _header(report)]
    columns = ["stage", "share", "count", "total", "self", "mean", "p50",
               "p95", "max", "cpu", "mem peak", "items/s"]
    parts.append("<table><tr>" + "".join(f"<th>{c}</th>" for c in columns)
                 + "</tr>")
    for s in report.stages:
        w = s.wall
        bar = max(0.0, min(s.share, 1.0)) * 120
        cells = [
            f'<td class="stage">{"&nbsp;" * 2 * s.depth}{e(s.name)}</td>',
            f'<td><span class="bar" style="width:{bar:.1f}px"></span>'
            f'{s.share * 100:.1f}%</td>',
        ] + [f"<td>{e(v)}</td>" for v in (
            f"{s.count:,}", fmt_time(w.total), fmt_time(s.self_time),
            fmt_time(w.mean), fmt_time(w.p50), fmt_time(w.p95),
            fmt_time(w.max), fmt_time(s.cpu), fmt_bytes(s.mem_peak),
            fmt_rate(s.throughput))]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    if not report.stages:
        parts.append("<div>no stages were recorded (mark them with "
                     "aquaprof.stage)</div>")
    top = [s for s in report.top(3) if s.self_time > 0]
    if top:
        parts.append("<div><b>Top bottlenecks by self time:</b><ol>")
        parts += [f"<li>{e(s.path)}: {fmt_time(s.self_time)}</li>"
                  for s in top]
        parts.append("</ol></div>")
    parts += [f'<div class="warn">{e(line)}</div>'
              for line in _warnings(report)]
    parts.append("</div>")
    return "\n".join(parts)


COLUMNS = ["path", "name", "depth", "count", "total_s", "self_s", "mean_s",
           "std_s", "min_s", "p50_s", "p95_s", "p99_s", "max_s", "cpu_s",
           "share", "items", "items_per_s", "mem_peak", "mem_delta",
           "raised"]


def report_dataframe(report: "Report") -> Any:
    """One row per stage path, in the table's order, times in seconds."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("Report.to_dataframe() needs pandas, which is "
                          "not installed: pip install pandas") from None
    rows = []
    for s in report.stages:
        w = s.wall
        rows.append([s.path, s.name, s.depth, s.count, w.total, s.self_time,
                     w.mean, w.std, w.min, w.p50, w.p95, w.p99, w.max, s.cpu,
                     s.share, s.items, s.throughput, s.mem_peak, s.mem_delta,
                     s.raised])
    return pd.DataFrame(rows, columns=COLUMNS)


def aquaprof_magic(line: str, cell: str, shell: Any) -> "Report":
    """``%%aquaprof [-o report.json]``: runs the cell under a Profiler,
    inside a stage named ``cell``, displays the report and returns it."""
    from . import Profiler, stage
    args = shlex.split(line)
    save = None
    if args[:1] == ["-o"] and len(args) == 2:
        save = args[1]
    elif args:
        raise ValueError(f"usage: %%aquaprof [-o report.json], got "
                         f"{line!r}")
    with Profiler() as prof:
        with stage("cell"):
            result = shell.run_cell(cell)
    report = prof.report()
    if save:
        report.save(save)
    from IPython.display import display
    display(report)
    if result is not None and not result.success:
        result.raise_error()
    return report


def load_ipython_extension(shell: Any) -> None:
    shell.register_magic_function(
        lambda line, cell: aquaprof_magic(line, cell, shell),
        magic_kind="cell", magic_name="aquaprof")
