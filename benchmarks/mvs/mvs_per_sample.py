"""The CPU plane sweep's time per sample (pixel x depth x source view) at
several image widths: whether it is bound by arithmetic (the same time
per sample at every width) or by the caches (slower once a row's sums
no longer fit). Also the workload to run under a profiler:

    python benchmarks/mvs/mvs_per_sample.py [--cost ncc] [--widths 160,320]
        [--height 240] [--views 4] [--depths 32] [--repeats 5]
        [--threads 1] [--parity textbook] [--pitch 0]
    perf record -g python benchmarks/mvs/mvs_per_sample.py --widths 320

Each width's time is the least CPU time of --repeats whole volumes
(refractive, flat scene, window 11). --pitch turns every camera about
its own x axis by that many degrees: at 75 the reference's rays just
under the horizon meet the water tens of metres out, which stretches
the source cameras' boxes of points past what a guess table lands on,
so that the sweep checks each sample (docs/mvs.md, Refraction).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import List, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from aquaprof import mvs  # noqa: E402
from aquaprof.mvs import scenes  # noqa: E402
from aquaprof.mvs.plane_sweep import COSTS, PARITIES  # noqa: E402


def counts(text: str, what: str,
           parser: argparse.ArgumentParser) -> List[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        parser.error(f"{what}: {text!r} is not a list of counts of 1 or "
                     f"more")
    return values


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cost", choices=sorted(COSTS), default="ncc")
    parser.add_argument("--widths", default="80,160,320,640,1280")
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--views", type=int, default=4,
                        help="source views (default 4)")
    parser.add_argument("--depths", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parity", choices=sorted(PARITIES),
                        default="textbook")
    parser.add_argument("--pitch", type=float, default=0.0,
                        help="degrees every camera is turned about its x "
                             "axis (default 0)")
    args = parser.parse_args(argv)
    if not -90 < args.pitch < 90:
        parser.error(f"--pitch must be between -90 and 90 degrees, got "
                     f"{args.pitch}")
    widths = counts(args.widths, "--widths", parser)
    counts(f"{args.height},{args.views},{args.depths},{args.repeats},"
           f"{args.threads}", "--height, --views, --depths, --repeats and "
           "--threads", parser)
    print(f"{args.cost} ({args.parity}), {args.height} rows, {args.views} "
          f"source views, {args.depths} depths, {args.threads} thread(s)"
          + (f", cameras pitched {args.pitch:g} degrees" if args.pitch
             else ""))
    print(f"{'width':>6} {'ns a sample':>12}")
    for w in widths:
        scene = scenes.make_scene("flat", "refractive", args.views + 1,
                                  args.height, w)
        depths = np.linspace(*scene.depth_range(0.03), args.depths)
        cams = [scenes.pitched(c, args.pitch) for c in scene.cameras]
        best = None
        for _ in range(args.repeats):
            start = time.process_time()
            mvs.build_cost_volume(scene.ref, scene.images[1:], cams[0],
                                  cams[1:], depths, args.cost, 11,
                                  threads=args.threads, parity=args.parity)
            took = time.process_time() - start
            best = took if best is None else min(best, took)
        samples = args.height * w * args.depths * args.views
        print(f"{w:>6} {best / samples * 1e9:12.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
