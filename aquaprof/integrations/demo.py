"""The reference workload, profiled: `python -m aquaprof demo`.

Underwater plane-sweep stereo on a synthetic scene: views of a textured
surface 1.178 m below cameras in air, seen through a flat water surface,
rendered with lens distortion. Stages: load, undistort, build_cost_volume,
extract_depth, fuse, evaluate. Prints the profile and the accuracy, and
saves the report, its trace and its flamegraph. `--device cuda` runs the
kernels on a GPU through torch tensors (the CPU stages then time the
launches; the wait for the GPU falls in `fuse`, where the depth map comes
back).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, cast

import numpy as np

from .. import _mvs, mvs
from .._core import stage
from ..mvs import scenes
from ..record.profiler import Profiler

K1 = -0.04             # radial distortion the frames are rendered with
MIN_CONFIDENCE = 0.1   # pixels kept by `fuse`


def run(args: argparse.Namespace) -> Dict[str, float]:
    """The pipeline; every step is a stage."""
    views, h, w = args.views, args.height, args.width
    with stage("load", items=views):
        scene = scenes.make_scene(args.scene, "refractive", views, h, w,
                                  k1=K1)
        # frames arrive as 8-bit BGR, as from a camera or a file
        frames = [np.repeat((img * 255).round().astype(np.uint8)[..., None],
                            3, axis=2) for img in scene.images]
    with stage("undistort", items=views):
        # host arrays; torch tensors on the GPU with --device cuda
        gray: List[Any] = [
            scenes.undistort(mvs.gray_from_bgr(f), cam.K, scene.k1)
            for f, cam in zip(frames, scene.cameras)]
        if args.device == "cuda":
            import torch
            gray = [torch.from_numpy(g).cuda() for g in gray]
    low, high = scene.depth_range(0.03)
    depths = np.linspace(low, high, args.depths)
    with stage("build_cost_volume", items=h * w * args.depths
                  * (views - 1)):
        volume = mvs.build_cost_volume(gray[0], gray[1:], scene.ref_cam,
                                       scene.cameras[1:], depths,
                                       cost=args.cost, window=args.window)
    with stage("extract_depth", items=h * w):
        depth, confidence = mvs.extract_depth(volume, depths)
    with stage("fuse", items=h * w):
        if args.device == "cuda":    # waits here for the GPU's queue
            # torch tensors: mvs gives back arrays of its input's library,
            # which its signatures, written for NumPy, cannot say
            depth = cast(Any, depth).cpu().numpy()
            confidence = cast(Any, confidence).cpu().numpy()
        kept = np.where(confidence >= MIN_CONFIDENCE, depth, np.nan)
        v, u = np.nonzero(np.isfinite(kept))
        origins, dirs, _ = scene.ref_cam.cast_rays(
            np.stack([u, v], axis=1).astype(np.float64))
        points = origins + kept[v, u][:, None] * dirs
    with stage("evaluate"):
        step = float(depths[1] - depths[0])
        result = scenes.metrics(scene, kept, tolerance=step)
        result["points"] = float(len(points))
        result["depth_step"] = step
    return result


def cuda_problem() -> Optional[str]:
    """Why --device cuda cannot run here, or None."""
    try:
        import torch
    except ImportError:
        return "needs torch, which is not installed"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    try:
        _mvs.gpu_check(torch.cuda.current_device())
    except RuntimeError as e:
        return str(e)
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aquaprof demo",
        description="Profile underwater plane-sweep stereo on a synthetic "
                    "scene and print the report and the depth accuracy.")
    parser.add_argument("--scene", choices=["flat", "wavy"], default="flat")
    parser.add_argument("--views", type=int, default=5,
                        help="cameras, the reference included (default 5)")
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--depths", type=int, default=64,
                        help="depth hypotheses (default 64)")
    parser.add_argument("--cost", choices=sorted(mvs.plane_sweep.COSTS),
                        default="ncc")
    parser.add_argument("--window", type=int, default=11)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                        help="where the kernels run: cpu (default), or cuda "
                             "(needs torch with a CUDA device)")
    parser.add_argument("--out", type=Path, default=Path("demo-output"),
                        help="folder for report.json, trace.json and "
                             "flamegraph.svg (default demo-output)")
    args = parser.parse_args(argv)
    if args.views < 2:
        parser.error("--views must be at least 2")
    if args.depths < 3:
        parser.error("--depths must be at least 3")
    if args.height < 16 or args.width < 16:
        parser.error("--height and --width must be at least 16")
    if args.window < 3 or args.window % 2 == 0:
        parser.error("--window must be an odd number >= 3")
    if args.device == "cuda":
        problem = cuda_problem()
        if problem:
            parser.error(f"--device cuda: {problem}")

    # call stacks sampled too: the diagnosis and the flamegraph name the
    # code inside each stage
    with Profiler(sample=0.001) as prof:
        result = run(args)
    report = prof.report()
    print(report)
    print()
    print(f"depth accuracy, {args.scene} scene, {args.views} views, "
          f"{args.depths} depths (step {result['depth_step'] * 1000:.2f} "
          f"mm), {args.cost} window {args.window}:")
    print(f"  mean |error|    {result['mean_abs_error'] * 1000:8.2f} mm")
    print(f"  median |error|  {result['median_abs_error'] * 1000:8.2f} mm")
    print(f"  completeness    {result['completeness'] * 100:8.1f} % "
          f"within one step")
    if "plane_fit_rmse" in result:
        print(f"  plane-fit RMSE  {result['plane_fit_rmse'] * 1000:8.2f} mm")
    print(f"  fused points    {int(result['points']):8d}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = report.save(args.out / "report.json")
    trace = report.to_chrome_trace(args.out / "trace.json")
    flame = report.to_flamegraph(args.out / "flamegraph.svg",
                                 title="aquaprof demo: underwater plane "
                                       "sweep")
    print(f"\nreport saved to {path} (load with aquaprof.Report.load)")
    print(f"trace: {trace} (open in ui.perfetto.dev)")
    print(f"flamegraph: {flame} (open in a browser)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
