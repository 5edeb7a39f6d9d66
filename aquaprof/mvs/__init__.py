"""aquaprof.mvs: plane-sweep stereo for pinhole and refractive cameras."""
from .camera import Camera
from .plane_sweep import build_cost_volume, extract_depth, gray_from_bgr, warp

__all__ = ["Camera", "build_cost_volume", "extract_depth", "gray_from_bgr",
           "warp"]
