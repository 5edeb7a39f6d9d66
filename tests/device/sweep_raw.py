"""The plane-sweep CUDA kernels driven through the driver's own memory
calls, without torch: it starts in a second, so compute-sanitizer and ncu
can run it whole, and it checks the kernels against the CPU path with
nothing of torch's in between.

    python3 tests/device/sweep_raw.py small|san|ncu|ncu_tiles|ncu_planes

small: warp, cost volumes (each cost, windows 3 to 63, depth batches,
       the sources warped by the cost kernel or as whole planes first,
       more views than one launch takes), AquaMVS parity (the strip
       kernel and the three passes), the strip kernels' blocks in
       either order, and depth extraction, each against the CPU within
       the tests' tolerance;
san:   a few of those, smaller, for compute-sanitizer;
ncu:   the full-size cost volume (1200 x 1600, 5 sources, 128 planes,
       NCC 11), for ncu; ncu_tiles: the same with the strip kernel's
       blocks a plane at a time; ncu_planes: a smaller one with the
       sources' planes warped first.
One line per case ('ok' or 'BAD'); exits 1 when any case is BAD."""
import ctypes
import os
import sys
from unittest import mock

import numpy as np

from aquaprof import _mvs, mvs
from aquaprof.mvs import scenes
from aquaprof.mvs.plane_sweep import COSTS

TOLERANCE = 1e-4        # what tests/mvs/test_mvs_gpu.py allows
PARITY_TOLERANCE = 1e-5  # what tests/mvs/test_mvs_parity.py allows
NAN_BITS = 0x7FC00000   # a float32 NaN: a pixel never written shows up

u64, size_t, vp = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p


class Device:
    """Device 0's primary context and the allocations made in it."""

    def __init__(self):
        self.cu = cu = ctypes.CDLL("libcuda.so.1")
        cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(u64), size_t]
        cu.cuMemFree_v2.argtypes = [u64]
        cu.cuMemcpyHtoD_v2.argtypes = [u64, vp, size_t]
        cu.cuMemcpyDtoH_v2.argtypes = [vp, u64, size_t]
        cu.cuMemsetD32_v2.argtypes = [u64, ctypes.c_uint, size_t]
        cu.cuGetErrorName.argtypes = [ctypes.c_int,
                                      ctypes.POINTER(ctypes.c_char_p)]
        self.check(cu.cuInit(0), "cuInit")
        dev, self.ctx = ctypes.c_int(), vp()
        self.check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
        self.check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev),
                   "cuDevicePrimaryCtxRetain")
        self.check(cu.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.live = []

    def check(self, rc, what):
        if rc != 0:
            name = ctypes.c_char_p()
            self.cu.cuGetErrorName(rc, ctypes.byref(name))
            raise RuntimeError(f"{what}: {name.value} ({rc})")

    def alloc(self, nbytes):
        """nbytes of device memory filled with NaN."""
        p = u64()
        nbytes = max(nbytes, 4)
        self.check(self.cu.cuMemAlloc_v2(ctypes.byref(p), nbytes),
                   "cuMemAlloc")
        self.live.append(p.value)
        self.check(self.cu.cuMemsetD32_v2(p.value, NAN_BITS, nbytes // 4),
                   "cuMemsetD32")
        return p.value

    def upload(self, array):
        array = np.ascontiguousarray(array)
        p = self.alloc(array.nbytes)
        self.check(self.cu.cuMemcpyHtoD_v2(p, array.ctypes.data,
                                           array.nbytes), "cuMemcpyHtoD")
        return p

    def download(self, p, shape, dtype=np.float32):
        out = np.empty(shape, dtype)
        # a kernel's fault is reported by the first call that waits
        self.check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")
        self.check(self.cu.cuMemcpyDtoH_v2(out.ctypes.data, p, out.nbytes),
                   "cuMemcpyDtoH")
        return out

    def free_all(self):
        self.check(self.cu.cuCtxSynchronize(), "cuCtxSynchronize")
        while self.live:
            self.check(self.cu.cuMemFree_v2(self.live.pop()), "cuMemFree")


class Cases:
    """Runs the kernels and counts the results that differ from the CPU."""

    def __init__(self, device):
        self.dev = device
        self.bad = 0

    def compare(self, name, got, want, tol=TOLERANCE):
        same_nan = np.array_equal(np.isnan(got), np.isnan(want))
        seen = ~np.isnan(want) & ~np.isnan(got)
        diff = float(np.abs(got[seen] - want[seen]).max()) if seen.any() \
            else 0.0
        ok = same_nan and diff <= tol
        self.bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name}: max |gpu - cpu| "
              f"{diff:.2e} (tolerance {tol:g}), NaN where the CPU has NaN: "
              f"{same_nan}", flush=True)

    def warp(self, sc, depth, name):
        h, w = sc.ref.shape
        src, rays, out = (self.dev.upload(sc.images[1]),
                          self.dev.alloc(6 * h * w * 8),
                          self.dev.alloc(h * w * 4))
        _mvs.gpu_warp(0, 0, src, h, w, sc.ref_cam.params,
                      sc.cameras[1].params, float(depth), rays, out)
        self.compare(name, self.dev.download(out, (h, w)),
                     mvs.warp(sc.images[1], sc.ref_cam, sc.cameras[1],
                              depth))

    def volume(self, sc, depths, cost, window, batch, room=0):
        """The GPU cost volume, launched depth_batch planes at a time;
        with room, the sources' planes warped first into a buffer of
        exactly that many planes (the sanitizer sees a write past it)."""
        h, w = sc.ref.shape
        n, d = len(sc.images) - 1, depths.size
        cams = np.stack([c.params for c in sc.cameras[1:]])
        ref = self.dev.upload(sc.ref)
        srcs = self.dev.upload(np.stack(sc.images[1:]))
        on_device = self.dev.upload(depths.astype(np.float64))
        rays, out = self.dev.alloc(6 * h * w * 8), self.dev.alloc(h * w * d
                                                                  * 4)
        warped = self.dev.alloc(room * min(n, _mvs.GPU_VIEWS) * h * w * 4) \
            if room else 0
        for first in range(0, d, batch):
            _mvs.gpu_cost_volume(0, 0, ref, srcs, n, h, w, sc.ref_cam.params,
                                 cams, on_device, d, first,
                                 min(batch, d - first), COSTS[cost], window,
                                 rays, out, 0, 0, warped, room)
        return self.dev.download(out, (h, w, d))

    def cost(self, sc, depths, cost, window, batch, name, room=0):
        want = mvs.build_cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                     sc.cameras[1:], depths, cost, window)
        if room:
            name += f", planes warped first, {room} at a time"
        self.compare(name, self.volume(sc, depths, cost, window, batch,
                                       room), want)
        return want

    def parity(self, sc, depths, cost, window, batch, name, passes=False):
        """AquaMVS parity on the GPU against the CPU's (the parity tests'
        tolerance): the strip kernel where it takes the window, else, or
        with passes, the three passes and their scratch."""
        h, w = sc.ref.shape
        n, d = len(sc.images) - 1, depths.size
        with mock.patch.dict(os.environ, {"AQUAPROF_MVS_GPU_PARITY":
                                          "passes"} if passes else {}):
            views = min(n, _mvs.GPU_VIEWS)
            scratch = self.dev.alloc(views * 3 * h * w * 8) \
                if _mvs.gpu_parity_scratch(0, COSTS[cost], window) else 0
            cams = np.stack([c.params for c in sc.cameras[1:]])
            ref = self.dev.upload(sc.ref)
            srcs = self.dev.upload(np.stack(sc.images[1:]))
            on_device = self.dev.upload(depths.astype(np.float64))
            rays = self.dev.alloc(6 * h * w * 8)
            out = self.dev.alloc(h * w * d * 4)
            for first in range(0, d, batch):
                _mvs.gpu_cost_volume(0, 0, ref, srcs, n, h, w,
                                     sc.ref_cam.params, cams, on_device, d,
                                     first, min(batch, d - first),
                                     COSTS[cost], window, rays, out, 1,
                                     scratch)
        want = mvs.build_cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                     sc.cameras[1:], depths, cost, window,
                                     parity="aquamvs")
        kernels = "passes" if scratch else "strip"
        self.compare(f"{name}, {kernels}", self.dev.download(out, (h, w, d)),
                     want, PARITY_TOLERANCE)

    def extract(self, volume, depths, name):
        h, w, d = volume.shape
        # the kernel reads doubles: a scene's range is float32 (NumPy 2
        # keeps a float32 scalar's type through linspace)
        vol = self.dev.upload(volume)
        on_device = self.dev.upload(np.asarray(depths, np.float64))
        depth, conf = self.dev.alloc(h * w * 4), self.dev.alloc(h * w * 4)
        _mvs.gpu_extract_depth(0, 0, vol, h, w, d, on_device, depth, conf)
        want_depth, want_conf = mvs.extract_depth(volume, depths)
        self.compare(f"{name} depth", self.dev.download(depth, (h, w)),
                     want_depth, 1e-6)
        self.compare(f"{name} confidence", self.dev.download(conf, (h, w)),
                     want_conf, 1e-6)


def tiles_first():
    """The strip kernels' blocks a plane at a time, the order before
    AQUAPROF_MVS_GPU_ORDER's default; the variable as it was after."""
    return mock.patch.dict(os.environ, {"AQUAPROF_MVS_GPU_ORDER": "tiles"})


def many_views(cases, views, height, width, room=0):
    """More source views than one launch takes: the accumulating path."""
    sc = scenes.make_scene("flat", "pinhole", views=views, height=height,
                           width=width)
    depths = np.linspace(*sc.depth_range(0.03), 6)
    return cases.cost(sc, depths, "ncc", 11, 6,
                      f"cost ncc w11, {views - 1} views (more than the "
                      f"{_mvs.GPU_VIEWS} of one launch)", room), depths


def small(cases):
    for model in ("refractive", "pinhole"):
        sc = scenes.make_scene("wavy", model, views=4, height=40, width=56)
        depths = np.linspace(*sc.depth_range(0.03), 9)
        for k in (0, 4, 8):
            cases.warp(sc, depths[k], f"warp {model}, depth #{k}")
        for cost, window in (("ncc", 3), ("ncc", 11), ("ssim", 7),
                             ("sad", 5), ("ncc", 63), ("ssim", 63)):
            for batch, room in ((9, 0), (4, 0), (9, 9), (4, 3)):
                cases.cost(sc, depths, cost, window, batch,
                           f"cost {model} {cost} w{window}, 3 views, depth "
                           f"batch {batch}", room)
        for cost, window in (("ncc", 11), ("ssim", 5), ("ncc", 17)):
            for passes in (False, True):
                cases.parity(sc, depths, cost, window, 4,
                             f"parity {model} {cost} w{window}, 3 views",
                             passes)
        with tiles_first():
            for cost, window in (("ncc", 11), ("ssim", 7), ("sad", 5)):
                cases.cost(sc, depths, cost, window, 4,
                           f"cost {model} {cost} w{window}, 3 views, "
                           f"depth batch 4, blocks a plane at a time")
            cases.parity(sc, depths, "ncc", 11, 4,
                         f"parity {model} ncc w11, 3 views, blocks a plane "
                         f"at a time")
        cases.dev.free_all()
    many_views(cases, _mvs.GPU_VIEWS + 3, 24, 32)
    sc = scenes.make_scene("flat", "refractive", views=_mvs.GPU_VIEWS + 3,
                           height=70, width=150)
    cases.parity(sc, np.linspace(*sc.depth_range(0.03), 3), "ssim", 15, 3,
                 f"parity ssim w15, {_mvs.GPU_VIEWS + 2} views, blocks "
                 f"across and down")
    many_views(cases, _mvs.GPU_VIEWS + 3, 24, 32, room=4)
    rng = np.random.default_rng(6)
    volume = rng.random((30, 40, 9)).astype(np.float32)
    cases.extract(volume, np.cumsum(rng.uniform(0.01, 0.03, 9)) + 0.8,
                  "extract")
    cases.dev.free_all()


def san(cases):
    sc = scenes.make_scene("wavy", "refractive", views=4, height=24,
                           width=40)
    depths = np.linspace(*sc.depth_range(0.03), 5)
    cases.warp(sc, depths[2], "warp")
    for cost, window, batch, room in (("ncc", 11, 5, 0), ("ssim", 63, 2, 0),
                                      ("sad", 3, 5, 0), ("ncc", 11, 5, 2),
                                      ("ssim", 63, 2, 2)):
        cases.cost(sc, depths, cost, window, batch,
                   f"cost {cost} w{window}, depth batch {batch}", room)
    for cost, window, passes in (("ncc", 11, False), ("ssim", 15, False),
                                 ("ncc", 5, True)):
        cases.parity(sc, depths, cost, window, 5,
                     f"parity {cost} w{window}", passes)
    cases.dev.free_all()
    many_views(cases, _mvs.GPU_VIEWS + 2, 16, 24, room=3)
    volume, depths = many_views(cases, _mvs.GPU_VIEWS + 2, 16, 24)
    cases.extract(volume, depths, "extract")
    cases.dev.free_all()


def ncu(cases, height=1200, width=1600, planes=128, room=0):
    """Two volumes: ncu profiles the second, once the code is warm."""
    sc = scenes.make_scene("flat", "refractive", views=6, height=height,
                           width=width)
    depths = np.linspace(*sc.depth_range(0.03), planes)
    for _ in range(2):
        cases.volume(sc, depths, "ncc", 11, planes, room)
    cases.dev.free_all()
    order = os.environ.get("AQUAPROF_MVS_GPU_ORDER", "planes")
    print(f"ncu workload: {height}x{width}, 5 source views, {planes} "
          f"depths, NCC 11, "
          + (f"planes warped first, {room} at a time" if room else
             f"the strip kernel's blocks {order} first"))


def ncu_tiles(cases):
    with tiles_first():
        ncu(cases)


if __name__ == "__main__":
    modes = {"small": small, "san": san, "ncu": ncu, "ncu_tiles": ncu_tiles,
             "ncu_planes": lambda cases: ncu(cases, 480, 640, 32, room=32)}
    if len(sys.argv) != 2 or sys.argv[1] not in modes:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(modes)}")
    cases = Cases(Device())
    modes[sys.argv[1]](cases)
    sys.exit(1 if cases.bad else 0)
