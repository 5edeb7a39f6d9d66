"""What ranking the stages on the run's clock costs a report: the union of
each stage's calls and the most open at once (aquaprof.analysis.
concurrency), measured at the first top() of a report, against building
the report and printing it. A run of --spans spans: that many stage pairs
on 4 threads at once, over --stages stage names; then on one thread,
where no stage's calls can overlap and nothing is sorted.

    .venv/bin/python benchmarks/bench_clock.py [--spans 1000000]
        [--stages 20] [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402


def recorded(spans: int, stages: int, threads: int) -> ap.Profiler:
    names = [ap.stage(f"s{i}") for i in range(stages)]

    def work(n: int) -> None:
        for i in range(n):
            with names[i % stages]:
                pass
    prof = ap.Profiler(memory=False, compensate=False, max_spans=spans)
    with prof:
        running = [threading.Thread(target=work, args=(spans // threads,))
                   for _ in range(threads)]
        for t in running:
            t.start()
        for t in running:
            t.join()
    return prof


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--stages", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    for threads in (4, 1):
        built, ranked, printed = [], [], []
        for _ in range(args.repeats):
            prof = recorded(args.spans, args.stages, threads)
            t0 = time.perf_counter()
            rep = prof.report()
            t1 = time.perf_counter()
            rep.top(3)
            t2 = time.perf_counter()
            str(rep)
            t3 = time.perf_counter()
            built.append(t1 - t0)
            ranked.append(t2 - t1)
            printed.append(t3 - t2)
        n = len(rep.spans())
        med = statistics.median
        print(f"{n:,} spans, {args.stages} stages on "
              f"{threads} thread(s), median of {args.repeats}:")
        print(f"  report()           {med(built) * 1e3:8.1f} ms")
        print(f"  first top(): clock {med(ranked) * 1e3:8.1f} ms "
              f"({med(ranked) / med(built):.2f} x report())")
        print(f"  str(report) after  {med(printed) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
