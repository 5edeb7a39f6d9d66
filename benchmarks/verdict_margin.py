"""The one-run-a-side verdict on a stage's total against the margin it
must be shown to have grown past (verdict.TOTAL_MARGIN, a share of the
threshold): false alarms on unchanged code whose new run drifted and
stalled one call, and catches of every call made slower. Synthetic
calls, seeded, so the figures are the rule's alone.

- unchanged: 40 calls of 500 us (1 % noise) a side, the new run's every
  call 0.1 %, 1 % or 2 % slower (the machine) and one of them stalled to
  3.3 ms (a preemption): how many of 100 draws are called slower;
- slower: 40 calls of 1 ms (5 % noise, 3 % of them 1.5x), every call of
  the new run 10 % or 15 % slower (twice and three times the 5 %
  threshold): how many of 200 draws are called slower.

    python benchmarks/verdict_margin.py [--margins 0,0.25,0.5,1]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from aquaprof.analysis import verdict  # noqa: E402
from aquaprof.analysis.verdict import SLOWER, RunFigures, judge  # noqa: E402


def timings(rng: np.random.Generator, n: int, median: float,
            spread: float = 0.05) -> np.ndarray:
    x = median * np.exp(rng.normal(0, spread, n))
    x[rng.random(n) < 0.03] *= 1.5
    return x


def slower_of(factor: float, draws: int = 200) -> int:
    rng = np.random.default_rng(7)
    found = 0
    for _ in range(draws):
        base = RunFigures.of(timings(rng, 40, 1e-3))
        new = RunFigures.of(timings(rng, 40, factor * 1e-3))
        found += judge([base], [new]).word == "slower"
    return found


def stall_alarms(drift: float, draws: int = 100) -> int:
    rng = np.random.default_rng(1)
    found = 0
    for _ in range(draws):
        base = 500e-6 * np.exp(rng.normal(0, 0.01, 40))
        new = 500e-6 * (1 + drift) * np.exp(rng.normal(0, 0.01, 40))
        new[rng.integers(40)] = 3.3e-3
        found += judge([RunFigures.of(base)],
                       [RunFigures.of(new)]).word in SLOWER
    return found


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--margins", default="0,0.25,0.5,1")
    a = p.parse_args(argv)
    try:
        margins = [float(m) for m in a.margins.split(",")]
    except ValueError:
        p.error(f"--margins takes numbers like 0,0.5, got {a.margins!r}")
    print("| TOTAL_MARGIN | unchanged, drift 0.1 % + a stall: slower | "
          "drift 1 % | drift 2 % | every call +10 %: caught | +15 % |")
    print("|---|---|---|---|---|---|")
    kept = verdict.TOTAL_MARGIN
    try:
        for margin in margins:
            verdict.TOTAL_MARGIN = margin
            alarms = [stall_alarms(d) for d in (0.001, 0.01, 0.02)]
            caught = [slower_of(f) for f in (1.10, 1.15)]
            print(f"| {margin:g}{' (default)' if margin == kept else ''} | "
                  + " | ".join(f"{n} of 100" for n in alarms) + " | "
                  + " | ".join(f"{n} of 200" for n in caught) + " |")
    finally:
        verdict.TOTAL_MARGIN = kept
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
