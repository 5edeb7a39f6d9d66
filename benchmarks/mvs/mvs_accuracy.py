"""Depth accuracy of AquaMVS's costs against aquaprof.mvs's own, on the
synthetic refractive scenes (aquaprof.mvs.scenes): the drop-in
(aquaprof.mvs.aquamvs) run twice per scene and cost, parity="aquamvs"
(AquaMVS's numbers) and parity="textbook", everything else the same.

    python benchmarks/mvs/mvs_accuracy.py [--height 240 --width 320 --views 5
                                       --depths 64 --window 11]

Prints per scene and cost: mean |error| (mm) over pixels with a depth,
completeness (share of ground-truth pixels within one depth step), and
the share of ground-truth pixels where the two depth maps differ by more
than one step (or only one has a depth)."""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from aquaprof.mvs import Camera, aquamvs, scenes  # noqa: E402

PARITIES = ("aquamvs", "textbook")


@dataclass
class Config:
    """AquaMVS's DenseStereoConfig, the fields the dense stage reads."""
    num_depths: int
    cost_function: str
    window_size: int


class Model:
    """An AquaMVS-style projection model of a scene camera."""

    def __init__(self, cam: Camera):
        self.K, self.R, self.t = (torch.from_numpy(np.array(a))
                                  for a in (cam.K, cam.R, cam.t))
        self.normal = torch.from_numpy(np.array(cam.normal))
        self.water_z, self.n_air, self.n_water = (cam.water_z, cam.n_air,
                                                  cam.n_water)


def depth_maps(scene: scenes.Scene, config: Config,
               margin: float) -> Dict[str, np.ndarray]:
    names = [f"cam{i}" for i in range(len(scene.cameras))]
    models = {n: Model(c) for n, c in zip(names, scene.cameras)}
    frames = {n: torch.from_numpy(i) for n, i in zip(names, scene.images)}
    lo, hi = scene.depth_range(margin)
    out = {}
    for parity in PARITIES:
        swept = aquamvs.plane_sweep_stereo(
            names[0], models[names[0]], names[1:], models, frames[names[0]],
            frames, (float(lo), float(hi)), config, parity=parity)
        depth, _ = aquamvs.extract_depth(swept["cost_volume"],
                                         swept["depths"])
        out[parity] = depth.numpy()
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--views", type=int, default=5)
    parser.add_argument("--depths", type=int, default=64)
    parser.add_argument("--window", type=int, default=11)
    parser.add_argument("--margin", type=float, default=0.03,
                        help="depth range beyond the ground truth's (m)")
    args = parser.parse_args(argv)
    print(f"{args.height}x{args.width}, {args.views} views, {args.depths} "
          f"depths, window {args.window}, refractive")
    print(f"{'scene':6} {'cost':5} {'parity':9} {'mean |err| mm':>13} "
          f"{'complete %':>10} {'differ %':>9}")
    for kind in ("flat", "wavy"):
        scene = scenes.make_scene(kind, "refractive", args.views,
                                  args.height, args.width)
        lo, hi = scene.depth_range(args.margin)
        step = (hi - lo) / (args.depths - 1)
        truth = np.isfinite(scene.depth)
        for cost in ("ncc", "ssim"):
            maps = depth_maps(scene, Config(args.depths, cost, args.window),
                              args.margin)
            a, b = maps["aquamvs"], maps["textbook"]
            with np.errstate(invalid="ignore"):
                apart = np.isfinite(a) != np.isfinite(b)
                apart |= np.abs(a - b) > step
            differ = (apart & truth).sum() / max(truth.sum(), 1)
            for parity in PARITIES:
                m = scenes.metrics(scene, maps[parity], tolerance=step)
                print(f"{kind:6} {cost:5} {parity:9} "
                      f"{m['mean_abs_error'] * 1e3:13.2f} "
                      f"{m['completeness'] * 100:10.1f} {differ * 100:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
