"""Image sizes the kernels take, checked alike on the CPU and GPU paths."""
from __future__ import annotations

from typing import Tuple

# Pixel indices are C ints in the kernels (AP_MAX_PIXELS in sweep.h).
MAX_PIXELS = 2 ** 31 - 1


def check_image_size(shape: Tuple[int, ...], name: str) -> None:
    """ValueError naming `name` unless shape's first two dimensions are at
    least 2 and hold at most MAX_PIXELS pixels."""
    if shape[0] < 2 or shape[1] < 2:
        raise ValueError(f"{name} must be at least 2 x 2, got {shape}")
    if shape[0] * shape[1] > MAX_PIXELS:
        raise ValueError(f"{name} has {shape[0] * shape[1]} pixels, more "
                         f"than the {MAX_PIXELS} the kernels index")
