"""The speedscope file format (https://www.speedscope.app): one evented
profile per thread, frames shared, open and close events from the raw
spans in time order. Where the run was sampled with a timeline, the code
frames (``function (file.py:line)``) open and close inside their stage's
events (views/code.py), the longest code.MAX_SLICES of them, and a thread
sampled without spans of its own gets a profile of its code."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Tuple, Union

import numpy as np

from .._version import __version__
from ..common.atomic import write_atomic
from ..analysis.sampled_code import (
    MAX_SLICES, CodeSlice, labels, longest, slices)
from .threads import thread_label

if TYPE_CHECKING:
    from ..model.report import Report

SCHEMA = "https://www.speedscope.app/file-format-schema.json"

# a track's intervals: begin, end, frame index, nesting level (0 for a
# span, 1 + depth for a code frame: outer first at equal times)
Track = Tuple[List[int], List[int], List[int], List[int]]


def speedscope(report: "Report", name: str = "aquaprof") -> Dict[str, Any]:
    names = report.stage_names
    start, stop = report.meta["start_ns"], report.meta["stop_ns"]
    tracks = _span_tracks(report)
    titles = [thread_label(t) for t in report.threads]
    _add_code(report, tracks, titles, len(names))
    profiles = [{"type": "evented", "name": title, "unit": "nanoseconds",
                 "startValue": 0, "endValue": stop - start,
                 "events": _events(track, start)}
                for track, title in zip(tracks, titles)]
    return {
        "$schema": SCHEMA,
        "shared": {"frames": [{"name": path} for path in names]
                   + _code_frames(report)},
        "profiles": profiles,
        "name": name,
        "activeProfileIndex": 0,
        "exporter": f"aquaprof {__version__}",
    }


def _span_tracks(report: "Report") -> List[Track]:
    """Each thread's spans as a track."""
    spans = report.spans()
    # grouped by thread once: one pass over the spans, not one a thread
    by_thread = spans[np.argsort(spans["thread"], kind="stable")]
    bounds = np.searchsorted(by_thread["thread"],
                             np.arange(len(report.threads) + 1)).tolist()
    tracks: List[Track] = []
    for t in report.threads:
        mine = by_thread[bounds[t["index"]]:bounds[t["index"] + 1]]
        tracks.append((mine["start_ns"].tolist(), mine["end_ns"].tolist(),
                       mine["stage"].tolist(), [0] * len(mine)))
    return tracks


def _code_frames(report: "Report") -> List[Dict[str, Any]]:
    samples = report.samples
    if not samples:
        return []
    return [{"name": label, "file": f[1], "line": f[2]}
            for label, f in zip(labels(samples), samples["frames"])]


def _add_code(report: "Report", tracks: List[Track], titles: List[str],
              first: int) -> None:
    """The timeline's code slices onto the track of their span's thread
    (outside any stage: the first thread of that tid, or a track of its
    own); code frame i is frame first + i."""
    spans = report.spans()
    thread_of: Dict[Tuple[int, int], int] = {}
    for t in report.threads:
        thread_of.setdefault((t.get("process", 0), t["native_id"]),
                             t["index"])
    for c in longest(slices(report), MAX_SLICES):
        track = _track_of(c, spans, thread_of, tracks, titles)
        begins, ends, frames, levels = tracks[track]
        begins.append(c.start_ns)
        ends.append(c.end_ns)
        frames.append(first + c.frame)
        levels.append(1 + c.depth)


def _track_of(c: CodeSlice, spans: np.ndarray,
              thread_of: Dict[Tuple[int, int], int], tracks: List[Track],
              titles: List[str]) -> int:
    if c.span >= 0:
        return int(spans["thread"][c.span])
    key = (c.process, c.tid)
    if key not in thread_of:
        thread_of[key] = len(tracks)
        tracks.append(([], [], [], []))
        titles.append(f"tid {c.tid} (process {c.process}), sampled code")
    return thread_of[key]


def _events(track: Track, start: int) -> List[Dict[str, Any]]:
    """A track's intervals as open and close events in time order."""
    begins, ends, frames, levels = (np.asarray(x, np.int64) for x in track)
    # outer before inner at equal starts: the longer first, then the
    # shallower
    order = np.lexsort((levels, -ends, begins))
    events: List[Dict[str, Any]] = []
    open_ends: List[tuple] = []        # (end_ns, frame) of open intervals
    for begin, end, frame in zip(begins[order].tolist(),
                                 ends[order].tolist(),
                                 frames[order].tolist()):
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
    return events


def write_speedscope(report: "Report", path: Union[str, os.PathLike],
                     name: str = "aquaprof") -> Path:
    text = json.dumps(speedscope(report, name), separators=(",", ":"))
    return write_atomic(path, text.encode("utf-8"))
