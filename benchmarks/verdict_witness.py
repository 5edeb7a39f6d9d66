"""The median call as the total's witness (verdict._witness): catches of
every call made slower where one long call in the base run leaves the
total uncertain, and false alarms on unchanged code, with the witness
and without it (the rule before).

Synthetic calls, seeded, one run a side unless said:
- caught: 40 calls of 1 ms (5 % noise) a side, one base call 16x (a
  warm-up, a collection, a preemption) at a random place; every new call
  1.1x, 1.25x or 2x (threshold 5 %); the pytest gate's case, 20 calls
  of 500 us, one base call 7.9 ms, every new call 4x (threshold 50 %);
  and 40 calls of 2 ms, one base call preempted to 40 ms, every new call
  1.5x, the total +3 % (threshold 10 %);
- unchanged: a DataLoader's stage, instant calls (1 ms) and waits (10
  ms), the share of waits 0.3, 0.5 or 0.7 in both runs (its median jumps
  between the groups); 40 calls of 1 ms, the new run 1 % slower all
  through and one call stalled 6.6x; the loader against 5 base runs.
Then real runs: a fresh process profiles 20 calls of a stage of about
0.5 ms of CPU whose first call also builds a 10 ms table (its warm-up),
--runs times unchanged and --runs times every call 1.5x; each run is
judged one against one (wall and CPU time, threshold 10 %) against each
of the unchanged runs before it.

    python benchmarks/verdict_witness.py [--draws 200] [--runs 8]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, List, Tuple
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aquaprof as ap  # noqa: E402
from aquaprof.analysis import verdict  # noqa: E402
from aquaprof.analysis.compare import Comparison  # noqa: E402
from aquaprof.analysis.verdict import SLOWER, RunFigures, judge  # noqa: E402

Draw = Callable[[np.random.Generator], Tuple[List[np.ndarray],
                                             List[np.ndarray]]]


def noisy(rng: np.random.Generator, n: int, median: float,
          spread: float = 0.05) -> np.ndarray:
    return median * np.exp(rng.normal(0, spread, n))


def outlier_base(factor: float, n: int = 40, median: float = 1e-3,
                 long: float = 16e-3) -> Draw:
    def draw(rng: np.random.Generator):
        base = noisy(rng, n, median)
        base[rng.integers(n)] = long
        return [base], [noisy(rng, n, factor * median)]
    return draw


def loader(rng: np.random.Generator, share: float, n: int = 40
           ) -> np.ndarray:
    x = noisy(rng, n, 1e-3)
    waits = rng.random(n) < share
    x[waits] = noisy(rng, int(waits.sum()), 10e-3)
    return x


def same_loader(share: float, base_runs: int = 1) -> Draw:
    def draw(rng: np.random.Generator):
        return ([loader(rng, share) for _ in range(base_runs)],
                [loader(rng, share)])
    return draw


def drift_and_stall(rng: np.random.Generator):
    base = noisy(rng, 40, 500e-6, 0.01)
    new = noisy(rng, 40, 505e-6, 0.01)
    new[rng.integers(40)] = 3.3e-3
    return [base], [new]


def slower_count(draw: Draw, draws: int, threshold: float, seed: int
                 ) -> Tuple[int, int]:
    """(with the witness, without it): how many draws are called slower."""
    found = []
    for witness in (True, False):
        rng = np.random.default_rng(seed)
        count = 0
        with mock.patch.object(verdict, "_witness",
                               verdict._witness if witness else
                               lambda *a: False):
            for _ in range(draws):
                base, new = draw(rng)
                count += judge([RunFigures.of(c) for c in base],
                               [RunFigures.of(c) for c in new],
                               threshold).word in SLOWER
        found.append(count)
    return found[0], found[1]


# ------------------------------------------------------------ real runs

def workload(factor: float, out: str) -> None:
    unit = 25000            # about 0.5 ms of CPU here

    def work(n: int) -> None:
        s = 0
        for i in range(n):
            s += i

    with ap.Profiler() as prof:
        for i in range(20):
            with ap.stage("lookup"):
                if i == 0:
                    work(unit * 20)       # the table, built once
                work(int(unit * factor))
    prof.report().save(out)


def real_runs(runs: int, folder: Path) -> None:
    def run(factor: float, name: str) -> ap.Report:
        path = folder / f"{name}.json"
        subprocess.run([sys.executable, __file__, "--worker", str(factor),
                        str(path)], check=True)
        return ap.Report.load(path)

    base = [run(1.0, f"base{i}") for i in range(runs)]
    unchanged = [run(1.0, f"same{i}") for i in range(runs)]
    slower = [run(1.5, f"slow{i}") for i in range(runs)]
    print("\nReal runs (20 calls of about 0.5 ms, the first also builds a "
          "10 ms table), one run against one, threshold 10 %:\n")
    print("| measure | rule | unchanged: slower | every call 1.5x: "
          "caught | by the median |")
    print("|---|---|---|---|---|")
    pairs = runs * runs
    for measure in ("wall", "cpu"):
        for witness in (True, False):
            with mock.patch.object(verdict, "_witness",
                                   verdict._witness if witness else
                                   lambda *a: False):
                def judged(new: ap.Report) -> List[Tuple[str, str]]:
                    out = []
                    for b in base:
                        c = Comparison(b, new, 0.1, 0.01, measure)
                        ch = next(x for x in c.changes
                                  if x.path == "lookup")
                        out.append((ch.verdict, ch.judgement.figure or ""))
                    return out
                alarms = sum(w in SLOWER for r in unchanged
                             for w, _ in judged(r))
                caught = [j for r in slower for j in judged(r)]
            rule = "witness (now)" if witness else "no witness (before)"
            print(f"| {measure} | {rule} | {alarms} of {pairs} | "
                  f"{sum(w == 'slower' for w, _ in caught)} of {pairs} | "
                  f"{sum(f == 'median' for _, f in caught)} |")


def main(argv: List[str]) -> int:
    if argv[:1] == ["--worker"]:
        workload(float(argv[1]), argv[2])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=200)
    p.add_argument("--runs", type=int, default=8)
    a = p.parse_args(argv)
    if a.draws < 1 or a.runs < 1:
        p.error("--draws and --runs take a whole number of at least 1")
    cases: List[Tuple[str, Draw, float]] = [
        ("caught: a long base call, every call 1.1x (5 %)",
         outlier_base(1.1), 0.05),
        ("caught: a long base call, every call 1.25x (5 %)",
         outlier_base(1.25), 0.05),
        ("caught: a long base call, every call 2x (5 %)",
         outlier_base(2.0), 0.05),
        ("caught: the gate's case, 20 calls, every call 4x (50 %)",
         outlier_base(4.0, 20, 500e-6, 7.9e-3), 0.5),
        ("caught: one base call of 2 ms preempted to 40 ms, every call "
         "1.5x (10 %)", outlier_base(1.5, 40, 2e-3, 40e-3), 0.1),
        ("unchanged: loader, waits 0.3 (5 %)", same_loader(0.3), 0.05),
        ("unchanged: loader, waits 0.5 (5 %)", same_loader(0.5), 0.05),
        ("unchanged: loader, waits 0.7 (5 %)", same_loader(0.7), 0.05),
        ("unchanged: loader, waits 0.5, 5 base runs (5 %)",
         same_loader(0.5, 5), 0.05),
        ("unchanged: drift 1 % and a stall (5 %)", drift_and_stall, 0.05),
    ]
    print(f"Synthetic calls, {a.draws} seeded draws each, one run a side "
          f"unless said:\n")
    print("| case (threshold) | slower, witness (now) | slower, no witness "
          "(before) |")
    print("|---|---|---|")
    for seed, (name, draw, threshold) in enumerate(cases):
        now, before = slower_count(draw, a.draws, threshold, seed)
        print(f"| {name} | {now} of {a.draws} | {before} of {a.draws} |",
              flush=True)
    with tempfile.TemporaryDirectory() as folder:
        real_runs(a.runs, Path(folder))
    print(f"\n(pid {os.getpid()}; nothing else should run meanwhile)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
