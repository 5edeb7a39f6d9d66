"""What sampling costs a program of many threads: N threads that each
compute a little and wait a little (a thread-per-request server), their
work done in a fixed time counted bare and under Profiler(sample=...),
interleaved; prints the throughput ratio and the share of the run the
sampler's rounds held the GIL (the docs promise at most a tenth).

    python benchmarks/bench_sampler_threads.py [--threads 500] [--runs 3]
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


def serve(stop: threading.Event, done: list, i: int) -> None:
    n = 0
    while not stop.is_set():
        total = 0
        for k in range(2000):
            total += k
        n += 1
        time.sleep(0.001)
    done[i] = n


def run(threads: int, seconds: float, sample) -> tuple:
    """(requests served, the share of the run sampling held the GIL)."""
    stop = threading.Event()
    done = [0] * threads
    pool = [threading.Thread(target=serve, args=(stop, done, i))
            for i in range(threads)]
    with ap.Profiler(sample=sample, compensate=False, memory=False,
                     children=False, dataloaders=False) as prof:
        for t in pool:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in pool:
            t.join()
    samples = prof.report().samples if sample else None
    held = samples["held_ns"] * 1e-9 / prof.report().wall if samples else 0
    return sum(done), held


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=500)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--interval", type=float, default=0.001)
    args = p.parse_args()
    bare, sampled, held = [], [], []
    for _ in range(args.runs):
        bare.append(run(args.threads, args.seconds, None)[0])
        served, share = run(args.threads, args.seconds, args.interval)
        sampled.append(served)
        held.append(share)
    print(f"{args.threads} threads, sample={args.interval}: "
          f"{statistics.median(sampled) / statistics.median(bare):.3f} of "
          f"the bare throughput (medians of {args.runs} runs); rounds held "
          f"the GIL {statistics.median(held) * 100:.1f} % of the run "
          f"(max {max(held) * 100:.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
