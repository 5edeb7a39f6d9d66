"""Plane-sweep cost volumes: aquaprof's kernels against the way users
write it today in PyTorch (per depth and view: a Newton solve for the
refracted projection, grid_sample, conv2d window sums), in one run.

    python benchmarks/mvs/bench_mvs.py [--height 480 --width 640 --views 4
                                    --depths 64,128 --repeats 3]
    python benchmarks/mvs/bench_mvs.py --device cuda      # on a GPU

CPU: ours and torch float32 are each the median of --repeats runs (torch
warmed up first); the same torch code in float64, run once, is the
reference of the same maths: the report gives our error against it. The
floor beside each time comes from two ceilings measured here first: a
float64 matrix product (arithmetic) and a large copy (memory). Target:
>= 20x the torch CPU version.

Against AquaMVS's own conventions (its centring, zero padding, per-depth
and per-source loop, float32 Newton), NCC and SSIM, both parity modes,
on 1 and 2 threads: benchmarks/mvs/bench_aquamvs.py; the drop-in from BGR
frames, CPU or CUDA: benchmarks/mvs/bench_aquamvs_dropin.py.

CUDA: both on the GPU, timed with CUDA events (3 warm-ups, median of
--gpu-repeats), ours once for each way of warping the sources
(--gpu-warps: strips of rows, their blocks in either order, the cost
kernel's tiles, or whole planes first), and the depth map without the
volume (reduce="depth") for each, beside
the bytes-moved roofline: the bytes a cost volume must move at least
(inputs read once, the volume written once) over the device-to-device
copy bandwidth measured in the same run. Targets: >= 100x the torch GPU
version; the depth map within 20 ms at 1200 x 1600, 5 sources, 128
depths.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from aquaprof import mvs  # noqa: E402
from aquaprof.mvs import _cuda, scenes  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

NEWTON = 10     # the torch version's cold-start iteration count
GPU_TARGET = 100   # the GPU kernel against the users' torch way, same GPU
GPU_DEPTH_TARGET_MS = 20   # reduce="depth" at full size, without the volume
# what our CPU path computes per sample (pixel, depth, view): the ray point
# in the interface frame (~25), the table guess (~15), one Newton step
# (~25), the pixel (~20), bilinear (~10), window sums and cost (~40)
FLOPS_PER_SAMPLE = 25 + 15 + 25 + 20 + 10 + 40


def ceilings():
    """Measured float64 arithmetic rate (matmul) and copy bandwidth."""
    a = np.random.default_rng(0).random((1024, 1024))
    a @ a
    t = time.perf_counter()
    for _ in range(3):
        a @ a
    flops = 3 * 2 * 1024 ** 3 / (time.perf_counter() - t)
    big = np.ones(32 * 1024 * 1024 // 8 * 8)     # 256 MiB
    dst = np.empty_like(big)
    np.copyto(dst, big)
    t = time.perf_counter()
    for _ in range(3):
        np.copyto(dst, big)
    bandwidth = 3 * 2 * big.nbytes / (time.perf_counter() - t)
    return flops, bandwidth


# ------------------------------------------------------- torch version
def torch_cost_volume(ref, srcs, ref_cam, src_cams, depths, window, dtype,
                      device="cpu"):
    """NCC cost volume as users write it in PyTorch (same definitions as
    aquaprof: box window, invalid samples excluded, < half seen -> 1)."""
    h, w = ref.shape
    v, u = np.mgrid[0:h, 0:w]
    o, d, ok = ref_cam.cast_rays(np.stack([u.ravel(), v.ravel()], 1)
                                 .astype(np.float64))
    o = torch.from_numpy(o).to(device, dtype)
    d = torch.from_numpy(d).to(device, dtype)
    ray_ok = torch.from_numpy(ok).to(device)
    r_img = torch.from_numpy(ref).to(device, dtype)[None, None]
    s_imgs = [torch.from_numpy(s).to(device, dtype)[None, None]
              for s in srcs]
    box = torch.ones(6, 1, window, window, dtype=dtype, device=device)
    pad = window // 2
    out = torch.zeros(h, w, len(depths), dtype=dtype, device=device)
    for k, depth in enumerate(depths):
        x = o + float(depth) * d
        for s_img, cam in zip(s_imgs, src_cams):
            px, valid = torch_project(cam, x, dtype, device)
            valid = valid & ray_ok & (px[:, 0] >= 0) & (px[:, 0] <= w - 1) \
                & (px[:, 1] >= 0) & (px[:, 1] <= h - 1)
            grid = torch.stack([px[:, 0] / (w - 1) * 2 - 1,
                                px[:, 1] / (h - 1) * 2 - 1], 1)
            grid = torch.nan_to_num(grid, nan=-2.0).reshape(1, h, w, 2)
            s = F.grid_sample(s_img, grid, align_corners=True)
            m = valid.reshape(1, 1, h, w).to(dtype)
            s = s * m
            r = r_img * m
            stack = torch.cat([m, r, s, r * r, s * s, r * s], dim=1)
            sums = F.conv2d(stack, box, padding=pad, groups=6)[0]
            n = sums[0].clamp(min=1e-12)
            mr, ms = sums[1] / n, sums[2] / n
            vr = sums[3] / n - mr * mr
            vs = sums[4] / n - ms * ms
            cov = sums[5] / n - mr * ms
            ncc = (cov / torch.sqrt((vr * vs).clamp(min=1e-30))).clamp(-1, 1)
            cost = 1 - ncc
            cost = torch.where((vr < 1e-10) | (vs < 1e-10), 1.0, cost)
            cost = torch.where(sums[0] < window * window / 2, 1.0, cost)
            out[:, :, k] += cost
    return out / len(srcs)


def torch_project(cam, x, dtype, device="cpu"):
    """Refracted projection, vectorised: Newton from the straight line."""
    def tensor(values):
        return torch.tensor(values, dtype=dtype, device=device)

    n = tensor(cam.normal / np.linalg.norm(cam.normal))
    plane = float(n @ tensor([0, 0, cam.water_z]))
    c = tensor(cam.center)
    hc = float(n @ c) - plane
    depth = plane - x @ n
    foot = c - hc * n
    hvec = x + depth[:, None] * n - foot
    dist = torch.linalg.norm(hvec, dim=1)
    r = dist * hc / (hc + depth)
    for _ in range(NEWTON):
        a2 = r * r + hc * hc
        a = torch.sqrt(a2)
        wv = dist - r
        b2 = wv * wv + depth * depth
        b = torch.sqrt(b2)
        f = cam.n_air * r / a - cam.n_water * wv / b
        df = cam.n_air * hc * hc / (a2 * a) + \
            cam.n_water * depth * depth / (b2 * b)
        r = r - f / df
    p = foot + hvec * (r / dist.clamp(min=1e-30))[:, None]
    R, t, K = tensor(cam.R), tensor(cam.t), tensor(cam.K)
    pc = p @ R.T + t
    uv = pc @ K.T
    px = uv[:, :2] / uv[:, 2:3]
    return px, (depth > 0) & (pc[:, 2] > 0)


def timed(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def depth_batch_sweep(args, scene, ref, srcs, count, timer,
                      depth_maps=False):
    """The same cost volume at each --batches depth_batch, timed by
    timer(fn) -> (seconds, result); with depth_maps, the depth map
    without the volume too, its planes swept depth_batch at a time
    (each chunk a launch and a fold: what a launch's last wave leaves
    idle is paid once a chunk)."""
    if not args.batches:
        return
    depths = np.linspace(*scene.depth_range(0.03), count)
    print(f"\ndepth_batch sweep, {count} depths:")
    for batch in [int(x) for x in args.batches.split(",")]:
        t, _ = timer(lambda: mvs.build_cost_volume(
            ref, srcs, scene.ref_cam, scene.cameras[1:], depths, "ncc",
            args.window, depth_batch=batch))
        line = f"  depth_batch {batch:3d}: {t * 1e3:9.1f} ms"
        if depth_maps:
            t, _ = timer(lambda: mvs.build_cost_volume(
                ref, srcs, scene.ref_cam, scene.cameras[1:], depths, "ncc",
                args.window, reduce="depth", depth_batch=batch))
            line += f", depth map {t * 1e3:9.1f} ms"
        print(line)


def gpu_timed(fn, repeats):
    """Median seconds of fn on the GPU (CUDA events, 3 warm-ups)."""
    for _ in range(3):
        result = fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        result = fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times), result


def use_way(how):
    """Sets the environment for one --gpu-warps entry: a warp mode
    (AQUAPROF_MVS_GPU_WARP), "strip-tiles" the strip kernel with its
    blocks a plane at a time (AQUAPROF_MVS_GPU_ORDER)."""
    os.environ[_cuda.ORDER_ENV] = "tiles" if how == "strip-tiles" \
        else "planes"
    os.environ[_cuda.WARP_ENV] = "strip" if how == "strip-tiles" else how


def depth_agreement(depth, confidence, volume_depth, volume_confidence,
                    want_depth, want_confidence, step):
    """How a depth map from reduce="depth" stands: against the extraction
    of the same way's volume, which it must equal to the bit (the fold
    is ap_extract_pixel's); and against the CPU volume's extraction,
    from costs within 1e-4 of the CPU's. Two planes whose costs are that
    close may swap, which the parabola's refinement (clamped to half a
    step) moves by under a step: pixels more than half a step apart are
    the CPU's least cost lost to a plane further off. Arrays on the host;
    step, the depths' spacing."""
    bits = int((depth.view(np.uint32) != volume_depth.view(np.uint32)).sum()
               + (confidence.view(np.uint32)
                  != volume_confidence.view(np.uint32)).sum())
    seen = ~np.isnan(want_depth) & ~np.isnan(depth)
    apart = np.abs(depth[seen] - want_depth[seen]) / step
    nan_apart = int((np.isnan(depth) != np.isnan(want_depth)).sum())
    conf = float(np.abs(confidence[seen] - want_confidence[seen]).max()) \
        if seen.any() else 0.0
    return (f"{bits} values not the bits of its volume's extraction; "
            f"against the CPU: {int((apart > 0.5).sum())} of {depth.size} "
            f"pixels over half a step apart (at most "
            f"{apart.max() if apart.size else 0.0:.2g} steps), {nan_apart} "
            f"NaN on one side only, confidence within {conf:.1e}")


def gpu_bandwidth():
    """Device-to-device copy bandwidth (read + write), 1 GiB."""
    a = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    t, _ = gpu_timed(lambda: b.copy_(a), 10)
    return 2 * a.numel() * 4 / t


def bench_cuda(args, scene, depth_counts) -> int:
    if torch is None or not torch.cuda.is_available():
        print("--device cuda needs torch with a CUDA device", file=sys.stderr)
        return 2
    bandwidth = gpu_bandwidth()
    h, w, n = args.height, args.width, args.views
    print(f"{h}x{w}, {n} source views, NCC window {args.window}, "
          f"refractive cameras, {torch.cuda.get_device_name()}")
    print(f"copy bandwidth measured now: {bandwidth / 1e9:.0f} GB/s")
    ref = torch.from_numpy(scene.ref).cuda()
    srcs = torch.from_numpy(np.stack(scene.images[1:])).cuda()
    cams = scene.cameras[1:]
    print(f"\n{'depths':>6} {'ours ms':>8} {'Gsamp/s':>8} {'roof ms':>8} "
          f"{'of roof':>8} {'torch ms':>9} {'x torch':>8} {'max |diff|':>10} "
          f"warp")
    worst = {}
    depth_lines = []
    # each way sets the launcher's variables: as they were after
    with mock.patch.dict(os.environ):
        for count in depth_counts:
            bench_cuda_depths(args, scene, ref, srcs, cams, count, bandwidth,
                              worst, depth_lines)
    print('\ndepth map (reduce="depth": no volume held), ms, against the '
          'torch volume alone:')
    for count, how, depth_t, torch_t, agreement in depth_lines:
        print(f"depth map {count:4d} depths {how:>11}: "
              f"{depth_t * 1e3:8.2f} ms {torch_t / depth_t:7.1f}x; "
              f"{agreement}")
    for count, how, depth_t, _, _ in depth_lines:
        if count == max(depth_counts):
            met = depth_t * 1e3 <= GPU_DEPTH_TARGET_MS
            print(f"target: depth map <= {GPU_DEPTH_TARGET_MS} ms, warp "
                  f"{how}: {'met' if met else 'not met'} "
                  f"({depth_t * 1e3:.1f} ms, {count} depths)")
    for how, ratio in worst.items() if not args.skip_torch else ():
        print(f"\ntarget: >= {GPU_TARGET}x torch on the GPU, warp {how}: "
              f"{'met' if ratio >= GPU_TARGET else 'not met'} "
              f"({ratio:.1f}x); CUDA equals the CPU within 1e-4: see max "
              f"|diff|")
    depth_batch_sweep(args, scene, ref, srcs, max(depth_counts),
                      lambda fn: gpu_timed(fn, args.gpu_repeats),
                      depth_maps=True)
    return 0


def bench_cuda_depths(args, scene, ref, srcs, cams, count, bandwidth, worst,
                      depth_lines):
    """One --depths count on the GPU: the torch way, then each way of
    ours (--gpu-warps), its volume and its depth map; the volume's lines
    printed, the worst ratio to torch kept in `worst`, the depth map's
    line in depth_lines."""
    h, w, n = args.height, args.width, args.views
    depths = np.linspace(*scene.depth_range(0.03), count)
    torch_t = float("nan") if args.skip_torch else gpu_timed(
        lambda: torch_cost_volume(
            scene.ref, scene.images[1:], scene.ref_cam, cams, depths,
            args.window, torch.float32, "cuda"),
        max(3, args.gpu_repeats // 4))[0]
    cpu = mvs.build_cost_volume(scene.ref, scene.images[1:],
                                scene.ref_cam, cams, depths, "ncc",
                                args.window)
    want_depth, want_conf = mvs.extract_depth(cpu, depths)
    roof = (4 * count + 4 * (n + 1)) * h * w / bandwidth
    samples = n * count * h * w
    # each way of warping the sources in turn, in one process
    for how in args.gpu_warps.split(","):
        use_way(how)
        ours_t, ours = gpu_timed(lambda: mvs.build_cost_volume(
            ref, srcs, scene.ref_cam, cams, depths, "ncc", args.window),
            args.gpu_repeats)
        got = ours.cpu().numpy()
        diff = float(np.nanmax(np.abs(got - cpu)))
        # where they part, and how often: a max alone hides whether
        # one window of near-zero variance or a whole border disagrees
        seen = ~np.isnan(cpu) & ~np.isnan(got)
        off = int((np.abs(got[seen] - cpu[seen]) > 1e-4).sum())
        nan_apart = int((np.isnan(cpu) != np.isnan(got)).sum())
        print(f"{count:6d} {ours_t * 1e3:8.2f} "
              f"{samples / ours_t / 1e9:8.2f} {roof * 1e3:8.3f} "
              f"{roof / ours_t * 100:7.1f}% {torch_t * 1e3:9.1f} "
              f"{torch_t / ours_t:8.1f} {diff:10.1e} {how}")
        print(f"       against the CPU: {off} of {cpu.size} costs off "
              f"by more than 1e-4, {nan_apart} seen by one side only")
        ratio = torch_t / ours_t
        worst[how] = min(worst.get(how, ratio), ratio)
        volume_depth, volume_conf = (
            a.cpu().numpy() for a in mvs.extract_depth(ours, depths))
        del ours
        # depth without the volume: chunks of planes folded as they
        # come (plane_sweep.DEPTH_CHUNK at a time)
        depth_t, (depth, conf) = gpu_timed(
            lambda: mvs.build_cost_volume(
                ref, srcs, scene.ref_cam, cams, depths, "ncc",
                args.window, reduce="depth"), args.gpu_repeats)
        depth_lines.append(
            (count, how, depth_t, torch_t, depth_agreement(
                depth.cpu().numpy(), conf.cpu().numpy(), volume_depth,
                volume_conf, want_depth, want_conf,
                np.ptp(depths) / max(count - 1, 1))))
        del depth, conf


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--views", type=int, default=4,
                        help="source views (default 4)")
    parser.add_argument("--depths", default="64,128")
    parser.add_argument("--window", type=int, default=11)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-torch", action="store_true",
                        help="time our kernels only")
    parser.add_argument("--batches", default="1,8,16,32",
                        help="depth_batch values to sweep (the first "
                             "--depths on the CPU, the largest with the "
                             "depth map too on the GPU; empty: none)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--gpu-repeats", type=int, default=20)
    parser.add_argument("--gpu-warps",
                        default="strip,strip-tiles,tile,planes",
                        help="ways of warping the sources to time "
                             f"({_cuda.WARP_ENV}; strip-tiles: the strip "
                             f"kernel's blocks a plane at a time, "
                             f"{_cuda.ORDER_ENV}=tiles; default "
                             f"strip,strip-tiles,tile,planes)")
    args = parser.parse_args()
    depth_counts = [int(x) for x in args.depths.split(",")]
    if args.device == "cuda":
        scene = scenes.make_scene("flat", "refractive", args.views + 1,
                                  args.height, args.width)
        return bench_cuda(args, scene, depth_counts)
    flops, bandwidth = ceilings()
    threads = len(os.sched_getaffinity(0))
    print(f"{args.height}x{args.width}, {args.views} source views, NCC "
          f"window {args.window}, refractive cameras, {threads} threads")
    print(f"ceilings measured now: {flops / 1e9:.1f} GFLOP/s float64 "
          f"(matmul), {bandwidth / 1e9:.1f} GB/s copy")
    scene = scenes.make_scene("flat", "refractive", args.views + 1,
                              args.height, args.width)
    ref, srcs = scene.ref, scene.images[1:]
    cams = scene.cameras[1:]
    rows = []
    if torch is not None and not args.skip_torch:
        # torch's first calls set up its kernels and thread pool: not
        # part of what a cost volume costs
        torch_cost_volume(ref, srcs, scene.ref_cam, cams,
                          np.linspace(*scene.depth_range(0.03), 2),
                          args.window, torch.float32)
    for count in depth_counts:
        depths = np.linspace(*scene.depth_range(0.03), count)
        samples = args.views * count * args.height * args.width
        floor = max(samples * FLOPS_PER_SAMPLE / flops,
                    (4 * count + 4 * (args.views + 1)) * args.height
                    * args.width / bandwidth)
        ours_t, ours = timed(lambda: mvs.build_cost_volume(
            ref, srcs, scene.ref_cam, cams, depths, "ncc", args.window),
            args.repeats)
        line = {"depths": count, "ours": ours_t, "floor": floor,
                "gsamples": samples / ours_t / 1e9}
        if torch is not None and not args.skip_torch:
            line["torch32"], _ = timed(lambda: torch_cost_volume(
                ref, srcs, scene.ref_cam, cams, depths, args.window,
                torch.float32), args.repeats)
            line["torch64"], ref64 = timed(lambda: torch_cost_volume(
                ref, srcs, scene.ref_cam, cams, depths, args.window,
                torch.float64).numpy(), 1)
            line["error"] = float(np.linalg.norm(ours - ref64)
                                  / np.linalg.norm(ref64))
        rows.append(line)
        print(f"  {count} depths done", file=sys.stderr)
    print()
    print(f"{'depths':>6} {'ours s':>8} {'Gsamp/s':>8} {'floor s':>8} "
          f"{'of floor':>8} {'torch32 s':>10} {'x torch32':>9} "
          f"{'torch64 s':>10} {'x torch64':>9} {'rel err':>9}")
    for r in rows:
        extra = ""
        if "torch32" in r:
            extra = (f" {r['torch32']:10.2f} {r['torch32'] / r['ours']:9.1f}"
                     f" {r['torch64']:10.2f} {r['torch64'] / r['ours']:9.1f}"
                     f" {r['error']:9.1e}")
        print(f"{r['depths']:6d} {r['ours']:8.2f} {r['gsamples']:8.4f} "
              f"{r['floor']:8.3f} {r['floor'] / r['ours'] * 100:7.1f}%"
              + extra)
    if rows and "torch32" in rows[0]:
        worst = min(r["torch32"] / r["ours"] for r in rows)
        print(f"\ntarget: >= 20x torch32 on the CPU: "
              f"{'met' if worst >= 20 else 'not met'} ({worst:.1f}x)")
    depth_batch_sweep(args, scene, ref, srcs, depth_counts[0],
                      lambda fn: timed(fn, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
