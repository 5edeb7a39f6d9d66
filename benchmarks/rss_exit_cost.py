"""What reading RSS afresh at a stage call's exit costs (memory=True, the
default: a call of at least memory_interval reads /proc/self/statm once
as it closes, so that a temporary freed before the call returns is not
charged as kept).

- the read: os.pread of /proc/self/statm from an open descriptor, as
  the core reads it, timed in a loop from Python (Python's own call
  overhead included: an upper bound on the core's read);
- a stage of about 1 ms of CPU work (calls that read at exit), N calls
  with memory_interval=1 ms and with memory_interval=1 s (no call reads
  at exit; the RSS sampler's own pace differs too), rounds interleaved
  in turning order: the median time a call, and the difference.

    python benchmarks/rss_exit_cost.py [--reads 200000] [--calls 500]
                                       [--rounds 7]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402


def read_cost(reads: int) -> float:
    """Seconds a read of /proc/self/statm takes, from Python."""
    fd = os.open("/proc/self/statm", os.O_RDONLY)
    try:
        start = time.perf_counter()
        for _ in range(reads):
            os.pread(fd, 256, 0)
        return (time.perf_counter() - start) / reads
    finally:
        os.close(fd)


def work(n: int) -> int:
    s = 0
    for i in range(n):
        s += i
    return s


def stage_calls(calls: int, interval: float, unit: int) -> float:
    """Seconds a call of the stage takes, profiled with memory_interval."""
    with ap.Profiler(memory_interval=interval):
        start = time.perf_counter()
        for _ in range(calls):
            with ap.stage("work"):
                work(unit)
        return (time.perf_counter() - start) / calls


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reads", type=int, default=200_000)
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--rounds", type=int, default=7)
    a = p.parse_args(argv)
    if min(a.reads, a.calls, a.rounds) < 1:
        p.error("--reads, --calls and --rounds take whole numbers >= 1")
    read = read_cost(a.reads)
    print(f"a read of /proc/self/statm from Python: {read * 1e6:.2f} us "
          f"({a.reads} reads)")
    # about 1.2 ms of work: every call past the 1 ms interval
    unit = 1
    while True:
        start = time.perf_counter()
        work(unit)
        if time.perf_counter() - start >= 1.2e-3:
            break
        unit *= 2
    reading, not_reading = [], []
    for i in range(a.rounds):
        # the order turns each round: the first of a pair runs colder
        for interval in ((1e-3, 1.0) if i % 2 else (1.0, 1e-3)):
            (reading if interval < 1 else not_reading).append(
                stage_calls(a.calls, interval, unit))
    r, n = statistics.median(reading), statistics.median(not_reading)
    print(f"a call of the stage, median of {a.rounds} rounds of {a.calls}: "
          f"{r * 1e6:.1f} us reading RSS at exit, {n * 1e6:.1f} us not "
          f"({(r / n - 1) * 100:+.2f} %); the read alone is "
          f"{read / n * 100:.2f} % of such a call")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
