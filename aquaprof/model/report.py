"""Report: plain data about one profiled run, loadable from JSON.

Everything a user sees is rendered from a Report, so a file saved yesterday
or on another machine shows the same table as a live run. This class holds
the data and answers questions about it; it runs no analysis and renders
nothing. The Report users get (aquaprof.Report, in aquaprof/report.py)
adds the conveniences, and is built there, figures derived once.
"""
from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, \
    Optional, Sequence, Set, Tuple, Union

import numpy as np

from ..common.checks import whole
from ..common.words import shorten_path
from .. import _core
from . import limits, schema
from ..common.atomic import write_atomic
from .schema import ReportError

#: the stage paths a KeyError for a missing one lists
KNOWN_SHOWN = 20

_NS = 1e-9


def subtree(parents: Sequence[int], root: int) -> Set[int]:
    """Stage id root and every stage below it, from each stage's parent
    id (-1: none; parents come before children)."""
    inside = {root}
    for sid in range(root + 1, len(parents)):
        if parents[sid] in inside:
            inside.add(sid)
    return inside


def stage_paths(stages: Sequence[Dict[str, Any]]) -> List[str]:
    """The ``outer/inner`` path of each stage dict (parents come first)."""
    paths: List[str] = []
    for s in stages:
        prefix = paths[s["parent"]] + "/" if s["parent"] >= 0 else ""
        paths.append(prefix + s["name"])
    return paths


class CodeFrame(NamedTuple):
    """A code object the sampler saw (Report.samples["frames"][i]): its
    qualified name, file and first line."""

    function: str
    file: str
    line: int

    @property
    def label(self) -> str:
        """``function (file.py:line)``, the file cut to its base name."""
        base = self.file.replace("\\", "/").rsplit("/", 1)[-1]
        return f"{self.function} ({base}:{self.line})"


class Timing:
    """Distribution of a stage's wall time over its calls, in seconds.

    Percentiles come from a log-bucketed histogram (bucket width at most
    1/32 of its value, about 1.6 % error) clamped to the exact min and max.
    """

    __slots__ = ("count", "total", "mean", "std", "min", "max", "_hist")

    def __init__(self, stage: Dict[str, Any]):
        self.count: int = stage["count"]
        self.total: float = stage["total_ns"] * _NS
        self.mean: float = stage["mean_ns"] * _NS
        var = stage["m2"] / (self.count - 1) if self.count > 1 else 0.0
        self.std: float = math.sqrt(max(var, 0.0)) * _NS
        self.min: float = stage["min_ns"] * _NS
        self.max: float = stage["max_ns"] * _NS
        self._hist: Sequence[Tuple[int, int]] = stage["hist"]

    def percentile(self, q: float) -> float:
        """Wall time at percentile q (0..100), nearest-rank, in seconds."""
        if not 0 <= q <= 100:
            raise ValueError(f"percentile q must be in [0, 100], got {q!r}")
        if self.count == 0:
            return 0.0
        rank = max(1, math.ceil(q / 100 * self.count))
        if rank == 1:
            return self.min   # the extremes are tracked exactly
        if rank >= self.count:
            return self.max
        seen = 0
        lower = _core.HIST_LOWER_NS
        for index, n in self._hist:
            seen += n
            if seen >= rank:
                mid = (int(lower[index]) + int(lower[index + 1])) / 2 * _NS
                return min(max(mid, self.min), self.max)
        return self.max

    def buckets(self) -> List[Tuple[int, int]]:
        """The histogram: (bucket index, calls) pairs, the bucket's
        bounds in ns being aquaprof._core.HIST_LOWER_NS[index:index + 2];
        only buckets with calls, fastest first."""
        return [(int(i), int(n)) for i, n in self._hist]

    p50 = property(lambda self: self.percentile(50), doc="Median, seconds.")
    p90 = property(lambda self: self.percentile(90), doc="90th pct, seconds.")
    p95 = property(lambda self: self.percentile(95), doc="95th pct, seconds.")
    p99 = property(lambda self: self.percentile(99), doc="99th pct, seconds.")

    def __repr__(self) -> str:
        return (f"Timing(count={self.count}, total={self.total:.6g}, "
                f"mean={self.mean:.6g}, p50={self.p50:.6g}, "
                f"p95={self.p95:.6g}, max={self.max:.6g})")


class StageStats:
    """Aggregates of one stage path (``outer/inner``) over the whole run.

    Times are seconds (float), counts ints, memory bytes (int).
    """

    __slots__ = ("id", "path", "name", "parent", "depth", "count", "wall",
                 "self_time", "cpu", "process_cpu", "items", "share",
                 "mem_peak", "mem_rise", "mem_delta", "raised", "unclosed",
                 "suspended",
                 "compensated_total", "compensated_self", "cuda", "clock")

    def __init__(self, sid: int, path: str, parent: Optional[str],
                 stage: Dict[str, Any], run_wall: float):
        self.id: int = sid
        self.path: str = path
        self.name: str = stage["name"]
        self.parent: Optional[str] = parent
        self.depth: int = stage["depth"]
        self.count: int = stage["count"]
        self.wall: Timing = Timing(stage)
        self.self_time: float = stage["self_ns"] * _NS
        self.cpu: float = stage["cpu_ns"] * _NS
        #: the CPU time of all the process's threads while its calls were
        #: open (the stage's own, a pool or native library it handed its
        #: work to, and whatever else ran then), read by the memory
        #: sampler; None with memory=False or in files from before it
        proc_cpu = process_cpu_ns(stage)
        self.process_cpu: Optional[float] = (
            None if proc_cpu is None else proc_cpu * _NS)
        self.items: int = stage["items"]
        #: wall time over the run's wall time (threads may add past 1)
        self.share: float = self.wall.total / run_wall if run_wall else 0.0
        #: highest process RSS seen while the stage was open, None if off
        self.mem_peak: Optional[int] = stage["mem_peak"] or None
        #: the most the process's RSS rose above its value at entry within
        #: one call: what the call took at once (with its sub-stages and
        #: other threads meanwhile), not memory other code kept between its
        #: calls; None if off, or in files from before it
        self.mem_rise: Optional[int] = (
            stage.get("mem_rise") if self.mem_peak else None)
        #: sum over calls of RSS at exit minus RSS at entry
        self.mem_delta: int = stage["mem_delta"]
        self.raised: int = stage["raised"]
        self.unclosed: int = stage["unclosed"]
        #: calls suspended at an await (asyncio): the thread ran other
        #: tasks meanwhile, so their CPU time is unknown and not in cpu
        self.suspended: int = stage.get("suspended", 0)
        #: total and self wall time with the profiler's calibrated cost
        #: taken out (aquaprof.analysis.overhead); None when the run was
        #: not calibrated
        self.compensated_total: Optional[float] = None
        self.compensated_self: Optional[float] = None
        #: GPU work the stage (and its sub-stages) launched, an
        #: aquaprof.analysis.gpu_stats.CudaStats; None when the run traced
        #: none for it
        self.cuda: Any = None
        #: the stages on the run's clock, measured from the spans at first
        #: use (aquaprof.analysis.concurrency.Clock); None: not measured
        self.clock: Any = None

    @property
    def self_wall(self) -> float:
        """Seconds of the run's clock during which the stage ran itself in
        at least one thread, asyncio task or process: self_time, with the
        time its calls overlapped counted once. What top() ranks by."""
        if self.clock is None:
            return self.self_time
        return float(self.clock.self_wall(self.id, self.self_time))

    @property
    def throughput(self) -> Optional[float]:
        """Items per second of the stage's time on the run's clock (its
        calls' wall time, where calls overlapped counted once: 4 threads
        each at 100 items/s make 400/s, not 100/s); None when no items
        were given."""
        if not self.items:
            return None
        wall = self.wall.total
        if self.clock is not None:
            wall = float(self.clock.wall(self.id, wall))
        return self.items / wall if wall > 0 else None

    @property
    def awaited_sub_stages(self) -> bool:
        """Whether its self time holds sub-stages that ran in other tasks
        it awaited (create_task, gather), which its time on the
        clock leaves out: its calls suspended, none at once with another,
        every one of them kept (max_spans)."""
        return (self.clock is not None and self.suspended > 0 and
                self.at_once <= 1 and self.clock.measured(self.id) and
                self.self_wall < 0.99 * self.self_time)

    @property
    def at_once(self) -> int:
        """The most of the stage's recorded calls open at one time: above
        1, its times sum overlapping calls (0: none recorded or not
        measured)."""
        return int(self.clock.at_once(self.id)) if self.clock else 0

    def __repr__(self) -> str:
        return (f"StageStats({self.path!r}, count={self.count}, "
                f"total={self.wall.total:.6g}, self={self.self_time:.6g})")


@dataclass(frozen=True)
class ProcessStats:
    """One process's own figures for one stage (Report.by_process).

    Times are seconds, like StageStats: total and self wall time, CPU
    time and the mean wall time of a call.
    """

    process: int        #: index into Report.processes
    label: str          #: the process's label ("rank 2 (node3)")
    pid: int
    count: int
    total: float
    self_time: float
    cpu: float
    mean: float


def process_stats(process: int, info: Dict[str, Any], count: int,
                  total_ns: int, self_ns: int, cpu_ns: int) -> ProcessStats:
    """A ProcessStats from a process entry and its figures in ns."""
    return ProcessStats(process, info["label"], info["pid"], count,
                        total_ns * _NS, self_ns * _NS, cpu_ns * _NS,
                        total_ns * _NS / count if count else 0.0)


def rows_by_stage(processes: Sequence[Dict[str, Any]]
                  ) -> Dict[int, List[ProcessStats]]:
    """{stage id: a ProcessStats per process that ran it, in process
    order} from a merged report's process entries, in one pass."""
    rows: Dict[int, List[ProcessStats]] = {}
    for p, info in enumerate(processes):
        for sid, count, total, self_ns, cpu in info.get("stages", []):
            if count:
                rows.setdefault(sid, []).append(
                    process_stats(p, info, count, total, self_ns, cpu))
    return rows


def process_cpu_ns(stage: Dict[str, Any]) -> Optional[int]:
    """A stage dict's process CPU time while open, ns; None where it was
    not measured: memory=False (which writes 0, and no RSS peak), or a
    file from before the figure."""
    if "proc_cpu_ns" not in stage or not stage["mem_peak"]:
        return None
    return stage["proc_cpu_ns"]


def stage_stats(stages: Sequence[Dict[str, Any]], run_wall: float,
                kind: type = StageStats) -> List[StageStats]:
    """A StageStats (or subclass `kind`) per stage dict, with its path and
    its parent's path; run_wall is the time shares are taken of."""
    paths = stage_paths(stages)
    return [kind(i, paths[i],
                       paths[s["parent"]] if s["parent"] >= 0 else None,
                       s, run_wall)
            for i, s in enumerate(stages)]


class Report:
    """The data of one profiled run: its stages, spans, threads, GPU
    events and samples, and the figures derived from them
    (StageStats.compensated_*, StageStats.cuda, sampling), which the
    builder (aquaprof.report) sets once.

    stage_kind: the class of the stages it holds (a StageStats)."""

    stage_kind: type = StageStats

    def __init__(self, data: Dict[str, Any], *, _checked: bool = False):
        # a live run's figures come from the core: checking them against
        # the limits on files could only lose a profile (a recursion past
        # MAX_DEPTH, say), so only data from elsewhere is checked
        if not _checked:
            schema.validate(data)
        # JSON gives histogram pairs as lists, C as tuples, and the same
        # for the samples' frames and stacks: one form, so that a loaded
        # report compares equal to the one saved
        stages = [dict(s, hist=[tuple(p) for p in s["hist"]])
                  for s in data["stages"]]
        self._data = dict(data, stages=stages)
        if "samples" in data:
            samples = data["samples"]
            self._data["samples"] = dict(
                samples, frames=[list(f) for f in samples["frames"]],
                stacks=[[*s[:3], list(s[3]), *s[4:]]
                        for s in samples["stacks"]])
        self._stats = stage_stats(stages, self.wall, self.stage_kind)
        self._paths = [s.path for s in self._stats]
        self._by_path = {s.path: s for s in self._stats}
        # per stage id, the paths of its name nested in it with none of
        # that name between (its recursion's next levels), found at first
        # use
        self._nested: Optional[Dict[int, List[StageStats]]] = None
        self._recursed_ids: Optional[Set[int]] = None
        #: how the run was sampled (aquaprof.analysis.samples.Sampling:
        #: interval in seconds, rounds, samples, late, lost, timeline,
        #: timeline_dropped, missed); None when it was not sampled
        self.sampling: Any = None

    # ------------------------------------------------------------ access
    @property
    def wall(self) -> float:
        """Wall time of the whole run, seconds."""
        return (self._data["stop_ns"] - self._data["start_ns"]) * _NS

    @property
    def meta(self) -> Dict[str, Any]:
        """Run-level figures: clock range, config, drops, host info."""
        sections = ("stages", "threads", "spans", "gpu", "samples")
        return {k: v for k, v in self._data.items() if k not in sections}

    @property
    def gpu_status(self) -> str:
        """What the run traced on the GPU, or exactly what was missing."""
        return self._data.get("gpu_status", "not recorded")

    @property
    def gpu(self) -> Optional[Dict[str, Any]]:
        """The traced GPU section (events, kernel_names, devices, dropped,
        unattributed), None when the run traced no GPU activity."""
        return self._data.get("gpu")

    @property
    def samples(self) -> Optional[Dict[str, Any]]:
        """The sampler's section (docs/report-format.md): interval_ns,
        rounds, late, lost, frames, stacks and the timeline; None when the
        run was not sampled. aquaprof.analysis.samples reads it."""
        return self._data.get("samples")

    def gpu_events(self) -> Optional[np.ndarray]:
        """Raw GPU events (read-only NumPy structured array, GPU_DTYPE):
        kind (aquaprof.schema.KERNEL, MEMCPY, MEMSET, ALLOC, FREE, SYNC),
        start_ns/end_ns on the spans' clock, bytes, the stage id and span
        index that launched it (-1: none), kernel name index, device,
        stream, grid, block, registers, shared, copy direction, pinned.
        None when no GPU activity was traced."""
        gpu = self.gpu
        return None if gpu is None else gpu["events"]

    def gpu_memory(self) -> Tuple[np.ndarray, np.ndarray]:
        """Device allocations and frees in time order (GPU_DTYPE events),
        and the device bytes in use right after each, of the allocations
        CUPTI saw. Empty when no GPU activity was traced."""
        events = self.gpu_events()
        if events is None:
            return np.empty(0, _core.GPU_DTYPE), np.empty(0, np.int64)
        memory = events[np.isin(events["kind"], (schema.ALLOC, schema.FREE))]
        memory = memory[np.argsort(memory["start_ns"], kind="stable")]
        in_use = np.cumsum(np.where(memory["kind"] == schema.ALLOC,
                                    memory["bytes"], -memory["bytes"]))
        return memory, in_use

    @property
    def threads(self) -> List[Dict[str, Any]]:
        """Threads that recorded stages: index, native_id, spans, dropped,
        and name (threading.Thread.name) for Python threads. Past the
        first 16,384 threads, one row with ``folded`` (a count) sums the
        ended threads that kept no span (docs/profiler.md)."""
        return [dict(t) for t in self._data["threads"]]

    @property
    def processes(self) -> List[Dict[str, Any]]:
        """The processes whose stages this report holds: one, or one per
        report merged into it. Each has a pid and a label; threads name
        theirs by index ("process", 0 when absent)."""
        merged = self._data.get("processes")
        if merged:
            return [dict(p) for p in merged]
        host = self._data.get("host", {})
        argv = host.get("argv") or ["python"]
        where = f", {host['hostname']}" if "hostname" in host else ""
        label = self._data.get("label") or \
            f"{Path(str(argv[0])).name} (pid {self._data['pid']}{where})"
        process = {"pid": self._data["pid"], "label": label,
                   "memory_samples": self.memory_samples}
        if "worker" in self._data:
            process["worker"] = self._data["worker"]
        return [process]

    @property
    def memory_samples(self) -> List[List[int]]:
        """Host RSS over the run: [CLOCK_MONOTONIC ns, bytes] pairs, one
        per sampling interval (evenly thinned past 4096), when memory was
        sampled; for a merged report, those of the first process."""
        merged = self._data.get("processes")
        if merged:
            return [list(p) for p in merged[0].get("memory_samples", [])]
        return [list(p) for p in self._data.get("memory_samples", [])]

    @property
    def spans_recorded(self) -> int:
        return len(self._data["spans"])

    @property
    def spans_dropped(self) -> int:
        """Spans beyond max_spans: not in spans(), still in aggregates."""
        return self._data["spans_dropped"]

    @property
    def unclosed(self) -> int:
        """Stages still open at stop(), closed there and flagged."""
        return self._data["unclosed"]

    @property
    def stage_names(self) -> List[str]:
        """Stage path for each stage id used in spans()['stage']."""
        return list(self._paths)

    @property
    def stage_parents(self) -> List[int]:
        """The parent's stage id of each stage id (-1: none)."""
        return [s["parent"] for s in self._data["stages"]]

    @property
    def stages(self) -> List[StageStats]:
        """All stage paths in tree order, siblings by total time, longest
        first."""
        children: Dict[Optional[str], List[StageStats]] = {}
        for s in sorted(self._stats, key=lambda s: (s.wall.total, s.path),
                        reverse=True):
            children.setdefault(s.parent, []).append(s)
        ordered: List[StageStats] = []
        todo = list(reversed(children.get(None, [])))
        while todo:
            stage = todo.pop()
            ordered.append(stage)
            todo.extend(reversed(children.get(stage.path, [])))
        return ordered

    def __iter__(self) -> Iterator[StageStats]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self._stats)

    def __contains__(self, path: object) -> bool:
        return path in self._by_path

    def __getitem__(self, path: str) -> StageStats:
        try:
            return self._by_path[path]
        except KeyError:
            paths = sorted(self._by_path)
            # a report of a name a request holds thousands: the first few
            known = ", ".join(shorten_path(p, 80)
                              for p in paths[:KNOWN_SHOWN]) or "none"
            more = (f" and {len(paths) - KNOWN_SHOWN:,} more"
                    if len(paths) > KNOWN_SHOWN else "")
            shown = repr(shorten_path(path, 200)) if isinstance(path, str) \
                else repr(path)[:200]
            raise KeyError(f"no stage {shown} in this report; stage paths "
                           f"are: {known}{more}") from None

    def top(self, n: int = 3) -> List[StageStats]:
        """The n stages that took the most of the run's clock running
        themselves (ranked_self): the bottlenecks. Where a stage's calls
        never overlapped, that is its self time; 100 tasks asleep 0.1 s
        at once count 0.1 s, not 10 s. A recursive stage ranks once, at
        its outermost path, with the self time of every level of it
        (recursion()), so each path's time ranks exactly once."""
        if not whole(n, 0):
            raise ValueError(f"n must be an int >= 0, got {n!r}")
        heads = [s for s in self._stats if not self._recursed(s)]
        return sorted(heads, key=lambda s: (-self.ranked_self(s), s.path))[:n]

    def bottlenecks(self, n: int = 3) -> List[Tuple[StageStats, float]]:
        """top(n) with each stage's ranked time (ranked_self), those
        that took any: what the printed report, the page, the pytest
        gate's summary and diagnose() list."""
        ranked = [(s, self.ranked_self(s)) for s in self.top(n)]
        return [(s, t) for s, t in ranked if t > 0]

    def recursion(self, stage: StageStats) -> List[StageStats]:
        """stage and the paths of its calls nested in themselves, at any
        depth: directly (`f/f`, `f/f/f`) or through other stages
        (`expr/term/expr`, a parser's mutual recursion), outermost
        first. Each level is a path of its own with its own self time, a
        share of the same code's."""
        nested = self._recursion_tree()[0]
        found = [stage]
        for level in found:     # grows as levels are found
            found += nested.get(level.id, ())
        return sorted(found, key=lambda s: s.depth)

    def ranked_self(self, stage: StageStats) -> float:
        """What top() ranks stage by: its self time on the run's clock
        (StageStats.self_wall) with that of its recursion (recursion());
        never more than the run."""
        levels = self.recursion(stage)
        if len(levels) == 1:
            return stage.self_wall
        return min(sum(s.self_wall for s in levels), self.wall)

    def _recursed(self, stage: StageStats) -> bool:
        """Whether stage is a call of a stage above it nested in itself,
        ranked with that stage's outermost level."""
        return stage.id in self._recursion_tree()[1]

    def _recursion_tree(self) -> Tuple[Dict[int, List[StageStats]],
                                       Set[int]]:
        """_nested and the ids of the stages nested so, found once by
        one walk of the stage tree that holds, per name, the stages of
        that name open along the path: a stage with one of its name above
        is the next level of the nearest."""
        if self._nested is not None and self._recursed_ids is not None:
            return self._nested, self._recursed_ids
        children: Dict[int, List[StageStats]] = {}
        for s in self._stats:
            parent = self._data["stages"][s.id]["parent"]
            children.setdefault(parent, []).append(s)
        nested: Dict[int, List[StageStats]] = {}
        recursed: Set[int] = set()
        above: Dict[str, List[int]] = {}
        todo = [(s, False) for s in children.get(-1, ())]
        while todo:     # a recursion thousands deep: no Python recursion
            stage, leaving = todo.pop()
            same = above.setdefault(stage.name, [])
            if leaving:
                same.pop()
                continue
            if same:
                nested.setdefault(same[-1], []).append(stage)
                recursed.add(stage.id)
            same.append(stage.id)
            todo.append((stage, True))
            todo += [(c, False) for c in children.get(stage.id, ())]
        self._nested, self._recursed_ids = nested, recursed
        return nested, recursed

    def by_process(self, path: str) -> List[ProcessStats]:
        """Each process's own figures for stage `path` (ProcessStats: count,
        total, self_time, cpu, mean, in seconds), one row per process that
        ran it, in process order. A report of one process gives one row,
        the stage's own; a merged report gives the figures each process
        kept (``processes[i]["stages"]``), exact even where raw spans were
        dropped. KeyError, listing the paths, for a path the report
        lacks."""
        stats = self[path]
        merged = self._data.get("processes")
        if merged:
            return rows_by_stage(merged).get(stats.id, [])
        stage = self._data["stages"][stats.id]
        if not stage["count"]:
            return []
        return [process_stats(0, self.processes[0], stage["count"],
                              stage["total_ns"], stage["self_ns"],
                              stage["cpu_ns"])]

    def spans(self) -> np.ndarray:
        """Raw spans as a read-only NumPy structured array (no copy):
        stage (id into stage_names), thread, parent (span index or -1),
        flags (aquaprof._core.SPAN_RAISED, SPAN_UNCLOSED), start_ns, end_ns,
        cpu_ns, items."""
        return self._data["spans"]

    def __repr__(self) -> str:
        return (f"<aquaprof.Report {len(self)} stages, wall "
                f"{self.wall:.6g} s, {self.spans_recorded} spans>")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Report):
            return NotImplemented
        a, b = self._data, other._data
        plain = ("spans", "gpu", "samples")
        if {k: v for k, v in a.items() if k not in plain} != \
                {k: v for k, v in b.items() if k not in plain} or \
                not np.array_equal(a["spans"], b["spans"]):
            return False
        return (_equal_with_array(a.get("gpu"), b.get("gpu"), "events")
                and _equal_with_array(a.get("samples"), b.get("samples"),
                                      "timeline"))

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready dict (spans compressed, base64)."""
        return schema.encode(self._data)

    def save(self, path: Union[str, os.PathLike]) -> Path:
        """Writes the report as JSON, atomically; returns the path."""
        text = json.dumps(self.to_dict(), separators=(",", ":"))
        return write_atomic(path, text.encode("utf-8"))

def _equal_with_array(a: Optional[Dict[str, Any]],
                      b: Optional[Dict[str, Any]], key: str) -> bool:
    """Two optional sections equal, their array under `key` (where
    present) compared by value."""
    if a is None or b is None:
        return a is b
    if (key in a) != (key in b):
        return False
    return ({k: v for k, v in a.items() if k != key}
            == {k: v for k, v in b.items() if k != key}
            and (key not in a or np.array_equal(a[key], b[key])))


def read_report_file(path: Union[str, bytes]) -> bytes:
    """The bytes of a regular file of at most limits.MAX_FILE_BYTES;
    ReportError otherwise. Opened without blocking, so a FIFO or a device
    is refused instead of waited on or read without end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise ReportError(f"cannot read report: {e.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = ("a directory" if stat.S_ISDIR(info.st_mode)
                    else "not a regular file")
            raise ReportError(f"cannot read report: {kind}")
        limit = limits.MAX_FILE_BYTES
        if info.st_size > limit:
            raise ReportError(f"cannot read report: larger than {limit} "
                              f"bytes (aquaprof.limits.MAX_FILE_BYTES)")
        with open(fd, "rb", closefd=False) as f:
            # the size stat() gave, and then what the file grew by since,
            # up to one byte past the limit (read() of n bytes allocates n)
            parts = [f.read(info.st_size + 1)]
            held = len(parts[0])
            while held <= limit and parts[-1]:
                parts.append(f.read(min(1 << 20, limit + 1 - held)))
                held += len(parts[-1])
        return b"".join(parts)
    except OSError as e:
        raise ReportError(f"cannot read report: {e.strerror}") from None
    finally:
        os.close(fd)


__all__ = ["CodeFrame", "ProcessStats", "Report", "ReportError",
           "StageStats", "Timing"]
