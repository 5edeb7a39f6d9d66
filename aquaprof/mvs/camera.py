"""Cameras of the plane-sweep kit: pinhole, and pinhole in air behind a
flat water surface (refractive)."""
from __future__ import annotations

from typing import Sequence, Tuple, Union

import numpy as np

from .. import _mvs

ArrayLike = Union[np.ndarray, Sequence]


def _matrix(value: Union[ArrayLike, float], name: str,
            shape: Tuple[int, ...]) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite {shape} array of numbers, "
                         f"got {type(value).__name__}") from None
    if a.shape != shape:
        raise ValueError(f"{name} must be a finite {shape} array, got shape "
                         f"{a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite, got {a.tolist()}")
    return a


def _positive(value: float, name: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got "
                         f"{type(value).__name__}") from None
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return v


class Camera:
    """K (3, 3) intrinsics, R (3, 3) and t (3,) world-to-camera. A
    refractive camera also has a flat interface at world z = water_z with
    `normal` pointing from the water into the air (default [0, 0, -1]: the
    world's z grows downwards, into the water), and refractive indices.

    Rays cast from a refractive camera start on the interface and point
    into the water; a point on a ray at depth d is origin + d * direction
    (direction of unit length), for either model."""

    __slots__ = ("K", "R", "t", "is_refractive", "water_z", "normal", "n_air",
                 "n_water", "params")

    def __init__(self, K: ArrayLike, R: ArrayLike, t: ArrayLike, *,
                 refractive: bool = False, water_z: float = 0.0,
                 normal: ArrayLike = (0.0, 0.0, -1.0), n_air: float = 1.0,
                 n_water: float = 1.333):
        self.K = _matrix(K, "K", (3, 3))
        self.R = _matrix(R, "R", (3, 3))
        self.t = _matrix(t, "t", (3,))
        self.is_refractive = bool(refractive)
        self.water_z = float(_matrix(water_z, "water_z", ()))
        self.normal = _matrix(normal, "normal", (3,))
        if not np.any(self.normal):
            raise ValueError("normal must not be the zero vector")
        self.n_air = _positive(n_air, "n_air")
        self.n_water = _positive(n_water, "n_water")
        self.params = np.concatenate([
            self.K.ravel(), self.R.ravel(), self.t,
            [1.0 if self.is_refractive else 0.0, self.water_z], self.normal,
            [self.n_air, self.n_water]])
        try:
            _mvs.check_camera(self.params)
        except ValueError:
            why = ("R must be a rotation (orthonormal, det 1) and K "
                   "invertible")
            if self.is_refractive:
                why += "; the camera must be above its water surface"
            raise ValueError(f"not a valid camera: {why}") from None

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
        unit directions (N, 3) and a validity mask (N,); NaN where invalid
        (a refractive ray that never reaches the water)."""
        return _mvs.cast_rays(self.params, _points(pixels, "pixels", 2))

    def project(self, points: ArrayLike) -> Tuple[np.ndarray, np.ndarray]:
        """Pixels (N, 2) of world points (N, 3) and a validity mask: points
        behind the camera, or above the water for a refractive camera, are
        invalid (NaN pixels)."""
        return _mvs.project(self.params, _points(points, "points", 3))

    def __repr__(self) -> str:
        kind = (f"refractive, water_z={self.water_z}, n_water={self.n_water}"
                if self.is_refractive else "pinhole")
        return f"<aquaprof.mvs.Camera {kind}, center={self.center.round(4)}>"


def _points(value: ArrayLike, name: str, width: int) -> np.ndarray:
    a = np.asarray(value, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != width:
        raise ValueError(f"{name} must be an (N, {width}) array, got shape "
                         f"{a.shape}")
    return a
