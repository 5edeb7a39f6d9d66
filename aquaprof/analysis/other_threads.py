"""What the other threads of a stage's process did while it was open, from
the sampled timeline: a stage that hands its work to a pool and waits
uses no CPU of its own, yet keeps the machine busy. Its own thread's
figures alone would call it waiting, as on I/O.

Each sample on the timeline stands for its stack's mean CPU time a sample
(the stacks keep sums, not each sample's). Other threads that were busy
as much outside the stage as inside it (a monitor, an unrelated worker)
are not its work: both rates are given."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, NamedTuple, Optional, Tuple

import numpy as np

from ..common.units import printable
from .samples import frame

if TYPE_CHECKING:
    from ..model.report import Report, StageStats

_NS = 1e-9


class OtherThreads(NamedTuple):
    """CPUs the process's other threads used on average while the stage
    was open (inside) and while it was not (outside; None where the stage
    was open nearly all the run), and their hottest function inside."""

    inside: float
    outside: Optional[float]
    hottest: str


def other_threads(report: "Report", stage: "StageStats"
                  ) -> Optional[OtherThreads]:
    """None for a run without a sampled timeline, or a stage whose
    process's other threads were never sampled while it was open."""
    samples = report.samples
    if samples is None or "timeline" not in samples:
        return None
    spans = report.spans()
    spans = spans[spans["stage"] == stage.id]
    if not len(spans):
        return None
    threads = {t["index"]: t for t in report.threads}
    own = {(threads[i].get("process", 0), threads[i]["native_id"])
           for i in np.unique(spans["thread"]).tolist()}
    processes = {p for p, _tid in own}
    starts, ends = _union(spans["start_ns"], spans["end_ns"])
    covered = int((ends - starts).sum())
    timeline = samples["timeline"]
    stacks = samples["stacks"]
    other = np.array([s[0] in processes and (s[0], s[1]) not in own
                      for s in stacks] + [False], bool)
    cpu = np.array([s[6] / s[4] if s[4] else 0.0 for s in stacks] + [0.0])
    pick = np.minimum(timeline["stack"], len(stacks))
    chosen = other[pick]
    t = timeline["t_ns"][chosen]
    where = np.searchsorted(starts, t, "right") - 1
    inside = (where >= 0) & (t < ends[np.maximum(where, 0)])
    each = cpu[pick][chosen]
    if not inside.any() or covered <= 0:
        return None
    run = int(report.meta["stop_ns"]) - int(report.meta["start_ns"])
    rest = run - covered
    outside = (float(each[~inside].sum()) / rest
               if rest > max(covered, run) * 0.1 else None)
    return OtherThreads(float(each[inside].sum()) / covered, outside,
                        _hottest(report, pick[chosen][inside]))


def _union(start: np.ndarray, end: np.ndarray
           ) -> Tuple[np.ndarray, np.ndarray]:
    """The intervals' union, as sorted disjoint [start, end) pairs."""
    order = np.argsort(start, kind="stable")
    start = start[order].astype(np.int64)
    end = np.maximum(end[order].astype(np.int64), start)
    reach = np.maximum.accumulate(end)
    fresh = np.r_[True, start[1:] > reach[:-1]]
    begins = np.flatnonzero(fresh)
    return start[begins], np.maximum.reduceat(end, begins)


def _hottest(report: "Report", picked: np.ndarray) -> str:
    """The innermost function most often on the picked samples' stacks."""
    stacks = report.samples["stacks"]      # type: ignore[index]
    counts: Dict[int, int] = {}
    for k, n in zip(*np.unique(picked, return_counts=True)):
        chain = stacks[int(k)][3]
        if chain:
            counts[chain[-1]] = counts.get(chain[-1], 0) + int(n)
    if not counts:
        return ""
    top = max(counts, key=lambda f: (counts[f], -f))
    return printable(frame(report, top).label)
