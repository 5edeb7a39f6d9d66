"""The speedscope file format (https://www.speedscope.app): one evented
profile per thread, frames shared, open and close events from the raw
spans in time order."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Union

import numpy as np

from .._version import __version__
from .._atomic import write_atomic

if TYPE_CHECKING:
    from ..report import Report

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def speedscope(report: "Report", name: str = "aquaprof") -> Dict[str, Any]:
    spans = report.spans()
    names = report.stage_names
    start, stop = report.meta["start_ns"], report.meta["stop_ns"]
    profiles: List[Dict[str, Any]] = []
    # grouped by thread once: one pass over the spans, not one a thread
    by_thread = spans[np.argsort(spans["thread"], kind="stable")]
    bounds = np.searchsorted(by_thread["thread"],
                             np.arange(len(report.threads) + 1)).tolist()
    for t in report.threads:
        mine = by_thread[bounds[t["index"]]:bounds[t["index"] + 1]]
        # outer before inner at equal starts: the longer span first
        order = np.lexsort((-mine["end_ns"], mine["start_ns"]))
        begins = mine["start_ns"][order].tolist()
        ends = mine["end_ns"][order].tolist()
        frames = mine["stage"][order].tolist()
        events: List[Dict[str, Any]] = []
        open_ends: List[tuple] = []        # (end_ns, frame) of open spans
        for begin, end, frame in zip(begins, ends, frames):
            while open_ends and open_ends[-1][0] <= begin:
                close, closing = open_ends.pop()
                events.append({"type": "C", "frame": closing,
                               "at": close - start})
            # a child ends within its parent; clamp what the clock blurs
            if open_ends:
                end = min(end, open_ends[-1][0])
            events.append({"type": "O", "frame": frame, "at": begin - start})
            open_ends.append((end, frame))
        while open_ends:
            close, frame = open_ends.pop()
            events.append({"type": "C", "frame": frame, "at": close - start})
        profiles.append({
            "type": "evented", "name": f"thread {t['index']} (tid "
                                       f"{t['native_id']})",
            "unit": "nanoseconds", "startValue": 0,
            "endValue": stop - start, "events": events})
    return {
        "$schema": SCHEMA,
        "shared": {"frames": [{"name": path} for path in names]},
        "profiles": profiles,
        "name": name,
        "activeProfileIndex": 0,
        "exporter": f"aquaprof {__version__}",
    }


def write_speedscope(report: "Report", path: Union[str, os.PathLike],
                     name: str = "aquaprof") -> Path:
    text = json.dumps(speedscope(report, name), separators=(",", ":"))
    return write_atomic(path, text.encode("utf-8"))
