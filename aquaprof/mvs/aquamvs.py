"""AquaMVS's dense stage on aquaprof.mvs's kernels: the functions of
``aquamvs.dense`` (its plane sweep, costs and depth-map files) with their
signatures, inputs and returns, so that switching is one import::

    from aquaprof.mvs.aquamvs import plane_sweep_stereo, extract_depth

Inputs are torch tensors on the CPU (they run the C kernels, read without
copies where they are float32 already) or on a CUDA device (the CUDA
kernels); outputs are tensors on the same device (plane_sweep_stereo,
as AquaMVS, moves the frames to its `device` first). Configs are any
objects carrying cost_function ("ncc" or "ssim"), window_size and
num_depths.

Projection models are honoured, never ignored. AquaMVS's own
RefractiveProjectionModel, and any object that carries K, R, t, water_z,
normal, n_air and n_water alone (tensors, arrays or numbers), run the
kernels with that geometry computed natively in float64. A model whose
method AquaMVS calls (the reference's cast_ray, a source's project) is
its own (AquaMVS's projection protocol implemented by the user, or a
subclass overriding it) runs through that method: the samples are
placed where the model says and the costs computed in torch (float64),
as AquaMVS does, a few times slower than the kernels.

By default (``parity="aquamvs"``) the costs are AquaMVS's: window
statistics centred on each pixel's own window mean, zero padding at the
image border, AquaMVS's half-window rule and epsilon, and its depth
extraction (the first step taken for all, epsilon 1e-8). With
``parity="textbook"`` the costs are aquaprof.mvs's own (textbook window
statistics over the samples a view sees): more accurate, see
docs/mvs.md, "Coming from AquaMVS". `outside` says what a sample off the
source image is, whatever the parity: "zero" (blended with zeros, as
AquaMVS's grid_sample) or "nan" (unseen); by default the parity's own,
"zero" for "aquamvs" and "nan" for "textbook".

Like AquaMVS, depth hypotheses may start at 0 (or below): such a plane's
points are not under the water, no view sees them, and their costs are
1.0. The geometry is AquaMVS's (``tilt="aquamvs"``): rays meet the level
plane z = water_z and are bent there about the model's normal as given,
points project through the level surface whatever the normal says
(TiltedSurfaceWarning once when it is not (0, 0, -1)); ``tilt="exact"``
refracts at the tilted surface the normal gives, rays and projections
alike."""
from __future__ import annotations

from pathlib import Path
from typing import (Callable, Dict, List, Mapping, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from .. import _mvs
from . import _aquamvs_torch, plane_sweep
from ._aquamvs_inputs import (COSTS, TILTS, Geometry, Tensor,
                              TiltedSurfaceWarning, check_choice,
                              check_parity, config_values, depths_host,
                              geometry, gray, host_array, is_int,
                              outside_for, torch_module)

__all__ = ["TiltedSurfaceWarning", "aggregate_costs", "build_cost_volume",
           "compute_cost", "compute_ncc", "compute_ssim", "extract_depth",
           "generate_depth_hypotheses", "load_depth_map",
           "plane_sweep_stereo", "save_depth_map", "warp_source_image"]

#: aquaprof.mvs's samples count as seen up to this far outside the image,
#: taking the border's value (AP_BORDER_SLACK in csrc/mvs/cpu/cost_math.h)
BORDER_SLACK = _aquamvs_torch.BORDER_SLACK
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
                      *, parity: str = "aquamvs",
                      outside: Optional[str] = None,
                      tilt: str = "aquamvs") -> Tensor:
    """src_image (gray (H, W), or BGR) resampled at the reference pixels
    pixel_grid ((H * W, 2) as (u, v)) at one ray depth: float32 (H, W) on
    src_image's device, NaN where the point does not project into the
    source camera. Bilinear, in float64. A sample off the image:
    outside=None (the default) takes the parity's way, "zero" with
    parity="aquamvs" (blended with zeros, grid_sample's zero padding, as
    AquaMVS) and "nan" with "textbook" (NaN beyond 1e-3 px of slack, as
    aquaprof.mvs.warp); or say outside="zero" or "nan". Native geometry
    runs on the CPU; a model's own cast_ray and project on its device."""
    torch = torch_module()
    parity = check_parity(parity)
    outside = outside_for(outside, parity)
    ref_geo = geometry(ref_model, "ref_model", "ref", tilt)
    src_geo = geometry(src_model, "src_model", "src", tilt)
    image = gray(src_image, "src_image")
    h, w = image.shape
    grid = host_array(pixel_grid)
    if grid.shape != (h * w, 2) or grid.dtype.kind not in "fiu":
        raise ValueError(f"pixel_grid must hold one (u, v) per pixel of "
                         f"src_image, ({h * w}, 2) numbers, got "
                         f"{grid.dtype} {grid.shape}")
    d = float(depths_host([depth], "depth")[0])
    native = ref_geo.camera is not None and src_geo.camera is not None
    if native and not d > 0:   # no point of the plane is under the water
        return torch.full((h, w), float("nan"), device=image.device)
    pixels = (torch.from_numpy(grid) if native else
              torch.as_tensor(pixel_grid).detach())
    with torch.no_grad():
        origins, directions = _cast(ref_geo, [src_geo])(pixels)
        at, valid = src_geo.project(origins + d * directions)
        return _aquamvs_torch.sample(image, at, valid, outside).float()


def _window(value: object, name: str) -> int:
    if not (is_int(value) and int(value) >= 3  # type: ignore[call-overload]
            and int(value) % 2 == 1):  # type: ignore[call-overload]
        raise ValueError(f"{name} must be an odd int >= 3, got {value!r}")
    return int(value)  # type: ignore[call-overload]


def _float_tensor(value: object, name: str, dims: str) -> None:
    """ValueError unless value is a floating-point tensor with as many
    dimensions as `dims` ("(H, W)") names."""
    torch = torch_module()
    if not isinstance(value, torch.Tensor) or \
            value.ndim != dims.count(",") + 1 or \
            not value.is_floating_point():
        got = (f"{value.dtype} {tuple(value.shape)}"
               if isinstance(value, torch.Tensor) else type(value).__name__)
        raise ValueError(f"{name} must be a float {dims} tensor, got {got}")


def _pair(ref: Tensor, src: Tensor) -> None:
    _float_tensor(ref, "ref", "(H, W)")
    _float_tensor(src, "src", "(H, W)")
    if ref.shape != src.shape or ref.device != src.device:
        raise ValueError(f"ref and src must be one shape on one device, "
                         f"got {tuple(ref.shape)} on {ref.device} and "
                         f"{tuple(src.shape)} on {src.device}")


def compute_cost(ref: Tensor, src: Tensor, cost_function: str = "ncc",
                 window_size: int = 11, *, parity: str = "aquamvs"
                 ) -> Tensor:
    """The cost map (H, W) of ref against the warped source src (NaN
    where unseen), lower is better, in ref's dtype: 1 - NCC over a box
    window (in [0, 2]) or 1 - SSIM over a Gaussian one (sigma 1.5, in
    [0, 1]), 1.0 where too few samples are seen. parity="aquamvs" (the
    default) gives AquaMVS's costs, "textbook" aquaprof.mvs's own
    (docs/mvs.md). Differentiable (torch autograd), computed in float64,
    any window (odd, >= 3)."""
    if cost_function not in COSTS:
        raise ValueError(f"Unknown cost function: {cost_function!r}. "
                         f"Expected 'ncc' or 'ssim'.")
    parity = check_parity(parity)
    window = _window(window_size, "window_size")
    _pair(ref, src)
    return _aquamvs_torch.pair_cost(ref, src, str(cost_function), window,
                                    parity)


def compute_ncc(ref: Tensor, src: Tensor, window_size: int = 11, *,
                parity: str = "aquamvs") -> Tensor:
    """compute_cost(ref, src, "ncc", window_size): 1 - NCC, in [0, 2]."""
    return compute_cost(ref, src, "ncc", window_size, parity=parity)


def compute_ssim(ref: Tensor, src: Tensor, window_size: int = 11, *,
                 parity: str = "aquamvs") -> Tensor:
    """compute_cost(ref, src, "ssim", window_size): 1 - SSIM, in [0, 1]."""
    return compute_cost(ref, src, "ssim", window_size, parity=parity)


def aggregate_costs(costs: Sequence[Tensor]) -> Tensor:
    """The mean of the views' cost maps (each (H, W)), differentiable."""
    torch = torch_module()
    if isinstance(costs, torch.Tensor) or not isinstance(costs, Sequence) \
            or not costs:
        raise ValueError("costs must be a non-empty list of (H, W) cost "
                         "maps")
    return torch.stack(list(costs), dim=0).mean(dim=0)


def build_cost_volume(ref_model: object, src_models: Sequence[object],
                      ref_image: Tensor, src_images: Sequence[Tensor],
                      depths: Tensor, config: object, *,
                      parity: str = "aquamvs",
                      outside: Optional[str] = None,
                      tilt: str = "aquamvs") -> Tensor:
    """float32 (H, W, D) costs on ref_image's device, lower is better: the
    mean over source views at each depth hypothesis (any order, any
    spacing; those <= 0 cost 1.0). Images gray (H, W) in [0, 1] (or BGR)
    on one device; config.cost_function and config.window_size (odd,
    >= 3; wider than 63 runs in torch). A sample off a source image:
    outside=None (the default) takes the parity's way ("zero" for
    "aquamvs", "nan" for "textbook"); the other runs in torch."""
    parity = check_parity(parity)
    outside = outside_for(outside, parity)
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
    return _sweep(geometry(ref_model, "ref_model", "ref", tilt),
                  [geometry(m, f"src_models[{i}]", "src", tilt)
                   for i, m in enumerate(src_models)],
                  ref, srcs, [f"src_images[{i}]" for i in range(len(srcs))],
                  depths_host(depths), cost, window, parity, outside)


def _sweep(ref_geo: Geometry, src_geos: List[Geometry], ref: Tensor,
           srcs: List[Tensor], names: List[str], depths: np.ndarray,
           cost: str, window: int, parity: str, outside: str) -> Tensor:
    """The kernels where they compute what is asked (the drop-in's own
    geometry, a window they hold, the parity's own outside), else the
    torch path through the models' methods."""
    for src, name in zip(srcs, names):
        if src.shape != ref.shape:
            raise ValueError(f"{name} is {tuple(src.shape)}, ref_image "
                             f"{tuple(ref.shape)}")
        if src.device != ref.device:
            raise ValueError(f"{name} is on {src.device}, ref_image on "
                             f"{ref.device}: all images on one device")
    kernels = (all(g.camera is not None for g in [ref_geo, *src_geos])
               and window <= _mvs.MAX_WINDOW
               and outside == outside_for(None, parity))
    if not kernels:
        return _aquamvs_torch.sweep(_cast(ref_geo, src_geos),
                                    [g.project for g in src_geos], ref,
                                    srcs, depths, cost, window, parity,
                                    outside)
    return _kernel_sweep(ref_geo, src_geos, ref, srcs, depths, cost, window,
                         parity)


def _cast(ref_geo: Geometry, src_geos: List[Geometry]
          ) -> Callable[[Tensor], Tuple[Tensor, Tensor]]:
    """The reference's cast for the torch path: where a source's own
    project() receives the points of a natively cast ray, they come in
    float32, as AquaMVS's float32 rays give them to it."""
    if ref_geo.camera is None or all(g.camera is not None
                                     for g in src_geos):
        return ref_geo.cast

    def float32_cast(pixels: Tensor) -> Tuple[Tensor, Tensor]:
        origins, directions = ref_geo.cast(pixels)
        return origins.float(), directions.float()
    return float32_cast


def _kernel_sweep(ref_geo: Geometry, src_geos: List[Geometry], ref: Tensor,
                  srcs: List[Tensor], depths: np.ndarray, cost: str,
                  window: int, parity: str) -> Tensor:
    """The native sweep over the depths > 0, in increasing order, once
    each; the volume laid out in the order asked for."""
    torch = torch_module()
    ref_cam = ref_geo.camera
    # every camera is native here (_sweep's test)
    src_cams = [g.camera for g in src_geos if g.camera is not None]
    assert ref_cam is not None and len(src_cams) == len(src_geos)
    positive = depths > 0
    planes = np.unique(depths[positive])
    as_given = planes.size == depths.size and np.array_equal(planes, depths)
    if planes.size:
        if ref.is_cuda:
            volume = plane_sweep.build_cost_volume(
                ref.contiguous(), torch.stack(srcs), ref_cam,
                src_cams, planes, cost=cost, window=window, parity=parity)
        else:   # float32 tensors read as NumPy arrays over their memory
            volume = torch.from_numpy(plane_sweep.build_cost_volume(
                ref.numpy(), [s.numpy() for s in srcs], ref_cam,
                src_cams, planes, cost=cost, window=window, parity=parity))
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
                       device: object = "cpu", *, parity: str = "aquamvs",
                       outside: Optional[str] = None, tilt: str = "aquamvs"
                       ) -> Dict[str, Union[Tensor, str]]:
    """AquaMVS's entry point for one reference camera: config.num_depths
    hypotheses over depth_range, the frames ((H, W, 3) uint8 or float32
    BGR) converted to gray on `device`, the cost volume built
    (build_cost_volume, whose keywords it takes: outside=None samples off
    a source as the parity does, zero padding for "aquamvs").

    Returns {"cost_volume": float32 (H, W, D), "depths": float32 (D,),
    "ref_name": ref_name}, tensors on `device`."""
    parity = check_parity(parity)
    outside = outside_for(outside, parity)
    check_choice(tilt, "tilt", TILTS)
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
    volume = _sweep(geometry(ref_model, "ref_model", "ref", tilt),
                    [geometry(src_models[n], f"src_models[{n!r}]", "src",
                              tilt) for n in src_names],
                    ref, srcs, [f"src_images[{n!r}]" for n in src_names],
                    depths_host(depths), cost, window, parity, outside)
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
    _float_tensor(cost_volume, "cost_volume", "(H, W, D)")
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


def save_depth_map(depth_map: Tensor, confidence: Tensor,
                   path: Union[str, Path]) -> None:
    """depth_map and confidence ((H, W) tensors on any device, or arrays)
    to an .npz file as AquaMVS writes it: np.savez with the arrays
    "depth" and "confidence" (numpy adds ".npz" to a path without it)."""
    depth, conf = host_array(depth_map), host_array(confidence)
    if depth.ndim != 2 or depth.shape != conf.shape:
        raise ValueError(f"depth_map and confidence must be (H, W) of one "
                         f"shape, got {depth.shape} and {conf.shape}")
    np.savez(path, depth=depth, confidence=conf)


def load_depth_map(path: Union[str, Path], device: object = "cpu"
                   ) -> Tuple[Tensor, Tensor]:
    """The (depth_map, confidence) tensors on `device` of an .npz file
    that AquaMVS's save_depth_map (or this module's) wrote."""
    torch = torch_module()
    with np.load(path) as data:     # no pickles: arrays only
        missing = [k for k in ("depth", "confidence") if k not in data]
        if missing:
            raise ValueError(f"{path} holds no {' or '.join(missing)} "
                             f"array: not a depth map file (it holds "
                             f"{sorted(data.files)})")
        depth, confidence = data["depth"], data["confidence"]
    return (torch.from_numpy(depth).to(device),
            torch.from_numpy(confidence).to(device))
