"""Is a stage slower, faster or the same? The one rule that compare, the
pytest gate, the history and the differential flamegraph all show.

What is judged is what the user pays for a stage in a run: its total
(calls x time a call, so more calls or a few long waits count as much as
every call slowing down) and its tail (the 95th percentile call, for
stages with at least MIN_TAIL_CALLS calls a run). Either slower is
enough. The median call is never judged alone: it misses a few long
waits grown longer, and for a stage of instant calls and waits (a
DataLoader's next()) it jumps between the two groups from one unchanged
run to the next. With one run a side whose calls are known it is a
witness: where it moved past the threshold and the total moved the same
way (by any amount), it is judged as a third figure (each figure then at
alpha / 3), so that a total that one long call makes uncertain (a
warm-up, a collection, a preemption in the base run) is still proven
slower when every call is: 20 calls of 500 us, one of them 7.9 ms,
against 20 calls of 2 ms read "noisy" (p=0.043) on the total alone, and
40 calls of 2 ms, one preempted to 40 ms, against 40 of 3 ms (the total
+3 %) "same". With several runs a side it is not: the run-to-run noise
learned from them is the total's, and the median of runs that agree
closely turns a candidate run on a busier machine into a proof (5 more
false alarms in 300 in benchmarks/loader_verdicts.py's model-bound
loop).

The unit of evidence is a run. Calls of one run are not independent
samples: a machine that was busy for the whole run makes every call
slower together, and a test on the calls would turn that drift into a
certainty (p = 1e-11 for code that did not change). So:

- With several runs (on either side), run-to-run noise is learned from
  them: the logs of the runs' figures are compared by Student's t-test
  with the variance pooled over the sides that have more than one run.
  Where the base holds runs made on a quiet and a busy machine, a
  candidate run on either is within that noise. A few runs can agree by
  chance far more closely than their figures can be known: the 95th
  percentile of 40 calls, most short and a few waits, sits on the
  third-longest call, and five runs may all have two waits where the
  next has three and its p95 on a wait. So where the runs agree more
  closely than a run's own calls can pin its figure down (the variance
  of its log over block resamples of the calls, as below, averaged over
  the runs whose calls say), that variance is pooled with the runs' as
  if PRIOR_RUNS more runs had shown it (never lowering it, and adding no
  degrees of freedom to the test). In a real DataLoader loop this took
  the reruns of unchanged code whose "data" stage was called slower
  against 5 runs from 27 of 300 to 3 (the model the bottleneck; 3 to 0
  where the loader was), and the loader made twice as slow was caught
  as often (benchmarks/loader_verdicts.py).
- With one run a side, noise between runs is unknown and the verdict says
  so ("1 run a side"). The ratio of the figures is resampled by a moving
  block bootstrap over consecutive calls (blocks of about sqrt(n) calls,
  so that a slow patch of the run stays whole in the resamples and widens
  the spread instead of passing for many independent slow calls): p is
  the share of resamples in which the figure did not grow. A machine that
  was slower for the whole of one run cannot be told from slower code
  this way; only more runs can, and the verdict says so.

A stage is slower (faster) when one of its figures moved by more than
`threshold` and the evidence above holds at level alpha (each figure at
alpha / 2, or alpha / 3 with the median, so that judging more figures
does not add false alarms): for the total, that it moved (with one run a side, past half
the threshold: TOTAL_MARGIN); for the tail, that it moved past the
threshold. The p95 call of a few dozen calls sits on one of the
longest: a tail that certainly moved a little (every call 1 % slower,
a drift the whole run shared) and by chance a lot (two stray slow calls
among 30, +18 %) is no proof of a change past the threshold, while a
total, a sum of every call, is not moved so far by a few calls. Asking
the total for a move past the threshold as well halved the catches of
a 25 % slower stage for few fewer false alarms
(benchmarks/gate_noise.py).
With fewer than MIN_CALLS calls in a single run a side, no resampling is
possible: the totals against the threshold decide, hedged ("slower?").
A figure that moved by no more than its clock can resolve (`resolution`
a call edge: thread CPU time is read at most every cpu_resolution, so a
call's CPU time is known to within twice that; a call's wall time to
within what timing it costs, the calibrated stage pair) has not moved at
all: a sleeping stage's few microseconds of CPU growing by a third, or an
empty stage's few hundred ns of wall time doubling, is no regression.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..common.units import fmt_time

#: fewest calls in a run for the one-run-a-side bootstrap
MIN_CALLS = 5
#: fewest calls in every run for the tail (95th percentile) to be judged
MIN_TAIL_CALLS = 20
#: bootstrap resamples; the smallest p it can give is 1 / RESAMPLES
RESAMPLES = 2000
#: block resamples a run's own spread is measured from (a variance, which
#: needs far fewer than a p-value's tail)
SPREAD_RESAMPLES = 200
#: the runs a run's own spread counts as, pooled with the runs' variance
#: where it is larger: two, so that five runs agreeing by chance on a
#: figure their calls cannot pin down are not certainty, while a spread
#: that the block resampling overstates (a run's one warm-up call,
#: resampled 0 to 3 times) does not outweigh the runs themselves
PRIOR_RUNS = 2
#: most calls a percentile is resampled from (memory and time bounded)
PERCENTILE_CALLS = 1000
#: the verdicts that are regressions
SLOWER = ("slower", "slower?")
#: the total moved past NOISY_AT times the threshold, but no further than
#: the noise between runs (or the calls' spread) moves it by chance:
#: never "same", which would hide a change that more runs might prove.
#: Within twice the threshold an unproven change stays "same": noise
#: moves unchanged code past the threshold itself often (a third of the
#: time at 5 % with one run a side), and a word said that often is
#: ignored.
NOISY = "noisy"
NOISY_AT = 2.0
#: one run a side, the share of the threshold the total must be shown to
#: have grown (or, for faster, shrunk) past (several runs: 0, the noise
#: between them learned).
#: There the evidence is the calls' own, and a run the machine made 1 %
#: slower all through is proof that the total grew at all, while one
#: stalled call of 40 can carry it past the threshold: asking only that
#: it grew called such unchanged code slower 100 times in 100, half the
#: threshold 0 times, and still catches a change of three times the
#: threshold 197 times in 200 (benchmarks/verdict_margin.py).
TOTAL_MARGIN = 0.5
#: the figures measured: wall time, the thread's CPU time, or the time
#: of the kernels each call launched (CUDA, traced)
MEASURES = ("wall", "cpu", "cuda")


@dataclass(frozen=True)
class RunFigures:
    """One stage in one run: calls (seconds, in the order they started)
    where known, else the figures a history keeps, with what the calls
    said of their spread (own_spread of the total and of the tail) where
    it kept that. Where the run timed rounds of a benchmark, its total
    and count are a round's (rounds: how many): pytest-benchmark fills
    about max_time with rounds, so a run's total stays the same however
    long a round takes."""
    total: float
    count: float
    p50: float
    p95: float
    calls: Optional[np.ndarray] = None
    spread: Optional[Tuple[Optional[float], Optional[float]]] = None
    rounds: int = 1
    #: where the calls are not all kept (max_spans): how many the spread
    #: was measured on; a tail is judged on no fewer than MIN_TAIL_CALLS
    kept: Optional[int] = None

    def own_spread(self, figure: str) -> Optional[float]:
        """own_spread() of the figure ("total" or "tail"), from the calls
        or, where they are not kept, from what was kept of it."""
        if self.calls is not None:
            return own_spread(figure, self.calls)
        if self.spread is None:
            return None
        return self.spread[0 if figure == "total" else 1]

    @property
    def calls_known(self) -> int:
        """How many calls the figures were measured on."""
        return len(self.calls) if self.calls is not None else \
            round(self.count * self.rounds)

    @classmethod
    def of(cls, calls: np.ndarray, rounds: int = 1) -> "RunFigures":
        calls = np.asarray(calls, np.float64)
        if not len(calls):
            return cls(0.0, 0, 0.0, 0.0, calls, rounds=rounds)
        # nearest rank, as the table's percentiles (Timing.percentile)
        p50, p95 = np.percentile(calls, [50, 95], method="inverted_cdf")
        return cls(float(calls.sum()) / rounds, len(calls) / rounds,
                   float(p50), float(p95), calls, rounds=rounds)


@dataclass(frozen=True)
class Verdict:
    """What judge() found; times are seconds, figures a mean run's."""
    word: str                  # slower, faster, same, slower?, faster?,
    #                            noisy
    figure: Optional[str]      # what decided: "total", "tail",
    #                            "median" or None
    change: float              # relative change of the total a run
    tail_change: Optional[float]   # of the p95 call, where judged
    p_value: Optional[float]   # of the deciding figure (or the total's)
    base_runs: int
    new_runs: int
    base_total: float
    new_total: float
    base_calls: float          # a run's calls, on average
    new_calls: float
    base_p50: float
    new_p50: float
    base_p95: float
    new_p95: float
    detail: str                # which calls moved, in words
    #: slower, or a figure grew past the threshold without the evidence
    #: for it: worth more runs before a verdict (the gate's rounds)
    suspect: bool = False
    #: what the total and calls are of: "a run", or a benchmark's "a round"
    per: str = "a run"
    #: where the runs' machines or their load differed
    #: (compare.machine_notes), the sentences that say so; "" where they
    #: did not, or no run said
    machine: str = ""

    @property
    def evidence(self) -> str:
        """How the noise was known: runs a side, or one run a side."""
        if self.base_runs == 1 and self.new_runs == 1:
            return "1 run a side"
        return f"{self.base_runs} vs {self.new_runs} runs"


def _mean_run(runs: Sequence[RunFigures]) -> Tuple[float, ...]:
    return tuple(float(np.mean([getattr(r, f) for r in runs]))
                 for f in ("total", "count", "p50", "p95"))


def _change(before: float, after: float) -> float:
    if before > 0:
        return after / before - 1
    return math.inf if after > 0 else 0.0


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function
    (modified Lentz's method)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) *
                                                 (a + 2 * m + 1))):
            d = 1 + num * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-12:
            break
    return h


def _incomplete_beta(a: float, b: float, x: float) -> float:
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1 - front * _betacf(b, a, 1 - x) / b


def t_two_sided_p(t: float, df: int) -> float:
    """Two-sided p of Student's t with df degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return _incomplete_beta(df / 2, 0.5, df / (df + t * t))


def runs_p(base: Sequence[float], new: Sequence[float],
           own: float = 0.0, threshold: float = 0.0
           ) -> Tuple[float, float]:
    """(p that new's figures are not above base's by more than threshold,
    p that they are not below by more than it): one-sided t-tests on two
    groups of runs' figures, the variance pooled over the groups with two
    or more runs (at least one has). On their logs (relative noise),
    pooled with own (the variance of a log figure that the runs' own
    calls give) as if PRIOR_RUNS more runs had shown it, where own is the
    larger: then it counts as those runs' degrees of freedom too, so that
    one base run against two new ones is not left with the single degree
    of freedom that no change, however large, can pass. Where a run has 0
    (a stage one run never called): on the figures themselves, the
    threshold relative to the base's mean, own unused."""
    x, y = np.asarray(base, np.float64), np.asarray(new, np.float64)
    logs = min(x.min(), y.min()) > 0
    if logs:
        x, y = np.log(x), np.log(y)
        margin = math.log1p(threshold)
    else:
        margin = threshold * float(x.mean())
    df = (len(x) - 1) + (len(y) - 1)
    ss = float(((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum())
    variance = ss / df
    if logs and (ss + PRIOR_RUNS * own) / (df + PRIOR_RUNS) > variance:
        df += PRIOR_RUNS
        variance = (ss + PRIOR_RUNS * own) / df
    diff = float(y.mean() - x.mean())
    se = math.sqrt(variance * (1 / len(x) + 1 / len(y)))
    return _beyond(diff - margin, se, df), _beyond(-diff - margin, se, df)


def _beyond(excess: float, se: float, df: int) -> float:
    """The one-sided p that a difference `excess` above its margin (with
    standard error se, df degrees of freedom) is not above 0."""
    if se == 0:
        return 0.0 if excess > 0 else 1.0
    far = t_two_sided_p(excess / se, df) / 2
    return far if excess > 0 else 1 - far


def _block_starts(n: int, rng: np.random.Generator, resamples: int
                  ) -> Tuple[int, np.ndarray]:
    """The block length for n calls (about sqrt(n)) and, for each of
    the resamples, the starts of the blocks that make it up."""
    block = max(1, int(round(math.sqrt(n))))
    blocks = -(-n // block)
    return block, rng.integers(0, n - block + 1, (resamples, blocks),
                               dtype=np.int64 if n >> 31 else np.int32)


def _resampled(figure: str, calls: np.ndarray, rng: np.random.Generator,
               resamples: int = RESAMPLES) -> np.ndarray:
    """The figure of each of the moving-block resamples of calls:
    the total (the count of calls kept: a run that called twice as often
    pays twice as much), the 95th percentile call ("tail") or the median
    call ("median").
    Bounded whatever the calls: a total sums whole blocks' sums, and a
    percentile is taken from at most PERCENTILE_CALLS calls, thinned
    evenly (which only widens its spread: less evidence, never more)."""
    if figure == "total":
        block, starts = _block_starts(len(calls), rng, resamples)
        sums = np.concatenate([[0.0], np.cumsum(calls)])
        per_block = sums[block:] - sums[:-block]
        # the blocks cover a little more than n calls: scaled back to n
        return per_block[starts].sum(axis=1) * (len(calls) /
                                                (starts.shape[1] * block))
    if len(calls) > PERCENTILE_CALLS:
        calls = calls[::-(-len(calls) // PERCENTILE_CALLS)]
    n = len(calls)
    block, starts = _block_starts(n, rng, resamples)
    index = (starts[:, :, None] + np.arange(block)).reshape(resamples, -1)
    # the nearest rank, as RunFigures.of's (numpy's inverted_cdf), by a
    # partial sort: a full one of every resample cost 20 times as much
    rank = _rank(50 if figure == "median" else 95, n)
    return np.partition(calls[index[:, :n]], rank, axis=1)[:, rank]


def _rank(percent: int, n: int) -> int:
    """The 0-based rank of the nearest-rank percentile of n values."""
    return max(0, -(-percent * n // 100) - 1)


def own_spread(figure: str, calls: Optional[np.ndarray]
               ) -> Optional[float]:
    """How far a run's own calls move its figure by chance: the variance
    of the log of the figure over block resamples of the calls, a
    resample's figure taken at least the smallest call above 0 (a
    waiting stage's CPU time is mostly 0); None where the calls are
    unknown, too few, or all 0. Seeded: the same calls give the same
    spread."""
    if calls is None or len(calls) < MIN_CALLS or not (calls > 0).any():
        return None
    figures = _resampled(figure, calls, np.random.default_rng(len(calls)),
                         SPREAD_RESAMPLES)
    least = float(calls[calls > 0].min())
    return float(np.var(np.log(np.maximum(figures, least)), ddof=1))


def bootstrap_p(base: np.ndarray, new: np.ndarray, figure: str,
                threshold: float = 0.0, rounds: Tuple[int, int] = (1, 1)
                ) -> Tuple[float, float]:
    """(share of block resamples in which the figure of new is not above
    base's by more than threshold, the share in which it is not below by
    more than it): one-sided evidence that it grew (shrank) past it,
    small when it did, never under 1 / RESAMPLES; a total is a round's
    where the runs timed `rounds` of a benchmark. Seeded: the same calls
    give the same p."""
    rng = np.random.default_rng(len(base) * 7919 + len(new))
    fb = _resampled(figure, base, rng)
    fn = _resampled(figure, new, rng)
    if figure == "total":
        fb, fn = fb / rounds[0], fn / rounds[1]
    floor = 1 / RESAMPLES
    grown = 1 + threshold
    return (max(floor, float(np.mean(fn <= fb * grown))),
            max(floor, float(np.mean(fn * grown >= fb))))


def _past(change: float, threshold: float) -> bool:
    """Whether a relative change is past the threshold either way (a
    shrink as far as a growth undoes: -threshold / (1 + threshold))."""
    return change > threshold or change < -threshold / (1 + threshold)


def _witness(total: float, median: float, threshold: float) -> bool:
    """Whether the median call is judged beside the total: it moved past
    the threshold, and the total moved the same way (by any amount: one
    long base call can hold the total's change to a few percent while
    every call is 1.5x slower). It may then prove the change, never move
    the verdict against the total."""
    return _past(median, threshold) and total != 0 and \
        (total > 0) == (median > 0)


def _word(change: float, p_up: Optional[float], p_down: Optional[float],
          threshold: float, alpha: float, noisy_allowed: bool) -> str:
    """slower/faster/same/noisy of one figure; p None: hedged by the
    change. Only the total may be noisy: the p95 call of a few dozen
    calls moves far by chance alone."""
    if p_up is None or p_down is None:
        return ("slower?" if change > threshold else
                "faster?" if change < -threshold / (1 + threshold) else
                "same")
    if change > threshold and p_up < alpha:
        return "slower"
    if change < -threshold / (1 + threshold) and p_down < alpha:
        return "faster"
    return (NOISY if noisy_allowed and _past(change, threshold * NOISY_AT)
            else "same")


def _detail(base: Sequence[RunFigures], new: Sequence[RunFigures],
            change: float, median_change: float, threshold: float,
            per: str) -> str:
    """Which calls moved, in words: every call, or how many long ones."""
    calls_b = [r.calls for r in base if r.calls is not None and
               len(r.calls)]
    calls_n = [r.calls for r in new if r.calls is not None and len(r.calls)]
    count_b = float(np.mean([r.count for r in base]))
    count_n = float(np.mean([r.count for r in new]))
    parts = []
    if abs(_change(count_b, count_n)) > threshold:
        parts.append(f"calls {count_b:.3g} -> {count_n:.3g} {per}")
    if abs(median_change) > threshold and abs(median_change) >= \
            abs(change) / 2:
        parts.append(f"the median call {median_change * 100:+.0f} %")
    elif calls_b and calls_n and abs(change) > threshold:
        all_b, all_n = np.concatenate(calls_b), np.concatenate(calls_n)
        cut = 2 * float(np.median(all_b))
        long_b, long_n = all_b[all_b > cut], all_n[all_n > cut]
        if len(long_n) or len(long_b):
            def share(long: np.ndarray, every: np.ndarray, runs: int
                      ) -> Tuple[str, str]:
                about = (f" (about {fmt_time(float(np.median(long)))} each)"
                         if len(long) else "")
                return (f"{len(long) / runs:.3g} of {len(every) / runs:.3g}",
                        about)
            now, now_about = share(long_n, all_n, _rounds(new))
            were, were_about = share(long_b, all_b, _rounds(base))
            parts.append(f"{now} calls {per} over {fmt_time(cut)}"
                         f"{now_about}, were {were}{were_about}")
    return "; ".join(parts)


def _rounds(runs: Sequence[RunFigures]) -> int:
    """The runs (their rounds, a benchmark's) whose calls are known."""
    return sum(r.rounds for r in runs if r.calls is not None and
               len(r.calls))


def _figure_p(figure: str, base: Sequence[RunFigures],
              new: Sequence[RunFigures], moved: float, margin: float
              ) -> Tuple[Optional[float], Optional[float], Optional[float]]:
    """(p that the figure did not grow past the margin, p that it did not
    shrink past it, the p to show) from the runs when either side has
    several, else from one run's calls (or their spreads); Nones where
    neither is possible (a single run a side of too few calls)."""
    if len(base) > 1 or len(new) > 1:
        field = "total" if figure == "total" else "p95"
        values = [getattr(r, field) for r in (*base, *new)]
        spreads = [r.own_spread(figure) for r in (*base, *new)]
        known = [v for v in spreads if v is not None]
        p_up, p_down = runs_p(values[:len(base)], values[len(base):],
                              float(np.mean(known)) if known else 0.0,
                              margin)
    else:
        b, n = base[0].calls, new[0].calls
        if b is not None and n is not None and min(len(b), len(n)) >= \
                MIN_CALLS:
            p_up, p_down = bootstrap_p(b, n, figure, margin,
                                       (base[0].rounds, new[0].rounds))
        else:
            found = _spread_p(figure, base[0], new[0], margin)
            if found is None:
                return None, None, None
            p_up, p_down = found
    return p_up, p_down, p_up if moved >= 0 else p_down


def _spread_p(figure: str, base: RunFigures, new: RunFigures,
              margin: float) -> Optional[Tuple[float, float]]:
    """One run a side whose calls are not all known (a history's, or a
    run that dropped spans): the log figures' difference against the
    spreads the runs' calls gave (a normal test: they stand for many
    resamples); None where a spread is unknown or a figure is 0."""
    field = "total" if figure == "total" else "p95"
    before, after = getattr(base, field), getattr(new, field)
    spreads = (base.own_spread(figure), new.own_spread(figure))
    if None in spreads or min(before, after) <= 0:
        return None
    se = math.sqrt(sum(v for v in spreads if v is not None))
    diff, past = math.log(after / before), math.log1p(margin)
    # no surer than the bootstrap may be
    return (max(1 / RESAMPLES, _beyond(diff - past, se, _NORMAL_DF)),
            max(1 / RESAMPLES, _beyond(-diff - past, se, _NORMAL_DF)))


#: degrees of freedom at which Student's t is the normal distribution
_NORMAL_DF = 10 ** 6


def judge(base: Sequence[RunFigures], new: Sequence[RunFigures],
          threshold: float = 0.05, alpha: float = 0.01,
          resolution: float = 0.0) -> Verdict:
    """The verdict on one stage: new runs against base runs (at least one
    run a side); resolution: how finely the clock resolves a call's edge
    (seconds). Slower beats faster: a stage whose total grew is slower
    whatever its median call did."""
    if not base or not new:
        raise ValueError("judge needs at least one run a side")
    tb, cb, mb, pb = _mean_run(base)
    tn, cn, mn, pn = _mean_run(new)
    # within what the clock resolves, a figure has not moved
    unresolved = 2 * resolution
    moved = {"total": _change(tb, tn) if abs(tn - tb) > unresolved *
             max(cb, cn) else 0.0}
    tail_judged = all(r.calls_known >= MIN_TAIL_CALLS and
                      (r.kept is None or r.kept >= MIN_TAIL_CALLS)
                      for r in (*base, *new))
    if tail_judged:
        moved["tail"] = _change(pb, pn) if abs(pn - pb) > unresolved \
            else 0.0
    # one run a side: the total's evidence comes from the calls, as the
    # tail's does, so it too must show a move past the threshold
    alone = len(base) == 1 and len(new) == 1
    median = _change(mb, mn) if abs(mn - mb) > unresolved else 0.0
    # the median's evidence is the calls' own: a run that kept too few
    # (a history's, one that dropped spans) has none, and a figure that
    # cannot be judged takes no share of alpha
    resampled = all(r.calls is not None and len(r.calls) >= MIN_CALLS
                    for r in (*base, *new))
    if alone and resampled and min(mb, mn) > 0 and \
            _witness(moved["total"], median, threshold):
        moved["median"] = median
    each = alpha / len(moved)      # no more false alarms for more figures
    words: List[Tuple[str, Optional[str], Optional[float]]] = []
    for name, change in moved.items():
        margin = threshold if name != "total" else \
            threshold * TOTAL_MARGIN if alone else 0.0
        p_up, p_down, p = _figure_p(name, base, new, change, margin)
        words.append((_word(change, p_up, p_down, threshold, each,
                            name == "total"), name, p))
    order = ("slower", "slower?", "faster", "faster?", NOISY, "same")
    word, figure, p = min(words, key=lambda w: order.index(w[0]))
    if word == "same":
        figure, p = None, words[0][2]
    per = "a round" if any(r.rounds > 1 for r in (*base, *new)) \
        else "a run"
    detail = (_detail(base, new, moved["total"], _change(mb, mn), threshold,
                      per) if word != "same" else "")
    suspect = word in SLOWER or any(c > threshold for c in moved.values())
    return Verdict(word, figure, _change(tb, tn),
                   _change(pb, pn) if tail_judged else None, p,
                   len(base), len(new), tb, tn, cb, cn, mb, mn, pb, pn,
                   detail, suspect, per)


def describe(v: Verdict) -> str:
    """A verdict in one line: the total a run and its change, the tail,
    the median call, the calls, the evidence, the word and what moved."""
    tail = (f", p95 {fmt_time(v.base_p95)} -> {fmt_time(v.new_p95)}"
            f" ({v.tail_change * 100:+.1f} %)"
            if v.tail_change is not None and math.isfinite(v.tail_change)
            else "")
    change = (f"{v.change * 100:+.1f} %" if math.isfinite(v.change)
              else "from 0")
    p = "" if v.p_value is None else f", p={v.p_value:.2g}"
    why = f" ({v.figure}" + (f": {v.detail})" if v.detail else ")") \
        if v.figure else ""
    unsure = ("; not proven against the noise: more runs would tell"
              if v.word == NOISY else "")
    return (f"total {fmt_time(v.base_total)} -> {fmt_time(v.new_total)} "
            f"{v.per} ({change}){tail}, median {fmt_time(v.base_p50)} -> "
            f"{fmt_time(v.new_p50)}, {v.base_calls:.3g} vs "
            f"{v.new_calls:.3g} calls, {v.evidence}{p}: {v.word}{why}"
            f"{unsure}")
