"""Whether a sampled run keeps a stage's run delay when the sampler's own
threads are starved with it.

The process is pinned whole, the sampler's threads included, to one CPU
that three busy processes share (tests/support/planted_waits.py,
"starved sampler"): a stage computes 0.3 s of CPU time in three calls
and waits for its CPU the rest. Linux's own count of the stage's run
delay, read at the edges of its calls, is the truth; the report's
sampled time and run delay (aquaprof.analysis.samples.stage_waits) and
diagnose()'s class are what a user reads.

    .venv/bin/python benchmarks/starved_sampler.py [--runs 3] [--root TREE]

--root runs another tree's aquaprof (a git worktree of an older commit)
with this tree's planted program. Each run is a fresh process.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PLANTED = HERE / "tests" / "support" / "planted_waits.py"


def run(root: Path) -> dict:
    out = subprocess.run(
        [sys.executable, str(PLANTED), "starved sampler"],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(root)))
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout)["compute"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--root", type=Path, default=HERE)
    args = parser.parse_args()
    print(f"aquaprof from {args.root}")
    print(f"{'run':>3}  {'wall':>7}  {'sampled':>7}  {'run delay':>9}  "
          f"{'sampled delay':>13}  class")
    for i in range(args.runs):
        f = run(args.root.resolve())
        print(f"{i + 1:>3}  {f['wall_s']:6.2f}s  {f['sampled_s']:6.2f}s  "
              f"{f['true_delay_s']:8.2f}s  {f['sampled_delay_s']:12.2f}s  "
              f"{f['kind']}")


if __name__ == "__main__":
    main()
