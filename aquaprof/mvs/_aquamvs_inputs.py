"""What AquaMVS's dense stage is given, read into the plane-sweep kit's
terms: projection models into native Cameras, configs into a cost and a
window, BGR frames into gray tensors, depth hypotheses into float64.

AquaMVS's inputs are duck-typed (any object with the right attributes),
so every reader names what it missed and the object's type."""
from __future__ import annotations

import sys
import warnings
from types import FrameType
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .camera import Camera
from .plane_sweep import PARITIES

#: a torch tensor: torch is optional, so the type checker cannot name it
Tensor = Any

MODEL_ATTRIBUTES = ("K", "R", "t", "water_z", "normal", "n_air", "n_water")
COSTS = ("ncc", "ssim")
#: where AquaMVS's own projection model is defined: a model whose method
#: is this class's is computed natively, any other runs as it is
AQUAMVS_MODEL = ("aquamvs.projection.refractive", "RefractiveProjectionModel")
#: the method a reference's model is asked for, and a source's
ROLE_METHOD = {"ref": "cast_ray", "src": "project"}
#: how a surface whose normal is not (0, 0, -1) is met: AquaMVS's way
#: (level, rays bent about the normal as given) or refracted exactly
TILTS = ("aquamvs", "exact")
#: what a sample off the source image is: zero padding (AquaMVS's) or NaN
OUTSIDES = ("zero", "nan")
#: a normal whose horizontal part, and whose length's difference from 1,
#: are under this share of its length is (0, 0, -1): one computed in
#: float32 (rotated from (0, 0, -1), say) is, up to its rounding
LEVEL_TOLERANCE = 1e-6


class TiltedSurfaceWarning(UserWarning):
    """A projection model's normal is not (0, 0, -1): AquaMVS (and so
    this drop-in) meets and projects through a level surface, but bends
    the rays it casts about that normal."""


_tilt_warned = False


def torch_module() -> Any:
    """torch, imported on first use: aquaprof does not need it otherwise."""
    try:
        import torch
    except ImportError:
        raise ImportError("aquaprof.mvs.aquamvs takes and returns torch "
                          "tensors, as AquaMVS does: install torch (pip "
                          "install torch), or use aquaprof.mvs's NumPy "
                          "API") from None
    return torch


def check_parity(parity: object) -> str:
    """parity, one of the native build_cost_volume's, checked before any
    work is done."""
    if parity not in PARITIES:
        raise ValueError(f"parity must be one of {sorted(PARITIES)}, got "
                         f"{parity!r}")
    return str(parity)


def check_choice(value: object, name: str, choices: Sequence[str]) -> str:
    """value, one of choices, checked before any work is done."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got "
                         f"{value!r}")
    return str(value)


def outside_for(outside: object, parity: str) -> str:
    """The sampling off the source image: as asked, else the parity's own
    (zero padding for "aquamvs", NaN for "textbook")."""
    if outside is None:
        return "zero" if parity == "aquamvs" else "nan"
    return check_choice(outside, "outside", OUTSIDES)


def host_array(value: object) -> np.ndarray:
    """A tensor (any device, requiring grad or not), array, sequence (of
    tensors too) or number as an array."""
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if isinstance(value, (list, tuple)):
        return np.asarray([host_array(v) for v in value])
    return np.asarray(value)


def _host(value: object) -> np.ndarray:
    """A tensor (any device), array or number as a float64 array."""
    try:
        return np.asarray(host_array(value), dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"must be numbers, got {type(value).__name__}") \
            from None


class Geometry(NamedTuple):
    """How the drop-in places a model's samples: through the native
    camera (`camera`, whose cast and project the torch path uses too), or
    through the model's own methods (`camera` None)."""
    camera: Optional[Camera]
    cast: Callable[[Tensor], Tuple[Tensor, Tensor]]
    project: Callable[[Tensor], Tuple[Tensor, Tensor]]


def _own_method(model: object, method: str) -> Optional[Callable[..., Any]]:
    """The model's `method` where it is callable and not AquaMVS's own
    RefractiveProjectionModel's (set on the instance, or defined by a
    class of the user's, a subclass's override included); else None."""
    bound = getattr(model, method, None)
    if not callable(bound):
        return None
    if method in getattr(model, "__dict__", {}):
        return bound
    defined = getattr(type(model), method, None)
    home = (getattr(defined, "__module__", None),
            getattr(defined, "__qualname__", "").rsplit(".", 1)[0])
    return None if home == AQUAMVS_MODEL else bound


def geometry(model: object, name: str, role: str,
             tilt: str = "aquamvs") -> Geometry:
    """The geometry of a model as AquaMVS uses it in `role` ("ref": its
    cast_ray, "src": its project). A model whose method there is its own
    (AquaMVS's projection protocol: a pinhole, a subclass overriding it)
    is run through that method; AquaMVS's RefractiveProjectionModel, and
    any object that carries the attributes alone, natively (camera())."""
    torch = torch_module()
    method = ROLE_METHOD[role]
    own = _own_method(model, method)
    if own is not None:
        checked = _checked(own, f"{name}.{method}", 3 if role == "ref"
                           else 2)
        return Geometry(None,
                        checked if role == "ref" else _refused(name,
                                                               "cast_ray"),
                        checked if role == "src" else _refused(name,
                                                               "project"))
    cam = camera(model, name, tilt)

    def native_cast(pixels: Tensor) -> Tuple[Tensor, Tensor]:
        origins, directions, _ = cam.cast_rays(host_array(pixels))
        return (torch.from_numpy(origins).to(pixels.device),
                torch.from_numpy(directions).to(pixels.device))

    def native_project(points: Tensor) -> Tuple[Tensor, Tensor]:
        pixels, valid = cam.project(host_array(points))
        return (torch.from_numpy(pixels).to(points.device),
                torch.from_numpy(valid).to(points.device))
    return Geometry(cam, native_cast, native_project)


def _refused(name: str, method: str
             ) -> Callable[[Tensor], Tuple[Tensor, Tensor]]:
    """A stand-in for the method a role never calls."""
    def never(_: Tensor) -> Tuple[Tensor, Tensor]:
        raise RuntimeError(f"{name}.{method} is not used in this role")
    return never


def _checked(method: Callable[[Tensor], Any], name: str, width: int
             ) -> Callable[[Tensor], Tuple[Tensor, Tensor]]:
    """A model's own method, its returns checked against AquaMVS's
    projection protocol: cast_ray gives origins and directions (N, 3),
    project pixels (N, 2) and a validity mask (N,)."""
    torch = torch_module()
    want = ("origins (N, 3) and directions (N, 3)" if width == 3
            else "pixels (N, 2) and valid (N,)")

    def call(given: Tensor) -> Tuple[Tensor, Tensor]:
        out = method(given)
        n = given.shape[0]
        shapes = ((n, 3), (n, 3)) if width == 3 else ((n, 2), (n,))
        ok = (isinstance(out, (tuple, list)) and len(out) == 2
              and all(isinstance(x, torch.Tensor) and tuple(x.shape) == s
                      for x, s in zip(out, shapes)))
        if not ok:
            got = ", ".join(f"{type(x).__name__} "
                            f"{tuple(getattr(x, 'shape', ()))}"
                            for x in (out if isinstance(out, (tuple, list))
                                      else [out]))
            raise ValueError(f"{name} returned {got} for N = {n}: AquaMVS's "
                             f"projection protocol returns {want} tensors, "
                             f"which the drop-in samples at")
        return out[0], out[1]
    return call


def camera(model: object, name: str, tilt: str = "aquamvs") -> Camera:
    """The native refractive camera of an AquaMVS-style projection model.
    tilt="aquamvs": casting as AquaMVS does (Camera's casts_as_aquamvs):
    its rays meet the plane z = water_z and are bent there about the
    model's normal as given, and points project through the level
    surface; a normal other than (0, 0, -1) is warned about once per
    process (TiltedSurfaceWarning). tilt="exact": refracted at the
    surface the normal gives, rays and projections alike."""
    missing = [a for a in MODEL_ATTRIBUTES if not hasattr(model, a)]
    if missing:
        method = "cast_ray" if name.startswith("ref") else "project"
        raise TypeError(f"{name} ({type(model).__name__}) has no "
                        f"{', '.join(missing)}: a projection model must "
                        f"carry {', '.join(MODEL_ATTRIBUTES)}, or "
                        f"implement AquaMVS's projection protocol (its "
                        f"own {method}(), which the drop-in then calls)")
    values = {}
    for attribute in MODEL_ATTRIBUTES:
        try:
            values[attribute] = _host(getattr(model, attribute))
        except ValueError as e:
            raise ValueError(f"{name}.{attribute} {e}") from None
    exact = check_choice(tilt, "tilt", TILTS) == "exact"
    _check_normal(values["normal"], name)
    if not exact:
        _check_level(values["normal"], name)
    water_z, n_air, n_water = (_scalar(values[a], f"{name}.{a}")
                               for a in ("water_z", "n_air", "n_water"))
    try:
        return Camera(values["K"], values["R"], values["t"],
                      refractive=True, water_z=water_z,
                      normal=values["normal"], n_air=n_air, n_water=n_water,
                      casts_as_aquamvs=not exact)
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None


def _scalar(value: np.ndarray, name: str) -> float:
    if value.size != 1:
        raise ValueError(f"{name} must be one number, got shape "
                         f"{value.shape}")
    return float(value.reshape(()))


def _check_normal(normal: np.ndarray, name: str) -> None:
    if normal.shape != (3,) or not np.isfinite(normal).all():
        raise ValueError(f"{name}.normal must be 3 finite numbers, got "
                         f"{normal.tolist()}")
    if not np.any(normal):
        raise ValueError(f"{name}.normal is the zero vector")


def _check_level(normal: np.ndarray, name: str) -> None:
    global _tilt_warned
    length = float(np.linalg.norm(normal))
    level = (np.hypot(normal[0], normal[1]) <= LEVEL_TOLERANCE * length
             and normal[2] < 0 and abs(length - 1) <= LEVEL_TOLERANCE)
    if level or _tilt_warned:
        return
    message = (
        f"{name}.normal is {normal.tolist()}, not (0, 0, -1): AquaMVS "
        f"meets the plane z = water_z and projects as if the surface "
        f"were level, whatever the normal says, but bends the rays it "
        f"casts about the normal as given (its length too), so that "
        f"its rays and projections disagree; aquaprof.mvs.aquamvs "
        f"does the same, to give its numbers. tilt=\"exact\" (a keyword "
        f"of every drop-in function), like aquaprof.mvs's native API "
        f"(Camera.refractive(..., normal=...)), handles a tilted "
        f"surface throughout. (Warned once per process.)")
    stacklevel, caller = _caller()
    if not _ignored(message, caller):
        _tilt_warned = True
        warnings.warn(message, TiltedSurfaceWarning, stacklevel=stacklevel)


def _caller() -> Tuple[int, Optional[FrameType]]:
    """warnings.warn's stacklevel, from _check_level, for the first frame
    outside this package (the user's call, through any of the drop-in's
    functions and comprehensions), and that frame."""
    frame: Optional[FrameType] = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_globals.get(
            "__name__", "").startswith(__package__ or "aquaprof"):
        frame = frame.f_back
        level += 1
    return level, frame


def _ignored(message: str, caller: Optional[FrameType]) -> bool:
    """Whether the warning filters (the first that matches decides) ignore
    TiltedSurfaceWarning with this message from the caller's line: then
    the once-per-process warning is kept for a call that shows it, not
    spent unseen."""
    module = caller.f_globals.get("__name__", "<string>") if caller else "sys"
    lineno = caller.f_lineno if caller else 0
    # the filters in force: a context's own where warnings keep them so
    # (Python 3.14's context-aware warnings), else the module's list
    filters = getattr(warnings, "_get_filters", lambda: warnings.filters)()
    for action, text, category, where, line in filters:
        if (_matches(text, message)
                and issubclass(TiltedSurfaceWarning, category)
                and _matches(where, module)
                and (line == 0 or line == lineno)):
            return action == "ignore"
    return getattr(warnings, "defaultaction", "default") == "ignore"


def _matches(pattern: Any, text: str) -> bool:
    """A filter's message or module pattern against text: None matches
    anything, a compiled pattern from its start, a string (which
    warnings.filters may hold, as its own default filters do) exactly."""
    if pattern is None:
        return True
    if isinstance(pattern, str):
        return pattern == text
    return bool(pattern.match(text))


def config_values(config: object, names: Sequence[str]) -> Tuple[Any, ...]:
    """config's attributes `names` (of cost_function, window_size,
    num_depths), checked."""
    missing = [a for a in names if not hasattr(config, a)]
    if missing:
        raise TypeError(f"config ({type(config).__name__}) has no "
                        f"{', '.join(missing)}: a dense stereo config must "
                        f"carry {', '.join(names)}")
    out = []
    for attribute in names:
        value = getattr(config, attribute)
        if attribute == "cost_function" and value not in COSTS:
            raise ValueError(f"config.cost_function: unknown cost function "
                             f"{value!r}, expected 'ncc' or 'ssim'")
        if attribute == "window_size" and not (
                is_int(value) and value >= 3 and value % 2 == 1):
            raise ValueError(f"config.window_size must be an odd int >= 3, "
                             f"got {value!r}")
        if attribute == "num_depths" and not (is_int(value) and value >= 1):
            raise ValueError(f"config.num_depths must be an int >= 1, got "
                             f"{value!r}")
        out.append(value if attribute == "cost_function" else int(value))
    return tuple(out)


def is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value,
                                                                   bool)


def gray(image: Tensor, name: str, device: object = None) -> Tensor:
    """An (H, W, 3) BGR frame (uint8, or float already in [0, 1]) or an
    (H, W) gray one, as a float32 (H, W) tensor in [0, 1] on `device`
    (default: the image's own), with AquaMVS's weights
    0.114 B + 0.587 G + 0.299 R computed in the same order, so that the
    bits are AquaMVS's."""
    torch = torch_module()
    if isinstance(image, np.ndarray):
        image = torch.from_numpy(image)
    if not isinstance(image, torch.Tensor):
        raise TypeError(f"{name} must be a torch tensor, got "
                        f"{type(image).__name__}")
    image = image.detach()      # the volume has no gradient to give
    if device is not None:
        image = image.to(device)
    shape = tuple(image.shape)
    kinds = (torch.uint8, torch.float32, torch.float64)
    if image.dtype not in kinds or not (
            len(shape) == 2 or (len(shape) == 3 and shape[2] == 3)):
        raise ValueError(f"{name} must be (H, W, 3) BGR or (H, W) gray, "
                         f"uint8 or float32, got {image.dtype} {shape}")
    if shape[0] < 2 or shape[1] < 2:
        raise ValueError(f"{name} must be at least 2 x 2 pixels, got "
                         f"{shape}")
    if image.dtype == torch.uint8:
        image = image.float() / 255.0
    elif image.dtype == torch.float64:
        image = image.float()
    if len(shape) == 3:
        image = (0.114 * image[..., 0] + 0.587 * image[..., 1]
                 + 0.299 * image[..., 2])
    if not image.is_cuda and not bool(torch.isfinite(image).all()):
        # the GPU is not asked: that would wait for it
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return image


def depths_host(depths: object, name: str = "depths") -> np.ndarray:
    """Depth hypotheses (a tensor on any device, an array, a sequence) as
    float64 (D,), at least one, all finite; any order, any sign."""
    try:
        d = _host(depths)
    except ValueError as e:
        raise ValueError(f"{name} {e}") from None
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D tensor, got shape "
                         f"{d.shape}")
    if not np.isfinite(d).all():
        raise ValueError(f"{name} must be finite")
    return d
