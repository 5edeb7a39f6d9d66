"""What GPU tracing costs, measured in one run on a CUDA device:

1. a stage pair (enter + exit, nothing inside) with cuda=False and with
   CUPTI tracing on (its external correlation push and pop);
2. a kernel launch (a one-element add, so that the launch is all there
   is) unprofiled and with CUPTI tracing on, as the host time per launch;
3. the wall time of a GPU pipeline of about 1 ms stages run unprofiled,
   profiled by aquaprof (CUPTI, no synchronization) and in the
   synchronize-per-stage style (cuda_sync=True), as medians of --runs.

Target: < 2 % added wall time for aquaprof; the synchronizing style is
shown for contrast. Needs torch with a CUDA device; says so and exits 2
without one.

    python benchmarks/bench_gpu_overhead.py [--runs 7] [--steps 200]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402


def pair_cost(cuda: bool, n: int = 200_000) -> float:
    stage = ap.stage("pair")
    with ap.Profiler(cuda=cuda, max_spans=0, compensate=False):
        start = time.perf_counter_ns()
        for _ in range(n):
            with stage:
                pass
        elapsed = time.perf_counter_ns() - start
    return elapsed / n


def make_pipeline(torch):
    """Three stages of GPU work, each about 1 ms on the device."""
    x = torch.randn(2048, 2048, device="cuda")
    w = torch.randn(2048, 2048, device="cuda") / 45
    # size the matmul chain so that a stage takes about 1 ms
    torch.mm(x, w)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(20):
        torch.mm(x, w)
    torch.cuda.synchronize()
    per_mm = (time.perf_counter() - t0) / 20
    reps = max(1, round(1e-3 / per_mm))

    def step():
        y = x
        for name in ("encode", "mix", "decode"):
            with ap.stage(name):
                for _ in range(reps):
                    y = torch.mm(y, w)
        return y

    return step, reps * per_mm


def timed(torch, step, steps: int, **profiler) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    if profiler:
        with ap.Profiler(**profiler):
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
    else:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    return time.perf_counter() - start


def launch_cost(torch, n: int, runs: int) -> tuple:
    """Host ns per launch of a tiny kernel, unprofiled and traced: the
    cost CUPTI adds to every launch. Medians of runs, interleaved."""
    x = torch.zeros(1, device="cuda")

    def launches(**profiler) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        if profiler:
            with ap.Profiler(**profiler):
                for _ in range(n):
                    x.add_(1)
                torch.cuda.synchronize()
        else:
            for _ in range(n):
                x.add_(1)
            torch.cuda.synchronize()
        return (time.perf_counter_ns() - start) / n

    launches()
    bare, traced = [], []
    for _ in range(runs):
        bare.append(launches())
        traced.append(launches(cuda=True, max_spans=0, compensate=False))
    return statistics.median(bare), statistics.median(traced)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("needs torch with a CUDA device: torch is not installed")
        return 2
    if not torch.cuda.is_available():
        print("needs torch with a CUDA device: none is available here")
        return 2
    print(f"device: {torch.cuda.get_device_name(0)}")
    with ap.Profiler(cuda=True) as probe:
        pass
    print(f"GPU: {probe.report().gpu_status}")
    off, on = pair_cost(False), pair_cost(True)
    print(f"stage pair: {off:.0f} ns with cuda=False, {on:.0f} ns with "
          f"CUPTI tracing (+{on - off:.0f} ns)")
    bare, traced = launch_cost(torch, 20_000, args.runs)
    print(f"kernel launch: {bare:.0f} ns unprofiled, {traced:.0f} ns with "
          f"CUPTI tracing (+{traced - bare:.0f} ns a launch)")
    step, stage_s = make_pipeline(torch)
    print(f"pipeline: 3 stages of {stage_s * 1e3:.2f} ms, {args.steps} "
          f"steps, median of {args.runs} runs")
    step()
    modes = {"unprofiled": {}, "aquaprof (CUPTI)": {"cuda": True},
             "synchronize per stage": {"cuda": False, "cuda_sync": True}}
    times = {name: [] for name in modes}
    for _ in range(args.runs):
        for name, profiler in modes.items():   # interleaved: drift is shared
            times[name].append(timed(torch, step, args.steps, **profiler))
    base = statistics.median(times["unprofiled"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"  {name:24s} {median * 1e3:9.1f} ms  "
              f"{(median / base - 1) * 100:+6.2f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
