"""What capturing child processes costs: a child's start-to-join with
the parent unprofiled, profiled with children=False, and profiled with
children=True (the child starts its own session, and at exit writes its
report), for each start method; the same for a child that records
`calls` stage calls (its report grows with them); and the parent's
stop() and report() gathering N children's reports; and the parent's own
stage pair with capture on and off, interleaved (nothing on the stage
path changes; bench_overhead.py has the finer measure).

    python benchmarks/bench_children.py [--repeats 7]
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402

_STEP = ap.stage("step")


def record(calls: int) -> None:
    for _ in range(calls):
        with _STEP:
            pass


def child_round_trip(method: str, calls: int, mode: str) -> float:
    """Seconds from Process.start() to join() of one child."""
    ctx = multiprocessing.get_context(method)
    prof = None if mode == "off" else ap.Profiler(
        memory=False, children=mode == "children")
    if prof is not None:
        prof.start()
    try:
        p = ctx.Process(target=record, args=(calls,))
        t0 = time.perf_counter()
        p.start()
        p.join()
        took = time.perf_counter() - t0
    finally:
        if prof is not None:
            prof.stop()
    if mode == "children":
        assert prof is not None
        assert prof.report().meta["children"]["reported"] == 1
    return took


def gathering(children: int, calls: int) -> tuple:
    """Seconds of the parent's stop() and report() with `children`
    reports of `calls` spans each to read and merge."""
    ctx = multiprocessing.get_context("fork")
    prof = ap.Profiler(memory=False).start()
    procs = [ctx.Process(target=record, args=(calls,))
             for _ in range(children)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    t0 = time.perf_counter()
    prof.stop()
    t1 = time.perf_counter()
    rep = prof.report()
    t2 = time.perf_counter()
    assert rep["step"].count == children * calls
    return t1 - t0, t2 - t1


def stage_pair_ns(children: bool, pairs: int = 200_000) -> float:
    with ap.Profiler(memory=False, compensate=False, children=children,
                     max_spans=0):
        t0 = time.perf_counter_ns()
        record(pairs)
        took = time.perf_counter_ns() - t0
    return took / pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    med = statistics.median
    print(f"child start to join, median of {args.repeats}, ms")
    print(f"{'method':>10} {'calls':>7} {'unprofiled':>11} "
          f"{'children=False':>15} {'children=True':>14} {'added':>8}")
    for method in ("fork", "spawn", "forkserver"):
        for calls in (0, 10_000):
            row = {}
            for mode in ("off", "parent only", "children"):
                row[mode] = med(child_round_trip(method, calls, mode)
                                for _ in range(args.repeats)) * 1e3
            print(f"{method:>10} {calls:>7} {row['off']:>11.1f} "
                  f"{row['parent only']:>15.1f} {row['children']:>14.1f} "
                  f"{row['children'] - row['parent only']:>+8.1f}")
    pairs: dict = {False: [], True: []}
    for _ in range(args.repeats):
        for flag in (False, True):
            pairs[flag].append(stage_pair_ns(flag))
    print(f"\nthe parent's stage pair (loop included), median of "
          f"{args.repeats}: children=False {med(pairs[False]):.1f} ns, "
          f"children=True {med(pairs[True]):.1f} ns")
    print(f"\nparent stop() and report() with N children's reports, "
          f"median of {args.repeats}, ms")
    print(f"{'children':>9} {'calls each':>11} {'stop':>8} {'report':>8}")
    for children, calls in ((4, 1000), (16, 1000), (4, 100_000)):
        runs = [gathering(children, calls) for _ in range(args.repeats)]
        print(f"{children:>9} {calls:>11} {med(r[0] for r in runs) * 1e3:>8.1f}"
              f" {med(r[1] for r in runs) * 1e3:>8.1f}")


if __name__ == "__main__":
    main()
