"""Calls far outside their stage's recent distribution: each call's
duration against the median and the median absolute deviation (MAD) of
the `window` calls of the same stage before it. A call is flagged when it
is more than `threshold` robust standard deviations (1.4826 MAD) above
that median, at least `min_ratio` times it and at least `min_excess`
seconds longer, so that neither noise, nor a perfectly steady stage, nor
the jitter of sub-microsecond calls raises false alarms."""
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


def outliers(current: np.ndarray, median: np.ndarray, mad: np.ndarray,
             threshold: float, min_ratio: float, min_excess: float
             ) -> Tuple[np.ndarray, np.ndarray]:
    """Scores of durations (ns) against their history's median and MAD,
    and which of them are flagged."""
    # a floor under the spread: 1 % of the median, so that a stage with
    # identical calls still needs a real jump
    spread = np.maximum(1.4826 * mad, 0.01 * median)
    score = (current - median) / np.where(spread > 0, spread, 1.0)
    return score, ((score > threshold) & (current >= min_ratio * median) &
                   (current - median >= min_excess * 1e9))


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
        mad = np.empty(len(current))
        for lo in range(0, len(current), BLOCK):
            block = windows[lo:lo + BLOCK]
            median[lo:lo + BLOCK] = np.nanmedian(block, axis=1)
            mad[lo:lo + BLOCK] = np.nanmedian(
                np.abs(block - median[lo:lo + BLOCK, None]), axis=1)
        score, flagged = outliers(current, median, mad, threshold,
                                  min_ratio, min_excess)
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
