"""Overhead compensation against the truth: a deeply nested synthetic
pipeline timed unprofiled, then profiled; the root stage's raw and
compensated totals against the unprofiled wall time, in the same run.
Target: compensated within 2 %.

    python benchmarks/bench_compensation.py [--runs 7] [--read-share N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402

DEPTH, FANOUT, WORK = 5, 4, 300      # 4^5 leaves of 300 loop steps each
STAGES = [ap.stage(f"level{i}") for i in range(DEPTH + 1)]


def work(n):
    total = 0
    for i in range(n):
        total += i
    return total


def pipeline(level=0, profiled=True):
    if profiled:
        with STAGES[level]:
            _body(level, profiled)
    else:
        _body(level, profiled)


def _body(level, profiled):
    if level == DEPTH:
        work(WORK)
        return
    for _ in range(FANOUT):
        pipeline(level + 1, profiled)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--cpu-resolution", type=float, default=20e-6,
                        help="Profiler(cpu_resolution=...), seconds")
    parser.add_argument("--read-share", type=int, default=None,
                        help="time a READ_SHARE-th of the pairs with the "
                             "CPU clock read (1: as many as without, the "
                             "calibration before 2026-11-29)")
    args = parser.parse_args()
    if args.read_share is not None:
        from aquaprof.record import calibration
        calibration.READ_SHARE = args.read_share
    plain, raw, comp = [], [], []
    for _ in range(3):                    # warm-up: caches, calibration
        pipeline(profiled=False)
        with ap.Profiler(memory=False, cpu_resolution=args.cpu_resolution):
            pipeline()
    for _ in range(args.runs):
        # each run pairs an unprofiled and a profiled pass, back to back:
        # the ratios below are per pair, so drift between runs cancels
        t = time.perf_counter()
        pipeline(profiled=False)
        plain.append(time.perf_counter() - t)
        with ap.Profiler(memory=False,
                         cpu_resolution=args.cpu_resolution) as prof:
            pipeline()
        root = prof.report()["level0"]
        raw.append(root.wall.total)
        comp.append(root.compensated_total)
    calls = sum(FANOUT ** i for i in range(DEPTH + 1))
    cost = prof.report().meta["overhead"]
    print(f"nested pipeline: depth {DEPTH + 1}, {calls:,} stage calls a "
          f"run, {args.runs} paired runs, cpu_resolution "
          f"{args.cpu_resolution * 1e6:g} us; calibrated "
          f"{cost['span_ns']:.0f} ns a call ({cost['inside_ns']:.0f} ns "
          f"inside the stage), {cost['read_ns']:.0f} ns a CPU-clock read")
    print(f"  unprofiled wall, median   {statistics.median(plain) * 1e3:8.2f}"
          f" ms")
    errors = {}
    for name, values in (("raw root total", raw),
                         ("compensated root total", comp)):
        ratios = [v / p - 1 for v, p in zip(values, plain)]
        errors[name] = statistics.median(ratios)
        print(f"  {name:24s}  {statistics.median(values) * 1e3:8.2f} ms, "
              f"median {errors[name] * 100:+6.2f} % against its unprofiled "
              f"pass")
    error = abs(errors["compensated root total"])
    print(f"target: compensated within 2 %: "
          f"{'met' if error <= 0.02 else 'not met'} ({error * 100:.2f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
