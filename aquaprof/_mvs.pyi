"""Type stubs of the C extension aquaprof._mvs (plane-sweep kernels)."""
from typing import Tuple

import numpy as np

CAMERA_PARAMS: int
CAST_AQUAMVS: int
NEWTON_COLD: int
NEWTON_WARM: int
MAX_WINDOW: int
# 1 where the kernels were built with AVX-512 and AVX2 clones (GCC,
# x86-64 Linux), else 0
VECTOR_CLONES: int
# 1 where the CPU window loops run at eight lanes (AVX-512), else 0
WIDE_LANES: int

def check_camera(params: np.ndarray) -> None: ...
def cast_rays(params: np.ndarray, pixels: np.ndarray
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]: ...
def project(params: np.ndarray, points: np.ndarray
            ) -> Tuple[np.ndarray, np.ndarray]: ...
def warp(src: np.ndarray, ref_params: np.ndarray, src_params: np.ndarray,
         depth: float) -> np.ndarray: ...
def cost_volume(ref: np.ndarray, srcs: np.ndarray, ref_params: np.ndarray,
                src_params: np.ndarray, depths: np.ndarray, first: int,
                count: int, cost: int, window: int, threads: int,
                out: np.ndarray, parity: int = ...) -> None: ...
def extract_depth(volume: np.ndarray, depths: np.ndarray
                  ) -> Tuple[np.ndarray, np.ndarray]: ...
# doubles a pixel of depth_fold's state (csrc/mvs/cuda/gpu_depth.h)
DEPTH_STATE_DOUBLES: int

def depth_fold(chunk: np.ndarray, lead: int, count: int, first: int,
               depths: np.ndarray, state: np.ndarray, depth: np.ndarray,
               confidence: np.ndarray) -> None: ...
# ("polynomial", degree, Newton steps), ("table", points a side, steps) or
# ("per sample", 0, steps): each crossing solved alone, as on the GPU
def snell_guess(params: np.ndarray, dist2_max: float, depth_min: float,
                depth_max: float) -> Tuple[str, int, int]: ...

# CUDA: device pointers as ints, launched on `stream`, never waited for
GPU_VIEWS: int

def gpu_check(device: int) -> None: ...
def gpu_warp(device: int, stream: int, src: int, h: int, w: int,
             ref_params: np.ndarray, src_params: np.ndarray, depth: float,
             rays: int, out: int) -> None: ...
def gpu_cost_volume(device: int, stream: int, ref: int, srcs: int, n: int,
                    h: int, w: int, ref_params: np.ndarray,
                    src_params: np.ndarray, depths: int, d: int, first: int,
                    count: int, cost: int, window: int, rays: int,
                    out: int, parity: int = ..., scratch: int = ...,
                    warped: int = ..., room: int = ...) -> None: ...
def gpu_parity_scratch(device: int, cost: int, window: int) -> bool: ...
def gpu_extract_depth(device: int, stream: int, volume: int, h: int, w: int,
                      d: int, depths: int, depth: int,
                      confidence: int) -> None: ...
def gpu_depth_fold(device: int, stream: int, chunk: int, h: int, w: int,
                   k: int, first: int, d: int, depths: int, state: int,
                   depth: int, confidence: int) -> None: ...
