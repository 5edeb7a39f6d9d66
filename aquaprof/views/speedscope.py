"""The speedscope file format (https://www.speedscope.app): one evented
profile per thread, frames shared, open and close events from the raw
spans in time order. Where asyncio tasks interleaved on a thread, the
thread has a profile per concurrent task ("task lane N", views/lanes.py,
as in the Chrome trace) so that every profile nests and every task keeps
its own close. Where the run was sampled with a timeline, the code frames
(``function (file.py:line)``) open and close inside their stage's events
(views/code.py), and a thread sampled without spans of its own gets a
profile of its code.

Large files stay usable, as the trace does: past ``max_events`` spans
the shortest are left out (a kept span's parent is never shorter, so
nesting holds), and so are code slices past ``max_events`` and those of
a span left out; the file's name (speedscope's title bar) says how many,
and its "aquaprof" member counts them."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, AbstractSet, Any, Dict, List, Tuple, \
    Union

import numpy as np

from .._version import __version__
from ..common.atomic import write_atomic
from ..common.checks import whole
from ..common.units import printable
from ..analysis.sampled_code import (
    MAX_SLICES, CodeSlice, labels, longest, slices)
from .lanes import longest_spans, task_lanes, untimed_samples
from .threads import idle_threads, sampled_label, sampled_names, \
    thread_label
from .trace import MAX_EVENTS

if TYPE_CHECKING:
    from ..model.report import Report

SCHEMA = "https://www.speedscope.app/file-format-schema.json"

# a track's intervals: begin, end, frame index, nesting level (0 for a
# span, 1 + depth for a code frame: outer first at equal times)
Track = Tuple[List[int], List[int], List[int], List[int]]


def speedscope(report: "Report", name: str = "aquaprof",
               max_events: int = MAX_EVENTS) -> Dict[str, Any]:
    """The file's document."""
    return json.loads(speedscope_json(report, name, max_events))


def speedscope_json(report: "Report", name: str = "aquaprof",
                    max_events: int = MAX_EVENTS) -> str:
    """The file as JSON text (events written as text directly: a dict per
    event costs several times the time and memory)."""
    if not whole(max_events, 0):
        raise ValueError(f"max_events must be an int >= 0, got "
                         f"{max_events!r}")
    spans = report.spans()
    kept, left_out = longest_spans(spans, max_events)
    tracks, titles, track_of_span, thread_track = _span_tracks(
        report, spans, kept)
    code_left_out = _add_code(report, tracks, titles,
                              (track_of_span, thread_track),
                              len(report.stage_names), max_events)
    start, stop = report.meta["start_ns"], report.meta["stop_ns"]
    counts = {"spans_in_report": int(len(spans)),
              "spans_left_out": left_out,
              "spans_never_recorded": int(report.spans_dropped),
              "max_events": max_events}
    untimed, untimed_said = untimed_samples(report)
    if report.samples is not None:
        counts["code_slices_left_out"] = code_left_out
        counts["code_samples_untimed"] = untimed
    head = {"$schema": SCHEMA,
            "shared": {"frames": [{"name": path}
                                  for path in report.stage_names]
                       + _code_frames(report)},
            "name": name + _left_out_note(counts, untimed_said),
            "activeProfileIndex": 0,
            "exporter": f"aquaprof {__version__}",
            "aquaprof": counts}
    profiles = [
        '{"type":"evented","name":' + json.dumps(title)
        + f',"unit":"nanoseconds","startValue":0,"endValue":{stop - start}'
        + ',"events":[' + ",".join(_events(track, start)) + "]}"
        for track, title in zip(tracks, titles)]
    text = json.dumps(head, separators=(",", ":"))
    return text[:-1] + ',"profiles":[' + ",".join(profiles) + "]}"


def _left_out_note(counts: Dict[str, int], untimed_said: str) -> str:
    """What the file leaves out, in the words of the trace's note; "" if
    nothing."""
    left_out, never = counts["spans_left_out"], counts["spans_never_recorded"]
    said = []
    if left_out or never:
        said.append(f"{left_out} shortest spans left out of this file "
                    f"(max_events={counts['max_events']}), {never} beyond "
                    f"max_spans never recorded; the report's aggregates "
                    f"count them all")
    if untimed_said:
        said.append(untimed_said)
    return f" (aquaprof: {'; '.join(said)})" if said else ""


def _span_tracks(report: "Report", spans: np.ndarray, kept: np.ndarray
                 ) -> Tuple[List[Track], List[str], np.ndarray, List[int]]:
    """A track per thread and task lane of the kept spans, lanes right
    after their thread's own; their titles; each span's track (-1 for a
    span left out); and each thread's own track."""
    threads = spans["thread"][kept].astype(np.int64)
    lanes = task_lanes(spans, kept)
    # a folded row is no thread, and has no span: no track
    lane_count = np.array([0 if t.get("folded") else 1
                           for t in report.threads], np.int64)
    np.maximum.at(lane_count, threads, lanes + 1)
    first = np.concatenate(([0], np.cumsum(lane_count)))
    track = first[threads] + lanes
    track_of_span = np.full(len(spans), -1, np.int64)
    track_of_span[kept] = track
    # grouped by track once: one pass over the spans, not one a track
    order = np.argsort(track, kind="stable")
    mine_of = kept[order]
    bounds = np.searchsorted(track[order],
                             np.arange(int(first[-1]) + 1)).tolist()
    tracks: List[Track] = []
    titles: List[str] = []
    for t in report.threads:
        for lane in range(int(lane_count[t["index"]])):
            at = int(first[t["index"]]) + lane
            mine = spans[mine_of[bounds[at]:bounds[at + 1]]]
            tracks.append((mine["start_ns"].tolist(),
                           mine["end_ns"].tolist(),
                           mine["stage"].tolist(), [0] * len(mine)))
            titles.append(thread_label(t) + _of_process(
                report, t.get("process", 0)) + (f", task lane {lane}"
                                                 if lane else ""))
    return tracks, titles, track_of_span, first[:-1].tolist()


def _code_frames(report: "Report") -> List[Dict[str, Any]]:
    samples = report.samples
    if not samples:
        return []
    return [{"name": label, "file": f[1], "line": f[2]}
            for label, f in zip(labels(samples), samples["frames"])]


def _add_code(report: "Report", tracks: List[Track], titles: List[str],
              places: Tuple[np.ndarray, List[int]], first: int,
              max_events: int) -> int:
    """The timeline's code slices onto the track of their span (outside
    any stage: the first thread of that tid, or a track of its own,
    titled ", idle" where the flamegraph folds the thread with the idle
    ones); code frame i is frame first + i. Returns how many were left out: past
    max_events the shortest, and those of a span left out."""
    track_of_span, thread_track = places
    cuts = slices(report)
    track_of_thread: Dict[Tuple[int, int], int] = {}
    # once: a track a thread, and thousands of threads (a thread a request)
    names = sampled_names(report)
    idle = idle_threads(report)
    for t in report.threads:
        if not t.get("folded"):
            track_of_thread.setdefault((t.get("process", 0),
                                        t["native_id"]),
                                       thread_track[t["index"]])
    written = 0
    for c in longest(cuts, min(max_events, MAX_SLICES)):
        track = _track_of(report, c, track_of_span, track_of_thread,
                          tracks, titles, (names, idle))
        if track < 0:
            continue
        begins, ends, frames, levels = tracks[track]
        begins.append(c.start_ns)
        ends.append(c.end_ns)
        frames.append(first + c.frame)
        levels.append(1 + c.depth)
        written += 1
    return len(cuts) - written


def _track_of(report: "Report", c: CodeSlice, track_of_span: np.ndarray,
              track_of_thread: Dict[Tuple[int, int], int],
              tracks: List[Track], titles: List[str],
              threads: Tuple[Dict[Tuple[int, int], str],
                             AbstractSet[Tuple[int, int]]]) -> int:
    if c.span >= 0:
        return int(track_of_span[c.span])
    key = (c.process, c.tid)
    if key not in track_of_thread:
        track_of_thread[key] = len(tracks)
        tracks.append(([], [], [], []))
        names, idle = threads
        titles.append(f"{sampled_label(names, key)}"
                      f"{_of_process(report, c.process)}, sampled code"
                      + (", idle" if key in idle else ""))
    return track_of_thread[key]


def _of_process(report: "Report", process: int) -> str:
    """', worker 0 (pid 4243)': the process a thread's profile is of, in
    a report of several (speedscope has no process of its own)."""
    processes = report.processes
    if len(processes) < 2 or not 0 <= process < len(processes):
        return ""
    return f", {printable(str(processes[process].get('label', process)))}"


def _events(track: Track, start: int) -> List[str]:
    """A track's intervals as open and close events (JSON texts) in time
    order."""
    begins, ends, frames, levels = (np.asarray(x, np.int64) for x in track)
    # outer before inner at equal starts: the longer first, then the
    # shallower
    order = np.lexsort((levels, -ends, begins))
    events: List[str] = []
    open_ends: List[Tuple[int, int]] = []   # (end_ns, frame) still open
    for begin, end, frame in zip((begins[order] - start).tolist(),
                                 (ends[order] - start).tolist(),
                                 frames[order].tolist()):
        while open_ends and open_ends[-1][0] <= begin:
            close, closing = open_ends.pop()
            events.append(f'{{"type":"C","frame":{closing},"at":{close}}}')
        # a child ends within its parent (lanes see to spans); clamp what
        # the clock blurs
        if open_ends:
            end = min(end, open_ends[-1][0])
        events.append(f'{{"type":"O","frame":{frame},"at":{begin}}}')
        open_ends.append((end, frame))
    while open_ends:
        close, closing = open_ends.pop()
        events.append(f'{{"type":"C","frame":{closing},"at":{close}}}')
    return events


def write_speedscope(report: "Report", path: Union[str, os.PathLike],
                     name: str = "aquaprof",
                     max_events: int = MAX_EVENTS) -> Path:
    return write_atomic(path, speedscope_json(report, name, max_events)
                        .encode("utf-8"))
