"""AquaMVS's dense stage on aquaprof.mvs's kernels: the functions of
``aquamvs.dense.plane_sweep`` with their signatures, inputs and returns,
so that switching is one import::

    from aquaprof.mvs.aquamvs import plane_sweep_stereo, extract_depth

Inputs are torch tensors on the CPU (they run the C kernels, read without
copies where they are float32 already) or on a CUDA device (the CUDA
kernels); outputs are tensors on the same device (plane_sweep_stereo,
as AquaMVS, moves the frames to its `device` first). Projection models are
any objects carrying K, R, t, water_z, normal, n_air and n_water (tensors,
arrays or numbers); configs any objects carrying cost_function ("ncc" or
"ssim"), window_size and num_depths.

By default (``parity="aquamvs"``) the costs are AquaMVS's: window
statistics centred on each pixel's own window mean, zero padding at the
image border, AquaMVS's half-window rule and epsilon, and its depth
extraction (the first step taken for all, epsilon 1e-8). With
``parity="textbook"`` the costs are aquaprof.mvs's own (textbook window
statistics over the samples a view sees): more accurate, see
docs/mvs.md, "Coming from AquaMVS".

Like AquaMVS, depth hypotheses may start at 0 (or below): such a plane's
points are not under the water, no view sees them, and their costs are
1.0. The geometry is AquaMVS's: rays meet the level plane z = water_z
and are bent there about the model's normal as given, points project
through the level surface whatever the normal says
(TiltedSurfaceWarning once when it is not (0, 0, -1))."""
from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple, Union

import numpy as np

from . import plane_sweep
from ._aquamvs_inputs import (Tensor, TiltedSurfaceWarning, camera,
                              check_parity, config_values, depths_host, gray,
                              host_array, is_int, torch_module)
from .camera import Camera

__all__ = ["TiltedSurfaceWarning", "build_cost_volume", "extract_depth",
           "generate_depth_hypotheses", "plane_sweep_stereo",
           "warp_source_image"]

#: aquaprof.mvs's samples count as seen up to this far outside the image,
#: taking the border's value (AP_BORDER_SLACK in csrc/kernels/cost_math.h)
BORDER_SLACK = 1e-3
#: AquaMVS's guard against dividing by zero in depth extraction
EPS = 1e-8


def generate_depth_hypotheses(d_min: float, d_max: float, num_depths: int,
                              device: object = "cpu") -> Tensor:
    """num_depths float32 ray depths from d_min to d_max, both included,
    evenly spaced (torch.linspace, as AquaMVS): descending where d_max <
    d_min, all one where they are equal."""
    torch = torch_module()
    lo, hi = (float(x) for x in depths_host([d_min, d_max], "depth range"))
    if not (is_int(num_depths) and num_depths >= 1):
        raise ValueError(f"num_depths must be an int >= 1, got "
                         f"{num_depths!r}")
    return torch.linspace(lo, hi, int(num_depths), device=device)


def warp_source_image(ref_model: object, src_model: object,
                      src_image: Tensor, depth: float, pixel_grid: Tensor,
                      *, parity: str = "aquamvs") -> Tensor:
    """src_image (gray (H, W), or BGR) resampled at the reference pixels
    pixel_grid ((H * W, 2) as (u, v)) at one ray depth: float32 (H, W) on
    src_image's device, NaN where the point does not project into the
    source camera. Bilinear; a sample off the image blends with zeros
    (``parity="aquamvs"``, as grid_sample's zero padding), or is NaN
    beyond aquaprof.mvs's 1e-3 px of slack (``"textbook"``, as
    aquaprof.mvs.warp). The geometry runs on the CPU."""
    torch = torch_module()
    parity = check_parity(parity)
    ref_cam = camera(ref_model, "ref_model")
    src_cam = camera(src_model, "src_model")
    image = gray(src_image, "src_image")
    h, w = image.shape
    grid = host_array(pixel_grid)
    if grid.shape != (h * w, 2) or grid.dtype.kind not in "fiu":
        raise ValueError(f"pixel_grid must hold one (u, v) per pixel of "
                         f"src_image, ({h * w}, 2) numbers, got "
                         f"{grid.dtype} {grid.shape}")
    d = float(depths_host([depth], "depth")[0])
    if not d > 0:   # no point of the plane is under the water
        return torch.full((h, w), float("nan"), device=image.device)
    origins, directions, _ = ref_cam.cast_rays(grid)
    pixels, valid = src_cam.project(origins + d * directions)
    scale = np.array([2.0 / (w - 1), 2.0 / (h - 1)])
    normalised = np.where(valid[:, None], pixels * scale - 1.0, 2.0)
    sample_at = torch.from_numpy(normalised.astype(np.float32)) \
        .reshape(1, h, w, 2).to(image.device)
    warped = torch.nn.functional.grid_sample(
        image[None, None], sample_at, mode="bilinear",
        padding_mode="zeros" if parity == "aquamvs" else "border",
        align_corners=True)[0, 0]
    if parity == "textbook":
        u, v = pixels[:, 0], pixels[:, 1]
        with np.errstate(invalid="ignore"):
            valid &= ((u >= -BORDER_SLACK) & (u <= w - 1 + BORDER_SLACK)
                      & (v >= -BORDER_SLACK) & (v <= h - 1 + BORDER_SLACK))
    unseen = torch.from_numpy(~valid).reshape(h, w).to(image.device)
    return warped.masked_fill(unseen, float("nan"))


def build_cost_volume(ref_model: object, src_models: Sequence[object],
                      ref_image: Tensor, src_images: Sequence[Tensor],
                      depths: Tensor, config: object, *,
                      parity: str = "aquamvs") -> Tensor:
    """float32 (H, W, D) costs on ref_image's device, lower is better: the
    mean over source views at each depth hypothesis (any order, any
    spacing; those <= 0 cost 1.0). Images gray (H, W) in [0, 1] (or BGR)
    on one device; config.cost_function and config.window_size."""
    parity = check_parity(parity)
    cost, window = config_values(config, ("cost_function", "window_size"))
    if getattr(src_images, "ndim", 0) >= 3:     # stacked: a view a row
        src_images = list(src_images)
    if isinstance(src_models, (str, bytes, Mapping)) or not isinstance(
            src_models, Sequence):
        raise TypeError(f"src_models must be a list of projection models, "
                        f"got {type(src_models).__name__}")
    if isinstance(src_images, Mapping) or not isinstance(src_images,
                                                         Sequence):
        raise TypeError(f"src_images must be a list of images, got "
                        f"{type(src_images).__name__}")
    if not src_models or len(src_models) != len(src_images):
        raise ValueError(f"src_models and src_images must hold one entry "
                         f"per source view, at least one: got "
                         f"{len(src_models)} and {len(src_images)}")
    ref = gray(ref_image, "ref_image")
    srcs = [gray(s, f"src_images[{i}]") for i, s in enumerate(src_images)]
    return _sweep(camera(ref_model, "ref_model"),
                  [camera(m, f"src_models[{i}]")
                   for i, m in enumerate(src_models)],
                  ref, srcs, [f"src_images[{i}]" for i in range(len(srcs))],
                  depths_host(depths), cost, window, parity)


def _sweep(ref_cam: Camera, src_cams: List[Camera], ref: Tensor,
           srcs: List[Tensor], names: List[str], depths: np.ndarray,
           cost: str, window: int, parity: str) -> Tensor:
    """The native sweep over the depths > 0, in increasing order, once
    each; the volume laid out in the order asked for."""
    torch = torch_module()
    for src, name in zip(srcs, names):
        if src.shape != ref.shape:
            raise ValueError(f"{name} is {tuple(src.shape)}, ref_image "
                             f"{tuple(ref.shape)}")
        if src.device != ref.device:
            raise ValueError(f"{name} is on {src.device}, ref_image on "
                             f"{ref.device}: all images on one device")
    positive = depths > 0
    planes = np.unique(depths[positive])
    as_given = planes.size == depths.size and np.array_equal(planes, depths)
    if planes.size:
        if ref.is_cuda:
            volume = plane_sweep.build_cost_volume(
                ref.contiguous(), torch.stack(srcs), ref_cam, src_cams,
                planes, cost=cost, window=window, parity=parity)
        else:   # float32 tensors read as NumPy arrays over their memory
            volume = torch.from_numpy(plane_sweep.build_cost_volume(
                ref.numpy(), [s.numpy() for s in srcs], ref_cam, src_cams,
                planes, cost=cost, window=window, parity=parity))
        if as_given:
            return volume
    out = torch.ones(tuple(ref.shape) + (depths.size,), dtype=torch.float32,
                     device=ref.device)
    if planes.size:
        where = torch.from_numpy(np.flatnonzero(positive)).to(ref.device)
        plane = torch.from_numpy(np.searchsorted(planes, depths[positive])) \
            .to(ref.device)
        out[:, :, where] = volume[:, :, plane]
    return out


def plane_sweep_stereo(ref_name: str, ref_model: object,
                       src_names: Sequence[str],
                       src_models: Mapping[str, object], ref_image: Tensor,
                       src_images: Mapping[str, Tensor],
                       depth_range: Tuple[float, float], config: object,
                       device: object = "cpu", *, parity: str = "aquamvs"
                       ) -> Dict[str, Union[Tensor, str]]:
    """AquaMVS's entry point for one reference camera: config.num_depths
    hypotheses over depth_range, the frames ((H, W, 3) uint8 or float32
    BGR) converted to gray on `device`, the cost volume built.

    Returns {"cost_volume": float32 (H, W, D), "depths": float32 (D,),
    "ref_name": ref_name}, tensors on `device`."""
    parity = check_parity(parity)
    cost, window, num_depths = config_values(
        config, ("cost_function", "window_size", "num_depths"))
    if isinstance(src_names, (str, bytes)) or not isinstance(src_names,
                                                             Sequence):
        raise TypeError(f"src_names must be a list of camera names, got "
                        f"{type(src_names).__name__}")
    if not src_names:
        raise ValueError("src_names must name at least one source camera")
    for table, what in ((src_models, "src_models"),
                        (src_images, "src_images")):
        if not isinstance(table, Mapping):
            raise TypeError(f"{what} must map camera names to entries, got "
                            f"{type(table).__name__}")
        absent = [n for n in src_names if n not in table]
        if absent:
            raise KeyError(f"{what} has no entry for "
                           f"{', '.join(map(repr, absent))}")
    if len(tuple(depth_range)) != 2:
        raise ValueError(f"depth_range must be (d_min, d_max), got "
                         f"{depth_range!r}")
    depths = generate_depth_hypotheses(depth_range[0], depth_range[1],
                                       num_depths, device=device)
    ref = gray(ref_image, "ref_image", device)
    srcs = [gray(src_images[n], f"src_images[{n!r}]", device)
            for n in src_names]
    volume = _sweep(camera(ref_model, "ref_model"),
                    [camera(src_models[n], f"src_models[{n!r}]")
                     for n in src_names],
                    ref, srcs, [f"src_images[{n!r}]" for n in src_names],
                    depths_host(depths), cost, window, parity)
    return {"cost_volume": volume, "depths": depths, "ref_name": ref_name}


def extract_depth(cost_volume: Tensor, depths: Tensor
                  ) -> Tuple[Tensor, Tensor]:
    """AquaMVS's depth extraction: winner-take-all, then a parabola
    through the best cost and its neighbours (offset clamped to half a
    step) scaled by depths[1] - depths[0], the step taken as uniform even
    where it is not; NaN depth and 0 confidence at the first and last
    hypothesis; confidence sqrt((1 - clamp(best, 0, 1)) * clamp(1 - best /
    (mean + 1e-8), 0, 1)). Tensors on cost_volume's device."""
    torch = torch_module()
    if not isinstance(cost_volume, torch.Tensor) or cost_volume.ndim != 3 \
            or not cost_volume.is_floating_point():
        got = (f"{cost_volume.dtype} {tuple(cost_volume.shape)}"
               if isinstance(cost_volume, torch.Tensor)
               else type(cost_volume).__name__)
        raise ValueError(f"cost_volume must be a float (H, W, D) tensor, "
                         f"got {got}")
    count = cost_volume.shape[2]
    hypotheses = torch.as_tensor(depths, device=cost_volume.device)
    if hypotheses.ndim != 1 or hypotheses.shape[0] != count:
        raise ValueError(f"depths must be (D,) with D = {count}, the "
                         f"cost_volume's planes, got "
                         f"{tuple(hypotheses.shape)}")
    if count < 2:
        raise ValueError("extract_depth needs at least 2 depth hypotheses: "
                         "the step is depths[1] - depths[0]")
    best = cost_volume.argmin(dim=2, keepdim=True)
    at_best = cost_volume.gather(2, best)
    below = cost_volume.gather(2, (best - 1).clamp(min=0))
    above = cost_volume.gather(2, (best + 1).clamp(max=count - 1))
    curvature = below - 2.0 * at_best + above + EPS
    offset = (0.5 * (below - above) / curvature).clamp(-0.5, 0.5)
    step = hypotheses[1] - hypotheses[0]
    best, at_best, offset = best[..., 0], at_best[..., 0], offset[..., 0]
    depth = hypotheses[best] + offset * step
    low_cost = 1.0 - at_best.clamp(0.0, 1.0)
    distinct = (1.0 - at_best / (cost_volume.mean(dim=2) + EPS)).clamp(0.0,
                                                                       1.0)
    confidence = torch.sqrt(low_cost * distinct)
    edge = (best == 0) | (best == count - 1)
    return (depth.masked_fill(edge, float("nan")),
            confidence.masked_fill(edge, 0.0))
