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


def chrome_trace(report: "Report", max_events: int = MAX_EVENTS
                 ) -> Dict[str, Any]:
    """The trace as a JSON-ready dict."""
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
    for i in progress(kept, "trace", every=100_000):
        s = spans[i]
        t = threads[s["thread"]]
        args: Dict[str, Any] = {"path": names[s["stage"]],
                                "cpu_ms": round(int(s["cpu_ns"]) * 1e-6, 6)}
        if s["items"]:
            args["items"] = int(s["items"])
        if s["flags"] & 1:
            args["raised"] = True
        if s["flags"] & 2:
            args["unclosed"] = True
        events.append({
            "ph": "X", "cat": "stage",
            "name": names[s["stage"]].rsplit("/", 1)[-1],
            "pid": pids[t.get("process", 0)], "tid": t["native_id"],
            "ts": (int(s["start_ns"]) - origin) * _US,
            "dur": (int(s["end_ns"]) - int(s["start_ns"])) * _US,
            "args": args})
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
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"producer": "aquaprof",
                      "spans_in_report": int(len(spans)),
                      "spans_left_out": int(left_out),
                      "spans_never_recorded": int(dropped),
                      "max_events": max_events},
    }


def write_chrome_trace(report: "Report", path: Union[str, os.PathLike],
                       max_events: int = MAX_EVENTS) -> Path:
    text = json.dumps(chrome_trace(report, max_events),
                      separators=(",", ":"))
    return write_atomic(path, text.encode("utf-8"))
