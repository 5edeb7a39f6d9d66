"""Where the CPU plane sweep's time goes, told by differences of whole
volumes: SAD (the sampling and geometry under the cheapest window sums),
NCC and SSIM on refractive cameras, and NCC and SSIM on pinhole cameras
(the same scene rendered for pinhole cameras: samples and sums alike,
with no refraction to solve, so its share is an estimate).

    python benchmarks/mvs/mvs_stage_split.py [--height 240 --width 320
        --views 4 --depths 64 --threads 1 --rounds 5 --parity textbook]

The five volumes are timed in turn, round after round, so that a busy
spell of a shared machine slows them alike; each time is the least of
its --rounds. It prints each time and what the differences say: the
share of NCC's and SSIM's time that refraction takes (1 - pinhole /
refractive), and the share of SSIM's that its Gaussian window sums take
beyond SAD's box sums ((SSIM - SAD) / SSIM). Those bound what speeding
up one stage alone can give: a stage's share of the time is the most
that making it free saves.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, List, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from alternating import interleaved  # noqa: E402
from aquaprof import mvs  # noqa: E402
from aquaprof.mvs import scenes  # noqa: E402

RUNS = [("sad", "refractive"), ("ncc", "refractive"), ("ssim", "refractive"),
        ("ncc", "pinhole"), ("ssim", "pinhole")]


def volume(args: argparse.Namespace, cost: str,
           kind: str) -> Callable[[int], object]:
    scene = scenes.make_scene("flat", kind, args.views + 1, args.height,
                              args.width)
    depths = np.linspace(*scene.depth_range(0.03), args.depths)
    extra = {} if cost == "sad" else {"parity": args.parity}
    return lambda i: mvs.build_cost_volume(
        scene.ref, scene.images[1:], scene.ref_cam, scene.cameras[1:],
        depths, cost, 11, threads=args.threads, **extra)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--views", type=int, default=4)
    parser.add_argument("--depths", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--parity", choices=["textbook", "aquamvs"],
                        default="textbook")
    args = parser.parse_args(argv)
    for name in ("height", "width", "views", "depths", "threads",
                 "rounds"):
        least = 16 if name in ("height", "width") else 1
        if getattr(args, name) < least:
            parser.error(f"--{name} must be at least {least}")
    best = interleaved({run: volume(args, *run) for run in RUNS},
                       args.rounds)
    print(f"{args.height}x{args.width}, {args.views} source views, "
          f"{args.depths} depths, window 11, {args.threads} thread(s), "
          f"NCC and SSIM parity {args.parity}; least of {args.rounds}")
    for (cost, kind), t in best.items():
        print(f"  {cost:<4} {kind:<10} {t * 1e3:10.4g} ms")
    refractive = {c: best[(c, "refractive")] for c in ("sad", "ncc", "ssim")}
    for cost in ("ncc", "ssim"):
        share = 1 - best[(cost, "pinhole")] / refractive[cost]
        print(f"refraction's share of {cost.upper()}: {share:6.1%}")
    sums = (refractive["ssim"] - refractive["sad"]) / refractive["ssim"]
    print(f"SSIM's Gaussian sums beyond SAD's, share of SSIM: {sums:6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
