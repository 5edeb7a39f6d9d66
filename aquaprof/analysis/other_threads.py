"""What the other threads of a stage's process did while it was open, from
the sampled timeline: a stage that hands its work to a pool and waits
uses no CPU of its own, yet keeps the machine busy. Its own thread's
figures alone would call it waiting, as on I/O.

Each sample on the timeline carries the CPU time its thread used since
the one before, so the sums hold whatever the sampling's pace. Each
process is measured over the time its timeline covers (its samples, the
ones kept within max_samples): the stage's calls there, and the rest of
that time. Other threads as busy outside the stage as inside it (a
monitor, an unrelated worker) are not its work: both rates are given,
and the second is unknown where the stage was open nearly all the
time. Calls of a few sampling intervals or less are not split: a
sample's CPU time, since the one before, crosses their edges."""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from ..common.units import printable
from ..model.schema import CPU_UNKNOWN
from .concurrency import union
from .samples import frame

if TYPE_CHECKING:
    from ..model.report import Report, StageStats

#: the rest of the time below this share of it: the outside rate unknown
OUTSIDE_SHARE = 0.1
#: calls shorter than this many sampling intervals on average are not
#: split: a sample's CPU time since the last one crosses their edges
INTERVALS_A_CALL = 4


class OtherThreads(NamedTuple):
    """CPUs the process's other threads used on average while the stage
    was open (inside) and while it was not (outside; None where the stage
    was open nearly all the time), and their hottest function inside."""

    inside: float
    outside: Optional[float]
    hottest: str
    #: the CPU seconds they used while it was open, within the timeline
    inside_s: float = 0.0


def other_threads(report: "Report", stage: "StageStats"
                  ) -> Optional[OtherThreads]:
    """None for a run without a sampled timeline or without each
    sample's CPU time (files from before it), a stage whose calls are
    too short for the sampling's pace, or one during whose calls no other
    thread of its processes was sampled."""
    found = _timed_calls(report, stage)
    if found is None:
        return None
    spans, threads, timeline, stacks = found
    own = {threads[i] for i in np.unique(spans["thread"]).tolist()}
    process_of_thread = np.zeros(max(threads) + 1, np.int64)
    for index, (process, _tid) in threads.items():
        process_of_thread[index] = process
    span_process = process_of_thread[spans["thread"]]
    process_of = np.array([s[0] for s in stacks], np.int64)
    other = np.array([(s[0], s[1]) not in own for s in stacks], bool)
    stack = timeline["stack"].astype(np.int64)
    totals = np.zeros(4)    # inside CPU, covered, outside CPU, the rest
    picked = []
    for process in sorted({p for p, _tid in own}):
        mine = process_of[stack] == process
        t = timeline["t_ns"][mine]
        if len(t) < 2:
            continue
        theirs = other[stack[mine]]
        cpu = timeline["cpu_us"][mine][theirs]
        if (cpu == CPU_UNKNOWN).any():
            return None
        found = _split(spans[span_process == process], t[0], t[-1],
                       t[theirs], cpu)
        totals += found[0]
        picked.append((stack[mine][theirs][found[1]], cpu[found[1]]))
    inside_cpu, covered, outside_cpu, rest = totals
    if covered <= 0 or not any(len(k) for k, _cpu in picked):
        return None
    outside = (outside_cpu / rest
               if rest >= OUTSIDE_SHARE * (covered + rest) else None)
    return OtherThreads(inside_cpu / covered, outside, _hottest(
        report, np.concatenate([k for k, _cpu in picked]),
        np.concatenate([c for _k, c in picked])), float(inside_cpu) * 1e-9)


def _timed_calls(report: "Report", stage: "StageStats"
                 ) -> Optional[Tuple[np.ndarray, Dict[int, Tuple[int, int]],
                                     np.ndarray, List[list]]]:
    """The stage's spans, each thread index's (process, native id), the
    sampled timeline and its stacks, where the timeline can split the
    stage's calls; None for a run without one, calls too short for the
    sampling's pace, or none."""
    samples = report.samples
    if samples is None or "timeline" not in samples or \
            stage.wall.mean < INTERVALS_A_CALL * samples["interval_ns"] * 1e-9:
        return None
    spans = report.spans()
    spans = spans[spans["stage"] == stage.id]
    if not len(spans) or not len(samples["timeline"]):
        return None
    threads = {t["index"]: (t.get("process", 0), t["native_id"])
               for t in report.threads}
    return spans, threads, samples["timeline"], samples["stacks"]


def _split(spans: np.ndarray, first: int, last: int, t: np.ndarray,
           cpu_us: np.ndarray):
    """([CPU inside, time covered, CPU outside, time outside], in ns; and
    which samples fell inside) of the stage's calls in one process (its
    spans), within the time its timeline covers, [first, last]."""
    starts, ends = union(np.clip(spans["start_ns"], first, last),
                         np.clip(spans["end_ns"], first, last))
    at = np.searchsorted(starts, t, "right") - 1
    inside = (at >= 0) & (t < ends[np.maximum(at, 0)])
    cpu_ns = cpu_us.astype(np.float64) * 1e3
    covered = float((ends - starts).sum())
    return (np.array([cpu_ns[inside].sum(), covered, cpu_ns[~inside].sum(),
                      float(last - first) - covered]), inside)


def _hottest(report: "Report", picked: np.ndarray, cpu_us: np.ndarray
             ) -> str:
    """The innermost function of the picked samples' stacks that used the
    most CPU; "" where none used any."""
    stacks = report.samples["stacks"]      # type: ignore[index]
    used: Dict[int, float] = {}
    for k, cpu in zip(picked.tolist(), cpu_us.tolist()):
        chain = stacks[k][3]
        if chain and cpu:
            used[chain[-1]] = used.get(chain[-1], 0.0) + cpu
    if not used:
        return ""
    top = max(used, key=lambda f: (used[f], -f))
    return printable(frame(report, top).label)


class LoopHolder(NamedTuple):
    """What the stage's own threads (an asyncio stage's: its event loops)
    ran most while its calls were open, other than the stage itself: a
    stage's path ("" for code in no stage), the CPU seconds it used
    there, and the seconds the calls covered."""

    path: str
    cpu_s: float
    covered_s: float


def loop_holder(report: "Report", stage: "StageStats"
                ) -> Optional[LoopHolder]:
    """For a stage whose calls wait at an await: what held its event
    loops meanwhile, from the sampled timeline (each sample's CPU time
    since its thread's one before). None for a run without the timeline
    or its CPU times, calls too short for the sampling's pace, or no
    other work sampled on those threads."""
    found = _timed_calls(report, stage)
    if found is None:
        return None
    spans, threads, timeline, stacks = found
    used: Dict[int, float] = {}
    covered = 0.0
    stack = timeline["stack"].astype(np.int64)
    stage_of = np.array([s[2] for s in stacks], np.int64)
    thread_of = [(s[0], s[1]) for s in stacks]
    for index in np.unique(spans["thread"]).tolist():
        mine = np.array([key == threads[index] for key in thread_of],
                        bool)[stack]
        t = timeline["t_ns"][mine]
        if len(t) < 2:
            continue
        cpu = timeline["cpu_us"][mine]
        if (cpu == CPU_UNKNOWN).any():
            return None
        split, inside = _split(spans[spans["thread"] == index], t[0], t[-1],
                               t, cpu)
        covered += split[1]
        where = stage_of[stack[mine]]
        for sid, us in zip(where[inside].tolist(), cpu[inside].tolist()):
            if sid != stage.id:
                used[sid] = used.get(sid, 0.0) + us * 1e-6
    if covered <= 0 or not used:
        return None
    top = max(used, key=lambda sid: (used[sid], -sid))
    path = "" if top < 0 else report.stage_names[top]
    return LoopHolder(path, used[top], covered * 1e-9)
