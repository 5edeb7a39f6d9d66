"""What a Profiler nested in another costs: its start() and stop() each
take the shared session's figures (every stage path's aggregates), and
its report() subtracts them. Timed against the number of distinct stage
paths the outer session holds and the spans recorded while the inner
runs; the outer's stage pairs cost the same whether an inner runs or not
(bench_overhead.py measures them).

    python benchmarks/bench_nesting.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402


def fill(paths: int) -> None:
    """Enters `paths` distinct stage paths once each (100 per parent)."""
    for i in range(0, paths, 100):
        with ap.stage(f"group{i // 100}"):
            for j in range(min(99, paths - i - 1)):
                with ap.stage(f"leaf{j}"):
                    pass


def one(paths: int, spans: int) -> tuple:
    with ap.Profiler(memory=False, compensate=False):
        fill(paths)
        step = ap.stage("step")
        t0 = time.perf_counter()
        inner = ap.Profiler(compensate=False)
        inner.start()
        t1 = time.perf_counter()
        for _ in range(spans):
            with step:
                pass
        t2 = time.perf_counter()
        inner.stop()
        t3 = time.perf_counter()
        rep = inner.report()
        t4 = time.perf_counter()
    assert rep["step"].count == spans
    return t1 - t0, t3 - t2, t4 - t3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'paths':>8} {'spans':>8} {'start':>10} {'stop':>10} "
          f"{'report':>10}   (median of {args.repeats}, ms)")
    for paths, spans in ((10, 1000), (1000, 1000), (10_000, 1000),
                         (10, 100_000)):
        runs = [one(paths, spans) for _ in range(args.repeats)]
        start, stop, report = (statistics.median(r[i] for r in runs) * 1e3
                               for i in range(3))
        print(f"{paths:>8} {spans:>8} {start:>10.2f} {stop:>10.2f} "
              f"{report:>10.2f}")


if __name__ == "__main__":
    main()
