"""Which spans a view draws, and the lanes of a thread's spans, for the
views that draw a track of nested slices per thread (the Chrome trace,
speedscope, the HTML timeline).

asyncio tasks interleaved at their awaits hold stages that overlap
without nesting, which one track cannot draw: a span that overlaps a span
of its thread's track without nesting in it goes on another lane of the
thread, where it nests. Lane 0 is the thread's own track; a span stays
in its parent's lane while it nests there, so a task's inner stages stay
under it. Only spans suspended or left open can overlap so: a run
without any has one lane a thread."""
from __future__ import annotations

import heapq
from typing import Any, Dict, List, Tuple

import numpy as np

from .. import _core


def longest_spans(spans: np.ndarray, max_events: int
                  ) -> Tuple[np.ndarray, int]:
    """The indices of the spans a view draws, the max_events longest in
    their order, and how many it leaves out (spans, or any rows with
    start_ns and end_ns: the page's GPU events too). Of equal durations
    the earlier (the outer) is kept, so that a parent stays with its
    child."""
    if len(spans) <= max_events:
        return np.arange(len(spans)), 0
    duration = spans["end_ns"] - spans["start_ns"]
    kept = np.sort(np.argsort(-duration, kind="stable")[:max_events])
    return kept, len(spans) - max_events


def untimed_samples(report: Any) -> Tuple[int, str]:
    """How many code samples past the timeline's cap (max_samples) have
    no time, and what a view that draws code in time says of them ("" for
    none): the code it draws stops where the timeline filled."""
    untimed = int((report.samples or {}).get("timeline_dropped", 0))
    return untimed, (f"{untimed} code samples past max_samples have no "
                     f"time: the code drawn stops where the timeline "
                     f"filled" if untimed else "")


def task_lanes(spans: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The lane of each of the spans at indices kept (in kept's order).
    O(n log n) in the spans: the open spans that end first leave first
    (a heap), and the lowest free lane is taken (a heap), so that a
    server's thousands of tasks open at once cost no scan of every lane
    for every span."""
    lane_of_kept = np.zeros(len(kept), np.int64)
    flags = spans["flags"][kept]
    if not (flags & (_core.SPAN_SUSPENDED | _core.SPAN_UNCLOSED)).any():
        return lane_of_kept
    # outer before inner at equal starts: the longer first
    order = np.lexsort((-spans["end_ns"][kept], spans["start_ns"][kept],
                        spans["thread"][kept]))
    lane_of: Dict[int, int] = {}
    threads: Dict[int, _Lanes] = {}
    picked = kept[order]
    for at, k, thread, start, end, parent in zip(
            order.tolist(), picked.tolist(),
            spans["thread"][picked].tolist(),
            spans["start_ns"][picked].tolist(),
            spans["end_ns"][picked].tolist(),
            spans["parent"][picked].tolist()):
        lanes = threads.get(thread)
        if lanes is None:
            lanes = threads[thread] = _Lanes()
        lanes.close_by(start)
        lane = lanes.pick(lane_of.get(parent, -1), parent, end)
        lanes.push(lane, end, k)
        lane_of[k] = lane
        lane_of_kept[at] = lane
    return lane_of_kept


class _Lanes:
    """One thread's lanes: each a stack of its open spans, innermost last,
    as (end, span); a span nests in the one under it, so a stack's ends
    fall towards its top, and the open span that ends first is a top."""

    def __init__(self) -> None:
        self.stacks: List[List[Tuple[int, int]]] = []
        self.ending: List[Tuple[int, int, int]] = []  # (end, -pushed, lane)
        self.free: List[int] = []                     # empty lanes, lazily
        self.pushed = 0

    def close_by(self, start: int) -> None:
        """Every span that ended by start leaves its lane."""
        while self.ending and self.ending[0][0] <= start:
            _end, _pushed, lane = heapq.heappop(self.ending)
            stack = self.stacks[lane]
            stack.pop()
            if not stack:
                heapq.heappush(self.free, lane)

    def pick(self, parent_lane: int, parent: int, end: int) -> int:
        """The parent's lane while the parent is innermost there and the
        span ends within it (a task can outlive the stage that started
        it), else the lowest free lane, a new one if none is."""
        if parent_lane >= 0:
            stack = self.stacks[parent_lane]
            if stack and stack[-1][1] == parent and end <= stack[-1][0]:
                return parent_lane
        while self.free:
            lane = heapq.heappop(self.free)
            if not self.stacks[lane]:
                return lane
        self.stacks.append([])
        return len(self.stacks) - 1

    def push(self, lane: int, end: int, span: int) -> None:
        self.stacks[lane].append((end, span))
        self.pushed += 1
        # of equal ends, the innermost (pushed last) leaves first
        heapq.heappush(self.ending, (end, -self.pushed, lane))
