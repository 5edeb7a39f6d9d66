"""What a live snapshot costs with many stages: Profiler(window=10) over
5,000 stages each called 10 times (a torch_modules model, a Prometheus
scrape's view), timed against the per-stage pass over all kept spans a
snapshot made before (the reference, measured here on the same data).

    python benchmarks/bench_snapshot.py [--stages N] [--window W]
"""
import argparse
import time

import numpy as np

import aquaprof as ap
from aquaprof import _core


def per_stage_pass(spans, nstages, window):
    """The reference: one pass over every kept span for each stage."""
    is_open = (spans["flags"] & _core.SPAN_UNCLOSED) != 0
    for sid in range(nstages):
        mine = spans["stage"] == sid
        closed = np.flatnonzero(mine & ~is_open)
        closed = closed[np.argsort(spans["end_ns"][closed],
                                   kind="stable")][-window:]
        wall = (spans["end_ns"][closed] - spans["start_ns"][closed]) * 1e-9
        if len(wall):
            np.percentile(wall, 95, method="inverted_cdf")


def best(func, rounds=5):
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        func()
        times.append(time.perf_counter() - t)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stages", type=int, default=5000)
    parser.add_argument("--window", type=int, default=10)
    args = parser.parse_args()
    names = [f"module-{i}" for i in range(args.stages)]
    with ap.Profiler(window=args.window, memory=False,
                     compensate=False) as prof:
        for _ in range(args.window):
            for name in names:
                with ap.stage(name):
                    pass
        snap = best(prof.snapshot)
        spans = prof.snapshot().spans()
    reference = best(lambda: per_stage_pass(spans, args.stages,
                                            args.window))
    print(f"{args.stages} stages x window {args.window} "
          f"({len(spans)} kept calls): snapshot() {snap * 1e3:.1f} ms; "
          f"the per-stage pass alone {reference * 1e3:.1f} ms "
          f"(x{reference / snap:.1f})")


if __name__ == "__main__":
    main()
