"""How much of the run's clock each stage took. A stage that several
threads, asyncio tasks or processes run at once sums their times, which
can pass the run's wall time: 100 tasks each asleep 0.1 s at once sum
10 s of a 0.1 s run, 8 threads computing 0.1 s at once 0.8 s. Ranked by
those sums, they would be called the bottleneck of a run whose time went
elsewhere. On the clock, a stage's self time counts once where its calls
overlap: the time during which at least one of its calls was open and
in none of its own sub-stages (exact where a call's sub-stages do not
overlap one another, as on one thread; tasks a call gathers may).

Measured on the raw spans: where some were dropped (max_spans), the
recorded ones stand for the rest."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _core


class OnClock(NamedTuple):
    """Per stage id: covered_ns, the run's time during which at least one
    of its recorded calls was open; summed_ns, their summed durations;
    at_once, the most of them open at once (0: none recorded); self_ns,
    where self_known, the time during which at least one was open and in
    none of its sub-stages (0 elsewhere: its self time is its own);
    self_known: where its calls or a sub-stage's overlapped or were
    suspended at an await (asyncio tasks a call gathers or awaits leave
    it no time of its own while any is open, though its self time, their
    time not taken from it, is its wall time)."""

    covered_ns: np.ndarray
    summed_ns: np.ndarray
    at_once: np.ndarray
    self_ns: np.ndarray
    self_known: np.ndarray


def suspended_spans(spans: np.ndarray) -> np.ndarray:
    """Which spans are of calls suspended at an await."""
    return (spans["flags"] & _core.SPAN_SUSPENDED) != 0


def on_clock(spans: np.ndarray, nstages: int,
             counts: "np.ndarray | None" = None) -> OnClock:
    """counts: per stage id, its calls, where some spans may have been
    dropped (max_spans): a stage suspended at awaits is measured on the
    clock only where every call of it has its span."""
    stage = spans["stage"].astype(np.int64)
    start = spans["start_ns"].astype(np.int64)
    end = np.maximum(spans["end_ns"].astype(np.int64), start)
    summed = _sums(stage, end - start, nstages)
    covered = np.zeros(nstages, np.int64)
    at_once = np.zeros(nstages, np.int64)
    if not len(spans):
        return OnClock(covered, summed, at_once, covered.copy(),
                       np.zeros(nstages, bool))
    parent = spans["parent"].astype(np.int64)
    by_span = (stage, start, end)
    first_key, last_key = _lifted(stage, start, end, nstages)
    order = np.argsort(first_key, kind="stable")
    stage, start, end = stage[order], start[order], end[order]
    first_key, last_key = first_key[order], last_key[order]
    covered = _covered_sorted(stage, start, end, first_key, last_key,
                              nstages)
    # open just after the i-th start: the starts so far less the ends at
    # or before it; each stage has as many ends as starts, so the count
    # need not know where its stage's keys begin
    ends = np.sort(last_key)
    open_now = np.arange(1, len(first_key) + 1) - np.searchsorted(
        ends, first_key, "right")
    groups = np.flatnonzero(np.r_[True, stage[1:] != stage[:-1]])
    at_once[stage[groups]] = np.maximum.reduceat(open_now, groups)
    # a call suspended at an await may have its sub-stages in other
    # tasks (create_task), which the core's self time, kept a
    # task at a time, does not take from it; where calls of it were
    # dropped, the kept ones cannot stand for them
    suspended = np.zeros(nstages, bool)
    suspended[by_span[0][suspended_spans(spans)]] = True
    if counts is not None:
        suspended &= np.bincount(by_span[0], minlength=nstages) >= counts
    known = _overlapped_or_over(by_span[0], parent,
                                (at_once > 1) | suspended)
    return OnClock(covered, summed, at_once,
                   _self_open(*by_span, parent, known, nstages), known)


def covered(stage: np.ndarray, start: np.ndarray, end: np.ndarray,
            nstages: int) -> np.ndarray:
    """Per stage id (stage: each call's), the time at least one of its
    calls [start, end) was open, in their unit: calls that overlapped (a
    pool's threads, tasks) counted once."""
    stage = stage.astype(np.int64)
    start = start.astype(np.int64)
    end = np.maximum(end.astype(np.int64), start)
    if not len(stage):
        return np.zeros(nstages, np.int64)
    first_key, last_key = _lifted(stage, start, end, nstages)
    order = np.argsort(first_key, kind="stable")
    return _covered_sorted(stage[order], start[order], end[order],
                           first_key[order], last_key[order], nstages)


def _covered_sorted(stage: np.ndarray, start: np.ndarray, end: np.ndarray,
                    first_key: np.ndarray, last_key: np.ndarray,
                    nstages: int) -> np.ndarray:
    """covered() of calls sorted by their lifted keys: each stage's keys
    lie above the stages' before it, so one pass over all finds every
    stage's stretches."""
    begins = _stretches(first_key, last_key)
    stretch_end = np.maximum.reduceat(end, begins)
    return _sums(stage[begins], stretch_end - start[begins], nstages)


def _overlapped_or_over(stage: np.ndarray, parent: np.ndarray,
                        overlapped: np.ndarray) -> np.ndarray:
    """Per stage id: its calls overlapped, or those of a sub-stage did."""
    under = (parent >= 0) & (parent < len(stage))
    under &= overlapped[stage]
    out = overlapped.copy()
    out[stage[parent[under]]] = True
    return out


def _self_open(stage: np.ndarray, start: np.ndarray, end: np.ndarray,
               parent: np.ndarray, wanted: np.ndarray,
               nstages: int) -> np.ndarray:
    """Per wanted stage, the time at least one of its calls was open and
    in none of its sub-stages: a sweep counting, at each moment, its open
    calls less their open sub-stage calls (each clipped to its call)."""
    calls = np.flatnonzero(wanted[stage])
    # a parent the array lacks is none: the span is taken as parentless
    known = (parent >= 0) & (parent < len(stage))
    under = np.flatnonzero(known & wanted[stage[np.where(known, parent, 0)]])
    up = parent[under]
    inner_start = np.clip(start[under], start[up], end[up])
    inner_end = np.clip(end[under], inner_start, end[up])
    owner = np.concatenate([stage[calls], stage[calls], stage[up],
                            stage[up]])
    times = np.concatenate([start[calls], end[calls], inner_start,
                            inner_end])
    steps = np.concatenate([np.ones(len(calls), np.int64),
                            -np.ones(len(calls), np.int64),
                            -np.ones(len(up), np.int64),
                            np.ones(len(up), np.int64)])
    order = np.lexsort((times, owner))
    owner, times, steps = owner[order], times[order], steps[order]
    # each stage's steps sum to 0: one running count serves every stage
    count = np.cumsum(steps)
    active = (count[:-1] > 0) & (owner[1:] == owner[:-1])
    return _sums(owner[:-1][active], np.diff(times)[active], nstages)


def self_open_by_thread(spans: np.ndarray, sid: int,
                        nthreads: int) -> np.ndarray:
    """Per thread index, the time during which at least one of stage
    sid's calls on that thread was open and in none of its sub-stages:
    all that the thread's event loop could have spent running the stage
    itself. Other threads' and processes' loops run theirs at the same
    time: on the run's clock alone, their samples would sum past it."""
    key = np.where(spans["stage"] == sid, spans["thread"].astype(np.int64),
                   nthreads)
    start = spans["start_ns"].astype(np.int64)
    end = np.maximum(spans["end_ns"].astype(np.int64), start)
    wanted = np.r_[np.ones(nthreads, bool), False]
    return _self_open(key, start, end, spans["parent"].astype(np.int64),
                      wanted, nthreads + 1)[:nthreads]


def union(start: np.ndarray, end: np.ndarray
          ) -> "tuple[np.ndarray, np.ndarray]":
    """The union of the intervals [start, end) as sorted disjoint ones:
    their starts and ends."""
    order = np.argsort(start, kind="stable")
    start = start[order].astype(np.int64)
    end = np.maximum(end[order].astype(np.int64), start)
    if not len(start):
        return start, end
    begins = _stretches(start, end)
    return start[begins], np.maximum.reduceat(end, begins)


def _stretches(first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Where stretches of overlapping intervals begin, the intervals in
    order of their starts: at an interval that starts at or after every
    earlier one ended."""
    reach = np.maximum.accumulate(last)
    return np.flatnonzero(np.r_[True, first[1:] >= reach[:-1]])


def _sums(stage: np.ndarray, ns: np.ndarray, nstages: int) -> np.ndarray:
    """Per stage id, the sum of ns (exact below 2^53 ns, 104 days)."""
    return np.rint(np.bincount(stage, weights=ns.astype(np.float64),
                               minlength=nstages)).astype(np.int64)


def _lifted(stage: np.ndarray, start: np.ndarray, end: np.ndarray,
            nstages: int) -> "tuple[np.ndarray, np.ndarray]":
    """start and end as keys that order as the times do within a stage,
    every stage's keys above those of the stages with lower ids: the
    times lifted by the stage's rank among those present, or, where that
    would pass 64 bits, their ranks among all the times lifted so."""
    present = np.zeros(nstages, bool)
    present[stage] = True
    group = (np.cumsum(present) - 1)[stage]
    low = int(start.min())
    width = int(end.max()) - low + 1
    if width * (int(group.max()) + 1) < 2 ** 62:
        base = group * width - low
        return start + base, end + base
    levels = np.unique(np.concatenate([start, end]))
    base = group * len(levels)
    return (np.searchsorted(levels, start) + base,
            np.searchsorted(levels, end) + base)


def apart(spans: np.ndarray, nstages: int) -> OnClock:
    """on_clock() of spans known not to overlap within a stage: one
    thread's, none suspended at an await (a stage nested in itself is
    another path, another stage)."""
    stage = spans["stage"].astype(np.int64)
    summed = _sums(stage, spans["end_ns"].astype(np.int64) -
                   spans["start_ns"].astype(np.int64), nstages)
    at_once = np.zeros(nstages, np.int64)
    at_once[stage] = 1
    return OnClock(summed, summed, at_once, np.zeros(nstages, np.int64),
                   np.zeros(nstages, bool))


class Clock:
    """A report's stages on the clock, measured at first use (two sorts
    of the spans where calls may overlap: kept off the path of reports
    nobody ranks) and kept."""

    def __init__(self, spans: np.ndarray, counts: np.ndarray,
                 overlap: bool, run_s: float):
        self._spans, self._counts = spans, counts
        self._nstages = len(counts)
        self._overlap = overlap
        self._run_s = run_s
        self._found: "OnClock | None" = None

    def _of(self) -> OnClock:
        if self._found is None:
            self._found = (on_clock(self._spans, self._nstages,
                                    self._counts) if self._overlap
                           else apart(self._spans, self._nstages))
        return self._found

    def self_wall(self, sid: int, self_time: float) -> float:
        """Its self time on the clock; never more than the run, which the
        sum of calls whose spans were dropped (max_spans) may pass."""
        found = self._of()
        if found.self_known[sid]:
            self_time = int(found.self_ns[sid]) * 1e-9
        return min(self_time, self._run_s)

    def wall(self, sid: int, total: float) -> float:
        """Its wall time on the clock: total, the time its calls
        overlapped counted once. Where spans were dropped (max_spans), the
        share of overlap its recorded calls had stands for the rest."""
        found = self._of()
        summed = int(found.summed_ns[sid])
        if found.at_once[sid] <= 1 or summed <= 0:
            return total
        return total * int(found.covered_ns[sid]) / summed

    def at_once(self, sid: int) -> int:
        return int(self._of().at_once[sid])

    def measured(self, sid: int) -> bool:
        """Whether its self time was measured on the clock."""
        return bool(self._of().self_known[sid])
