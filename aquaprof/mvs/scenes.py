"""Synthetic underwater scenes with ground truth: a textured surface below
cameras in air, rendered into calibrated views; and accuracy metrics.

World frame: z grows downwards (into the water), cameras at z = 0 look
along +z, the water surface is at z = water_z, the textured surface at
z = depth (+ a sine undulation for the "wavy" scene)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from ._limits import check_pixels
from .camera import Camera

FLAT_DEPTH = 1.178          # m below the cameras: the default scene
WAVE_AMPLITUDE = 0.005      # m
WAVE_LENGTH = 0.05          # m


@dataclass
class Scene:
    """Views of one surface: images[0] is the reference view."""
    kind: str                   # "flat" or "wavy"
    cameras: List[Camera]
    images: List[np.ndarray]    # float32 (H, W) in [0, 1]
    depth: np.ndarray           # float32 (H, W): reference ray depth, NaN
    #: surface z at the plane's rest position (m)
    surface_z: float
    #: radial lens distortion k1 the images were rendered with (0: none);
    #: undistort() removes it
    k1: float = 0.0

    @property
    def ref(self) -> np.ndarray:
        return self.images[0]

    @property
    def ref_cam(self) -> Camera:
        return self.cameras[0]

    def depth_range(self, margin: float = 0.05) -> np.ndarray:
        """The interval of ray depths in the ground truth, widened."""
        valid = self.depth[np.isfinite(self.depth)]
        return np.array([valid.min() - margin, valid.max() + margin])


class _Texture:
    """A band-limited random texture on the surface's (x, y), in [0, 1]:
    sines from 3 to 30 pixels' footprint in wavelength, so that views of
    any resolution see texture they can resolve."""

    def __init__(self, seed: int, footprint: float):
        rng = np.random.default_rng(seed)
        n = 48
        wavelengths = footprint * np.exp(rng.uniform(np.log(3), np.log(30),
                                                     n))
        angles = rng.uniform(0, np.pi, n)
        self.kx = 2 * np.pi * np.cos(angles) / wavelengths
        self.ky = 2 * np.pi * np.sin(angles) / wavelengths
        self.phase = rng.uniform(0, 2 * np.pi, n)
        self.amp = rng.uniform(0.5, 1.0, n) / np.sqrt(n)

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        total = np.zeros_like(x)
        for kx, ky, p, a in zip(self.kx, self.ky, self.phase, self.amp):
            total += a * np.sin(kx * x + ky * y + p)
        return np.clip(0.5 + 0.35 * total, 0.0, 1.0)


def _surface_z(kind: str, z0: float, x: np.ndarray) -> np.ndarray:
    if kind == "flat":
        return np.full_like(x, z0)
    return z0 + WAVE_AMPLITUDE * np.sin(2 * np.pi * x / WAVE_LENGTH)


def _intersect(kind: str, z0: float, origins: np.ndarray,
               directions: np.ndarray) -> np.ndarray:
    """Ray depth s where origin + s * direction meets the surface (NaN if
    the ray misses it): exact for the plane, Newton for the sine."""
    with np.errstate(invalid="ignore", divide="ignore"):
        s = (z0 - origins[:, 2]) / directions[:, 2]
        if kind == "wavy":
            k = 2 * np.pi / WAVE_LENGTH
            for _ in range(20):
                x = origins[:, 0] + s * directions[:, 0]
                g = (origins[:, 2] + s * directions[:, 2]
                     - _surface_z(kind, z0, x))
                dg = directions[:, 2] - WAVE_AMPLITUDE * k * np.cos(k * x) \
                    * directions[:, 0]
                s = s - g / dg
    s[~(s > 0)] = np.nan
    return s


def _radial(K: np.ndarray, pixels: np.ndarray, k1: float,
            inverse: bool) -> np.ndarray:
    """Applies (or with inverse, removes by fixed-point iteration) the
    radial distortion x_d = x_u (1 + k1 |x_u|^2) in normalized coords."""
    f = np.array([K[0, 0], K[1, 1]])
    c = K[:2, 2]
    x = (pixels - c) / f
    if inverse:
        xu = x.copy()
        for _ in range(20):
            xu = x / (1 + k1 * (xu ** 2).sum(axis=1, keepdims=True))
        x = xu
    else:
        x = x * (1 + k1 * (x ** 2).sum(axis=1, keepdims=True))
    return x * f + c


def undistort(image: np.ndarray, K: np.ndarray, k1: float) -> np.ndarray:
    """The ideal pinhole image of a frame taken through radial distortion
    k1 (bilinear resampling; pixels that fall outside the frame get 0)."""
    h, w = image.shape
    v, u = np.mgrid[0:h, 0:w].astype(np.float64)
    src = _radial(K, np.stack([u.ravel(), v.ravel()], axis=1), k1, False)
    x, y = src[:, 0], src[:, 1]
    inside = (x >= 0) & (y >= 0) & (x <= w - 1) & (y <= h - 1)
    x0 = np.clip(np.floor(x).astype(int), 0, w - 2)
    y0 = np.clip(np.floor(y).astype(int), 0, h - 2)
    fx, fy = x - x0, y - y0
    img = image.astype(np.float64)
    out = ((1 - fx) * (1 - fy) * img[y0, x0] + fx * (1 - fy) * img[y0, x0 + 1]
           + (1 - fx) * fy * img[y0 + 1, x0] + fx * fy * img[y0 + 1, x0 + 1])
    out[~inside] = 0.0
    return out.reshape(h, w).astype(np.float32)


def _render(cam: Camera, kind: str, z0: float, texture: _Texture,
            height: int, width: int, k1: float):
    v, u = np.mgrid[0:height, 0:width].astype(np.float64)
    pixels = np.stack([u.ravel(), v.ravel()], axis=1)
    if k1:
        pixels = _radial(cam.K, pixels, k1, inverse=True)
    origins, directions, valid = cam.cast_rays(pixels)
    s = _intersect(kind, z0, origins, directions)
    s[~valid] = np.nan
    hit = origins + s[:, None] * directions
    image = texture(hit[:, 0], hit[:, 1])
    image[~np.isfinite(s)] = 0.0
    return (image.reshape(height, width).astype(np.float32),
            s.reshape(height, width).astype(np.float32))


def make_scene(kind: str = "flat", model: str = "refractive",
               views: int = 5, height: int = 240, width: int = 320,
               depth: float = FLAT_DEPTH, water_z: float = 0.2,
               baseline: float = 0.08, focal: Optional[float] = None,
               k1: float = 0.0, seed: int = 0) -> Scene:
    """Renders `views` cameras on a line along x (the reference in the
    middle) looking straight down at a textured surface.

    kind: "flat" (a plane at `depth`) or "wavy" (that plane plus a 5 mm
    sine of 5 cm wavelength along x). model: "refractive" (cameras in air,
    water below z = water_z) or "pinhole" (no water). k1: radial lens
    distortion of the rendered images; the ground truth is that of the
    undistorted reference view."""
    if kind not in ("flat", "wavy"):
        raise ValueError(f"kind must be 'flat' or 'wavy', got {kind!r}")
    if model not in ("refractive", "pinhole"):
        raise ValueError(f"model must be 'refractive' or 'pinhole', got "
                         f"{model!r}")
    if not isinstance(views, int) or views < 2:
        raise ValueError(f"views must be an int >= 2, got {views!r}")
    if height < 16 or width < 16:
        raise ValueError("height and width must be at least 16")
    check_pixels(height, width, "the scene")    # before rendering it
    if not 0 < water_z < depth:
        raise ValueError("water_z must lie between the cameras (z = 0) and "
                         "the surface")
    f = focal if focal is not None else 1.2 * width
    K = np.array([[f, 0, (width - 1) / 2], [0, f, (height - 1) / 2],
                  [0, 0, 1.0]])
    offsets = (np.arange(views) - (views - 1) / 2) * baseline / max(
        views - 1, 1)
    # reference first: the middle camera, then the others outwards
    order = sorted(range(views), key=lambda i: (abs(offsets[i]), i))
    cameras = []
    for i in order:
        t = -np.array([offsets[i], 0.0, 0.0])
        cameras.append(Camera.refractive(K, np.eye(3), t, water_z)
                       if model == "refractive"
                       else Camera.pinhole(K, np.eye(3), t))
    texture = _Texture(seed, footprint=depth / f)
    images = [_render(c, kind, depth, texture, height, width, k1)[0]
              for c in cameras]
    truth = _render(cameras[0], kind, depth, texture, height, width, 0.0)[1]
    return Scene(kind, cameras, images, truth, depth, k1)


def pitched(cam: Camera, degrees: float) -> Camera:
    """cam turned about its own x axis by `degrees`, its centre where it
    was: a scene's cameras pitched towards the horizon, whose rays just
    under it meet the water far out (the sweep's hardest geometry)."""
    if degrees == 0:
        return cam
    a = np.deg2rad(degrees)
    turn = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(a), -np.sin(a)],
                     [0.0, np.sin(a), np.cos(a)]])
    rotation = turn @ cam.R
    return Camera(cam.K, rotation, -rotation @ cam.center,
                  refractive=cam.is_refractive, water_z=cam.water_z,
                  normal=cam.normal, n_air=cam.n_air, n_water=cam.n_water,
                  casts_as_aquamvs=cam.casts_as_aquamvs)


def metrics(scene: Scene, depth: np.ndarray,
            tolerance: float = 0.005) -> Dict[str, float]:
    """Accuracy of an estimated reference depth map (ray depths, NaN where
    none): mean and median absolute error (m) over pixels with both,
    completeness (share of ground-truth pixels estimated within
    `tolerance` m), and for the flat scene the RMSE (m) of the estimated
    3-D points about the best-fitting plane."""
    if depth.shape != scene.depth.shape:
        raise ValueError(f"depth has shape {depth.shape}, the scene "
                         f"{scene.depth.shape}")
    truth = scene.depth.astype(np.float64)
    est = depth.astype(np.float64)
    both = np.isfinite(truth) & np.isfinite(est)
    err = np.abs(est[both] - truth[both])
    out = {
        "mean_abs_error": float(err.mean()) if err.size else float("nan"),
        "median_abs_error": float(np.median(err)) if err.size
        else float("nan"),
        "completeness": float((err <= tolerance).sum()
                              / max(np.isfinite(truth).sum(), 1)),
    }
    if scene.kind == "flat" and both.sum() >= 3:
        h, w = depth.shape
        v, u = np.mgrid[0:h, 0:w]
        pixels = np.stack([u[both], v[both]], axis=1).astype(np.float64)
        o, d, _ = scene.ref_cam.cast_rays(pixels)
        pts = o + est[both][:, None] * d
        centred = pts - pts.mean(axis=0)
        normal = np.linalg.svd(centred, full_matrices=False)[2][2]
        out["plane_fit_rmse"] = float(np.sqrt(np.mean((centred @ normal)
                                                      ** 2)))
    return out
