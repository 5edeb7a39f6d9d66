"""Chrome Trace Event JSON of a Report, for Perfetto (ui.perfetto.dev) and
chrome://tracing: a process per profiled process (a rank, after merge), a
track per thread, stages as complete ("X") events with their arguments, and
host memory as a counter track where the report has samples.

Large traces stay usable: past ``max_events`` spans the shortest are left
out (a kept span's parent is never shorter, so nesting holds), and the
trace says how many in its metadata and in an instant event at the start.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Union

import numpy as np

from ._atomic import write_atomic
from ._progress import progress

if TYPE_CHECKING:
    from .report import Report

MAX_EVENTS = 1_000_000
_US = 1e-3      # trace timestamps are microseconds


def chrome_trace(report: "Report", max_events: int = MAX_EVENTS) -> str:
    """The trace as JSON text."""
    if (not isinstance(max_events, int) or isinstance(max_events, bool)
            or max_events < 0):
        raise ValueError(f"max_events must be an int >= 0, got "
                         f"{max_events!r}")
    spans = report.spans()
    origin = report.meta["start_ns"]
    names = report.stage_names
    processes = report.processes
    pids = [p["pid"] for p in processes]
    if len(set(pids)) < len(pids):      # e.g. the same pid on two hosts
        pids = list(range(1, len(processes) + 1))
    threads = report.threads
    events: List[Dict[str, Any]] = []
    for p, proc in enumerate(processes):
        events.append({"ph": "M", "name": "process_name", "pid": pids[p],
                       "args": {"name": proc["label"]}})
        events.append({"ph": "M", "name": "process_sort_index",
                       "pid": pids[p], "args": {"sort_index": p}})
    for t in threads:
        pid = pids[t.get("process", 0)]
        events.append({"ph": "M", "name": "thread_name", "pid": pid,
                       "tid": t["native_id"],
                       "args": {"name": f"thread {t['index']} "
                                        f"(tid {t['native_id']})"}})
    kept = np.arange(len(spans))
    left_out = 0
    if len(spans) > max_events:
        duration = spans["end_ns"] - spans["start_ns"]
        # stable: equal durations keep the earlier (outer) span
        kept = np.sort(np.argsort(-duration, kind="stable")[:max_events])
        left_out = len(spans) - max_events
    # spans are written as JSON text directly: dicts per span cost 10x
    leaf = [json.dumps(n.rsplit("/", 1)[-1]) for n in names]
    paths = [json.dumps(n) for n in names]
    tids = [t["native_id"] for t in threads]
    tpids = [pids[t.get("process", 0)] for t in threads]
    columns = [spans[k][kept].tolist() for k in (
        "stage", "thread", "start_ns", "end_ns", "cpu_ns", "items", "flags")]
    span_text: List[str] = []
    rows = list(zip(*columns))
    for stage, thread, begin, end, cpu, items, flags in progress(
            rows, "trace", every=100_000):
        extra = (f',"items":{items}' if items else "") + \
            (',"raised":true' if flags & 1 else "") + \
            (',"unclosed":true' if flags & 2 else "")
        span_text.append(
            f'{{"ph":"X","cat":"stage","name":{leaf[stage]},'
            f'"pid":{tpids[thread]},"tid":{tids[thread]},'
            f'"ts":{(begin - origin) / 1000:.3f},'
            f'"dur":{(end - begin) / 1000:.3f},'
            f'"args":{{"path":{paths[stage]},"cpu_ms":{cpu / 1e6:.6f}'
            f'{extra}}}}}')
    for p, proc in enumerate(processes):
        for t_ns, rss in proc.get("memory_samples", []):
            events.append({"ph": "C", "name": "host memory", "pid": pids[p],
                           "ts": (t_ns - origin) * _US,
                           "args": {"RSS MiB": round(rss / 2**20, 3)}})
    dropped = report.spans_dropped
    if left_out or dropped:
        events.append({
            "ph": "i", "s": "g", "name":
                f"aquaprof: {left_out} shortest spans left out of this trace "
                f"(max_events={max_events}), {dropped} beyond max_spans "
                f"never recorded; the report's aggregates count them all",
            "pid": pids[0], "tid": 0, "ts": 0.0})
    other = {"producer": "aquaprof", "spans_in_report": int(len(spans)),
             "spans_left_out": int(left_out),
             "spans_never_recorded": int(dropped), "max_events": max_events}
    return "".join([
        '{"traceEvents":[',
        ",".join([json.dumps(e, separators=(",", ":")) for e in events]
                 + span_text),
        '],"displayTimeUnit":"ms","otherData":',
        json.dumps(other, separators=(",", ":")), "}"])


def write_chrome_trace(report: "Report", path: Union[str, os.PathLike],
                       max_events: int = MAX_EVENTS) -> Path:
    return write_atomic(path, chrome_trace(report, max_events)
                        .encode("utf-8"))
