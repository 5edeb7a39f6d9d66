"""Sizes the kernels take, checked alike on the CPU and GPU paths, and
before anything is copied or allocated. The C binding checks the same
limits again (AP_MAX_PIXELS and AP_MAX_COUNT in sweep.h), with the same
messages."""
from __future__ import annotations

from typing import Tuple

# Pixel indices are C ints in the kernels.
MAX_PIXELS = 2 ** 31 - 1
# So are depth planes and source views.
MAX_COUNT = 2 ** 31 - 1


def check_pixels(height: int, width: int, name: str) -> None:
    """ValueError naming `name` and the sizes unless height x width is at
    most MAX_PIXELS."""
    if height * width > MAX_PIXELS:
        raise ValueError(f"{name} has {height} x {width} = {height * width}"
                         f" pixels, more than the {MAX_PIXELS} (2^31 - 1) "
                         f"the kernels index")


def check_count(count: int, name: str, things: str) -> None:
    """ValueError unless `count` (of `things`: planes, views, entries) is
    at most MAX_COUNT."""
    if count > MAX_COUNT:
        raise ValueError(f"{name} has {count} {things}, more than the "
                         f"{MAX_COUNT} (2^31 - 1) the kernels index")


def check_image_size(shape: Tuple[int, ...], name: str) -> None:
    """ValueError naming `name` unless shape's first two dimensions are at
    least 2 and hold at most MAX_PIXELS pixels."""
    if shape[0] < 2 or shape[1] < 2:
        raise ValueError(f"{name} must be at least 2 x 2, got {shape}")
    check_pixels(shape[0], shape[1], name)
