"""Calls far outside their stage's recent distribution: each call's
duration against the `window` calls of the same stage before it. A call is
flagged when it is more than `threshold` robust standard deviations above
that window's median, and at least `min_ratio` times and `min_excess`
seconds longer than the window's tail: the shortest of its longest
TAIL_SHARE (2.5 %) calls. So an anomaly is both extreme (neither noise
nor the jitter of sub-microsecond calls raises it) and rare (fewer than
2.5 % of the window's calls come within min_ratio of it: a stage's
regular long calls, a DataLoader's refill every few batches, are its
tail, not anomalies).
The rule is `judge()`, shared by Report.anomalies() and the live
Snapshot.anomalies()."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Tuple

import numpy as np

from ..common.checks import whole

if TYPE_CHECKING:
    from ..model.report import Report

MIN_HISTORY = 10
BLOCK = 20_000


class Anomalies(list):
    """The anomalies found (a list of Anomaly, in time order), and how
    many calls were not examined: those whose spans the run dropped
    (max_spans), which are its last; note says so ("" when none)."""

    def __init__(self, found: List["Anomaly"], examined: int,
                 not_examined: int):
        super().__init__(found)
        self.examined = examined
        self.not_examined = not_examined

    @property
    def note(self) -> str:
        if not self.not_examined:
            return ""
        return (f"anomalies() examined the {self.examined:,} calls whose "
                f"spans were kept; {self.not_examined:,} calls whose "
                f"spans were not (max_spans: the run's last) were not "
                f"examined")


@dataclass
class Anomaly:
    path: str
    span: int            # index into report.spans()
    start: float         # seconds from the run's start
    duration: float      # seconds
    usual: float         # median of the calls before, seconds
    score: float         # robust standard deviations above it
    running: bool = False  # still open: duration is its age so far


def check_limits(threshold: float, min_ratio: float) -> None:
    if not threshold > 0 or not min_ratio >= 1:
        raise ValueError("threshold must be > 0 and min_ratio >= 1")


# an anomaly must be rarer than 1 in 40 of its window's calls: a long call
# that recurs every 20th call or more often (a refill every few batches) is
# then never one (but for a first, with none as long before it) once the
# window holds 20 calls: n such calls hold at least n // 20 of them, never
# fewer than ceil(n / 40). In the default window of 50 the tail is the
# second longest call, so one earlier spike does not hide the next
TAIL_SHARE = 0.025
# the normal distribution's 90th - 10th percentile range, in standard
# deviations
_DECILE_SIGMAS = 2.5631


def _at(ordered: np.ndarray, n: np.ndarray, q: float) -> np.ndarray:
    """Each row's q-quantile (linear interpolation) of its first n[row]
    values, ordered ascending."""
    pos = q * (n - 1)
    lo = np.floor(pos).astype(np.intp)
    hi = np.minimum(lo + 1, n - 1)
    rows = np.arange(len(ordered))
    return (ordered[rows, lo] +
            (pos - lo) * (ordered[rows, hi] - ordered[rows, lo]))


def window_stats(windows: np.ndarray
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each window's (a row of `windows`, NaN where it holds fewer calls,
    at least one call a row) median, spread and tail, what judge() sets
    a call against."""
    ordered = np.sort(windows, axis=1)             # NaN last
    n = np.count_nonzero(~np.isnan(windows), axis=1)
    median = _at(ordered, n, 0.5)
    # NaN sorts last, as in `ordered`: the median of the first n (numpy's
    # nanmedian takes a masked array's slow path on small windows)
    mad = _at(np.sort(np.abs(windows - median[:, None]), axis=1), n, 0.5)
    # MAD is 0 as soon as over half the window's calls are equal (a steady
    # stage with a long call every few), and says nothing then of the
    # others: the 10th-90th percentile range does not collapse until 80 %
    # are equal, and 1 % of the median floors it for a stage of identical
    # calls, so that it still needs a real jump
    spread = np.maximum.reduce([
        1.4826 * mad,
        (_at(ordered, n, 0.9) - _at(ordered, n, 0.1)) / _DECILE_SIGMAS,
        0.01 * median])
    # the window's tail: the shortest of its ceil(TAIL_SHARE n) longest
    # calls; a call must clear it by the ratio, so that a long call that
    # recurs (and jitters a little) is never flagged against the short
    # ones, however steady they are
    k = np.ceil(TAIL_SHARE * n - 1e-9).astype(np.intp)
    tail = ordered[np.arange(len(ordered)), n - k]
    return median, spread, tail


def flag(current: np.ndarray, stats: Tuple[np.ndarray, np.ndarray,
                                           np.ndarray],
         threshold: float, min_ratio: float, min_excess: float
         ) -> Tuple[np.ndarray, np.ndarray]:
    """Durations (ns) set against window_stats (each row's, or one a
    duration): their scores and which of them are flagged."""
    median, spread, tail = stats
    score = (current - median) / np.where(spread > 0, spread, 1.0)
    return score, ((score > threshold) & (current >= min_ratio * tail) &
                   (current - tail >= min_excess * 1e9))


def judge(current: np.ndarray, windows: np.ndarray, threshold: float,
          min_ratio: float, min_excess: float
          ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Durations (ns) each set against its window (a row of `windows`,
    NaN where the window holds fewer calls, at least one call a row):
    their windows' medians, their scores and which of them are flagged."""
    stats = window_stats(windows)
    score, flagged = flag(current, stats, threshold, min_ratio, min_excess)
    return stats[0], score, flagged


def find_anomalies(report: "Report", window: int = 50,
                   threshold: float = 6.0, min_ratio: float = 1.5,
                   min_excess: float = 1e-5) -> Anomalies:
    if not whole(window, MIN_HISTORY):
        raise ValueError(f"window must be an int >= {MIN_HISTORY}, got "
                         f"{window!r}")
    check_limits(threshold, min_ratio)
    spans = report.spans()
    origin = report.meta["start_ns"]
    found: List[Anomaly] = []
    # each stage's spans in time order, grouped in one sort
    by_stage = np.lexsort((spans["start_ns"], spans["stage"]))
    bounds = np.searchsorted(spans["stage"][by_stage],
                             np.arange(len(report.stage_names) + 1)).tolist()
    for sid, path in enumerate(report.stage_names):
        index = by_stage[bounds[sid]:bounds[sid + 1]]
        if len(index) <= MIN_HISTORY:
            continue
        d = (spans["end_ns"][index] - spans["start_ns"][index]).astype(
            np.float64)
        # the `window` calls before each call from the MIN_HISTORY-th on,
        # in blocks so that a million calls need no 400 MB window array
        padded = np.concatenate([np.full(window - 1, np.nan), d[:-1]])
        windows = np.lib.stride_tricks.sliding_window_view(padded, window)
        windows = windows[MIN_HISTORY - 1:]
        current = d[MIN_HISTORY:]
        median = np.empty(len(current))
        score = np.empty(len(current))
        flagged = np.empty(len(current), dtype=bool)
        for lo in range(0, len(current), BLOCK):
            part = slice(lo, lo + BLOCK)
            median[part], score[part], flagged[part] = judge(
                current[part], windows[part], threshold, min_ratio,
                min_excess)
        hits = np.flatnonzero(flagged)
        for k in hits:
            i = index[MIN_HISTORY + k]
            found.append(Anomaly(
                path, int(i), (int(spans["start_ns"][i]) - origin) * 1e-9,
                float(current[k]) * 1e-9, float(median[k]) * 1e-9,
                float(score[k])))
    kept = np.bincount(spans["stage"], minlength=len(report.stage_names))
    missing = sum(max(s.count - int(kept[s.id]), 0) for s in report.stages)
    out = Anomalies(sorted(found, key=lambda a: a.start), len(spans),
                    missing)
    if missing:
        # a list found empty would read as a run without anomalies
        warnings.warn(f"aquaprof: {out.note}", stacklevel=3)
    return out
