"""What one sampling round costs the program, seen from its main thread:
a pure-Python loop timed bare and under Profiler(sample=interval),
interleaved, median of --runs; the difference over the rounds taken is
the cost of a round (the walk of the stacks, taken on the main thread
when it runs Python). Also with --idle threads blocked meanwhile, which
each round counts again without walking them.

    python benchmarks/bench_sampler_round.py [--runs 9] [--interval 0.0002]
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


def loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def timed(n: int, sample) -> tuple:
    """(seconds of the loop, rounds the sampler took, ns they held the
    GIL)."""
    with ap.Profiler(sample=sample, compensate=False, memory=False,
                     children=False, dataloaders=False) as prof:
        start = time.perf_counter()
        loop(n)
        elapsed = time.perf_counter() - start
    samples = prof.report().samples if sample else None
    if samples is None:
        return elapsed, 0, 0
    return elapsed, samples["rounds"], samples["held_ns"]


def measure(n: int, runs: int, interval: float) -> tuple:
    bare, sampled, rounds, held = [], [], [], []
    for _ in range(runs):
        bare.append(timed(n, None)[0])
        seconds, taken, ns = timed(n, interval)
        sampled.append(seconds)
        rounds.append(taken)
        held.append(ns / max(taken, 1))
    return (statistics.median(bare), statistics.median(sampled),
            statistics.median(rounds), statistics.median(held))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--loop", type=int, default=5_000_000)
    p.add_argument("--interval", type=float, default=0.0002)
    p.add_argument("--idle", type=int, default=50)
    args = p.parse_args()
    print(f"pure-Python loop of {args.loop:,} additions, sampled every "
          f"{args.interval * 1e3:g} ms, median of {args.runs} interleaved "
          f"runs")
    for idle in (0, args.idle):
        gate = threading.Event()
        threads = [threading.Thread(target=gate.wait) for _ in range(idle)]
        for t in threads:
            t.start()
        try:
            b, s, r, h = measure(args.loop, args.runs, args.interval)
        finally:
            gate.set()
            for t in threads:
                t.join()
        per_round = (s - b) / r * 1e6 if r else float("nan")
        print(f"  {idle:3d} idle threads: bare {b * 1e3:7.1f} ms, sampled "
              f"{s * 1e3:7.1f} ms ({(s / b - 1) * 100:+.1f} %), "
              f"{r:.0f} rounds: {per_round:.1f} us a round; at 1 kHz "
              f"{per_round / 10:.2f} % of the main thread; a round held "
              f"the GIL {h / 1e3:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
