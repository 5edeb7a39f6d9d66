"""The AquaMVS drop-in (aquaprof.mvs.aquamvs.plane_sweep_stereo) against
AquaMVS's dense stage in torch (benchmarks/mvs/aquamvs_torch.py), on the same
frames in the same run: time of each, their ratio, and how far the
drop-in's cost volume is from the torch one.

    python benchmarks/mvs/bench_aquamvs_dropin.py [--height 120 --width 160
        --views 5 --depths 32 --cost ncc --window 11 --repeats 3]
    python benchmarks/mvs/bench_aquamvs_dropin.py --device cuda

Both start from uint8 BGR frames (gray conversion included) and end with
the (H, W, D) volume; times are medians of --repeats runs after one
warm-up (CUDA: synchronized before the clock is read)."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, List, Optional, Tuple

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import aquamvs_torch as reference  # noqa: E402
from aquaprof.mvs import aquamvs, scenes  # noqa: E402
from aquaprof.mvs._aquamvs_inputs import geometry  # noqa: E402


@dataclass
class Config:
    num_depths: int
    cost_function: str
    window_size: int


def median_time(run: Callable[[], torch.Tensor], device: str,
                repeats: int) -> Tuple[float, torch.Tensor]:
    """The median time of `repeats` runs after a warm-up, and the last
    run's result."""
    out = run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = run()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--height", type=int, default=120)
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--views", type=int, default=5)
    parser.add_argument("--depths", type=int, default=32)
    parser.add_argument("--cost", choices=["ncc", "ssim"], default="ncc")
    parser.add_argument("--window", type=int, default=11)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    args = parser.parse_args(argv)
    scene = scenes.make_scene("wavy", "refractive", args.views, args.height,
                              args.width)
    names = [f"cam{i}" for i in range(args.views)]
    frames = {n: (torch.from_numpy(g)[..., None].expand(-1, -1, 3) * 255)
              .round().to(torch.uint8).to(args.device)
              for n, g in zip(names, scene.images)}
    models = {n: reference.RefractiveModel.from_camera(c, torch.float32,
                                                       args.device)
              for n, c in zip(names, scene.cameras)}
    # The drop-in gets what its users hand it, AquaMVS's own
    # RefractiveProjectionModel, which it reads natively: the models'
    # attributes without their methods stand for it (aquamvs need not be
    # installed). The torch reference's models, whose cast_ray and
    # project are their own, would send the drop-in down its torch path.
    native = {n: SimpleNamespace(**vars(m)) for n, m in models.items()}
    kernels = all(geometry(native[n], n, role).camera is not None
                  for n, role in zip(names, ["ref"] + ["src"] * len(names)))
    config = Config(args.depths, args.cost, args.window)
    depth_range = tuple(float(x) for x in scene.depth_range(0.03))

    def dropin(parity: str = "aquamvs") -> torch.Tensor:
        return aquamvs.plane_sweep_stereo(
            names[0], native[names[0]], names[1:], native, frames[names[0]],
            frames, depth_range, config, args.device,
            parity=parity)["cost_volume"]

    def torch_version() -> torch.Tensor:
        grays = [frames[n].float() / 255.0 for n in names]
        grays = [0.114 * g[..., 0] + 0.587 * g[..., 1] + 0.299 * g[..., 2]
                 for g in grays]
        depths = torch.linspace(*depth_range, args.depths,
                                device=args.device)
        return reference.build_cost_volume(
            models[names[0]], [models[n] for n in names[1:]], grays[0],
            grays[1:], depths, args.cost, args.window)

    ours, volume = median_time(dropin, args.device, args.repeats)
    textbook, _ = median_time(lambda: dropin("textbook"), args.device,
                              args.repeats)
    theirs, expected = median_time(torch_version, args.device, args.repeats)
    gap = (volume.double() - expected.double()).abs().max()
    print(f"{args.height}x{args.width}, {args.views} views, {args.depths} "
          f"depths, {args.cost} {args.window}, {args.device}"
          + (f" ({torch.cuda.get_device_name()})"
             if args.device == "cuda" else
             f", {torch.get_num_threads()} torch threads"))
    print("drop-in geometry: " + ("native, the kernels" if kernels else
                                  "the models' own methods, in torch"))
    print(f"AquaMVS in torch (float32): {theirs * 1e3:9.1f} ms")
    print(f"drop-in, parity=aquamvs:    {ours * 1e3:9.1f} ms  "
          f"{theirs / ours:6.1f}x faster")
    print(f"drop-in, parity=textbook:   {textbook * 1e3:9.1f} ms  "
          f"{theirs / textbook:6.1f}x faster")
    print(f"max |cost difference|, parity=aquamvs against torch float32: "
          f"{gap:.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
