"""What the first Profiler.start() of a process spends calibrating, and
the figures it finds: calibrate() timed in --processes fresh processes,
each printing its time and figures; --read-share N times a N-th of the
pairs with the CPU clock read (1: as many as without, the calibration
before 2026-11-29).

    .venv/bin/python benchmarks/bench_calibration.py [--processes 5]
        [--read-share N]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ONE = """
import json, sys, time
from aquaprof.record import calibration
if sys.argv[1] != "-":
    calibration.READ_SHARE = int(sys.argv[1])
t = time.perf_counter()
figures = calibration.calibrate()
print(json.dumps(dict(figures, took_ms=(time.perf_counter() - t) * 1e3)))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--read-share", type=int, default=None)
    args = parser.parse_args()
    share = "-" if args.read_share is None else str(args.read_share)
    runs = []
    for _ in range(args.processes):
        out = subprocess.run([sys.executable, "-c", ONE, share],
                             capture_output=True, text=True, check=True,
                             cwd=ROOT).stdout
        runs.append(json.loads(out))
    for r in runs:
        print(f"{r['took_ms']:6.1f} ms: a pair {r['span_ns']:.0f} ns "
              f"({r['inside_ns']:.0f} inside), a CPU-clock read "
              f"{r['read_ns']:.0f} ns")
    print(f"median {statistics.median(r['took_ms'] for r in runs):.1f} ms "
          f"over {len(runs)} processes")


if __name__ == "__main__":
    main()
