"""How often diagnose() names the planted waits right, and the shares it
measures: tests/support/planted_waits.py run --runs times per case (a stage on a
core shared with three pinned busy processes, stages blocked on a sleep
and a pipe, eight threads running Python), on a quiet machine and, with
--hogs N, with N more busy processes on every core.

    python benchmarks/bench_waits.py [--runs 5] [--hogs 0]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLANTED = ROOT / "tests" / "support" / "planted_waits.py"
#: case -> the stages it plants and the class each should get
CASES = {"starved": {"compute": "cpu-starved"},
         "blocked": {"sleep": "waiting", "pipe read": "waiting"},
         "gil": {"py_work": "gil-bound"}}


def run(case: str) -> dict:
    out = subprocess.run([sys.executable, str(PLANTED), case],
                         capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--hogs", type=int, default=0)
    args = parser.parse_args()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.hogs)]
    try:
        print(f"planted waits, {args.runs} runs a case, {args.hogs} extra "
              f"busy processes, {os.cpu_count()} CPUs")
        for case, stages in CASES.items():
            found = [run(case) for _ in range(args.runs)]
            for stage, want in stages.items():
                kinds = Counter(f[stage]["kind"] for f in found)
                mean = {k: sum(f[stage][k] for f in found) / len(found)
                        for k in ("cpu", "delay", "gil")}
                print(f"  {stage:10} want {want:12} got "
                      f"{kinds[want]}/{len(found)} "
                      f"({', '.join(f'{k} {n}' for k, n in kinds.items())});"
                      f" mean shares: cpu {mean['cpu']:.2f}, run delay "
                      f"{mean['delay']:.2f}, GIL {mean['gil']:.2f}")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


if __name__ == "__main__":
    main()
