"""The regression verdict against several base runs, in a real training
loop: how often one run of unchanged code is called slower, and how often
a loader made twice as slow is caught.

benchmarks/slow_loader.py's loop (40 steps, a DataLoader of 2 workers,
1.5 ms an item; planted: 3 ms an item) in two shapes:
- "loader-bound": 20 passes a step, so the main process mostly waits
  for its batches;
- "model-bound": 60 passes a step, so a batch is mostly ready and the
  "data" stage is instant calls and a few waits: its 95th percentile
  call sits on the third-longest of 40, and moves between the two groups
  from one unchanged run to the next.
For each shape: --runs runs of the base's code, then --slow planted runs,
a CPU hog on for every other five runs (a machine busy now and then).
Then --draws times: five consecutive base runs as the base (taken one
after the other, as a user takes them) and one run from outside them as
the candidate, judged as `aquaprof compare` judges (threshold 5 %, alpha
0.01); and against a planted run.

Four rules: "now"; "runs alone": the same t-test between runs
without what a run's own calls say of its figure's spread
(verdict.own_spread); "tail, no margin": the tail (the p95 call) asked
only to have moved at all, not past the threshold (the rule before);
"no witness": without the median call as the total's witness
(verdict._witness); kept here as the references for what each changes.

It also prints what the hog did to the base's runs: the "step" stage's
median total a run, wall and thread CPU time, with the hog and without,
and the CPUs other processes kept busy as each run recorded it
(meta["host"]["other_cpus"], what compare's machine note reads).

    python benchmarks/loader_verdicts.py [--runs 30] [--slow 20] [--draws 300]

Nothing else should run on the machine meanwhile: the hog is the noise.
"""
from __future__ import annotations

import argparse
import contextlib
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aquaprof as ap  # noqa: E402
from aquaprof.analysis import verdict  # noqa: E402
from aquaprof.analysis.compare import Comparison, run_figures  # noqa
from slow_loader import train  # noqa: E402

SHAPES = {"loader-bound": 20, "model-bound": 60}
BASE_RUNS = 5


def hogged(i: int) -> bool:
    """Whether the i-th run of a kind has the hog beside it: every other
    five."""
    return bool(i // 5 % 2)


def runs(count: int, item_seconds: float, step_iterations: int,
         folder: Path, tag: str) -> List[ap.Report]:
    """count runs of the loop, the hog on for every other five."""
    out = []
    for i in range(count):
        hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) \
            if hogged(i) else None
        try:
            out.append(ap.Report.load(train(
                item_seconds, folder / f"{tag}{i}.json", step_iterations)))
        finally:
            if hog:
                hog.kill()
                hog.wait()
    return out


def hog_effect(unchanged: List[ap.Report]) -> str:
    """The step's median wall and CPU total a run, and the other CPUs
    recorded, in the runs with the hog against those without."""
    def median(runs: List[ap.Report], what: str) -> float:
        return float(np.median([
            run_figures(r, measure=what)["step"].total if what != "host"
            else r.meta["host"].get("other_cpus", np.nan) for r in runs]))
    busy = [r for i, r in enumerate(unchanged) if hogged(i)]
    quiet = [r for i, r in enumerate(unchanged) if not hogged(i)]
    wall, cpu = (median(busy, m) / median(quiet, m) - 1
                 for m in ("wall", "cpu"))
    return (f"the hog on: step wall {wall * 100:+.0f} %, CPU "
            f"{cpu * 100:+.0f} % (medians); other processes' CPUs "
            f"recorded {median(quiet, 'host'):.2f} without the hog, "
            f"{median(busy, 'host'):.2f} with it")


def verdicts(base: List[ap.Report], new: ap.Report
             ) -> Tuple[Dict[str, str], bool]:
    """Each stage's word, and for a slower one the figure that decided;
    whether compare noted that the machine differed."""
    comparison = Comparison(base, new, 0.05, 0.01)
    return {c.path: c.verdict + (f" ({c.judgement.figure})"
                                 if c.verdict == "slower" else "")
            for c in comparison.changes}, bool(comparison.machine)


def judged(unchanged: List[ap.Report], slow: List[ap.Report], draws: int
           ) -> Dict[str, int]:
    """Counts over the draws: unchanged candidates with any stage slower
    (and which stage and figure; "noted": with the machine note), and
    the planted candidates' "data" verdicts."""
    rng = random.Random(0)
    counts: Dict[str, int] = {"false": 0, "noted": 0, "slower": 0,
                              "noisy": 0, "other": 0}
    for _ in range(draws):
        start = rng.randrange(len(unchanged) - BASE_RUNS + 1)
        base = unchanged[start:start + BASE_RUNS]
        others = unchanged[:start] + unchanged[start + BASE_RUNS:]
        words, noted = verdicts(base, rng.choice(others))
        alarms = [f"{path} {word}" for path, word in words.items()
                  if word.startswith("slower")]
        counts["false"] += bool(alarms)
        counts["noted"] += bool(alarms) and noted
        for alarm in alarms:
            counts[alarm] = counts.get(alarm, 0) + 1
        word = verdicts(base, rng.choice(slow))[0]["data"].split()[0]
        counts[word if word in ("slower", "noisy") else "other"] += 1
    return counts


_with_margin = verdict._figure_p


def no_margin(figure, base, new, moved, margin):
    """The evidence that a figure moved at all, whatever the threshold."""
    return _with_margin(figure, base, new, moved, 0.0)


#: each rule, as the verdict module patched for it
RULES = {
    "now": contextlib.nullcontext,
    "runs alone": lambda: mock.patch.object(
        verdict, "own_spread", lambda figure, calls: None),
    "tail, no margin": lambda: mock.patch.object(
        verdict, "_figure_p", no_margin),
    "no witness": lambda: mock.patch.object(
        verdict, "_witness", lambda *a: False),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--slow", type=int, default=20)
    parser.add_argument("--draws", type=int, default=300)
    args = parser.parse_args()
    if args.runs <= BASE_RUNS or args.slow < 1 or args.draws < 1:
        sys.exit(f"needs --runs over {BASE_RUNS}, --slow and --draws of "
                 f"at least 1")
    started = time.time()
    rows, effects = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for shape, iterations in SHAPES.items():
            unchanged = runs(args.runs, 0.0015, iterations, Path(tmp),
                             f"{shape}-base")
            slow = runs(args.slow, 0.003, iterations, Path(tmp),
                        f"{shape}-slow")
            effects.append(f"{shape}: {hog_effect(unchanged)}")
            print(f"  {effects[-1]}", flush=True)
            for rule, patched in RULES.items():
                with patched():
                    counts = judged(unchanged, slow, args.draws)
                rows.append((shape, rule, counts))
                print(f"  {shape} {rule}: {counts}", flush=True)
    n = args.draws
    print(f"\n{args.runs} base runs and {args.slow} planted runs a shape, "
          f"{n} draws of {BASE_RUNS} consecutive base runs against one "
          f"candidate ({time.time() - started:.0f} s)\n")
    print("| loop | rule | unchanged: a stage slower | of which the "
          "machine noted | doubled loader: slower | noisy | same or faster |")
    print("|---|---|---|---|---|---|---|")
    for shape, rule, c in rows:
        print(f"| {shape} | {rule} | {c['false']} of {n} | {c['noted']} | "
              f"{c['slower']} of {n} | {c['noisy']} of {n} | {c['other']} "
              f"of {n} |")
    print()
    for line in effects:
        print(line)


if __name__ == "__main__":
    main()
