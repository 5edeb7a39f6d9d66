"""How precise parity's sample positions must be: AquaMVS's costs (the
float64 reference of its maths, tests/support/aquamvs_reference.py) with every
sample's position rounded to float32, against the same costs from float64
positions. On the synthetic refractive scene as it is, and with black
stripes across the sources, as a housing's vignetting or a mask leaves:
windows of the near-zero samples beside them have so little variance that
their NCC cost follows the positions' last digits.

    python benchmarks/mvs/parity_positions.py [--height 240 --width 320
                                           --views 5 --cost ncc --window 5]

Prints per scene the largest change of a cost, its 99.9th percentile, and
the share of costs moved by more than parity's tolerance (1e-5)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "support"))
from aquaprof.mvs import Camera, scenes  # noqa: E402

import aquamvs_reference as reference  # noqa: E402

TOLERANCE = 1e-5


def striped(images: List[np.ndarray]) -> List[np.ndarray]:
    """The images with black stripes across and down, shifted image by
    image."""
    out = []
    for i, image in enumerate(images):
        h, w = image.shape
        image = image.copy()
        image[:, (np.arange(w) + 5 * i) % 24 < 12] = 0
        image[(np.arange(h) + 3 * i) % 30 < 8, :] = 0
        out.append(image)
    return out


def costs(scene: scenes.Scene, sources: List[np.ndarray], cost: str,
          window: int, float32: bool) -> np.ndarray:
    lo, hi = scene.depth_range(0.05)
    depths = np.array([0.5 * lo, lo, (lo + hi) / 2, hi, 1.5 * hi])
    exact = Camera.project

    def rounded(self: Camera, points: np.ndarray):
        uv, valid = exact(self, points)
        return uv.astype(np.float32).astype(np.float64), valid
    if float32:
        Camera.project = rounded    # type: ignore[method-assign]
    try:
        return reference.cost_volume(scene.ref, sources, scene.ref_cam,
                                     scene.cameras[1:], depths, cost,
                                     window)
    finally:
        Camera.project = exact      # type: ignore[method-assign]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--views", type=int, default=5)
    parser.add_argument("--cost", choices=("ncc", "ssim"), default="ncc")
    parser.add_argument("--window", type=int, default=5)
    args = parser.parse_args(argv)
    if args.height < 1 or args.width < 1 or args.views < 2 or \
            args.window < 1 or args.window % 2 == 0:
        parser.error("sizes must be positive, views at least 2, the "
                     "window odd")
    scene = scenes.make_scene("flat", "refractive", views=args.views,
                              height=args.height, width=args.width)
    print(f"{args.cost} window {args.window}, {args.height}x{args.width}, "
          f"{args.views - 1} source views: float32 positions against "
          f"float64")
    print(f"{'scene':<10} {'largest':>10} {'99.9th':>10} "
          f"{'over ' + str(TOLERANCE):>10}")
    for name, sources in (("plain", list(scene.images[1:])),
                          ("striped", striped(list(scene.images[1:])))):
        moved = np.abs(costs(scene, sources, args.cost, args.window, True) -
                       costs(scene, sources, args.cost, args.window, False))
        print(f"{name:<10} {np.nanmax(moved):>10.3g} "
              f"{np.nanpercentile(moved, 99.9):>10.3g} "
              f"{100 * np.mean(moved > TOLERANCE):>9.4f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
