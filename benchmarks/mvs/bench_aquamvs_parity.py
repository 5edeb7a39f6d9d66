"""The drop-in against AquaMVS as it runs: AquaMVS 1.7.3's own dense code
(tests/support/aquamvs_harness loads it without its heavy dependencies) in
float32, as its pipeline runs it, and with its geometry in float64, and
the drop-in (parity="aquamvs") on the same scenes and frames.

Per scene and cost it prints: the spread (how far AquaMVS's float32
volume moves when its geometry runs in float64), how far the drop-in is
from each of AquaMVS's runs, and for the depth maps (AquaMVS's own
extract_depth over each volume): the pixels whose winning depth differs
from AquaMVS's float32 run, the largest gap between the two winners'
costs in that run (a near-tie when under the spread), and the largest
difference of refined depths, in depth steps, where the winners agree;
the same for AquaMVS's float64 run, which is the yardstick.

    python benchmarks/mvs/bench_aquamvs_parity.py --height 240 --width 320"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))
sys.path.insert(0, str(ROOT))

import aquamvs_harness as harness  # noqa: E402


@dataclass
class Config:
    cost_function: str
    window_size: int


def depth_agreement(aq, theirs, ours, depths) -> Dict[str, float]:
    """How far `ours` moves AquaMVS's depth map of `theirs`."""
    z_theirs, _ = aq.plane_sweep.extract_depth(theirs.float(), depths)
    z_ours, _ = aq.plane_sweep.extract_depth(ours.float(), depths)
    k_theirs, k_ours = theirs.argmin(2), ours.argmin(2)
    differ = k_theirs != k_ours
    gap = (theirs.gather(2, k_ours[..., None])
           - theirs.gather(2, k_theirs[..., None]))[..., 0].abs()
    same = ~differ & z_theirs.isfinite()
    step = float(depths[1] - depths[0])
    return {
        "winners_differ": int(differ.sum()),
        "max_gap": float(gap[differ].max()) if differ.any() else 0.0,
        "max_depth_steps": (float((z_ours - z_theirs)[same].abs().max())
                            / step if same.any() else 0.0),
        "nan_differ_elsewhere": int(((z_ours.isnan() != z_theirs.isnan())
                                     & ~differ).sum()),
    }


def compare(aq, kind: str, cost: str, height: int, width: int, views: int,
            depths: int, window: int) -> Dict[str, object]:
    import torch
    from aquaprof.mvs import aquamvs as dropin
    from aquaprof.mvs import scenes
    scene = scenes.make_scene(kind, "refractive", views, height, width)
    d = torch.linspace(*scene.depth_range(0.03), depths)
    f32 = harness.cost_volume(aq, scene.cameras, scene.images, d, cost,
                              window, torch.float32).double()
    f64 = harness.cost_volume(aq, scene.cameras, scene.images, d.double(),
                              cost, window, torch.float64)
    models = harness.models(aq, scene.cameras, torch.float32)
    frames = [torch.from_numpy(i) for i in scene.images]
    ours = dropin.build_cost_volume(models[0], models[1:], frames[0],
                                    frames[1:], d,
                                    Config(cost, window)).double()
    return {
        "spread": float((f64 - f32).abs().max()),
        "ours_f64": float((ours - f64).abs().max()),
        "ours_f32": float((ours - f32).abs().max()),
        "ours": depth_agreement(aq, f32, ours, d),
        "f64": depth_agreement(aq, f32, f64, d),
    }


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--views", type=int, default=4)
    parser.add_argument("--depths", type=int, default=32)
    parser.add_argument("--window", type=int, default=11)
    args = parser.parse_args(argv)
    if args.views < 2 or args.depths < 3 or min(args.height,
                                                 args.width) < 16:
        parser.error("at least 2 views, 3 depths and 16 x 16 pixels")
    aq = harness.load()
    print(f"AquaMVS {harness.VERSION} against the drop-in, "
          f"{args.height} x {args.width}, {args.views} views, "
          f"{args.depths} depths, window {args.window}")
    print(f"{'scene':6}{'cost':6}{'spread':>10}{'ours-f64':>10}"
          f"{'ours-f32':>10} | {'differ':>7}{'gap':>10}{'steps':>8}"
          f" | f64: {'differ':>6}{'gap':>10}{'steps':>8}")
    for kind in ("flat", "wavy"):
        for cost in ("ncc", "ssim"):
            r = compare(aq, kind, cost, args.height, args.width, args.views,
                        args.depths, args.window)
            o, f = r["ours"], r["f64"]
            print(f"{kind:6}{cost:6}{r['spread']:10.2e}{r['ours_f64']:10.2e}"
                  f"{r['ours_f32']:10.2e} | {o['winners_differ']:7d}"
                  f"{o['max_gap']:10.2e}{o['max_depth_steps']:8.3f} | "
                  f"     {f['winners_differ']:6d}{f['max_gap']:10.2e}"
                  f"{f['max_depth_steps']:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
