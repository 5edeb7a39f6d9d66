"""The Report users hold, and the one place a report is built.

aquaprof.model.report holds a run's data and answers questions about it.
Here a report's data (from a session, a file, a merge, a nested
profiler) becomes a Report: the figures derived from the data
(compensated times, each stage's CUDA work, the sampling summary) are
computed once, at construction. The conveniences users rely on
(``rep.to_html()``, ``rep.diagnose()``, ``rep["x"].hot()``) are each one
line handing the report to the analysis or the view that does the work,
imported when called, so importing aquaprof costs no view.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, \
    Tuple, Union, cast

import numpy as np

from .analysis.concurrency import Clock
from .analysis.gpu_stats import stage_cuda
from .analysis.overhead import compensate
from .analysis.samples import HotFunction, sampled, stage_hot, summary
from .model import report as model
from .model import schema
from .model.report import ProcessStats, Timing, read_report_file
from .model.schema import ReportError

if TYPE_CHECKING:
    from .analysis.stragglers import Straggler
    from .views.flamegraph_html import Flamegraph

PathLike = Union[str, os.PathLike]


class StageStats(model.StageStats):
    __doc__ = model.StageStats.__doc__

    __slots__ = ("_sampled",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # the report's samples section and its stages' parents, set by
        # Report when the run was sampled: hot() needs no report
        self._sampled: Optional[Tuple[Dict[str, Any], List[int]]] = None

    def hot(self, n: int = 10, sub_stages: bool = True) -> List[HotFunction]:
        """The n hottest functions of the stage and its sub-stages (of the
        stage alone with sub_stages=False), from the sampled call stacks
        (docs/sampling.md): HotFunction(function, file, line, own, total,
        own_s, total_s, cpu_s), most own time first; [] when the run took
        no samples of it. ValueError unless n is an int >= 0."""
        return stage_hot(self._sampled, self.id, n, sub_stages)


class Report(model.Report):
    """The outcome of one profiled run. Build with Profiler.report() or
    Report.load(path)."""

    stage_kind = StageStats

    def __init__(self, data: Dict[str, Any], *, _checked: bool = False):
        super().__init__(data, _checked=_checked)
        for path, (total, self_time) in (compensate(self) or {}).items():
            stats = self[path]
            stats.compensated_total, stats.compensated_self = total, self_time
        for sid, cuda in stage_cuda(self).items():
            self._stats[sid].cuda = cuda
        self.sampling = summary(self)
        found = sampled(self)    # what hot() reads, None when unsampled
        spans = self.spans()
        # one thread's calls of a stage overlap only across awaits
        overlap = bool(len(spans)) and (
            spans["thread"].min() != spans["thread"].max() or
            any(s.suspended for s in self._stats))
        clock = Clock(spans, np.array([s.count for s in self._stats],
                                      np.int64), overlap, self.wall)
        for stage in self._stats:
            cast(StageStats, stage)._sampled = found
            stage.clock = clock

    if TYPE_CHECKING:   # the stages this class holds are its own kind
        def __getitem__(self, path: str) -> StageStats: ...

    @classmethod
    def load(cls, path: PathLike) -> "Report":
        """Reads a file written by save(); ReportError if it is not one.
        Bounded in time and memory whatever the file holds
        (aquaprof.limits)."""
        path = os.fspath(path)  # no Path: see record.processes.parent.collect
        try:
            return cls.from_dict(schema.parse_json(read_report_file(path)))
        except ReportError as e:
            raise ReportError(f"{str(path)!r}: {e}") from None

    @classmethod
    def from_dict(cls, obj: Any) -> "Report":
        """Inverse of to_dict(); ReportError naming what is wrong."""
        return cls(schema.decode(obj))

    # ------------------------------------------------------- analyses
    def kernels(self, limit: Optional[int] = None) -> List[Any]:
        """Per kernel name: count, total, mean, grid/block, registers,
        shared memory and theoretical occupancy, longest total first."""
        from .analysis.gpu_stats import kernel_table
        events = self.gpu_events()
        return [] if events is None else kernel_table(self, events, limit)

    def span_gpu_time(self) -> np.ndarray:
        """Kernel seconds each span launched, aligned with spans()."""
        from .analysis.gpu_stats import span_gpu_time
        return span_gpu_time(self)

    def stragglers(self, top: Optional[int] = None, by: str = "total"
                   ) -> List["Straggler"]:
        """Per stage run by two processes or more: its slowest and its
        fastest process (ProcessStats), the ratio of their times and the
        time the slowest lost to the fastest, most time lost first; `top`
        keeps that many. `by` is "total" (the time each process spent in
        the stage, what the others wait for at the next synchronisation)
        or "mean" (a call's mean, for processes that ran different
        numbers of calls by design). A report of one process has none."""
        from .analysis.stragglers import find_stragglers
        return find_stragglers(self, top, by)

    def diagnose(self, top: int = 3) -> Any:
        """The top stages as the report ranks them (bottlenecks(top):
        a recursive stage with all its levels) classified (cpu-bound,
        waiting, mixed; allocation-heavy on top), each with its evidence,
        a fix to try and the command that verifies it."""
        from .analysis.diagnose import Diagnosis
        return Diagnosis(self, top)

    def anomalies(self, window: int = 50, threshold: float = 6.0,
                  min_ratio: float = 1.5, min_excess: float = 1e-5
                  ) -> List[Any]:
        """Calls far slower than their stage's previous `window` calls,
        and rare among them (robust z-score over the median above
        `threshold`, at least `min_ratio` times and `min_excess` seconds
        over the window's longest 2.5 % of calls, so that a long call
        every few calls is not one), from the raw spans, in
        time order: a list (analysis.anomaly.Anomalies) whose
        not_examined counts the calls whose spans were dropped
        (max_spans), which a warning then says."""
        from .analysis.anomaly import find_anomalies
        return find_anomalies(self, window, threshold, min_ratio,
                              min_excess)

    def compare(self, base: Union[model.Report, Sequence[model.Report]],
                threshold: float = 0.05, alpha: float = 0.01,
                measure: str = "wall") -> Any:
        """This run against base (a Report, or a list of Reports of
        repeated base runs), stage by stage: a Comparison whose changes
        say slower, faster or same, judged on each stage's total and tail
        (p95 call) a run (analysis.verdict); .regressions lists the
        slower stages. measure "cpu" judges thread CPU time."""
        from .analysis.compare import Comparison
        return Comparison(base, self, threshold, alpha, measure)

    # ---------------------------------------------------------- views
    def __str__(self) -> str:
        from .views.text import format_report
        return format_report(self)

    def _repr_html_(self) -> str:
        from .views.html import report_html
        return report_html(self)

    def to_dataframe(self) -> Any:
        """pandas DataFrame, one row per stage path (needs pandas)."""
        from .views.dataframe import report_dataframe
        return report_dataframe(self)

    def to_chrome_trace(self, path: PathLike,
                        max_events: int = 1_000_000) -> Path:
        """Chrome Trace Event JSON for Perfetto and chrome://tracing: a
        track per thread (per process after a merge), stages as complete
        events; past max_events spans the shortest are left out, and the
        trace says so. Returns the path."""
        from .views.trace import write_chrome_trace
        return write_chrome_trace(self, path, max_events)

    def to_folded(self, path: PathLike) -> Path:
        """Folded stacks (``a;b;c <self ns>``), for flamegraph.pl and
        friends."""
        from .views.flamegraph import write_folded
        return write_folded(self, path)

    def to_flamegraph(self, path: PathLike,
                      title: str = "aquaprof flamegraph") -> Path:
        """A self-contained interactive SVG flamegraph (hover, click to
        zoom, search)."""
        from .views.flamegraph import write_flamegraph
        return write_flamegraph(self, path, title)

    def flamegraph(self, title: str = "aquaprof flamegraph",
                   base: Optional[model.Report] = None,
                   threshold: float = 0.05,
                   alpha: float = 0.01) -> "Flamegraph":
        """The interactive flamegraph as an object a notebook displays
        (JupyterLab, Notebook, VS Code: hover, click to zoom, search), as
        wide as the page; .save(path) writes it as an SVG file. With base,
        the differential flamegraph (aquaprof.diff_flamegraph)."""
        from .views.flamegraph_html import Flamegraph
        return Flamegraph(self, title, base, threshold, alpha)

    def to_html(self, path: PathLike, title: Optional[str] = None) -> Path:
        """The report as one self-contained HTML page (no network): the
        header, the stage table, the flamegraph, the timeline, call time
        distributions, memory, GPU activity and the diagnosis."""
        from .views.page import write_page
        return write_page(self, path, title)

    def to_speedscope(self, path: PathLike,
                      max_events: int = 1_000_000) -> Path:
        """The speedscope file format: an evented profile per thread and
        concurrent asyncio task lane; past max_events spans the shortest
        are left out, and the file's name says so."""
        from .views.speedscope import write_speedscope
        return write_speedscope(self, path, max_events=max_events)


def merge_reports(reports: Sequence[model.Report],
                  labels: Optional[Sequence[str]] = None) -> Report:
    """One report of several processes (aquaprof.merge)."""
    # imported here: importing aquaprof need not load what only a merge
    # uses
    from .analysis.merging import merged_data
    return Report(merged_data(reports, labels))


__all__ = ["ProcessStats", "Report", "ReportError", "StageStats", "Timing",
           "merge_reports"]
