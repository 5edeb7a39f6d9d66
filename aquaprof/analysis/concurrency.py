"""How much of the run's clock each stage took. A stage that several
threads, asyncio tasks or processes run at once sums their times, which
can pass the run's wall time: 100 tasks each asleep 0.1 s at once sum
10 s of a 0.1 s run, 8 threads computing 0.1 s at once 0.8 s. Ranked by
those sums, they would be called the bottleneck of a run whose time went
elsewhere. On the clock, a stage's self time counts once where its calls
overlap: the union of its calls' intervals, times the share of their
summed time that is its own (exact where its calls have no sub-stages
or never overlap).

Measured on the raw spans: where some were dropped (max_spans), the
recorded ones stand for the rest."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class OnClock(NamedTuple):
    """Per stage id: covered_ns, the run's time during which at least one
    of its recorded calls was open; summed_ns, their summed durations;
    at_once, the most of them open at once (0: none recorded)."""

    covered_ns: np.ndarray
    summed_ns: np.ndarray
    at_once: np.ndarray


def on_clock(spans: np.ndarray, nstages: int) -> OnClock:
    stage = spans["stage"].astype(np.int64)
    start = spans["start_ns"].astype(np.int64)
    end = np.maximum(spans["end_ns"].astype(np.int64), start)
    covered = np.zeros(nstages, np.int64)
    summed = np.bincount(stage, weights=end - start,
                         minlength=nstages).astype(np.int64)
    at_once = np.zeros(nstages, np.int64)
    if not len(spans):
        return OnClock(covered, summed, at_once)
    order = np.lexsort((start, stage))
    stage, start, end = stage[order], start[order], end[order]
    # the latest end of the stage's calls before each: a call starting
    # after it begins a new stretch of the stage's time
    first = np.r_[True, stage[1:] != stage[:-1]]
    reach = _running_max_by_group(end, first)
    fresh = first | np.r_[False, start[1:] >= reach[:-1]]
    begins = np.flatnonzero(fresh)
    stretch_end = np.maximum.reduceat(end, begins)
    np.add.at(covered, stage[begins], stretch_end - start[begins])
    at_once[:] = _most_at_once(stage, start, end, nstages)
    return OnClock(covered, summed, at_once)


def _running_max_by_group(values: np.ndarray,
                          first: np.ndarray) -> np.ndarray:
    """The running maximum of values, restarting where first is True:
    each group is lifted above every value of the groups before it, so
    that one running maximum over all restarts at each group."""
    group = np.cumsum(first) - 1
    low = values.min()
    span = int(values.max() - low) + 1
    # ranks keep the lift within 64 bits whatever the clock's range
    if span * (int(group[-1]) + 1) < 2 ** 62:
        lifted = values - low + group * span
        return np.maximum.accumulate(lifted) - group * span + low
    ranks = np.unique(values, return_inverse=True)
    levels, rank = ranks[0], ranks[1].ravel()
    lifted = rank + group * len(levels)
    return levels[np.maximum.accumulate(lifted) - group * len(levels)]


def _most_at_once(stage: np.ndarray, start: np.ndarray, end: np.ndarray,
                  nstages: int) -> np.ndarray:
    """Per stage, the most of its calls open at one time: a sweep over
    its starts (+1) and ends (-1), an end before a start at one time."""
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(len(start), np.int64),
                            -np.ones(len(end), np.int64)])
    stages = np.concatenate([stage, stage])
    order = np.lexsort((steps, times, stages))
    stages = stages[order]
    # each stage's steps sum to 0: one running sum serves every stage
    open_now = np.cumsum(steps[order])
    begins = np.flatnonzero(np.r_[True, stages[1:] != stages[:-1]])
    most = np.zeros(nstages, np.int64)
    most[stages[begins]] = np.maximum.reduceat(open_now, begins)
    return most


class Clock:
    """A report's stages on the clock, measured at first use (a sort of
    the spans: kept off the path of reports nobody ranks) and kept."""

    def __init__(self, spans: np.ndarray, nstages: int):
        self._spans, self._nstages = spans, nstages
        self._found: "OnClock | None" = None

    def _of(self) -> OnClock:
        if self._found is None:
            self._found = on_clock(self._spans, self._nstages)
        return self._found

    def self_wall(self, sid: int, self_time: float) -> float:
        found = self._of()
        summed = int(found.summed_ns[sid])
        if found.at_once[sid] <= 1 or summed <= 0:
            return self_time
        return self_time * int(found.covered_ns[sid]) / summed

    def at_once(self, sid: int) -> int:
        return int(self._of().at_once[sid])
