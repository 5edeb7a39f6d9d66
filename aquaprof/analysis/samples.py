"""What the sampler saw inside the stages (docs/sampling.md).

The report keeps the sampled call stacks aggregated: one entry per
distinct (process, thread, stage, call stack) with its number of samples
and the wall and CPU time they stand for (each sample stands for the wall
time since the sampler's previous round, and the CPU time its thread used
meanwhile). A function's share of a stage is a share of that sampled
time, so it reads the same whatever the sampling interval:
- own: the samples where the function is the innermost frame (its own
  code, or C code it called);
- total: those where it is anywhere on the stack, counted once per
  sample however often it recurses.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, \
    Sequence, Tuple

from ..common.checks import whole
from ..common.units import fmt_time
from ..model.report import CodeFrame, subtree

if TYPE_CHECKING:
    from ..model.report import Report

_NS = 1e-9

__all__ = ["CodeFrame", "HotFunction", "SampleStack", "Sampling", "Waits",
           "frame", "hot", "stacks", "stage_hot", "stage_waits",
           "stage_wall_by_thread", "summary"]


class SampleStack(NamedTuple):
    """One entry of Report.samples["stacks"]: the samples of one call
    stack of one thread under one stage."""

    process: int                #: index into Report.processes
    tid: int                    #: the thread's native id
    stage: int                  #: index into Report.stage_names, -1: none
    frames: Tuple[int, ...]     #: frame indices (frame()), outermost first
    count: int  # type: ignore[assignment]   # samples (shadows tuple's)
    wall_ns: int                #: wall time they stand for
    cpu_ns: int                 #: CPU time their thread used meanwhile
    #: of the rest, runnable but not running (the CPU went to others)
    delay_ns: int = 0
    #: and asleep on the GIL (0 where not measured: Report.samples'
    #: "delay_ns", "gil_ns" and "lock_ns" say what was)
    gil_ns: int = 0
    #: and asleep on a lock or another thread (a futex not the GIL's:
    #: a lock, a condition, a queue, a thread's end)
    lock_ns: int = 0


class HotFunction(NamedTuple):
    """A function's part of a stage's sampled time: own and total are
    shares (0..1), the rest seconds."""

    function: str
    file: str
    line: int
    own: float          #: share of samples with it innermost
    total: float        #: share of samples with it on the stack
    own_s: float        #: wall seconds of its own samples
    total_s: float      #: wall seconds of the samples with it on the stack
    cpu_s: float        #: CPU seconds of its own samples

    @property
    def label(self) -> str:
        """``function (file.py:line)``."""
        return CodeFrame(self.function, self.file, self.line).label

    def __repr__(self) -> str:
        return (f"HotFunction({self.label}: own {self.own * 100:.1f} % "
                f"{fmt_time(self.own_s)}, total {self.total * 100:.1f} % "
                f"{fmt_time(self.total_s)}, cpu {fmt_time(self.cpu_s)})")


class Sampling(NamedTuple):
    """How a run was sampled (Report.sampling)."""

    interval: float         #: seconds between rounds, as asked
    rounds: int             #: sampling rounds taken
    samples: int            #: samples recorded (threads x rounds)
    late: int               #: rounds over 2 intervals after the last
    lost: int               #: samples not recorded (memory, limits)
    timeline: int           #: samples kept in time order
    timeline_dropped: int   #: samples past max_samples, in stacks only
    #: rounds asked and never taken: the next tick found the one before
    #: still waiting for the GIL (or the sampler kept off the CPU)
    missed: int = 0


def summary(report: "Report") -> Optional[Sampling]:
    """The run's Sampling; None when it was not sampled."""
    samples = report.samples
    if samples is None:
        return None
    timeline = samples.get("timeline")
    return Sampling(samples["interval_ns"] * _NS, samples["rounds"],
                    sum(s[4] for s in samples["stacks"]), samples["late"],
                    samples["lost"], 0 if timeline is None else len(timeline),
                    samples.get("timeline_dropped", 0),
                    samples.get("unanswered", 0))


def stacks(report: "Report") -> List[SampleStack]:
    """Every sampled stack of the run ([] when it was not sampled)."""
    samples = report.samples or {"stacks": []}
    return [SampleStack(p, tid, stage, tuple(frames), *figures)
            for p, tid, stage, frames, *figures in samples["stacks"]]


class Waits(NamedTuple):
    """Where a stage's sampled wall time went, in seconds: its threads'
    CPU time, their run delay (runnable, not running: the CPU went to
    other threads or processes), their sleep on the GIL and on a lock or
    another thread (a futex not the GIL's: a lock, a condition, a queue,
    a thread's end, a pool's result); the rest they were blocked (I/O,
    sleep, other processes; locks too where lock_known is False)."""

    wall_s: float
    cpu_s: float
    delay_s: float
    gil_s: float
    delay_known: bool       #: run delays were measured (Linux)
    gil_known: bool         #: GIL sleeps were measured (Linux)
    lock_s: float = 0.0
    lock_known: bool = False    #: lock sleeps were measured (Linux)

    @property
    def blocked_s(self) -> float:
        return max(self.wall_s - self.cpu_s - self.delay_s - self.gil_s -
                   self.lock_s, 0.0)


def stage_waits(report: "Report", stage_path: str,
                sub_stages: bool = True) -> Optional[Waits]:
    """The Waits of the samples taken in a stage and its sub-stages (of
    the stage alone with sub_stages=False), in every process of a merged
    report; None for a run not sampled or a stage never sampled."""
    samples = report.samples
    if samples is None:
        return None
    ids = {s.path: s.id for s in report.stages}
    parents = [-1] * len(ids)
    for s in report.stages:
        parents[s.id] = ids[s.parent] if s.parent else -1
    wanted = (subtree(parents, ids[stage_path]) if sub_stages
              else {ids[stage_path]})
    sums = [0, 0, 0, 0, 0]
    for _p, _tid, stage, _frames, _count, *figures in samples["stacks"]:
        if stage in wanted:
            for k, figure in enumerate(figures):
                sums[k] += figure
    if not sums[0]:
        return None
    wall, cpu, delay, gil, lock = (x * _NS for x in sums)
    # a wait Linux tells a round late goes back to the stack that held
    # it, whose time off the CPU was counted asleep then (on the GIL, a
    # lock, or blocked): the run delay, measured, is its time off the
    # CPU at most, and the sleeps, each a state seen as a round read it,
    # share what it leaves as the samples found them
    off = max(wall - cpu, 0.0)
    delay = min(delay, off)
    if gil + lock > off - delay:
        scale = (off - delay) / (gil + lock)
        gil, lock = gil * scale, lock * scale
    return Waits(wall, cpu, delay, gil, "delay_ns" in samples,
                 "gil_ns" in samples, lock, "lock_ns" in samples)


def stage_wall_by_thread(report: "Report", sid: int
                         ) -> Dict[Tuple[int, int], int]:
    """The sampled wall time (ns) of stage id `sid` alone, not its
    sub-stages, per (process, native thread id) that ran it."""
    walls: Dict[Tuple[int, int], int] = {}
    for process, tid, stage, _frames, _count, wall, *_ in \
            (report.samples or {"stacks": []})["stacks"]:
        if stage == sid:
            walls[process, tid] = walls.get((process, tid), 0) + wall
    return walls


def frame(report: "Report", i: int) -> CodeFrame:
    """The code object that SampleStack.frames index `i` names;
    IndexError when the report holds no such frame."""
    frames = (report.samples or {"frames": []})["frames"]
    if not whole(i, 0, len(frames) - 1):
        raise IndexError(f"no frame {i!r}: the report holds "
                         f"{len(frames)} sampled frames")
    return CodeFrame(*frames[i])


def sampled(report: "Report"
            ) -> Optional[Tuple[Dict[str, Any], List[int]]]:
    """What stage_hot() reads of a report: its samples section and each
    stage's parent id; None when the run was not sampled."""
    samples = report.samples
    return None if samples is None else (samples, report.stage_parents)


def hot(report: "Report", stage_path: str, n: int = 10,
        sub_stages: bool = True) -> List[HotFunction]:
    """StageStats.hot(n, sub_stages) of the stage at `stage_path`
    (KeyError, listing the paths, for one the report lacks)."""
    return stage_hot(sampled(report), report[stage_path].id, n, sub_stages)


def _check_n(n: Any) -> None:
    if not whole(n, 0):
        raise ValueError(f"n must be an int >= 0, got {n!r}")


def stage_hot(sampled: Optional[Tuple[Dict[str, Any], Sequence[int]]],
              stage: int, n: int = 10,
              sub_stages: bool = True) -> List[HotFunction]:
    """The n hottest functions of stage id `stage` (and of its sub-stages
    unless sub_stages is False) from `sampled`, the samples section and
    the stages' parents; [] when sampled is None or holds no sample of
    them. ValueError for an n that is not an int >= 0."""
    _check_n(n)
    if sampled is None:
        return []
    samples, parents = sampled
    wanted = subtree(parents, stage) if sub_stages else {stage}
    mine = [s for s in samples["stacks"] if s[2] in wanted]
    if not mine:
        return []
    return _rank(mine, samples["frames"])[:n]


def _rank(mine: List[List[Any]],
          frames: Sequence[Sequence[Any]]) -> List[HotFunction]:
    """HotFunctions of the given stacks, most own time first."""
    own: Dict[Tuple[Any, ...], List[int]] = {}      # key: [wall, cpu]
    total: Dict[Tuple[Any, ...], int] = {}
    whole = 0
    for _p, _tid, _stage, chain, _count, wall, cpu, *_waits in mine:
        whole += wall
        keys = [tuple(frames[f]) for f in chain]
        for key in set(keys):
            total[key] = total.get(key, 0) + wall
        if keys:
            slot = own.setdefault(keys[-1], [0, 0])
            slot[0] += wall
            slot[1] += cpu
    found = []
    for key, on_stack in total.items():
        own_ns, cpu_ns = own.get(key, (0, 0))
        found.append(HotFunction(
            key[0], key[1], key[2], own_ns / whole if whole else 0.0,
            on_stack / whole if whole else 0.0, own_ns * _NS,
            on_stack * _NS, cpu_ns * _NS))
    found.sort(key=lambda h: (-h.own_s, -h.total_s, h.label))
    return found
