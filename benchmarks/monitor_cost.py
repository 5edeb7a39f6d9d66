"""What a live Monitor costs the program it watches, and whether a sampled
run shows its work as the program's.

A loop of staged calls (300 stage names, each with a sub-stage, about
300,000 calls a second on one core) runs for SECONDS under
Profiler(window=5000, sample=0.001): without a monitor, then with one
checking every second, then every 10 ms. For each: the loop's calls
(against the run without a monitor), the wall time stop() took, the
seconds the monitor's thread spent checking, and the sampled time the
report files outside the loop's stages (the profiler's threads, numpy
in the checks, stop() joining the thread; none of it is the program's).

    .venv/bin/python benchmarks/monitor_cost.py [--seconds 2] [--root TREE]

--root runs another tree's aquaprof (a git worktree of an older commit).
Each setting runs in a fresh process.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r'''
import json, sys, time
import aquaprof as ap
seconds, interval = float(sys.argv[1]), sys.argv[2]

def work(n):
    s = 0
    for i in range(n):
        s += i
    return s

with ap.Profiler(window=5000, sample=0.001) as prof:
    mon = prof.monitor(interval=float(interval)) if interval != "none" \
        else None
    began = time.perf_counter()
    calls = 0
    while time.perf_counter() - began < seconds:
        with ap.stage(f"s{calls % 300}"):
            with ap.stage("inner"):
                work(200)
        calls += 1
    stopping = time.perf_counter()
stopped = time.perf_counter() - stopping
rep = prof.report()
outside = sum(s[5] for s in rep.samples["stacks"] if s[2] < 0) * 1e-9
threads = len({(s[0], s[1]) for s in rep.samples["stacks"]})
print(json.dumps({"calls": calls, "stop_s": stopped, "outside_s": outside,
                  "threads": threads,
                  "busy_s": getattr(mon, "busy", 0.0) if mon else 0.0}))
'''


def run(root: Path, seconds: float, interval: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", CHILD, str(seconds),
                          interval], env=env, cwd=root, capture_output=True,
                         text=True, timeout=600)
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.splitlines()[-1])


def main(argv: list) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--root", type=Path,
                   default=Path(__file__).resolve().parents[1])
    a = p.parse_args(argv)
    base = None
    print(f"{'monitor':>10} {'calls':>9} {'vs none':>8} {'stop() s':>9} "
          f"{'checking s':>11} {'sampled outside stages s':>25} "
          f"{'threads sampled':>16}")
    for interval in ("none", "1", "0.01"):
        r = run(a.root, a.seconds, interval)
        base = base or r["calls"]
        print(f"{interval:>10} {r['calls']:>9,} {r['calls'] / base:>8.2f} "
              f"{r['stop_s']:>9.2f} {r['busy_s']:>11.2f} "
              f"{r['outside_s']:>25.2f} {r['threads']:>16}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
