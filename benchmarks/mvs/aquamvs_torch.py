"""AquaMVS's dense stage as its users run it, in PyTorch: the reference
that aquaprof's plane sweep is timed against (benchmarks/mvs/bench_mvs.py)
and, in float64, the reference its `parity="aquamvs"` mode is checked
against (tests/mvs/test_mvs_parity.py, tests/mvs/test_mvs_aquamvs.py).

Written from AquaMVS's published conventions (tlancaster6/AquaMVS,
`dense/plane_sweep.py`, `dense/cost.py`, `projection/refractive.py`):
- rays that meet the plane z = water_z and are bent there about `normal`
  as given, depth along the bent ray;
  projection by 10 Newton steps on the interface point from the straight
  line, in the tensors' dtype (float32 in AquaMVS), the surface taken as
  level (z = water_z) whatever `normal` says;
- warping by `grid_sample(bilinear, zeros, align_corners=True)`: outside
  the source image counts as 0 and is seen; only an invalid projection
  (the point not below the water, or behind the camera) is unseen;
- costs through conv2d with zero padding, each sample centred by its own
  window's mean, `cov / (sqrt(var_r var_s) + 1e-8)`, a window that sees
  fewer than (s * s) // 2 samples (half the Gaussian weight for SSIM)
  costing 1;
- a per-depth, per-source loop, the mean over sources.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F

NEWTON_STEPS = 10
NCC_EPS = 1e-8
SSIM_SIGMA = 1.5


class RefractiveModel:
    """A camera in air above a level water surface at z = water_z (world
    frame, z pointing down into the water), AquaMVS's parameters."""

    def __init__(self, K: torch.Tensor, R: torch.Tensor, t: torch.Tensor,
                 water_z: float, normal: torch.Tensor, n_air: float,
                 n_water: float) -> None:
        self.K, self.R, self.t = K, R, t
        self.water_z, self.normal = float(water_z), normal
        self.n_air, self.n_water = float(n_air), float(n_water)
        self.center = -R.T @ t

    @classmethod
    def from_camera(cls, cam: object, dtype: torch.dtype = torch.float32,
                    device: str = "cpu") -> "RefractiveModel":
        """The model of an aquaprof.mvs.Camera (refractive)."""
        def tensor(value: object) -> torch.Tensor:
            return torch.as_tensor(np.array(value, dtype=np.float64),
                                   dtype=dtype, device=device)
        return cls(tensor(cam.K), tensor(cam.R), tensor(cam.t),  # type: ignore[attr-defined]
                   cam.water_z, tensor(cam.normal), cam.n_air,  # type: ignore[attr-defined]
                   cam.n_water)  # type: ignore[attr-defined]

    def cast_ray(self, pixels: torch.Tensor
                 ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Origins on the surface and unit refracted directions of (N, 2)
        pixels."""
        ones = torch.ones_like(pixels[:, :1])
        rays = torch.cat([pixels, ones], 1) @ torch.linalg.inv(self.K).T
        rays = rays / rays.norm(dim=1, keepdim=True)
        rays = rays @ self.R        # camera to world: R^T applied to rows
        reach = (self.water_z - self.center[2]) / rays[:, 2]
        origins = self.center + reach[:, None] * rays
        cos_i = -(rays @ self.normal)
        ratio = self.n_air / self.n_water
        cos_t = torch.sqrt((1 - ratio ** 2 * (1 - cos_i ** 2)).clamp(min=0))
        into_water = -self.normal
        directions = ratio * rays + (cos_t - ratio * cos_i)[:, None] \
            * into_water
        return origins, directions / directions.norm(dim=1, keepdim=True)

    def project(self, points: torch.Tensor
                ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Pixels (N, 2) of world points and whether each is valid (below
        the water, its interface point in front of the camera)."""
        c = self.center
        above = self.water_z - c[2]
        below = points[:, 2] - self.water_z
        dx, dy = points[:, 0] - c[0], points[:, 1] - c[1]
        reach = torch.sqrt(dx * dx + dy * dy + 1e-12)
        r = reach * above / (above + below + 1e-12)
        for _ in range(NEWTON_STEPS):
            air2 = r * r + above * above
            air = torch.sqrt(air2)
            left = reach - r
            water2 = left * left + below * below
            water = torch.sqrt(water2)
            f = self.n_air * r / air - self.n_water * left / water
            slope = self.n_air * above * above / (air2 * air) \
                + self.n_water * below * below / (water2 * water)
            r = torch.minimum((r - f / (slope + 1e-12)).clamp(min=0), reach)
        surface = torch.stack([c[0] + r * dx / reach, c[1] + r * dy / reach,
                               torch.full_like(r, self.water_z)], 1)
        cam = surface @ self.R.T + self.t
        pixels = (cam[:, :2] / cam[:, 2:3]) @ self.K[:2, :2].T + self.K[:2, 2]
        valid = (below > 0) & (cam[:, 2] > 0)
        nan = torch.full_like(pixels, float("nan"))
        return torch.where(valid[:, None], pixels, nan), valid


def pixel_grid(h: int, w: int, dtype: torch.dtype = torch.float32,
               device: str = "cpu") -> torch.Tensor:
    """(H * W, 2) pixel coordinates (u, v), row by row."""
    v, u = torch.meshgrid(torch.arange(h, dtype=dtype, device=device),
                          torch.arange(w, dtype=dtype, device=device),
                          indexing="ij")
    return torch.stack([u.reshape(-1), v.reshape(-1)], 1)


def warp(origins: torch.Tensor, directions: torch.Tensor,
         src_model: RefractiveModel, src: torch.Tensor,
         depth: float) -> torch.Tensor:
    """The source image seen from the reference rays at one ray depth;
    NaN where the projection is invalid, 0 outside the image."""
    h, w = src.shape
    pixels, valid = src_model.project(origins + depth * directions)
    gx = torch.where(valid, 2 * pixels[:, 0] / (w - 1) - 1, 2.0)
    gy = torch.where(valid, 2 * pixels[:, 1] / (h - 1) - 1, 2.0)
    grid = torch.stack([gx, gy], 1).reshape(1, h, w, 2)
    warped = F.grid_sample(src[None, None], grid, mode="bilinear",
                           padding_mode="zeros", align_corners=True)[0, 0]
    return torch.where(valid.reshape(h, w), warped, float("nan"))


def _gauss(size: int, dtype: torch.dtype,
           device: torch.device) -> torch.Tensor:
    x = torch.arange(size, dtype=dtype, device=device) - size // 2
    return torch.exp(-x * x / (2 * SSIM_SIGMA ** 2))


def _kernel(cost_function: str, size: int, dtype: torch.dtype,
            device: torch.device) -> torch.Tensor:
    if cost_function == "ncc":
        return torch.ones(1, 1, size, size, dtype=dtype, device=device)
    g = _gauss(size, dtype, device)
    k = torch.outer(g, g)
    return (k / k.sum())[None, None]


def separable_conv(cost_function: str, size: int, dtype: torch.dtype,
                   device: torch.device):
    """conv2d with the window as a row then a column of weights: the same
    sums (to float rounding), for timing AquaMVS as it runs where
    conv2d is fast. AquaMVS itself makes one size x size conv2d, whose
    speed depends on the CPU and the torch build far more than anything
    else in its loop (oneDNN runs it on a scalar reference path on some
    AVX2 CPUs)."""
    if cost_function == "ncc":
        g = torch.ones(size, dtype=dtype, device=device)
    else:
        g = _gauss(size, dtype, device)
        g = g / g.sum()     # outer(g, g) is _kernel's window
    row, col = g.view(1, 1, 1, size), g.view(1, 1, size, 1)

    def conv(x: torch.Tensor) -> torch.Tensor:
        x = F.conv2d(x, row, padding=(0, size // 2))
        return F.conv2d(x, col, padding=(size // 2, 0))
    return conv


def window_cost(ref: torch.Tensor, warped: torch.Tensor,
                cost_function: str, size: int,
                separable: bool = False) -> torch.Tensor:
    """(H, W) cost of a warped source against the reference: 1 - NCC over
    a box window, or 1 - SSIM over a Gaussian one. separable: the window
    sums by separable_conv instead of AquaMVS's one conv2d."""
    seen = ~torch.isnan(warped)
    mask = seen.to(ref.dtype)[None, None]
    s = torch.where(seen, warped, 0.0)[None, None]
    r = ref[None, None]
    kernel = _kernel(cost_function, size, ref.dtype, ref.device)

    def conv(x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, kernel, padding=size // 2)
    if separable:
        conv = separable_conv(cost_function, size, ref.dtype, ref.device)

    weight = conv(mask)
    count = weight.clamp(min=1.0 if cost_function == "ncc" else 1e-8)
    rc = (r - conv(r * mask) / count) * mask
    sc = (s - conv(s * mask) / count) * mask
    var_r, var_s = conv(rc * rc) / count, conv(sc * sc) / count
    cov = conv(rc * sc) / count
    if cost_function == "ncc":
        cost = 1 - cov / (torch.sqrt(var_r * var_s) + NCC_EPS)
        cost = torch.where(weight < (size * size) // 2, 1.0, cost)
        return cost.clamp(0, 2)[0, 0]
    mr, ms = conv(r * mask) / count, conv(s * mask) / count
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    ssim = (2 * mr * ms + c1) * (2 * cov + c2) / (
        (mr * mr + ms * ms + c1) * (var_r + var_s + c2))
    cost = torch.where(count < 0.5 * kernel.sum(), 1.0, 1 - ssim)
    return cost.clamp(0, 1)[0, 0]


def build_cost_volume(ref_model: RefractiveModel,
                      src_models: Sequence[RefractiveModel],
                      ref: torch.Tensor, srcs: Sequence[torch.Tensor],
                      depths: torch.Tensor, cost_function: str = "ncc",
                      window_size: int = 11,
                      separable: bool = False) -> torch.Tensor:
    """(H, W, D) mean cost over the sources, one depth and one source at
    a time, as AquaMVS builds it (separable: see window_cost)."""
    h, w = ref.shape
    origins, directions = ref_model.cast_ray(
        pixel_grid(h, w, ref.dtype, str(ref.device)))
    volume = torch.zeros(h, w, len(depths), dtype=ref.dtype,
                         device=ref.device)
    for k in range(len(depths)):
        depth = float(depths[k])
        costs: List[torch.Tensor] = [
            window_cost(ref, warp(origins, directions, model, src, depth),
                        cost_function, window_size, separable)
            for model, src in zip(src_models, srcs)]
        volume[:, :, k] = torch.stack(costs).mean(0)
    return volume


def extract_depth(volume: torch.Tensor, depths: torch.Tensor
                  ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Winner-take-all, a parabola through the best cost and its
    neighbours (step depths[1] - depths[0]), NaN at the first and last
    hypothesis; confidence sqrt((1 - best) * distinctness)."""
    eps = 1e-8
    d = volume.shape[2]
    best = volume.argmin(2)
    pick = lambda idx: volume.gather(2, idx[..., None])[..., 0]  # noqa: E731
    c0, cm, cp = pick(best), pick((best - 1).clamp(min=0)), \
        pick((best + 1).clamp(max=d - 1))
    offset = (0.5 * (cm - cp) / (cm - 2 * c0 + cp + eps)).clamp(-0.5, 0.5)
    depth = depths[best] + offset * (depths[1] - depths[0])
    edge = (best == 0) | (best == d - 1)
    distinct = (1 - c0 / (volume.mean(2) + eps)).clamp(0, 1)
    confidence = torch.sqrt((1 - c0.clamp(0, 1)) * distinct)
    return (torch.where(edge, float("nan"), depth),
            torch.where(edge, 0.0, confidence))
