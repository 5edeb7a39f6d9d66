"""Snapshot: a running profiler's figures so far (Profiler(window=N),
prof.snapshot()). Each stage has its aggregates since the start and rolling
figures over its last N calls: moving mean, percentiles, CPU share,
throughput, and the calls open now, so that a stuck stage shows before it
ends. Built from _core's snapshot_data(), which copies the rings under the
GIL: a snapshot costs about a microsecond per kept call.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from .. import _core
from ..common.units import align_columns, fmt_bytes, fmt_rate, fmt_time
from ..analysis.concurrency import covered
from ..analysis.anomaly import MIN_HISTORY, Anomaly, check_limits, flag, \
    window_stats
from ..model.report import StageStats, stage_stats

_NS = 1e-9
#: the calls before it that a call is judged against, at most (a window
#: of a million calls would make a check judge each new one against all)
HISTORY = 1000
#: calls judged at once, against the calls before the first of them
BLOCK = 256


@dataclass
class Recent:
    """A stage's last `window` closed calls (all threads), and its open
    calls. Times are seconds; None where there is no call to measure."""
    path: str
    calls: int                    # closed calls in the window
    mean: Optional[float]
    p50: Optional[float]
    p95: Optional[float]
    max: Optional[float]
    last: Optional[float]         # the latest closed call
    cpu_share: Optional[float]    # thread CPU time over wall time
    throughput: Optional[float]   # items/s, overlapping calls once
    running: int                  # calls open now
    running_for: Optional[float]  # age of the oldest open call


def _grouped(spans: np.ndarray, is_open: np.ndarray, nstages: int,
             window: int):
    """Per stage id, its kept closed calls (the latest `window` of all
    threads, latest last) and its open calls, as index arrays; one sort
    for all stages, so a snapshot costs the same for 5,000 stages as for
    5 with as many calls."""
    order = np.lexsort((spans["end_ns"], spans["stage"], is_open))
    n_closed = int(np.count_nonzero(~is_open))
    closed, open_ = order[:n_closed], order[n_closed:]
    ids = np.arange(nstages)
    c_start = np.searchsorted(spans["stage"][closed], ids)
    c_end = np.searchsorted(spans["stage"][closed], ids, side="right")
    o_start = np.searchsorted(spans["stage"][open_], ids)
    o_end = np.searchsorted(spans["stage"][open_], ids, side="right")
    c_start = np.maximum(c_start, c_end - window)
    return ([closed[a:b] for a, b in zip(c_start, c_end)],
            [open_[a:b] for a, b in zip(o_start, o_end)])


def _recent_all(paths: List[str], spans: np.ndarray, closed: List[np.ndarray],
                open_: List[np.ndarray], now: int) -> Dict[str, "Recent"]:
    """Every stage's Recent, computed over all stages at once."""
    counts = np.array([len(c) for c in closed], dtype=np.int64)
    kept = np.concatenate(closed) if closed else np.zeros(0, np.int64)
    group = np.repeat(np.arange(len(paths)), counts)
    wall = (spans["end_ns"][kept] - spans["start_ns"][kept]).astype(
        np.float64) * _NS
    n = len(paths)
    total = np.bincount(group, wall, minlength=n)
    cpu = np.bincount(group, spans["cpu_ns"][kept].astype(np.float64),
                      minlength=n) * _NS
    items = np.bincount(group, spans["items"][kept].astype(np.float64),
                        minlength=n)
    # items/s over the time the calls were open, overlapping ones (a
    # pool's threads) counted once, as the report's throughput
    rated = items[group] > 0         # only stages given items need it
    on_clock = covered(group[rated], spans["start_ns"][kept[rated]],
                       spans["end_ns"][kept[rated]], n).astype(
                           np.float64) * _NS
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    # each group's calls by duration: percentiles as numpy's
    # inverted_cdf gives them, the smallest call with q of them at or
    # under it
    by_wall = np.lexsort((wall, group))
    sorted_wall = wall[by_wall]

    def pct(g: int, q: float) -> float:
        k = max(int(np.ceil(counts[g] * q / 100.0)) - 1, 0)
        return float(sorted_wall[starts[g] + k])

    out: Dict[str, Recent] = {}
    for g, path in enumerate(paths):
        c = int(counts[g])
        o = open_[g]
        t = float(total[g])
        out[path] = Recent(
            path, c, t / c if c else None,
            pct(g, 50) if c else None, pct(g, 95) if c else None,
            float(sorted_wall[starts[g] + c - 1]) if c else None,
            float(wall[starts[g] + c - 1]) if c else None,
            float(cpu[g]) / t if t > 0 else None,
            float(items[g]) / float(on_clock[g])
            if items[g] and on_clock[g] > 0 else None,
            len(o),
            (now - int(spans["start_ns"][o].min())) * _NS if len(o)
            else None)
    return out


class Snapshot:
    """What a running Profiler(window=N) has recorded so far."""

    def __init__(self, data: Dict[str, Any], window: int):
        self.window = window
        self._data = data
        now = data["stop_ns"]
        #: seconds since the profiler started
        self.elapsed: float = (now - data["start_ns"]) * _NS
        #: process RSS now, bytes (None with memory=False)
        self.rss: Optional[int] = (data["memory_samples"][-1][1]
                                   if data["memory_samples"] else None)
        stats = stage_stats(data["stages"], self.elapsed)
        paths = [s.path for s in stats]
        #: aggregates of every call closed so far, as in a Report
        self.stages: Dict[str, StageStats] = {s.path: s for s in stats}
        spans = data["spans"]
        is_open = (spans["flags"] & _core.SPAN_UNCLOSED) != 0
        # per stage id: its kept closed calls, latest last, and open calls
        closed, open_ = _grouped(spans, is_open, len(paths), window)
        self._closed: Dict[int, np.ndarray] = dict(enumerate(closed))
        self._open: Dict[int, np.ndarray] = dict(enumerate(open_))
        self.recent: Dict[str, Recent] = _recent_all(paths, spans, closed,
                                                     open_, now)

    def spans(self) -> np.ndarray:
        """The kept calls (SPAN_DTYPE, parent -1): each stage's last
        `window` closed calls of each thread, then the calls open now,
        flagged SPAN_UNCLOSED and ending at the snapshot."""
        return self._data["spans"]

    def anomalies(self, threshold: float = 6.0, min_ratio: float = 1.5,
                  min_excess: float = 1e-5,
                  since: Optional[float] = None) -> List[Anomaly]:
        """Each stage's latest closed call (with `since`, seconds from the
        profiler's start: every call of the window that closed after it,
        BLOCK at a time against the HISTORY calls before them), and its
        open calls, set against
        its window by the rule of Report.anomalies() (one rule,
        analysis.anomaly.judge: extreme for the window and longer than its
        tail). An open call is judged on its age so far, so a stage that
        hangs is flagged while it hangs."""
        check_limits(threshold, min_ratio)
        spans = self._data["spans"]
        now = self._data["stop_ns"]
        after = None if since is None else \
            self._data["start_ns"] + int(since * 1e9)
        found: List[Anomaly] = []
        for sid, path in enumerate(self.recent):
            closed = self._closed[sid]
            d = (spans["end_ns"][closed] - spans["start_ns"][closed]).astype(
                np.float64)
            first = len(d) - 1 if after is None else int(
                np.searchsorted(spans["end_ns"][closed], after, "right"))
            # closed calls in blocks of BLOCK, each block against the
            # HISTORY calls at most before its first call; open ones (by
            # their age) against the last HISTORY: a window a block, all
            # of a stage's sorted at once, so that a check costs little
            # however many calls closed since the last (a window a call
            # cost the program more than its own work at a high call rate)
            at = np.arange(max(first, MIN_HISTORY), len(d))
            opened = self._open[sid] if len(d) >= MIN_HISTORY else \
                np.empty(0, np.intp)
            if not len(at) and not len(opened):
                continue
            rows = np.concatenate([closed[at], opened]).astype(np.intp)
            current = np.concatenate(
                [d[at], (now - spans["start_ns"][opened]).astype(np.float64)])
            ends = np.append(at[::BLOCK], len(d)) if len(opened) else \
                at[::BLOCK]
            block = np.concatenate([np.arange(len(at)) // BLOCK,
                                    np.full(len(opened), len(ends) - 1)])
            width = min(int(ends.max()), HISTORY)
            cols = ends[:, None] - width + np.arange(width)
            stats = window_stats(np.where(cols >= 0, d[np.maximum(cols, 0)],
                                          np.nan))
            median = stats[0][block]
            score, flagged = flag(current, tuple(x[block] for x in stats),
                                  threshold, min_ratio, min_excess)
            for k in np.flatnonzero(flagged):
                i = int(rows[k])
                found.append(Anomaly(
                    path, i,
                    (int(spans["start_ns"][i]) - self._data["start_ns"])
                    * _NS, float(current[k]) * _NS, float(median[k]) * _NS,
                    float(score[k]), bool(k >= len(at))))
        return found

    def to_dict(self) -> Dict[str, Any]:
        """Plain data (JSON-ready): elapsed, rss, window, and per stage its
        calls and total so far with the rolling figures."""
        return {
            "elapsed": self.elapsed, "rss": self.rss, "window": self.window,
            "stages": [dict(asdict(r), count=self.stages[p].count,
                            total=self.stages[p].wall.total)
                       for p, r in self.recent.items()],
        }

    def __str__(self) -> str:
        head = (f"aquaprof snapshot at {fmt_time(self.elapsed)}"
                f"{', RSS ' + fmt_bytes(self.rss) if self.rss else ''}; "
                f"rolling figures over each stage's last {self.window} "
                f"calls")
        def t(x: Optional[float]) -> str:
            return fmt_time(x) if x is not None else "-"

        rows = [("stage", "calls", "total", "mean", "p95", "last",
                 "throughput", "open")]
        for p, r in self.recent.items():
            rows.append((p, str(self.stages[p].count),
                         fmt_time(self.stages[p].wall.total), t(r.mean),
                         t(r.p95), t(r.last), fmt_rate(r.throughput),
                         f"{r.running} for {t(r.running_for)}"
                         if r.running else "-"))
        return "\n".join([head] + align_columns(rows))

    def __repr__(self) -> str:
        return (f"<aquaprof.Snapshot at {self.elapsed:.3f} s, "
                f"{len(self.recent)} stages>")
