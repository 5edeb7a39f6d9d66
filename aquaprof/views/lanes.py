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

from typing import Dict, List, Tuple

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


def task_lanes(spans: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """The lane of each of the spans at indices kept (in kept's order)."""
    lane_of_kept = np.zeros(len(kept), np.int64)
    flags = spans["flags"][kept]
    if not (flags & (_core.SPAN_SUSPENDED | _core.SPAN_UNCLOSED)).any():
        return lane_of_kept
    # outer before inner at equal starts: the longer first
    order = np.lexsort((-spans["end_ns"][kept], spans["start_ns"][kept],
                        spans["thread"][kept]))
    lane_of: Dict[int, int] = {}
    # thread: lane: the open spans, innermost last, as (end, span)
    lanes: Dict[int, List[List[Tuple[int, int]]]] = {}
    picked = kept[order]
    for at, k, thread, start, end, parent in zip(
            order.tolist(), picked.tolist(),
            spans["thread"][picked].tolist(),
            spans["start_ns"][picked].tolist(),
            spans["end_ns"][picked].tolist(),
            spans["parent"][picked].tolist()):
        stacks = lanes.setdefault(thread, [])
        for stack in stacks:
            while stack and stack[-1][0] <= start:
                stack.pop()
        lane = _lane(stacks, lane_of.get(parent, -1), parent, end)
        stacks[lane].append((end, k))
        lane_of[k] = lane
        lane_of_kept[at] = lane
    return lane_of_kept


def _lane(stacks: List[List[Tuple[int, int]]], parent_lane: int,
          parent: int, end: int) -> int:
    """The parent's lane while the parent is innermost there and the span
    ends within it (a task can outlive the stage that started it), else
    the first free lane, a new one if none is."""
    if parent_lane >= 0:
        top = stacks[parent_lane][-1] if stacks[parent_lane] else None
        if top is not None and top[1] == parent and end <= top[0]:
            return parent_lane
    free = next((i for i, stack in enumerate(stacks) if not stack),
                len(stacks))
    if free == len(stacks):
        stacks.append([])
    return free
