"""Stress: threads entering random nested stages as fast as they can, far
more spans than max_spans keeps. Checks that aggregates stay exact, drops
are counted and memory stays bounded; prints the figures.

    python benchmarks/stress.py [--threads 8 --spans 10000000 --cap 100000]
"""
from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402

NAMES = ["load", "decode", "augment", "forward", "backward", "step"]


def program(rng: random.Random, depth: int = 0):
    """A random tree of stages: (name, children) pairs."""
    return [(rng.choice(NAMES), program(rng, depth + 1)
             if depth < 3 and rng.random() < 0.5 else [])
            for _ in range(rng.randint(1, 3))]


def run(tree, stages, counts, prefix=""):
    for name, children in tree:
        with stages[name]:
            run(children, stages, counts, prefix + name + "/")
        counts[prefix + name] += 1


def size(tree) -> int:
    return sum(1 + size(children) for _, children in tree)


def peak_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--spans", type=int, default=10_000_000)
    parser.add_argument("--cap", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    trees = [program(rng) for _ in range(args.threads)]
    per_thread = args.spans // args.threads
    counts = [Counter() for _ in range(args.threads)]
    stages = {name: ap.stage(name) for name in NAMES}

    def worker(i):
        tree, done = trees[i], 0
        while done < per_thread:
            run(tree, stages, counts[i])
            done += size(tree)

    base = peak_rss()
    t0 = time.perf_counter()
    with ap.Profiler(max_spans=args.cap, memory=False) as prof:
        threads = [threading.Thread(target=worker, args=(i,))
                   for i in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    elapsed = time.perf_counter() - t0
    rep = prof.report()
    expected = sum(counts, Counter())
    got = {s.path: s.count for s in rep.stages}
    total = sum(expected.values())
    exact = got == dict(expected)
    accounted = rep.spans_recorded + rep.spans_dropped == total
    grown = peak_rss() - base
    print(f"{args.threads} threads, {total:,} spans in {elapsed:.1f} s "
          f"({total / elapsed / 1e6:.2f} M spans/s), max_spans "
          f"{args.cap:,}")
    print(f"aggregates exact for {len(got)} stage paths: {exact}")
    print(f"spans kept {rep.spans_recorded:,} + dropped "
          f"{rep.spans_dropped:,} = {total:,}: {accounted}")
    print(f"peak RSS grew by {grown / 2**20:.1f} MiB "
          f"({grown / total:.2f} bytes a span seen)")
    return 0 if exact and accounted else 1


if __name__ == "__main__":
    sys.exit(main())
