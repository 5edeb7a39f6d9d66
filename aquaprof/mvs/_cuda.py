"""The plane sweep on GPU arrays: torch tensors and CuPy arrays (read
through ``__cuda_array_interface__``), and other DLPack producers through
whichever of the two is installed, without copies.

Outputs and scratch are allocated by the input's own library, the kernels
are queued on that library's current stream, and nothing waits for the
GPU: results are ready when that stream gets there, as with any torch or
CuPy operation. Pixel values are not checked for NaN here, since that
would mean waiting for the GPU."""
from __future__ import annotations

import os
from typing import Any, List, Sequence, Tuple

import numpy as np

from .. import _mvs
from ._limits import check_count, check_image_size, check_pixels

DLPACK_CUDA, DLPACK_CUDA_MANAGED = 2, 13

#: how the textbook sweep warps its sources (``AQUAPROF_MVS_GPU_WARP``,
#: WARP_MODES): "tile", the cost kernel warps each tile and its window's
#: halo as it goes (about two warps a sample at window 11); "planes", a
#: kernel first warps every plane of the sources once into a buffer of at
#: most WARP_PLANES_BYTES, each ray walked down the planes.
WARP_ENV = "AQUAPROF_MVS_GPU_WARP"
WARP_PLANES_BYTES = 512 << 20
#: which kernels AquaMVS parity takes (``AQUAPROF_MVS_GPU_PARITY``):
#: "strip" (the default: one launch, windows up to 15, no scratch) or
#: "passes" (three launches a plane through global scratch, as wider
#: windows take anyway); the launcher reads the same variable
PARITY_ENV = "AQUAPROF_MVS_GPU_PARITY"
PARITY_MODES = ("strip", "passes")
#: the order of the strip kernels' blocks (``AQUAPROF_MVS_GPU_ORDER``):
#: "planes" (the default: every plane of a tile side by side, why in
#: docs/mvs.md) or "tiles" (a plane's blocks at a time, the order before,
#: kept to time against); the launcher reads the same variable
ORDER_ENV = "AQUAPROF_MVS_GPU_ORDER"
ORDER_MODES = ("planes", "tiles")

#: a torch tensor or a CuPy array, used through the attributes both have
#: (``__cuda_array_interface__``, ``device``); both libraries are optional,
#: so the type checker cannot name them
GpuObject = Any


def is_gpu(obj: object) -> bool:
    """Whether obj is an array on a CUDA GPU, also inside a list/tuple."""
    if isinstance(obj, (list, tuple)):
        return any(is_gpu(o) for o in obj)
    if isinstance(obj, np.ndarray):
        return False
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    device = getattr(obj, "__dlpack_device__", None)
    if device is None:
        return False
    try:
        kind = device()[0]
    except Exception:     # a producer that cannot say is not ours to take
        return False
    return kind in (DLPACK_CUDA, DLPACK_CUDA_MANAGED)


def _library(obj: object) -> str:
    return type(obj).__module__.split(".")[0]


def _adopt(obj: object, name: str) -> GpuObject:
    """obj as a torch tensor or CuPy array over the same memory."""
    if _library(obj) in ("torch", "cupy"):
        return obj
    for lib in ("cupy", "torch"):
        try:
            module = __import__(lib)
        except ImportError:
            continue
        if hasattr(obj, "__dlpack__"):
            return module.from_dlpack(obj)
        if lib == "cupy":
            return module.asarray(obj)           # reads the interface
        return module.as_tensor(obj, device="cuda")
    raise RuntimeError(f"{name}: GPU arrays must be torch tensors or CuPy "
                       f"arrays, or come with torch or CuPy installed (got "
                       f"{type(obj).__name__})")


class GpuArray:
    """A C-contiguous float32 GPU array: its pointer, shape and device,
    and the library that allocates like it."""

    def __init__(self, obj: object, name: str, ndim: int):
        if not is_gpu(obj):
            raise ValueError(f"{name} is a {type(obj).__name__}, not a GPU "
                             f"array: the arrays of one call must all be on "
                             f"the GPU or all on the host")
        self.obj = _adopt(obj, name)
        cai = self.obj.__cuda_array_interface__
        self.shape: Tuple[int, ...] = tuple(cai["shape"])
        if cai["typestr"] != "<f4" or len(self.shape) != ndim:
            raise ValueError(f"{name} must be a float32 array of {ndim} "
                             f"dimensions, got {cai['typestr']} "
                             f"{self.shape}")
        contiguous = [4]
        for extent in reversed(self.shape[1:]):
            contiguous.insert(0, contiguous[0] * extent)
        strides = cai.get("strides")
        if strides is not None and any(
                extent > 1 and stride != expected for extent, stride,
                expected in zip(self.shape, strides, contiguous)):
            raise ValueError(f"{name} must be C-contiguous (call "
                             f".contiguous() or cupy.ascontiguousarray)")
        self.ptr: int = cai["data"][0]
        self.lib = _library(self.obj)
        if self.lib == "torch":
            self.device: int = self.obj.device.index or 0
        else:
            self.device = self.obj.device.id

    def empty(self, shape: Sequence[int], dtype: str = "float32"
              ) -> GpuObject:
        """A new array of this library on this device."""
        if self.lib == "torch":
            import torch
            return torch.empty(tuple(shape), dtype=getattr(torch, dtype),
                               device=self.obj.device)
        import cupy
        with cupy.cuda.Device(self.device):
            return cupy.empty(tuple(shape), dtype=dtype)

    def upload(self, values: np.ndarray) -> GpuObject:
        """float64 values copied to this device, queued on the current
        stream: a pageable copy would wait for the GPU."""
        if self.lib == "torch":
            import torch
            host = torch.from_numpy(np.ascontiguousarray(values, np.float64))
            return host.pin_memory().to(self.obj.device, non_blocking=True)
        import cupy
        with cupy.cuda.Device(self.device):
            out = cupy.empty(values.shape, dtype=np.float64)
            out.set(np.ascontiguousarray(values, np.float64),
                    stream=cupy.cuda.get_current_stream())
            return out

    def stream(self) -> int:
        """The library's current stream on this device, as a handle."""
        if self.lib == "torch":
            import torch
            return torch.cuda.current_stream(self.obj.device).cuda_stream
        import cupy
        with cupy.cuda.Device(self.device):
            return cupy.cuda.get_current_stream().ptr


def _pointer(array: GpuObject) -> int:
    return array.__cuda_array_interface__["data"][0]


def images(ref: object, srcs: object) -> Tuple[GpuArray, GpuArray, int]:
    """ref (H, W) and srcs ((N, H, W) or a sequence of (H, W)) on one GPU:
    the reference, the stacked views, and N."""
    ref_view = GpuArray(ref, "ref", 2)
    check_image_size(ref_view.shape, "ref")   # before stacking the views
    if isinstance(srcs, (list, tuple)):
        if not srcs:
            raise ValueError("srcs must hold at least one source view")
        check_count(len(srcs), "srcs", "views")
        views: List[GpuArray] = [GpuArray(s, f"srcs[{i}]", 2)
                                 for i, s in enumerate(srcs)]
        stacked = ref_view.empty((len(views),) + ref_view.shape)
        for i, view in enumerate(views):
            _same_device(ref_view, view, f"srcs[{i}]")
            if view.shape != ref_view.shape:
                raise ValueError(f"srcs[{i}] has shape {view.shape}, ref "
                                 f"has {ref_view.shape}")
            stacked[i] = view.obj      # a device-to-device copy, queued
        stack = GpuArray(stacked, "srcs", 3)
    else:
        stack = GpuArray(srcs, "srcs", 3)
        check_count(stack.shape[0], "srcs", "views")
        if stack.shape[1:] != ref_view.shape or stack.shape[0] < 1:
            raise ValueError(f"srcs has shape {stack.shape}, ref has "
                             f"{ref_view.shape}")
    _same_device(ref_view, stack, "srcs")
    return ref_view, stack, stack.shape[0]


def _same_device(a: GpuArray, b: GpuArray, name: str) -> None:
    if a.device != b.device or a.lib != b.lib:
        raise ValueError(f"{name} is on {b.lib} device {b.device}, ref on "
                         f"{a.lib} device {a.device}")


def warp(src: object, ref_params: np.ndarray, src_params: np.ndarray,
         depth: float) -> GpuObject:
    image = GpuArray(src, "src", 2)
    check_image_size(image.shape, "src")
    _mvs.gpu_check(image.device)
    h, w = image.shape
    rays = image.empty((6, h, w), "float64")
    out = image.empty((h, w))
    _mvs.gpu_warp(image.device, image.stream(), image.ptr, h, w, ref_params,
                  src_params, depth, _pointer(rays), _pointer(out))
    return out


#: how the GPU cost kernels may warp: "strip" (the default: a thread a
#: column walks down a strip of rows, sliding its window sums, or for
#: SSIM summing them afresh),
#: "tile" (a block warps its tile and halo), "planes" (whole planes
#: first, into a buffer); the launcher reads the same variable
WARP_MODES = ("strip", "tile", "planes")


def warp_mode() -> str:
    """AQUAPROF_MVS_GPU_WARP's value ("strip" when unset), or
    ValueError."""
    return _mode(WARP_ENV, WARP_MODES)


def parity_mode() -> str:
    """AQUAPROF_MVS_GPU_PARITY's value ("strip" when unset), or
    ValueError."""
    return _mode(PARITY_ENV, PARITY_MODES)


def order_mode() -> str:
    """AQUAPROF_MVS_GPU_ORDER's value ("planes" when unset), or
    ValueError."""
    return _mode(ORDER_ENV, ORDER_MODES)


def _mode(variable: str, modes: Tuple[str, ...]) -> str:
    how = os.environ.get(variable, modes[0])
    if how not in modes:
        raise ValueError(f"{variable} must be one of "
                         f"{', '.join(map(repr, modes))}, got {how!r}")
    return how


def warp_room(views: int, h: int, w: int, planes: int) -> int:
    """The planes of `views` (h, w) warped images that the warp buffer
    holds at once, at most `planes` and WARP_PLANES_BYTES: 0 when the
    cost kernel warps its tiles itself, as it does where one plane of
    the views alone is larger."""
    if warp_mode() != "planes":
        return 0
    return min(planes, WARP_PLANES_BYTES // (views * h * w * 4))


class _Sweep:
    """What the cost launches of one call share: the depths on the
    device, the rays, AquaMVS parity's scratch and the warped planes."""

    def __init__(self, ref: GpuArray, stack: GpuArray, n: int,
                 ref_params: np.ndarray, cams: np.ndarray,
                 depths: np.ndarray, cost: int, window: int, batch: int,
                 parity: int):
        _mvs.gpu_check(ref.device)
        warp_mode()      # a bad value is refused whatever the parity
        order_mode()
        if parity:
            parity_mode()
        self.ref, self.stack, self.n = ref, stack, n
        self.ref_params, self.cams = ref_params, cams
        self.cost, self.window, self.parity = cost, window, parity
        h, w = ref.shape
        self.depths = ref.upload(depths)
        self.rays = ref.empty((6, h, w), "float64")
        # AquaMVS parity's three passes meet in global memory: per view
        # of a launch, the warped image and the centred reference and
        # source (its strip kernel, for windows up to 15, needs none)
        views = min(n, _mvs.GPU_VIEWS)
        self.scratch = ref.empty((views, 3, h, w), "float64") \
            if parity and _mvs.gpu_parity_scratch(ref.device, cost, window) \
            else None
        self.room = 0 if parity else warp_room(views, h, w,
                                               min(batch, depths.size))
        self.warped = ref.empty((self.room, views, h, w)) \
            if self.room else None
        self.stream = ref.stream()

    def launch(self, depths: int, d: int, first: int, count: int,
               out: GpuObject) -> None:
        """Planes [first, first + count) of the d depths at device
        address `depths` into out, float32 (H, W, d)."""
        h, w = self.ref.shape
        _mvs.gpu_cost_volume(
            self.ref.device, self.stream, self.ref.ptr, self.stack.ptr,
            self.n, h, w, self.ref_params, self.cams, depths, d, first,
            count, self.cost, self.window, _pointer(self.rays),
            _pointer(out), self.parity,
            0 if self.scratch is None else _pointer(self.scratch),
            0 if self.warped is None else _pointer(self.warped), self.room)


def cost_volume(ref: GpuArray, stack: GpuArray, n: int,
                ref_params: np.ndarray, cams: np.ndarray, depths: np.ndarray,
                cost: int, window: int, depth_batch: int,
                parity: int = 0) -> GpuObject:
    sweep = _Sweep(ref, stack, n, ref_params, cams, depths, cost, window,
                   depth_batch, parity)
    h, w = ref.shape
    d = depths.size
    out = ref.empty((h, w, d))
    for first in range(0, d, depth_batch):
        sweep.launch(_pointer(sweep.depths), d, first,
                     min(depth_batch, d - first), out)
    return out


def depth_map(ref: GpuArray, stack: GpuArray, n: int,
              ref_params: np.ndarray, cams: np.ndarray, depths: np.ndarray,
              cost: int, window: int, chunk: int,
              parity: int = 0) -> Tuple[GpuObject, GpuObject]:
    """build_cost_volume(reduce="depth") on the GPU: chunks of `chunk`
    planes, each swept into an (H, W, chunk) buffer as a volume of its
    own (its depths a slice of the call's, so that its costs are the
    volume's bits) and folded in plane order into each pixel's state
    (ap_depth_fold_kernel); the last fold writes depth and confidence."""
    sweep = _Sweep(ref, stack, n, ref_params, cams, depths, cost, window,
                   chunk, parity)
    h, w = ref.shape
    d = depths.size
    out = ref.empty((h, w, chunk))
    state = ref.empty((h, w, _mvs.DEPTH_STATE_DOUBLES), "float64")
    depth, confidence = ref.empty((h, w)), ref.empty((h, w))
    for first in range(0, d, chunk):
        count = min(chunk, d - first)
        sliced = _pointer(sweep.depths) + 8 * first
        sweep.launch(sliced, count, 0, count, out)
        _mvs.gpu_depth_fold(ref.device, sweep.stream, _pointer(out), h, w,
                            count, first, d, _pointer(sweep.depths),
                            _pointer(state), _pointer(depth),
                            _pointer(confidence))
    return depth, confidence


def extract_depth(volume: object, depths: np.ndarray) -> Tuple[GpuObject,
                                                               GpuObject]:
    vol = GpuArray(volume, "cost_volume", 3)
    h, w, d = vol.shape
    check_pixels(h, w, "cost_volume")
    check_count(d, "cost_volume", "planes")
    if d != depths.size:
        raise ValueError(f"depths has {depths.size} entries, cost_volume "
                         f"{d} planes")
    _mvs.gpu_check(vol.device)
    on_device = vol.upload(depths)
    depth, confidence = vol.empty((h, w)), vol.empty((h, w))
    _mvs.gpu_extract_depth(vol.device, vol.stream(), vol.ptr, h, w, d,
                           _pointer(on_device), _pointer(depth),
                           _pointer(confidence))
    return depth, confidence
