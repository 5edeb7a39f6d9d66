"""The realistic pipeline (benchmarks/pipeline_workload.py) bare, under a
Profiler recording stages, and under Profiler(sample=0.001), interleaved
in ONE process, median of --repeats: the same interpreter, heap and
warmed-up torch for each, so that the comparison is free of the
process-to-process spread that bench_sampler.py (a fresh process per run,
as its peers need) has to live with.

    python benchmarks/bench_sampler_inprocess.py [--repeats 9] [--frames 120]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import aquaprof as ap  # noqa: E402
import pipeline_workload as pw  # noqa: E402

TARGET = 0.03
CONFIGS = {"bare": None, "stages": {}, "sample 1 ms": {"sample": 0.001}}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--frames", type=int, default=120)
    args = p.parse_args()
    import torch
    torch.set_num_threads(1)
    frames, model = pw.make_frames(args.frames), pw.build_model()
    pw.timed_run(frames, model)                      # warm-up
    times = {name: [] for name in CONFIGS}
    rounds = []
    for _ in range(args.repeats):
        for name, options in CONFIGS.items():
            if options is None:
                times[name].append(pw.timed_run(frames, model)[0])
                continue
            with ap.Profiler(**options) as prof:
                times[name].append(pw.timed_run(frames, model)[0])
            if "sample" in options:
                rounds.append(prof.report().samples["rounds"])
    bare = statistics.median(times["bare"])
    print(f"pipeline of {args.frames} frames, {args.repeats} interleaved "
          f"repeats in one process (median seconds, slowdown vs bare, "
          f"spread of the runs)")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"  {name:12s} {median:7.3f} s {median / bare - 1:+7.1%}   "
              f"{min(seconds) / bare - 1:+.1%}..{max(seconds) / bare - 1:+.1%}")
    slowdown = statistics.median(times["sample 1 ms"]) / bare - 1
    print(f"  sampler rounds a run: {statistics.median(rounds):.0f}")
    print(f"aquaprof sampler at 1 kHz: {slowdown:+.1%} vs bare, target <= "
          f"{TARGET:.0%}: {'PASS' if slowdown <= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
