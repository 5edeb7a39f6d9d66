"""A/B timing of two builds of aquaprof._mvs on bench_mvs.py's scene,
alternating calls so that both see the same machine; says whether their
cost volumes are the same to the bit.

    cp aquaprof/_mvs*.so /tmp/a.so     # build A; then rebuild B
    python benchmarks/mvs/ab_mvs.py /tmp/a.so aquaprof/_mvs*.so [--depths 64]
        [--cost ssim] [--threads 1] [--size 240x320] [--parity aquamvs]
        [--clock cpu]
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from aquaprof.mvs import scenes  # noqa: E402
from aquaprof.mvs.plane_sweep import COSTS, PARITIES  # noqa: E402


def load(path: str, tag: str):
    spec = importlib.util.spec_from_file_location(f"{tag}._mvs", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--depths", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--kind", choices=["refractive", "pinhole"],
                        default="refractive")
    parser.add_argument("--cost", choices=sorted(COSTS), default="ncc")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--size", default="480x640", help="HxW")
    parser.add_argument("--parity", choices=sorted(PARITIES),
                        default="textbook")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: the process's CPU time, which leaves "
                        "out what a VM's host took (--threads 1 only)")
    args = parser.parse_args()
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu sums every thread's CPU time: use it "
                     "with --threads 1")
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    height, width = (int(v) for v in args.size.split("x"))
    builds = [load(args.a, "a"), load(args.b, "b")]
    scene = scenes.make_scene("flat", args.kind, 5, height, width)
    depths = np.linspace(*scene.depth_range(0.03), args.depths)
    stack = np.stack(scene.images[1:])
    cams = np.stack([c.params for c in scene.cameras[1:]])
    times, volumes = [[], []], [None, None]
    for round_ in range(args.rounds):
        # A then B, then B then A: whichever runs second in a round
        # (warmer caches, a drifting clock) is each build in turn
        order = (0, 1) if round_ % 2 == 0 else (1, 0)
        for i in order:
            build = builds[i]
            out = np.empty(scene.ref.shape + (args.depths,), np.float32)
            t = clock()
            build.cost_volume(scene.ref, stack, scene.ref_cam.params, cams,
                              depths, 0, args.depths, COSTS[args.cost], 11,
                              args.threads, out, PARITIES[args.parity])
            times[i].append(clock() - t)
            volumes[i] = out
    for name, t in zip((args.a, args.b), times):
        print(f"{name}: min {min(t):.3f} s, median "
              f"{statistics.median(t):.3f} s")
    same = np.array_equal(volumes[0], volumes[1], equal_nan=True)
    # each round's B against its A: drift in the machine's speed over the
    # run cancels
    paired = statistics.median(b / a for a, b in zip(*times))
    print(f"B / A (medians): "
          f"{statistics.median(times[1]) / statistics.median(times[0]):.3f}"
          f", paired by round {paired:.3f}"
          f"; volumes {'identical' if same else 'differ'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
