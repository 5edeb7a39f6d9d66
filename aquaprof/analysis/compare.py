"""Is a stage slower, faster or the same? Decided per stage on the raw
span samples of two reports, so that noise is not called a regression.

A stage is slower (faster) when both hold:
- the Mann-Whitney U test says the two samples of call durations differ
  (two-sided, normal approximation with tie and continuity corrections,
  p < alpha), and
- its median call moved by more than `threshold` (the smallest change
  that matters to you).
With fewer than MIN_SAMPLES calls on either side no test is possible: the
verdict then comes from the medians against the threshold alone, and says
so ("slower?"/"faster?").

A stage's calls hold its sub-stages' calls, so a parent of a slower stage
is slower too; Comparison.own_changes gives the same verdicts on each
call's self time instead (the differential flamegraph colours by them).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import numpy as np

from .._units import fmt_time, printable, text_html

if TYPE_CHECKING:
    from ..report import Report

MIN_SAMPLES = 5
SLOWER = ("slower", "slower?")      # the verdicts that are regressions


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' as the fraction 0.05; ValueError saying how to write
    it otherwise (a bare 5 would be 500 %)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"threshold must be like 5% or 0.05, got "
                         f"{text!r}") from None
    if not 0 <= value < math.inf:      # NaN too
        raise ValueError(f"threshold must be a finite value >= 0, got "
                         f"{text!r}")
    if value > 1 and not text.endswith("%"):
        raise ValueError(f"threshold {text} would be {value * 100:g} %: "
                         f"write {text}% or {value / 100:g}")
    return value


EXACT_MAX = 12      # exact U distribution up to this many calls a side


def _exact_p(u: float, n1: int, n2: int) -> float:
    """Two-sided exact p of U (no ties): the count of arrangements with a
    U as far from its mean, by the recurrence on the largest value."""
    # ways[j][k]: orderings of (i, j) values whose U is k, i growing
    ways = [[1] + [0] * (n1 * n2) for _ in range(n2 + 1)]
    for _ in range(n1):
        nxt = [[0] * (n1 * n2 + 1) for _ in range(n2 + 1)]
        for j in range(n2 + 1):
            for k in range(n1 * n2 + 1):
                # the largest value is from a (adds j to U) or from b
                total = ways[j][k - j] if k >= j else 0
                if j:
                    total += nxt[j - 1][k]
                nxt[j][k] = total
        ways = nxt
    counts = ways[n2]
    mean = n1 * n2 / 2
    far = sum(c for k, c in enumerate(counts) if abs(k - mean) >=
              abs(u - mean))
    return min(1.0, far / sum(counts))


def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of the Mann-Whitney U test of a against b: exact
    for up to EXACT_MAX values a side without ties, else the normal
    approximation with tie and continuity corrections."""
    n1, n2 = len(a), len(b)
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(len(both))
    sorted_values = both[order]
    # average ranks over ties
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] !=
                                  sorted_values[:-1]])
    ends = np.r_[starts[1:], len(both)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    if max(n1, n2) <= EXACT_MAX and len(starts) == len(both):
        return _exact_p(u, n1, n2)
    n = n1 + n2
    ties = (ends - starts).astype(np.float64)
    tie_term = (ties ** 3 - ties).sum() / (n * (n - 1)) if n > 1 else 0.0
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / sigma
    return math.erfc(max(z, 0.0) / math.sqrt(2))


def verdict(base: np.ndarray, new: np.ndarray, threshold: float = 0.05,
            alpha: float = 0.01) -> Tuple[str, float, Optional[float]]:
    """(verdict, relative change of the median, p-value or None) of new
    call durations against base ones."""
    base_median, new_median = float(np.median(base)), float(np.median(new))
    change = (new_median - base_median) / base_median if base_median > 0 \
        else 0.0
    if len(base) < MIN_SAMPLES or len(new) < MIN_SAMPLES:
        word = "slower?" if change > threshold else \
            "faster?" if change < -threshold else "same"
        return word, change, None
    p = mann_whitney_p(np.asarray(base, np.float64),
                       np.asarray(new, np.float64))
    if p < alpha and change > threshold:
        return "slower", change, p
    if p < alpha and change < -threshold:
        return "faster", change, p
    return "same", change, p


@dataclass
class StageChange:
    """One stage of a comparison; times are seconds."""
    path: str
    verdict: str             # slower, faster, same, slower?, faster?, new,
    #                          gone
    change: Optional[float]  # relative change of the median call
    p_value: Optional[float]
    base_median: Optional[float]
    new_median: Optional[float]
    base_calls: int
    new_calls: int

    def summary(self) -> str:
        """The medians, change, calls, p-value and verdict, as compare
        prints them after the path."""
        if (self.change is None or self.base_median is None
                or self.new_median is None):    # "new" or "gone"
            return self.verdict
        p = "" if self.p_value is None else f", p={self.p_value:.2g}"
        return (f"{fmt_time(self.base_median)} -> "
                f"{fmt_time(self.new_median)} ({self.change * 100:+.1f} %, "
                f"{self.base_calls} vs {self.new_calls} calls{p}): "
                f"{self.verdict}")


def durations(report: "Report", own: bool = False
              ) -> Dict[str, np.ndarray]:
    """Call durations (s) per stage path, from the raw spans; a stage
    whose spans were all dropped falls back to its mean, once. own: each
    call less the calls recorded inside it (its self time), which is what
    the differential flamegraph judges a frame by."""
    spans = report.spans()
    names = report.stage_names
    out: Dict[str, np.ndarray] = {}
    ns = spans["end_ns"] - spans["start_ns"]
    if own and len(spans):
        # a parent index past the spans (a parent left out) takes nothing
        inner = (spans["parent"] >= 0) & (spans["parent"] < len(spans))
        ns = ns - np.bincount(spans["parent"][inner], ns[inner],
                              len(spans)).astype(np.int64)
    # grouped by stage once: one pass over the spans, not one a stage
    order = np.argsort(spans["stage"], kind="stable")
    seconds = ns[order] * 1e-9
    bounds = np.searchsorted(spans["stage"][order],
                             np.arange(len(names) + 1)).tolist()
    for sid, path in enumerate(names):
        mine = seconds[bounds[sid]:bounds[sid + 1]]
        stats = report[path]
        fallback = (stats.self_time / stats.count if own and stats.count
                    else stats.wall.mean)
        out[path] = mine if len(mine) else np.array([fallback])
    return out


def stage_changes(base: "Report", new: "Report", threshold: float = 0.05,
                  alpha: float = 0.01, own: bool = False
                  ) -> List[StageChange]:
    """The verdict of every stage of new against base, then the stages
    gone from new; own: judged on self time (durations)."""
    before, after = durations(base, own), durations(new, own)
    changes: List[StageChange] = []
    for s in new.stages:
        b = before.get(s.path)
        if b is None:
            changes.append(StageChange(
                s.path, "new", None, None, None,
                float(np.median(after[s.path])), 0, s.count))
            continue
        word, change, p = verdict(b, after[s.path], threshold, alpha)
        changes.append(StageChange(
            s.path, word, change, p, float(np.median(b)),
            float(np.median(after[s.path])), base[s.path].count, s.count))
    for s in base.stages:
        if s.path not in new:
            changes.append(StageChange(
                s.path, "gone", None, None,
                float(np.median(before[s.path])), None, s.count, 0))
    return changes


class Comparison:
    """Every stage of two reports, with its verdict."""

    def __init__(self, base: "Report", new: "Report", threshold: float,
                 alpha: float):
        if not threshold >= 0:
            raise ValueError(f"threshold must be >= 0, got {threshold!r}")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
        self.threshold, self.alpha = threshold, alpha
        self.changes = stage_changes(base, new, threshold, alpha)
        self._reports = (base, new)
        self._own: Optional[List[StageChange]] = None

    @property
    def own_changes(self) -> List[StageChange]:
        """The same verdicts on each stage's self time per call (a call
        less the sub-stage calls inside it), so that a stage is not called
        slower for what its sub-stages did: the differential flamegraph
        colours by these."""
        if self._own is None:       # on demand: a second Mann-Whitney pass
            self._own = stage_changes(*self._reports, self.threshold,
                                      self.alpha, own=True)
        return self._own

    @property
    def regressions(self) -> List[StageChange]:
        """Stages found slower by the test ("slower"; "slower?" too, where
        too few calls allowed no test)."""
        return [c for c in self.changes if c.verdict in SLOWER]

    def __repr__(self) -> str:
        return str(self)       # what a REPL should show: the verdicts

    def _repr_html_(self) -> str:
        return text_html(str(self))

    def __str__(self) -> str:
        lines = [f"median call time per stage, base -> new (slower/faster: "
                 f"Mann-Whitney p < {self.alpha:g} and a change over "
                 f"{self.threshold * 100:g} %)"]
        for c in self.changes:
            mark = "!" if c.verdict in SLOWER else " "
            lines.append(f"{mark} {printable(c.path)}: {c.summary()}")
        return "\n".join(lines)
