"""The report as one self-contained HTML page (Report.to_html, ``aquaprof
html``, ``aquaprof run --html``), to mail or attach to a CI run: every
style and script inline, nothing fetched from the network.

Sections, in order: the header (command, host, start, duration), the
stage table (views/html.py), the interactive flamegraph
(views/flamegraph_html.py), the timeline of spans per thread and process
and the GPU work (views/timeline.py), the distribution of each top
stage's call times and memory over time (views/charts.py), and the
diagnosis. A section the report has nothing for says why in one line
rather than vanishing.
"""
from __future__ import annotations

import datetime
import html
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional, Tuple, Union

from ..analysis.diagnose import Diagnosis
from ..common.atomic import write_atomic
from ..common.words import plural
from ..common.units import fmt_time, printable
from .charts import distribution_svg, series_svg
from .flamegraph import MIN_SHARE
from .flamegraph_html import flamegraph_html
from .html import report_html
from .timeline import gpu_svg, spans_svg

if TYPE_CHECKING:
    from ..model.report import Report

#: how many of the top stages (by self time) get a distribution chart
TOP_STAGES = 5
#: how many processes the header lists and the memory section charts
#: before the rest fold under a <details>: a DataLoader without
#: persistent workers starts two processes an epoch, hundreds a run
PROCESSES_SHOWN = 8

_STYLE = """<style>
body { font: 13px Verdana, sans-serif; color: #222; margin: 0 auto;
  padding: 12px 24px 40px; max-width: 1400px; background: #fff; }
h1 { font-size: 20px; margin: 8px 0; }
h2 { font-size: 16px; margin: 28px 0 8px; border-bottom: 1px solid #ccc;
  padding-bottom: 3px; }
h3 { font-size: 13px; margin: 12px 0 4px; font-family: monospace; }
nav a { margin-right: 12px; color: #06c; text-decoration: none; }
dl.run { display: grid; grid-template-columns: max-content auto;
  gap: 2px 14px; margin: 6px 0; }
dl.run dt { color: #666; } dl.run dd { margin: 0; font-family: monospace;
  word-break: break-all; }
.absent { color: #777; font-style: italic; }
.note { color: #777; font-size: 12px; }
.charts { display: grid; grid-template-columns:
  repeat(auto-fill, minmax(380px, 1fr)); gap: 12px 24px; }
svg.timeline, svg.chart { display: block; }
svg.timeline text, svg.chart text { font: 11px Verdana, sans-serif;
  fill: #333; }
svg.timeline .proc { font-weight: bold; }
svg.timeline .tick { fill: #888; font-size: 10px; }
.legend-key span { display: inline-block; width: 10px; height: 10px;
  margin: 0 4px 0 12px; vertical-align: middle; }
pre { font-size: 12px; white-space: pre-wrap; }
</style>"""

_SECTIONS = [("stages", "Stages"), ("flamegraph", "Flamegraph"),
             ("timeline", "Timeline"), ("distributions", "Call times"),
             ("memory", "Memory"), ("gpu", "GPU"),
             ("diagnosis", "Diagnosis")]


def _folded(summary: str, body: str) -> str:
    """body under a <details> that says what it holds (no script)."""
    return (f"<details><summary>{html.escape(summary)}</summary>{body}"
            f"</details>")


def _absent(text: str) -> str:
    return f'<p class="absent">{html.escape(text)}</p>'


def _note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>' if text else ""


def _header(report: "Report", title: str) -> str:
    """The title and what ran where: command, host, start, duration, and
    every process of a merged report (past PROCESSES_SHOWN, the rest
    folded)."""
    host = report.meta.get("host", {})
    rows: List[Tuple[str, str]] = []
    argv = host.get("argv")
    if argv:
        rows.append(("command", shlex.join(str(a) for a in argv)))
    where = [str(host[k]) for k in ("hostname", "platform") if k in host]
    if "python" in host:
        where.append(f"Python {host['python']}")
    if where:
        rows.append(("host", ", ".join(where)))
    started = host.get("started_at")
    if isinstance(started, (int, float)):
        try:
            when = datetime.datetime.fromtimestamp(started,
                                                   datetime.timezone.utc)
            rows.append(("started", when.strftime("%Y-%m-%d %H:%M:%S UTC")))
        except (OverflowError, OSError, ValueError):
            pass        # a file's time past what datetime holds: not shown
    rows.append(("duration", f"{fmt_time(report.wall)} wall"))
    cells = [(k, html.escape(printable(v))) for k, v in rows]
    processes = report.processes if len(report.processes) > 1 else []
    labels = [html.escape(printable(str(p["label"]))) for p in processes]
    cells += [("process", label) for label in labels[:PROCESSES_SHOWN]]
    rest = labels[PROCESSES_SHOWN:]
    if rest:
        cells.append(("process", _folded(f"{len(rest):,} more processes",
                                         "<br>".join(rest))))
    if "aquaprof" in host:
        cells.append(("aquaprof", html.escape(printable(
            str(host["aquaprof"])))))
    body = "".join(f"<dt>{html.escape(k)}</dt><dd>{v}</dd>"
                   for k, v in cells)
    nav = "".join(f'<a href="#{key}">{name}</a>' for key, name in _SECTIONS)
    return (f"<header><h1>{html.escape(title)}</h1>"
            f'<dl class="run">{body}</dl><nav>{nav}</nav></header>')


def _flamegraph(report: "Report", min_share: float) -> str:
    if not report.stages and report.samples is None:
        return _absent("no stages were recorded, so there is no "
                       "flamegraph")
    title = ("stages, and the code sampled in them" if report.samples
             else "stages")
    return flamegraph_html(report, title, min_share=min_share)


def _timeline(report: "Report") -> str:
    svg, note = spans_svg(report)
    if not svg:
        return _absent(f"no timeline: {note}")
    return ('<p class="note">a band per thread, a row per stage depth, '
            'a lane of rows per concurrent asyncio task; hover a bar for '
            'its stage and duration</p>' + svg + _note(note))


def _distributions(report: "Report") -> str:
    top = [s for s in report.top(TOP_STAGES) if s.count > 0]
    if not top:
        return _absent("no stage calls were recorded, so there are no call "
                       "times to show")
    charts = [f"<div><h3>{html.escape(printable(s.path))}</h3>"
              f'<div class="note">{plural(s.count, "call")}, mean '
              f'{fmt_time(s.wall.mean)}, max {fmt_time(s.wall.max)}</div>'
              f"{distribution_svg(s)}</div>" for s in top]
    return ('<p class="note">the top stages by self time: how many calls '
            'took how long (log time axis)</p><div class="charts">'
            + "".join(charts) + "</div>")


def _memory(report: "Report") -> str:
    origin = report.meta["start_ns"]
    parts = []
    processes = report.processes
    for proc in processes:
        samples = proc.get("memory_samples") or []
        if not samples:
            continue
        points = [((t - origin) * 1e-9, float(rss)) for t, rss in samples]
        name = (f" of {printable(str(proc['label']))}"
                if len(processes) > 1 else "")
        parts.append(f"<div><h3>host RSS{html.escape(name)}</h3>"
                     f"{series_svg(points, report.wall)}</div>")
    events, in_use = report.gpu_memory()
    if len(events):
        points = [((int(t) - origin) * 1e-9, float(b))
                  for t, b in zip(events["start_ns"], in_use)]
        parts.append("<div><h3>GPU memory in use (allocations CUPTI saw)"
                     f"</h3>{series_svg(points, report.wall, steps=True)}"
                     f"</div>")
    if not parts:
        return _absent("host memory was not sampled in this run "
                       "(Profiler(memory=True) samples it)")
    shown, rest = parts[:PROCESSES_SHOWN], parts[PROCESSES_SHOWN:]
    charts = '<div class="charts">' + "".join(shown) + "</div>"
    if rest:
        charts += _folded(f"{len(rest):,} more charts",
                          '<div class="charts">' + "".join(rest) + "</div>")
    return charts


def _gpu(report: "Report") -> str:
    svg, note = gpu_svg(report)
    if not svg:
        return _absent(note)
    key = "".join(f'<span style="background:{fill}"></span>{name}'
                  for name, fill in (("kernel", "rgb(118,185,0)"),
                                     ("memcpy", "rgb(66,133,244)"),
                                     ("memset", "rgb(171,71,188)"),
                                     ("host waits", "rgb(158,158,158)")))
    return f'<p class="note legend-key">{key}</p>{svg}{_note(note)}'


def _diagnosis(report: "Report") -> str:
    return str(Diagnosis(report)._repr_html_())


def page_html(report: "Report", title: Optional[str] = None,
              min_share: float = MIN_SHARE) -> str:
    """The whole page as text; the flamegraph's code frames under
    min_share of its root merged into the frame under them."""
    title = title or "aquaprof report"
    bodies = {"stages": report_html(report), "flamegraph":
              _flamegraph(report, min_share), "timeline": _timeline(report),
              "distributions": _distributions(report),
              "memory": _memory(report), "gpu": _gpu(report),
              "diagnosis": _diagnosis(report)}
    sections = [f'<section id="{key}"><h2>{name}</h2>{bodies[key]}'
                f"</section>" for key, name in _SECTIONS]
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, '
        'initial-scale=1">', f"<title>{html.escape(title)}</title>",
        _STYLE, "</head><body>", _header(report, title), *sections,
        "</body></html>", ""])


def write_page(report: "Report", path: Union[str, os.PathLike],
               title: Optional[str] = None,
               min_share: float = MIN_SHARE) -> Path:
    """The page, written atomically to path."""
    return write_atomic(path, page_html(report, title, min_share)
                        .encode("utf-8"))
