"""Cameras of the plane-sweep kit: pinhole, and pinhole in air behind a
flat water surface (refractive)."""
from __future__ import annotations

from typing import Sequence, Tuple, Union

import numpy as np

from .. import _mvs

ArrayLike = Union[np.ndarray, Sequence]


def _matrix(value: Union[ArrayLike, float], name: str,
            shape: Tuple[int, ...]) -> np.ndarray:
    """value as a read-only float64 array of `shape`, every entry finite;
    ValueError naming `name` and what is wrong otherwise."""
    try:
        a = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a {shape} array of numbers, got "
                         f"{type(value).__name__}") from None
    if a.shape != shape:
        raise ValueError(f"{name} must be a {shape} array, got shape "
                         f"{a.shape}")
    bad = np.argwhere(~np.isfinite(a))
    if bad.size:
        where = "".join(f"[{i}]" for i in bad[0])
        raise ValueError(f"{name}{where} is {a[tuple(bad[0])]}: {name} "
                         f"must be finite")
    a.flags.writeable = False
    return a


def _number(value: float, name: str) -> float:
    try:
        if np.ndim(value) != 0:     # float() takes a 1-element array
            raise TypeError
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got "
                         f"{type(value).__name__}") from None
    if not np.isfinite(v):
        raise ValueError(f"{name} is {v}: it must be finite")
    return v


def _positive(value: float, name: str) -> float:
    v = _number(value, name)
    if not v > 0:
        raise ValueError(f"{name} is {v}: a refractive index must be > 0")
    return v


class Camera:
    """K (3, 3) intrinsics, R (3, 3) and t (3,) world-to-camera. A
    refractive camera also has a flat interface at world z = water_z with
    `normal` pointing from the water into the air (default [0, 0, -1]: the
    world's z grows downwards, into the water), and refractive indices.

    Rays cast from a refractive camera start on the interface and point
    into the water; a point on a ray at depth d is origin + d * direction
    (direction of unit length), for either model. With n_water < n_air,
    rays past the critical angle are reflected whole: they are invalid.

    `casts_as_aquamvs=True` (refractive cameras only) makes the geometry
    of AquaMVS's RefractiveProjectionModel, which aquaprof.mvs.aquamvs
    uses: every ray meets the level plane z = water_z (from behind the
    camera where the pixel looks up) and is bent there about `normal` as
    given, of any length; points project through the level surface,
    whatever `normal` says. With a tilted normal its cast and project
    are then not each other's inverse, as in AquaMVS; and as there, no
    ray is reflected whole (past the critical angle the bent ray runs
    along the surface).

    Every argument is checked, and a ValueError names the one that is
    wrong and why. A camera cannot be changed once made (its arrays are
    read-only): its packed `params` are what the kernels use."""

    __slots__ = ("K", "R", "t", "is_refractive", "water_z", "normal", "n_air",
                 "n_water", "casts_as_aquamvs", "params")

    def __init__(self, K: ArrayLike, R: ArrayLike, t: ArrayLike, *,
                 refractive: bool = False, water_z: float = 0.0,
                 normal: ArrayLike = (0.0, 0.0, -1.0), n_air: float = 1.0,
                 n_water: float = 1.333, casts_as_aquamvs: bool = False):
        self.K = _matrix(K, "K", (3, 3))
        self.R = _matrix(R, "R", (3, 3))
        self.t = _matrix(t, "t", (3,))
        self.is_refractive = bool(refractive)
        self.water_z = _number(water_z, "water_z")
        self.normal = _matrix(normal, "normal", (3,))
        if not np.any(self.normal):
            raise ValueError("normal is the zero vector: it must point "
                             "from the water into the air, with any "
                             "non-zero length")
        self.n_air = _positive(n_air, "n_air")
        self.n_water = _positive(n_water, "n_water")
        self.casts_as_aquamvs = bool(casts_as_aquamvs)
        if self.casts_as_aquamvs and not self.is_refractive:
            raise ValueError("casts_as_aquamvs is for refractive cameras: "
                             "a pinhole casts its rays one way")
        flag = (_mvs.CAST_AQUAMVS if self.casts_as_aquamvs
                else 1.0 if self.is_refractive else 0.0)
        params = np.concatenate([
            self.K.ravel(), self.R.ravel(), self.t, [flag, self.water_z],
            self.normal, [self.n_air, self.n_water]])
        # K's last row, singular K, R not a rotation, a camera not above
        # its water: checked by the kernels' own camera setup, which says
        # which and why
        _mvs.check_camera(params)
        params.flags.writeable = False
        self.params = params    # last: the camera is made

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, "params"):
            raise AttributeError(f"a Camera cannot be changed once made "
                                 f"(setting {name}): make a new one")
        object.__setattr__(self, name, value)

    def __reduce__(self) -> Tuple[object, Tuple[object, ...]]:
        return (_rebuild, (self.K, self.R, self.t, self.is_refractive,
                           self.water_z, self.normal, self.n_air,
                           self.n_water, self.casts_as_aquamvs))

    @classmethod
    def pinhole(cls, K: ArrayLike, R: ArrayLike, t: ArrayLike) -> "Camera":
        return cls(K, R, t)

    @classmethod
    def refractive(cls, K: ArrayLike, R: ArrayLike, t: ArrayLike,
                   water_z: float, normal: ArrayLike = (0.0, 0.0, -1.0),
                   n_air: float = 1.0, n_water: float = 1.333) -> "Camera":
        return cls(K, R, t, refractive=True, water_z=water_z, normal=normal,
                   n_air=n_air, n_water=n_water)

    @property
    def center(self) -> np.ndarray:
        """Camera centre in world coordinates."""
        return -self.R.T @ self.t

    def cast_rays(self, pixels: ArrayLike
                  ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rays of pixels (N, 2) as (u, v) = (column, row): origins (N, 3),
        unit directions (N, 3) and a validity mask (N,); NaN where invalid:
        a pixel that is not finite, or a refractive ray that never reaches
        the water or that the surface reflects whole (past the critical
        angle, where n_water < n_air); casting as AquaMVS does, only a ray
        parallel to the surface."""
        return _mvs.cast_rays(self.params, _points(pixels, "pixels", 2))

    def project(self, points: ArrayLike) -> Tuple[np.ndarray, np.ndarray]:
        """Pixels (N, 2) of world points (N, 3) and a validity mask: points
        that are not finite, behind the camera, or above the water for a
        refractive camera, are invalid (NaN pixels)."""
        return _mvs.project(self.params, _points(points, "points", 3))

    def __repr__(self) -> str:
        kind = (f"refractive, water_z={self.water_z}, n_water={self.n_water}"
                if self.is_refractive else "pinhole")
        if self.casts_as_aquamvs:
            kind += ", casting as AquaMVS does"
        return f"<aquaprof.mvs.Camera {kind}, center={self.center.round(4)}>"


def _rebuild(K: np.ndarray, R: np.ndarray, t: np.ndarray, refractive: bool,
             water_z: float, normal: np.ndarray, n_air: float,
             n_water: float, casts_as_aquamvs: bool = False) -> Camera:
    return Camera(K, R, t, refractive=refractive, water_z=water_z,
                  normal=normal, n_air=n_air, n_water=n_water,
                  casts_as_aquamvs=casts_as_aquamvs)


def _points(value: ArrayLike, name: str, width: int) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an (N, {width}) array of numbers, "
                         f"got {type(value).__name__}") from None
    if a.ndim != 2 or a.shape[1] != width:
        raise ValueError(f"{name} must be an (N, {width}) array, got shape "
                         f"{a.shape}")
    return a
