"""Timelines of a report as static SVG for the HTML page: the stage spans
of each thread of each process, nested by depth (asyncio tasks that
overlapped on a lane each, as in the trace), titled by the Python
thread's name, and the GPU work of each device and stream where the run
traced it.

Both share the run's time axis (0 at the profiler's start) and one
drawing width; every bar has a tooltip (<title>). A run with very many
spans draws its longest ones: a parent is never shorter than its child,
so what is drawn still nests, and a line under the timeline says how
many were left out. A thread draws its first MAX_LANES lanes; a row
under them counts the task lanes and spans past them.
"""
from __future__ import annotations

import html
from typing import TYPE_CHECKING, Dict, List, Tuple

import numpy as np

from ..common.units import fmt_time, printable
from ..common.words import shorten, shorten_path
from ..model.schema import COPY_NAMES, KERNEL, MEMCPY, MEMSET, SYNC
from .lanes import longest_spans, task_lanes
from .threads import thread_label

if TYPE_CHECKING:
    from ..model.report import Report

WIDTH = 1200
LABEL = 220          # the left column: thread and stream names
ROW = 14
MAX_BARS = 20_000    # per timeline: past it, the longest are drawn
#: lanes drawn a thread (its own and its asyncio tasks'): a server with a
#: thousand tasks open at once would draw a page 14,000 pixels tall; the
#: trace and speedscope draw every lane
MAX_LANES = 32
#: the most characters of a band's title: the rest of the label column
#: is the bars'
TITLE_CHARS = 34
#: the most characters of a bar's tooltip's stage path: a path grows with
#: its depth, and 20,000 bars of a recursive stage thousands deep would
#: make the page its depth squared (hundreds of MB); the table has them
BAR_PATH_CHARS = 160

# a lane's rows: from which y, and the stage depth of its first row
LaneRows = Tuple[int, int]

_GPU_KINDS = {KERNEL: ("kernel", "rgb(118,185,0)"),
              MEMCPY: ("memcpy", "rgb(66,133,244)"),
              MEMSET: ("memset", "rgb(171,71,188)"),
              SYNC: ("host waits on the device", "rgb(158,158,158)")}


def _stage_colour(path: str) -> str:
    h = sum(ord(c) for c in path.rsplit("/", 1)[-1])
    return f"rgb({205 + h % 50},{80 + (h * 7) % 120},{40 + (h * 3) % 50})"


def _axis(wall_ns: int, top: int, bottom: int) -> List[str]:
    """Ticks every round step of time along the top, lines down to
    bottom."""
    span = WIDTH - LABEL - 10
    parts: List[str] = []
    if wall_ns <= 0:
        return parts
    step = 10 ** int(np.floor(np.log10(wall_ns / 8)))
    for mult in (1, 2, 5, 10):
        if wall_ns / (step * mult) <= 10:
            step *= mult
            break
    for k in range(int(wall_ns // step) + 1):
        x = LABEL + k * step / wall_ns * span
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" '
                     f'y2="{bottom}" stroke="#ddd"/>'
                     f'<text x="{x:.1f}" y="{top - 4}" text-anchor="middle" '
                     f'class="tick">{fmt_time(k * step * 1e-9)}</text>')
    return parts


def _svg(rows: List[str], bars: List[str], height: int,
         wall_ns: int) -> str:
    return (f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" '
            f'width="100%" viewBox="0 0 {WIDTH} {height}">'
            + "".join(_axis(wall_ns, 18, height)) + "".join(rows)
            + "".join(bars) + "</svg>")


def spans_svg(report: "Report") -> Tuple[str, str]:
    """The stage timeline: a band per thread (grouped by process), a row
    per stage depth in it, and where asyncio tasks overlapped a lane of
    rows per concurrent task (views/lanes.py, as in the trace); and a
    note of what was left out ("" if nothing). ("", why) when there are
    no spans to draw."""
    spans = report.spans()
    if len(spans) == 0:
        why = ("no spans were recorded" if report.spans_dropped == 0 else
               f"all {report.spans_dropped:,} spans went past max_spans")
        return "", why
    origin, wall_ns = report.meta["start_ns"], report.meta["stop_ns"] - \
        report.meta["start_ns"]
    names = report.stage_names
    depth = np.array([n.count("/") for n in names], dtype=np.int64)
    keep, left_out = longest_spans(spans, MAX_BARS)
    lane_of = task_lanes(spans, keep)
    over = lane_of >= MAX_LANES
    hidden = _hidden_lanes(spans["thread"][keep][over], lane_of[over])
    keep, lanes = keep[~over], lane_of[~over].tolist()
    spans = spans[keep]
    span_depths = depth[spans["stage"]].tolist()
    rows, row_of, height = _bands(report, spans["thread"].tolist(), lanes,
                                  span_depths, hidden)
    scale = (WIDTH - LABEL - 10) / wall_ns if wall_ns > 0 else 0.0
    bars = []
    for stage, thread, lane, at_depth, begin, end in zip(
            spans["stage"].tolist(), spans["thread"].tolist(), lanes,
            span_depths, spans["start_ns"].tolist(),
            spans["end_ns"].tolist()):
        if (thread, lane) not in row_of:
            continue
        top, shallowest = row_of[(thread, lane)]
        x = LABEL + (begin - origin) * scale
        w = max((end - begin) * scale, 0.5)
        path = printable(names[stage])
        y = top + (at_depth - shallowest) * ROW
        bars.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" '
                    f'height="{ROW - 1}" fill="'
                    f'{_stage_colour(path)}"><title>'
                    f'{html.escape(_bar_path(path, at_depth))}: '
                    f'{fmt_time((end - begin) * 1e-9)}</title></rect>')
    note = (f"the {MAX_BARS:,} longest spans drawn, {left_out:,} shorter "
            f"ones left out" if left_out else "")
    if hidden:
        note += ("; " if note else "") + (
            f"{int(over.sum()):,} spans on task lanes past the {MAX_LANES} "
            f"a thread left out (the trace draws them all)")
    if report.spans_dropped:
        note += ("; " if note else "") + (
            f"{report.spans_dropped:,} spans went past max_spans and were "
            f"never recorded")
    return _svg(rows, bars, height, wall_ns), note


def _bar_path(path: str, depth: int) -> str:
    """A bar's stage path for its tooltip: whole, or past BAR_PATH_CHARS
    cut in the middle (its last stage kept) with its depth said."""
    if len(path) <= BAR_PATH_CHARS:
        return path
    return f"{shorten_path(path, BAR_PATH_CHARS)} (depth {depth})"


def _hidden_lanes(threads: np.ndarray, lanes: np.ndarray
                  ) -> Dict[int, Tuple[int, int]]:
    """{thread: (lanes, spans) past MAX_LANES, not drawn}."""
    out: Dict[int, Tuple[int, int]] = {}
    for thread in np.unique(threads).tolist():
        mine = lanes[threads == thread]
        out[thread] = (len(np.unique(mine)), len(mine))
    return out


def _lane_depths(threads: List[int], lanes: List[int], depths: List[int]
                 ) -> Dict[Tuple[int, int], Tuple[int, int]]:
    """{(thread, lane): (shallowest, deepest) stage depth drawn there}; a
    thread's own lane starts at depth 0, so its top stages line up."""
    out: Dict[Tuple[int, int], Tuple[int, int]] = {}
    for key, d in zip(zip(threads, lanes), depths):
        low, high = out.get(key, (0 if key[1] == 0 else d, d))
        out[key] = (min(low, d), max(high, d))
    return out


def _lane_rows(thread: int, extent: Dict[Tuple[int, int], Tuple[int, int]],
               row_of: Dict[Tuple[int, int], LaneRows], y: int,
               hidden: Tuple[int, int]) -> Tuple[List[str], int]:
    """Places the thread's lanes from y on (a row for a thread that drew
    nothing) and a row saying what lanes past MAX_LANES were left out;
    their titles, and the y below them."""
    titles: List[str] = []
    lanes = sorted(lane for who, lane in extent if who == thread)
    for lane in lanes or [0]:
        low, high = extent.get((thread, lane), (0, 0))
        row_of[(thread, lane)] = (y, low)
        if lane:
            titles.append(f'<text x="14" y="{y + 11}" class="lane" '
                          f'fill="#777">'
                          f'task lane {lane}</text>')
        y += (high - low + 1) * ROW
    more, spans = hidden
    if more:
        titles.append(f'<text x="14" y="{y + 11}" class="lane" '
                      f'fill="#777">{more:,} more task '
                      f'lane{"s" if more > 1 else ""}, {spans:,} '
                      f'span{"s" if spans > 1 else ""}: in the trace</text>')
        y += ROW
    return titles, y


def _bands(report: "Report", threads: List[int], lanes: List[int],
           depths: List[int], hidden: Dict[int, Tuple[int, int]]
           ) -> Tuple[List[str], Dict[Tuple[int, int], LaneRows], int]:
    """The threads' bands, grouped by process: their backgrounds and
    titles, where each lane's rows start, and the height of them all."""
    extent = _lane_depths(threads, lanes, depths)
    processes = report.processes
    rows: List[str] = []
    row_of: Dict[Tuple[int, int], LaneRows] = {}
    y = 24
    for p, proc in enumerate(processes):
        mine = [t for t in report.threads if t.get("process", 0) == p]
        if not mine:
            continue
        if len(processes) > 1:
            rows.append(f'<text x="4" y="{y + 11}" class="proc">'
                        f'{html.escape(printable(str(proc["label"])))}'
                        f'</text>')
            y += ROW + 2
        for t in mine:
            top = y
            lane_titles, y = _lane_rows(t["index"], extent, row_of, y,
                                        hidden.get(t["index"], (0, 0)))
            title = shorten(thread_label(t), TITLE_CHARS)
            # the background first: SVG paints in order
            rows.append(f'<rect x="0" y="{top}" width="{WIDTH}" '
                        f'height="{y - top}" fill="#f3f3ee"/>'
                        f'<text x="4" y="{top + 11}">'
                        f'{html.escape(title)}</text>')
            rows += lane_titles
            y += 4
    return rows, row_of, y + 4


def gpu_svg(report: "Report") -> Tuple[str, str]:
    """GPU work: a row per device and stream (kernels, copies, memsets)
    and one per device for host waits; device memory in use is drawn by
    charts.py. ("", why) when the run traced no GPU activity."""
    gpu = report.gpu
    events = report.gpu_events()
    if gpu is None or events is None or len(events) == 0:
        return "", f"no GPU activity was traced ({report.gpu_status})"
    events = events[np.isin(events["kind"], list(_GPU_KINDS))]
    if len(events) == 0:
        return "", "the GPU trace holds only memory allocations"
    origin = report.meta["start_ns"]
    wall_ns = report.meta["stop_ns"] - origin
    devices = gpu["devices"] or []
    kernel_names = gpu["kernel_names"]
    stage_names = report.stage_names
    keep, left_out = longest_spans(events, MAX_BARS)
    events = events[keep]
    lanes = sorted({(int(d), -1 if int(k) == SYNC else int(s))
                    for d, s, k in zip(events["device"], events["stream"],
                                       events["kind"])})
    row = {lane: 24 + i * (ROW + 4) for i, lane in enumerate(lanes)}
    rows = []
    for (d, s), y in row.items():
        device = (devices[d].get("name", "GPU") if d < len(devices)
                  else "GPU")
        where = "host waits" if s < 0 else f"stream {s}"
        rows.append(f'<rect x="0" y="{y}" width="{WIDTH}" height="{ROW}" '
                    f'fill="#f3f3ee"/><text x="4" y="{y + 11}">GPU {d} '
                    f'{html.escape(printable(str(device)))[:18]}: {where}'
                    f'</text>')
    scale = (WIDTH - LABEL - 10) / wall_ns if wall_ns > 0 else 0.0
    bars = []
    for e in events:
        kind = int(e["kind"])
        label, fill = _GPU_KINDS[kind]
        if kind == KERNEL and int(e["name"]) < len(kernel_names):
            label = str(kernel_names[int(e["name"])])
        elif kind == MEMCPY:
            label = f"memcpy {COPY_NAMES.get(int(e['copy']), 'other')}"
        stage = int(e["stage"])
        under = f" in {stage_names[stage]}" if 0 <= stage < len(
            stage_names) else ""
        begin, end = int(e["start_ns"]), int(e["end_ns"])
        y = row[(int(e["device"]), -1 if kind == SYNC else int(e["stream"]))]
        text = printable(f"{label}{under}: {fmt_time((end - begin) * 1e-9)}")
        bars.append(f'<rect x="{LABEL + (begin - origin) * scale:.2f}" '
                    f'y="{y}" width="{max((end - begin) * scale, 0.5):.2f}" '
                    f'height="{ROW - 1}" fill="{fill}"><title>'
                    f'{html.escape(text)}</title></rect>')
    note = (f"the {MAX_BARS:,} longest GPU events drawn, {left_out:,} "
            f"shorter ones left out" if left_out else "")
    return _svg(rows, bars, 24 + len(lanes) * (ROW + 4) + 4, wall_ns), note
