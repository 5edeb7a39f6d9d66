"""The regression verdict on a noisy machine: false alarms and catches,
with the noise made here.

Each run is a fresh process that profiles 100 rounds of three stages of
CPU work (about 1 ms a call):
- "every": every call the same;
- "tail": every call the same;
- "groups": two groups of calls, one in ten 4.33x the others.
A planted run slows one stage's total by 25 %, in one of three shapes:
every call of "every" 25 % slower; one call in ten of "tail" 3.5x slower;
the share of slow calls in "groups" doubled.

A CPU hog is switched on for every other run (base and candidate alike):
when gating on wall time it is pinned to the other core (the work is
pinned to core 0), when gating on CPU time to the work's core as well.
For each measure: 6 base runs, then 20 candidates of each kind
(unchanged, and the three planted shapes), each judged seven ways:
- "runs": the verdict on one candidate run against the 6 base runs
  (noise between runs learned from them);
- "runs, rounds 3": the same, and where a stage is suspect (slower, or
  grown past the threshold without the evidence), two more runs of the
  candidate and the verdict on all three (what `--aquaprof-rounds 3`
  does in the pytest gate);
- "runs alone": the first, without what a run's own calls say of its
  figure's spread (verdict.own_spread), kept here as the reference for
  what that changes;
- "1 run": the verdict against the first base run alone (block
  bootstrap over the calls);
- "runs, no witness" and "1 run, no witness": the first and the fourth
  without the median call as the total's witness (verdict._witness),
  the rule before it, kept here as the reference for what it changes;
- "runs, no margin" and "1 run, no margin": the first and the fourth
  with the evidence asked only that the tail (the p95 call) moved at
  all, not that it moved past the threshold (the rule before), kept
  here as the reference for what that changes;
- "before": the rule aquaprof used before (Mann-Whitney on the calls of
  one base run and one candidate run, and a median change over the
  threshold), kept here as the reference.
It prints the noise between the base runs (the standard deviation of
the log of each stage's total), then, per measure and rule, how many
unchanged runs had any stage called slower, how many planted runs had
the planted stage called slower, and how many planted runs had another
stage called slower.

Nothing else should run on the machine meanwhile: the hog is the noise.

    python benchmarks/gate_noise.py [--candidates 20] [--threshold 10%]
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aquaprof as ap  # noqa: E402
from aquaprof.analysis import verdict  # noqa: E402
from aquaprof.analysis.compare import (Comparison, parse_threshold,  # noqa
                                       run_figures)

SHAPES = ("unchanged", "every", "tail", "groups")
CALLS = 100


def workload(plant: str, out: str) -> None:
    """One run: 40 rounds of the three stages, a shape planted."""
    os.sched_setaffinity(0, {0})
    unit = 50000          # about 1 ms of CPU here

    def work(n: int) -> None:
        s = 0
        for i in range(n):
            s += i

    with ap.Profiler() as prof:
        for i in range(CALLS):
            with ap.stage("every"):
                work(int(unit * (1.25 if plant == "every" else 1)))
            with ap.stage("tail"):
                slow = plant == "tail" and i % 10 == 3
                work(int(unit * (3.5 if slow else 1)))
            with ap.stage("groups"):
                slow = i % 10 == 0 or (plant == "groups" and i % 10 == 5)
                work(int(unit * (4.33 if slow else 1)))
    prof.report().save(out)


def hog(cores: List[int]) -> List[subprocess.Popen]:
    return [subprocess.Popen(
        [sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{c}}})"
         f"\nwhile True: pass"]) for c in cores]


def one_run(plant: str, path: Path, hog_cores: List[int]) -> ap.Report:
    hogs = hog(hog_cores)
    try:
        time.sleep(0.1)                # the hog running before the work
        subprocess.run([sys.executable, __file__, "--worker", plant,
                        str(path)], check=True)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    return ap.Report.load(path)


# ------------------------------------------------- the rule used before

def mann_whitney_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p of the Mann-Whitney U test, normal approximation with
    tie and continuity corrections (40 calls a side)."""
    n1, n2 = len(a), len(b)
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(len(both))
    values = both[order]
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    ends = np.r_[starts[1:], len(both)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    n = n1 + n2
    ties = (ends - starts).astype(np.float64)
    tie_term = (ties ** 3 - ties).sum() / (n * (n - 1))
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (abs(u - n1 * n2 / 2) - 0.5) / sigma
    return math.erfc(max(z, 0.0) / math.sqrt(2))


def before_slower(base: ap.Report, new: ap.Report, threshold: float,
                  measure: str) -> Dict[str, bool]:
    b, n = run_figures(base, measure=measure), run_figures(new,
                                                           measure=measure)
    out = {}
    for path in n:
        x, y = b[path].calls, n[path].calls
        change = np.median(y) / np.median(x) - 1
        out[path] = bool(mann_whitney_p(x, y) < 0.01 and change > threshold)
    return out


_with_margin = verdict._figure_p


def no_margin(figure, base, new, moved, margin):
    """The evidence that a figure moved at all, whatever the threshold."""
    return _with_margin(figure, base, new, moved, 0.0)


# --------------------------------------------------------------- driver

def base_noise(base: List[ap.Report], measure: str) -> str:
    """The spread of each stage's total over the base runs."""
    figures = [run_figures(r, measure=measure) for r in base]
    spread = {stage: np.std(np.log([f[stage].total for f in figures]),
                            ddof=1) for stage in ("every", "tail", "groups")}
    return ", ".join(f"{stage} {sd * 100:.1f} %"
                     for stage, sd in spread.items())


def measure_runs(measure: str, candidates: int, threshold: float,
                 folder: Path) -> Dict[str, Dict[str, int]]:
    hog_cores = [1] if measure == "wall" else [0, 1]
    base = [one_run("unchanged", folder / f"{measure}-base{i}.json",
                    hog_cores if i % 2 else []) for i in range(6)]
    print(f"  {measure}: noise between the 6 base runs (sd of the log of "
          f"each stage's total): {base_noise(base, measure)}", flush=True)
    counts = {rule: {kind: 0 for kind in (*SHAPES, "others")}
              for rule in ("runs", "runs, rounds 3", "runs alone",
                           "1 run", "runs, no witness", "1 run, no witness",
                           "runs, no margin", "1 run, no margin",
                           "before")}
    made = 0

    def candidate(shape: str) -> ap.Report:
        nonlocal made
        made += 1
        return one_run(shape, folder / f"{measure}-{made}.json",
                       hog_cores if made % 2 else [])

    def judged(comparison: Comparison) -> Dict[str, bool]:
        return {c.path: c.verdict == "slower" for c in comparison.changes}

    def compared(base_runs: object, new_runs: object) -> Comparison:
        return Comparison(base_runs, new_runs, threshold, 0.01, measure)

    for shape in SHAPES:
        for i in range(candidates):
            new = candidate(shape)
            first = compared(base, new)
            verdicts = {"runs": judged(first)}
            verdicts["runs, rounds 3"] = judged(compared(
                base, [new, candidate(shape), candidate(shape)])) \
                if first.suspects else verdicts["runs"]
            with mock.patch.object(verdict, "own_spread",
                                   lambda figure, calls: None):
                verdicts["runs alone"] = judged(compared(base, new))
            verdicts["1 run"] = judged(compared(base[0], new))
            with mock.patch.object(verdict, "_witness", lambda *a: False):
                verdicts["runs, no witness"] = judged(compared(base, new))
                verdicts["1 run, no witness"] = judged(compared(base[0],
                                                                new))
            with mock.patch.object(verdict, "_figure_p", no_margin):
                verdicts["runs, no margin"] = judged(compared(base, new))
                verdicts["1 run, no margin"] = judged(compared(base[0], new))
            verdicts["before"] = before_slower(base[0], new, threshold,
                                               measure)
            for rule, slower in verdicts.items():
                if shape == "unchanged":
                    counts[rule][shape] += any(slower.values())
                    continue
                counts[rule][shape] += slower[shape]
                counts[rule]["others"] += any(
                    s for path, s in slower.items() if path != shape)
            print(f"  {measure} {shape} {i}: " + ", ".join(
                f"{rule} {sorted(p for p, s in v.items() if s)}"
                for rule, v in verdicts.items()), flush=True)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--threshold", type=parse_threshold, default=0.10)
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        workload(*args.worker)
        return
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs two cores (the hog's and the work's)")
    started = time.time()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for measure in ("wall", "cpu"):
            counts = measure_runs(measure, args.candidates, args.threshold,
                                  Path(tmp))
            for rule, c in counts.items():
                rows.append((measure, rule, c))
    n = args.candidates
    print(f"\nthreshold {args.threshold * 100:g} %, alpha 0.01, {n} "
          f"candidate runs of each kind, 6 base runs, hog on every other "
          f"run ({time.time() - started:.0f} s)\n")
    print("| measure (hog) | rule | unchanged: any stage slower | every "
          "call +25 % caught | tail caught | groups caught | planted: "
          "another stage slower |")
    print("|---|---|---|---|---|---|---|")
    where = {"wall": "wall (other core)", "cpu": "cpu (both cores)"}
    for measure, rule, c in rows:
        print(f"| {where[measure]} | {rule} | {c['unchanged']} of {n} | "
              f"{c['every']} of {n} | {c['tail']} of {n} | "
              f"{c['groups']} of {n} | {c['others']} of {3 * n} |")


if __name__ == "__main__":
    main()
