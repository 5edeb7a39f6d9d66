"""The drop-in's torch path: per-pair window costs (differentiable, as
AquaMVS's are) and a plane sweep that places its samples where given
functions say, for what the C and CUDA kernels cannot run: a user's own
projection model (its project and cast_ray are the geometry), windows
wider than the kernels hold, and samples off the source image treated
the other way from the parity's own.

The costs are computed in float64 whatever the inputs' precision (with
AquaMVS's own formulas in float32, an NCC window moves by up to 1e-5)
and given back in the reference's dtype. Window sums are separable
(box or Gaussian, row then column), each zero-padded beyond the image as
AquaMVS's 2-D conv2d is."""
from __future__ import annotations

from typing import Any, Callable, List, Sequence, Tuple

import numpy as np

from ._aquamvs_inputs import Tensor, torch_module

#: AquaMVS's epsilon in NCC's denominator
NCC_EPS = 1e-8
SSIM_C1, SSIM_C2 = 0.01 ** 2, 0.03 ** 2
SSIM_SIGMA = 1.5
#: a textbook NCC window with less variance than this has no texture
NCC_MIN_VARIANCE = 1e-10
#: samples seen up to this far outside the image, on its border
#: (AP_BORDER_SLACK of csrc/mvs/cpu/cost_math.h)
BORDER_SLACK = 1e-3
OUTSIDES = ("zero", "nan")

#: cast(pixels (N, 2) float32) -> (origins, directions), (N, 3) each
Cast = Callable[[Tensor], Tuple[Tensor, Tensor]]
#: project(points (N, 3)) -> (pixels (N, 2), valid (N,))
Project = Callable[[Tensor], Tuple[Tensor, Tensor]]


def weights_1d(cost: str, window: int, device: Any) -> Tensor:
    """The window's weights along one axis, float64: ones for NCC, the
    Gaussian of sigma 1.5 for SSIM, normalised so that the 2-D window
    (their outer product) sums to 1."""
    torch = torch_module()
    if cost == "ncc":
        return torch.ones(window, dtype=torch.float64, device=device)
    x = torch.arange(window, dtype=torch.float64, device=device) \
        - window // 2
    g = torch.exp(-x * x / (2 * SSIM_SIGMA ** 2))
    return g / g.sum()


def window_sum(x: Tensor, weights: Tensor) -> Tensor:
    """x (H, W) summed over each pixel's window, zeros beyond the image."""
    torch = torch_module()
    k = weights.numel()
    rows = torch.nn.functional.conv2d(x[None, None],
                                      weights.view(1, 1, 1, k),
                                      padding=(0, k // 2))
    return torch.nn.functional.conv2d(rows, weights.view(1, 1, k, 1),
                                      padding=(k // 2, 0))[0, 0]


def pair_cost(ref: Tensor, src: Tensor, cost: str, window: int,
              parity: str) -> Tensor:
    """One view's cost map (H, W) of ref against the warped src (NaN
    where unseen), in ref's floating dtype, differentiable."""
    torch = torch_module()
    seen = ~torch.isnan(src)
    m = seen.double()
    r = ref.double()
    s = torch.where(seen, src.double(), torch.zeros((), dtype=torch.float64,
                                                    device=src.device))
    w = weights_1d(cost, window, ref.device)
    n = window_sum(m, w)
    if parity == "aquamvs":
        out = _aquamvs_cost(r, s, m, n, w, cost, window)
    else:
        out = _textbook_cost(r, s, m, n, w, cost, window)
    dtype = ref.dtype if ref.is_floating_point() else torch.float32
    return out.to(dtype)


def _aquamvs_cost(r: Tensor, s: Tensor, m: Tensor, n: Tensor, w: Tensor,
                  cost: str, window: int) -> Tensor:
    """AquaMVS's compute_ncc and compute_ssim: each sample centred by its
    own window's means, then summed over the pixel's window."""
    torch = torch_module()
    one = torch.ones((), dtype=torch.float64, device=r.device)
    count = n.clamp(min=1.0 if cost == "ncc" else 1e-8)
    mr = window_sum(r * m, w) / count
    ms = window_sum(s * m, w) / count
    rc, sc = (r - mr) * m, (s - ms) * m
    vr = window_sum(rc * rc, w) / count
    vs = window_sum(sc * sc, w) / count
    cov = window_sum(rc * sc, w) / count
    if cost == "ncc":
        # the root of a window without variance (none seen, or flat) is
        # 0 with no gradient: AquaMVS's sqrt(0) passes NaN back
        product = vr * vs
        textured = product > 0
        root = torch.where(textured, torch.sqrt(torch.where(textured,
                                                            product, one)),
                           0.0 * one)
        c = 1.0 - cov / (root + NCC_EPS)
        c = torch.where(n < (window * window) // 2, one, c)
        return c.clamp(0.0, 2.0)
    ssim = ((2 * mr * ms + SSIM_C1) * (2 * cov + SSIM_C2)) / (
        (mr * mr + ms * ms + SSIM_C1) * (vr + vs + SSIM_C2))
    # AquaMVS compares the clamped weight with half the kernel's sum
    c = torch.where(count < 0.5 * w.sum() ** 2, one, 1.0 - ssim)
    return c.clamp(0.0, 1.0)


def _textbook_cost(r: Tensor, s: Tensor, m: Tensor, n: Tensor, w: Tensor,
                   cost: str, window: int) -> Tensor:
    """aquaprof.mvs's own costs: the window's mean, variance and
    covariance over the samples it sees (csrc/mvs/cpu/cost_math.h)."""
    torch = torch_module()
    one = torch.ones((), dtype=torch.float64, device=r.device)
    sr, ss = window_sum(r * m, w), window_sum(s * m, w)
    srr, sss = window_sum(r * r * m, w), window_sum(s * s * m, w)
    srs = window_sum(r * s * m, w)
    if cost == "ncc":
        full = float(window * window)
        vr, vs = n * srr - sr * sr, n * sss - ss * ss
        least = NCC_MIN_VARIANCE * n * n
        flat = (n < full / 2) | (vr < least) | (vs < least)
        # a flat window's denominator replaced, so that no gradient
        # passes through a square root of zero
        denominator = torch.sqrt(torch.where(flat, one, vr * vs))
        ncc = ((n * srs - sr * ss) / denominator).clamp(-1.0, 1.0)
        return torch.where(flat, one, 1.0 - ncc)
    few = n < 0.5
    inv = 1.0 / torch.where(few, one, n)
    mr, ms = sr * inv, ss * inv
    vr, vs = srr * inv - mr * mr, sss * inv - ms * ms
    cov = srs * inv - mr * ms
    ssim = ((2 * mr * ms + SSIM_C1) * (2 * cov + SSIM_C2)) / (
        (mr * mr + ms * ms + SSIM_C1) * (vr + vs + SSIM_C2))
    return torch.where(few, one, (1.0 - ssim).clamp(0.0, 1.0))


def sample(image: Tensor, pixels: Tensor, valid: Tensor,
           outside: str) -> Tensor:
    """image (H, W) sampled bilinearly (float64) at pixels (H * W, 2)
    (u, v), as float64 (H, W): NaN where not valid or not finite; off the
    image, blended with zeros (``outside="zero"``, grid_sample's zero
    padding, AquaMVS's) or NaN beyond 1e-3 px (``"nan"``, the kernels'
    textbook warp, the border's value within that slack)."""
    torch = torch_module()
    h, w = image.shape
    uv = pixels.detach().to(device=image.device, dtype=torch.float64)
    ok = valid.to(device=image.device, dtype=torch.bool).reshape(-1) \
        & torch.isfinite(uv).all(1)
    uv = torch.where(ok[:, None], uv, torch.zeros((), dtype=torch.float64,
                                                  device=image.device))
    scale = torch.tensor([2.0 / (w - 1), 2.0 / (h - 1)],
                         dtype=torch.float64, device=image.device)
    grid = (uv * scale - 1.0).reshape(1, h, w, 2)
    warped = torch.nn.functional.grid_sample(
        image.double()[None, None], grid, mode="bilinear",
        padding_mode="zeros" if outside == "zero" else "border",
        align_corners=True)[0, 0]
    if outside == "nan":
        u, v = uv[:, 0], uv[:, 1]
        ok = ok & (u >= -BORDER_SLACK) & (u <= w - 1 + BORDER_SLACK) \
            & (v >= -BORDER_SLACK) & (v <= h - 1 + BORDER_SLACK)
    return warped.masked_fill(~ok.reshape(h, w), float("nan"))


def pixel_grid(h: int, w: int, device: Any) -> Tensor:
    """Every pixel's (u, v), float32 (H * W, 2), row by row: the grid
    AquaMVS casts its reference rays from."""
    torch = torch_module()
    v, u = torch.meshgrid(torch.arange(h, dtype=torch.float32,
                                       device=device),
                          torch.arange(w, dtype=torch.float32,
                                       device=device), indexing="ij")
    return torch.stack([u.reshape(-1), v.reshape(-1)], dim=-1)


def sweep(cast: Cast, projects: Sequence[Project], ref: Tensor,
          srcs: List[Tensor], depths: np.ndarray, cost: str, window: int,
          parity: str, outside: str) -> Tensor:
    """float32 (H, W, D) costs on ref's device, the mean over the views,
    with every sample placed by `cast` and each view's `project`, at each
    depth as given (what a depth <= 0 means is the models' to say)."""
    torch = torch_module()
    h, w = ref.shape
    with torch.no_grad():
        origins, directions = cast(pixel_grid(h, w, ref.device))
        out = torch.empty((h, w, depths.size), dtype=torch.float32,
                         device=ref.device)
        for k, depth in enumerate(depths.tolist()):
            points = origins + depth * directions
            total = torch.zeros((h, w), dtype=torch.float64,
                                device=ref.device)
            for project, src in zip(projects, srcs):
                pixels, valid = project(points)
                warped = sample(src, pixels, valid, outside)
                total += pair_cost(ref.double(), warped, cost, window,
                                   parity)
            out[:, :, k] = (total / len(srcs)).float()
    return out
