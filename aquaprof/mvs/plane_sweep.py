"""Warping, cost volumes and depth extraction: NumPy arrays run the C
kernels on the CPU, GPU arrays (torch, CuPy, DLPack) the CUDA kernels."""
from __future__ import annotations

import os
from typing import Literal, Optional, Sequence, Tuple, Union, overload

import numpy as np

from ..common.checks import whole
from .. import _mvs
from . import _cuda
from ._limits import MAX_COUNT, check_count, check_image_size, check_pixels
from .camera import Camera

COSTS = {"ncc": 0, "ssim": 1, "sad": 2}
#: whose costs build_cost_volume computes (ap_parity in csrc/mvs/cpu/sweep.h)
PARITIES = {"textbook": 0, "aquamvs": 1}
#: what build_cost_volume may reduce its volume to (None: the volume)
REDUCTIONS = ("depth",)
#: planes a chunk of reduce="depth" holds where depth_batch is not given:
#: H x W x 16 floats at a time, not the volume's H x W x D
DEPTH_CHUNK = 16


def _image(value: object, name: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{name} must be a NumPy float32 (H, W) array, got "
                        f"{type(value).__name__}")
    if value.dtype != np.float32 or value.ndim != 2:
        raise ValueError(f"{name} must be float32 (H, W), got {value.dtype} "
                         f"{value.shape}")
    check_image_size(value.shape, name)
    if not np.isfinite(value).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return value


def _camera(value: object, name: str) -> Camera:
    if not isinstance(value, Camera):
        raise TypeError(f"{name} must be an aquaprof.mvs.Camera, got "
                        f"{type(value).__name__}")
    return value


def _depths(value: object) -> np.ndarray:
    if isinstance(value, np.ndarray):   # before a copy to float64
        check_count(value.size, "depths", "entries")
    d = np.asarray(value, dtype=np.float64)
    check_count(d.size, "depths", "entries")
    if d.ndim == 0:
        d = d.reshape(1)
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"depths must be a non-empty 1-D sequence, got "
                         f"shape {d.shape}")
    if not np.isfinite(d).all() or (d <= 0).any():
        raise ValueError("depths must be finite and > 0")
    if d.size > 1 and (np.diff(d) <= 0).any():
        raise ValueError("depths must be strictly increasing")
    return d


def _threads(value: Optional[int]) -> int:
    if value is None:
        return max(1, len(os.sched_getaffinity(0))
                   if hasattr(os, "sched_getaffinity") else os.cpu_count()
                   or 1)
    if not whole(value, 1, MAX_COUNT):
        raise ValueError(f"threads must be an int from 1 to {MAX_COUNT}, "
                         f"got {value!r}")
    return value


def warp(src: np.ndarray, ref_cam: Camera, src_cam: Camera,
         depth: float) -> np.ndarray:
    """src resampled into the reference view at one ray depth (bilinear);
    NaN where the point is not seen by src_cam. A GPU src gives a GPU
    result of its own library."""
    d = _depths(depth)
    if d.size != 1:
        raise ValueError("depth must be one number")
    ref_params = _camera(ref_cam, "ref_cam").params
    src_params = _camera(src_cam, "src_cam").params
    if _cuda.is_gpu(src):
        _mvs.gpu_check(-1)
        return _cuda.warp(src, ref_params, src_params, float(d[0]))
    return _mvs.warp(_image(src, "src"), ref_params, src_params, float(d[0]))


Images = Union[np.ndarray, Sequence[np.ndarray]]
Depths = Union[np.ndarray, Sequence[float]]


@overload
def build_cost_volume(ref: np.ndarray, srcs: Images, ref_cam: Camera,
                      src_cams: Sequence[Camera], depths: Depths,
                      cost: str = ..., window: int = ...,
                      depth_batch: Optional[int] = ...,
                      threads: Optional[int] = ..., parity: str = ...,
                      *, reduce: None = ...) -> np.ndarray: ...


@overload
def build_cost_volume(ref: np.ndarray, srcs: Images, ref_cam: Camera,
                      src_cams: Sequence[Camera], depths: Depths,
                      cost: str = ..., window: int = ...,
                      depth_batch: Optional[int] = ...,
                      threads: Optional[int] = ..., parity: str = ...,
                      *, reduce: Literal["depth"]
                      ) -> Tuple[np.ndarray, np.ndarray]: ...


def build_cost_volume(ref: np.ndarray, srcs: Images, ref_cam: Camera,
                      src_cams: Sequence[Camera], depths: Depths,
                      cost: str = "ncc",
                      window: int = 11, depth_batch: Optional[int] = None,
                      threads: Optional[int] = None,
                      parity: str = "textbook", *,
                      reduce: Optional[str] = None
                      ) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
    """float32 (H, W, D) matching costs, lower is better, the mean over
    source views; the warped images are never stored.

    cost: "ncc" (1 - normalized cross-correlation over a box window, in
    [0, 2]), "ssim" (1 - SSIM with a Gaussian window, sigma 1.5, clamped to
    [0, 1]) or "sad" (mean absolute difference). A window that sees fewer
    than half its pixels (half its weight, for SSIM) costs 1.0, and so does
    an NCC window without texture (variance under 1e-10).
    depth_batch: depths computed per call of the kernel (default all); it
    does not change the result, and each call repeats the sweep's setup.
    A CPU sweep on the main thread runs the program's signal handlers
    every 0.1 s: Ctrl-C (or any handler that raises) ends it within that
    and one plane of a band.
    threads: worker threads (default: the CPUs this process may use); the
    result is the same for any number.
    parity: "textbook" (the costs above) or "aquamvs": AquaMVS's costs,
    to reproduce its results (ncc and ssim only; docs/mvs.md says how
    they differ): samples off the source image are zero-padded and seen,
    each pixel is centred by its own window's means, NCC divides by
    sqrt(var_r var_s) + 1e-8 with no texture test, and a window needs
    (window^2) // 2 seen pixels.

    GPU arrays (torch, CuPy, DLPack; all on one device) run the CUDA
    kernels and give an array of the same library on that device, queued
    on its current stream without waiting for it. Within 1e-4 of the CPU
    result; threads does not apply there.

    reduce: None (the volume) or "depth": extract_depth's (depth,
    confidence) of the volume, the same bits, without holding it. The
    planes are swept depth_batch at a time (default DEPTH_CHUNK) into a
    chunk of H x W x depth_batch costs, each chunk folded in plane order
    into 32 bytes a pixel of what the extraction reads (the least cost,
    its plane, its neighbours' costs, the costs' sum). Every cost, window,
    parity and device takes it; a bad value is a ValueError."""
    if reduce is not None and (not isinstance(reduce, str)
                               or reduce not in REDUCTIONS):
        raise ValueError(f"reduce must be None or one of "
                         f"{', '.join(map(repr, REDUCTIONS))}, got "
                         f"{reduce!r}")
    ref_params = _camera(ref_cam, "ref_cam").params
    gpu = _cuda.is_gpu(ref) or _cuda.is_gpu(srcs)
    if gpu:
        _mvs.gpu_check(-1)
        ref_view, stack, n = _cuda.images(ref, srcs)
    else:
        ref = _image(ref, "ref")
        stacked = isinstance(srcs, np.ndarray) and srcs.ndim == 3
        if not (stacked or isinstance(srcs, Sequence)):
            raise TypeError("srcs must be a float32 (N, H, W) array or a "
                            "sequence of float32 (H, W) arrays")
        check_count(len(srcs), "srcs", "views")    # before reading them
        views = [_image(s, f"srcs[{i}]") for i, s in enumerate(srcs)]
        if not views:
            raise ValueError("srcs must hold at least one source view")
        for i, s in enumerate(views):
            if s.shape != ref.shape:
                raise ValueError(f"srcs[{i}] has shape {s.shape}, ref has "
                                 f"{ref.shape}")
        n = len(views)
    if not isinstance(src_cams, Sequence) or len(src_cams) != n:
        raise ValueError(f"src_cams must hold one camera per source view "
                         f"({n})")
    cams = np.stack([_camera(c, f"src_cams[{i}]").params
                     for i, c in enumerate(src_cams)])
    d = _depths(depths)
    if cost not in COSTS:
        raise ValueError(f"cost must be one of {sorted(COSTS)}, got "
                         f"{cost!r}")
    if not whole(window, 3, _mvs.MAX_WINDOW) or window % 2 == 0:
        raise ValueError(f"window must be an odd int from 3 to "
                         f"{_mvs.MAX_WINDOW}, got {window!r}")
    if parity not in PARITIES:
        raise ValueError(f"parity must be one of {sorted(PARITIES)}, got "
                         f"{parity!r}")
    if parity == "aquamvs" and cost == "sad":
        raise ValueError("parity='aquamvs' has no 'sad' cost (AquaMVS "
                         "has ncc and ssim only)")
    if depth_batch is None:
        depth_batch = DEPTH_CHUNK if reduce else d.size
    if not whole(depth_batch, 1):
        raise ValueError(f"depth_batch must be an int >= 1, got "
                         f"{depth_batch!r}")
    n_threads = _threads(threads)
    if gpu:
        if reduce:
            return _cuda.depth_map(ref_view, stack, n, ref_params, cams, d,
                                   COSTS[cost], window,
                                   min(depth_batch, d.size),
                                   PARITIES[parity])
        return _cuda.cost_volume(ref_view, stack, n, ref_params, cams, d,
                                COSTS[cost], window, depth_batch,
                                PARITIES[parity])
    # a float32 (N, H, W) array goes as it is (the binding makes it
    # contiguous if it must); a sequence is stacked once
    host_stack = srcs if stacked and isinstance(srcs, np.ndarray) \
        else np.stack(views)
    if reduce:
        return _depth_map(ref, host_stack, ref_params, cams, d, COSTS[cost],
                          window, min(depth_batch, d.size), n_threads,
                          PARITIES[parity])
    out = np.empty(ref.shape + (d.size,), dtype=np.float32)
    for first in range(0, d.size, depth_batch):
        _mvs.cost_volume(ref, host_stack, ref_params, cams, d, first,
                         min(depth_batch, d.size - first), COSTS[cost],
                         window, n_threads, out, PARITIES[parity])
    return out


def _depth_map(ref: np.ndarray, stack: np.ndarray, ref_params: np.ndarray,
               cams: np.ndarray, d: np.ndarray, cost: int, window: int,
               chunk: int, threads: int, parity: int
               ) -> Tuple[np.ndarray, np.ndarray]:
    """build_cost_volume(reduce="depth") on the CPU: chunks of `chunk`
    planes swept and folded in turn. A sweep fits its refraction guesses
    to its depths' first and last entries, so each chunk is swept among
    those two, at planes 1 to count of count + 2 (the two ends never
    computed): the chunk's costs are the whole volume's bits."""
    h, w = ref.shape
    state = np.empty((h, w, _mvs.DEPTH_STATE_DOUBLES), dtype=np.float64)
    depth = np.empty((h, w), dtype=np.float32)
    confidence = np.empty((h, w), dtype=np.float32)
    out = np.empty((h, w, chunk + 2), dtype=np.float32)
    for first in range(0, d.size, chunk):
        count = min(chunk, d.size - first)
        if count + 2 != out.shape[2]:
            out = np.empty((h, w, count + 2), dtype=np.float32)
        among = np.concatenate(([d[0]], d[first:first + count], [d[-1]]))
        _mvs.cost_volume(ref, stack, ref_params, cams, among, 1, count,
                         cost, window, threads, out, parity)
        _mvs.depth_fold(out, 1, count, first, d, state, depth, confidence)
    return depth, confidence


def extract_depth(cost_volume: np.ndarray,
                  depths: Union[np.ndarray, Sequence[float]]
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """Winner-take-all depth (H, W) with parabola refinement (offset
    clamped to half a step), NaN at the first and last hypothesis and
    where a pixel's costs are not all finite; and the confidence
    sqrt((1 - clamp(best, 0, 1)) * clamp(1 - best / mean, 0, 1)), 0 where
    the depth is NaN. H x W is at most 2^31 - 1 pixels. A GPU volume
    gives GPU arrays."""
    d = _depths(depths)
    if _cuda.is_gpu(cost_volume):
        _mvs.gpu_check(-1)
        return _cuda.extract_depth(cost_volume, d)
    if not isinstance(cost_volume, np.ndarray) or cost_volume.ndim != 3 \
            or cost_volume.dtype != np.float32:
        got = (f"{cost_volume.dtype} {cost_volume.shape}"
               if isinstance(cost_volume, np.ndarray)
               else type(cost_volume).__name__)
        raise ValueError(f"cost_volume must be a float32 (H, W, D) array, "
                         f"got {got}")
    h, w, planes = cost_volume.shape
    check_pixels(h, w, "cost_volume")
    check_count(planes, "cost_volume", "planes")
    if d.size != cost_volume.shape[2]:
        raise ValueError(f"depths has {d.size} entries, cost_volume "
                         f"{cost_volume.shape[2]} planes")
    return _mvs.extract_depth(cost_volume, d)


def gray_from_bgr(image: np.ndarray) -> np.ndarray:
    """uint8 (H, W, 3) BGR (OpenCV's order) to float32 grayscale in
    [0, 1], ITU-R BT.601 weights."""
    if not isinstance(image, np.ndarray) or image.dtype != np.uint8 \
            or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError("image must be uint8 (H, W, 3) in BGR order")
    weights = np.array([0.114, 0.587, 0.299], dtype=np.float32) / 255.0
    return image.astype(np.float32) @ weights
