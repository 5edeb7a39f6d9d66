"""A projection model is honoured, never ignored: AquaMVS's own
RefractiveProjectionModel (and an object carrying its attributes) runs
the kernels; a model whose cast_ray or project is its own (a pinhole
implementing AquaMVS's projection protocol, a subclass overriding a
method, a method set on the instance) runs through that method, and one
whose method breaks the protocol is refused with the reason."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import aquamvs_harness as harness  # noqa: E402

from aquaprof.mvs import aquamvs as dropin  # noqa: E402
from aquaprof.mvs import plane_sweep, scenes  # noqa: E402

try:
    AQ = harness.load()
except ImportError as e:
    AQ, WHY = None, str(e)
else:
    WHY = ""
needs_aquamvs = pytest.mark.skipif(AQ is None, reason=WHY)
H, W = 48, 64


class Config:
    def __init__(self, cost="ncc", window=7):
        self.cost_function, self.window_size = cost, window


class Pinhole:
    """A pinhole implementing AquaMVS's projection protocol only, in
    float64: no K, R, t attributes for the drop-in to read."""

    def __init__(self, cam):
        self._K = torch.tensor(cam.K)
        self._R = torch.tensor(cam.R)
        self._t = torch.tensor(cam.t)

    def cast_ray(self, pixels):
        p = torch.cat([pixels.double(), torch.ones(len(pixels), 1,
                                                   dtype=torch.float64)], 1)
        rays = p @ torch.linalg.inv(self._K).T @ self._R
        rays = rays / rays.norm(dim=1, keepdim=True)
        return (-self._R.T @ self._t).expand(len(pixels), 3), rays

    def project(self, points):
        cam = points.double() @ self._R.T + self._t
        valid = cam[:, 2] > 0
        uv = cam[:, :2] / cam[:, 2:] @ self._K[:2, :2].T + self._K[:2, 2]
        return torch.where(valid[:, None], uv, float("nan")), valid


@pytest.fixture(scope="module")
def pinhole_scene():
    return scenes.make_scene("wavy", "pinhole", 3, H, W)


@pytest.mark.parametrize("parity", ["aquamvs", "textbook"])
@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_a_protocol_pinhole_runs_through_its_own_methods(pinhole_scene,
                                                         parity, cost):
    # once a TypeError; now its samples are where its project puts them,
    # and its costs are the kernels' for the same pinhole cameras
    sc = pinhole_scene
    models = [Pinhole(c) for c in sc.cameras]
    frames = [torch.from_numpy(i) for i in sc.images]
    depths = np.linspace(*sc.depth_range(0.03), 6)
    out = dropin.build_cost_volume(models[0], models[1:], frames[0],
                                   frames[1:], torch.from_numpy(depths),
                                   Config(cost), parity=parity)
    native = plane_sweep.build_cost_volume(
        sc.images[0], sc.images[1:], sc.cameras[0], sc.cameras[1:], depths,
        cost, 7, parity=parity)
    assert out.dtype == torch.float32 and out.shape == (H, W, 6)
    assert (out.numpy() < 1).mean() > 0.5
    np.testing.assert_allclose(out.numpy(), native, atol=1e-5, rtol=0)


def test_a_protocol_pinhole_warps_through_its_own_methods(pinhole_scene):
    sc = pinhole_scene
    models = [Pinhole(c) for c in sc.cameras]
    grid = torch.from_numpy(np.stack(np.meshgrid(np.arange(W), np.arange(H)),
                                     -1).reshape(-1, 2).astype(np.float32))
    depth = float(sc.depth_range(0.03)[1])
    warped = dropin.warp_source_image(models[0], models[1],
                                      torch.from_numpy(sc.images[1]), depth,
                                      grid, outside="nan")
    native = torch.from_numpy(plane_sweep.warp(sc.images[1], sc.cameras[0],
                                               sc.cameras[1], depth))
    assert torch.equal(warped.isnan(), native.isnan())
    seen = ~native.isnan()
    assert (warped - native)[seen].abs().max() < 1e-5


def shifted(aq, dx):
    """A subclass of AquaMVS's model whose project() moves every pixel
    dx to the right: a calibration correction, say."""
    class Shifted(aq.refractive.RefractiveProjectionModel):
        def project(self, points):
            pixels, valid = super().project(points)
            return pixels + torch.tensor([dx, 0.0]), valid
    return Shifted


def aquamvs_models(aq, cameras, cls=None):
    base = harness.models(aq, cameras, torch.float32)
    if cls is None:
        return base
    return [cls(m.K, m.R, m.t, m.water_z, m.normal, m.n_air, m.n_water)
            for m in base]


@pytest.fixture(scope="module")
def scene():
    return scenes.make_scene("flat", "refractive", 3, H, W)


@needs_aquamvs
@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_an_overridden_project_is_honoured_as_aquamvs_honours_it(scene,
                                                                 cost):
    plain = aquamvs_models(AQ, scene.cameras)
    moved = aquamvs_models(AQ, scene.cameras, shifted(AQ, 0.75))
    frames = [torch.from_numpy(i) for i in scene.images]
    depths = torch.linspace(*scene.depth_range(0.03), 6)
    ours = dropin.build_cost_volume(moved[0], moved[1:], frames[0],
                                    frames[1:], depths, Config(cost))
    theirs = AQ.plane_sweep.build_cost_volume(
        moved[0], moved[1:], frames[0], frames[1:], depths, Config(cost))
    unmoved = dropin.build_cost_volume(plain[0], plain[1:], frames[0],
                                       frames[1:], depths, Config(cost))
    assert (ours - unmoved).abs().max() > 0.05    # the override counts
    # AquaMVS's float32 cost arithmetic against the drop-in's float64
    assert (ours - theirs).abs().max() < 5e-5


@needs_aquamvs
def test_an_overridden_cast_ray_of_the_reference_is_honoured(scene):
    class Nudged(AQ.refractive.RefractiveProjectionModel):
        def cast_ray(self, pixels):
            origins, directions = super().cast_ray(pixels)
            return origins + torch.tensor([0.002, 0.0, 0.0]), directions
    plain = aquamvs_models(AQ, scene.cameras)
    ref = aquamvs_models(AQ, scene.cameras[:1], Nudged)[0]
    frames = [torch.from_numpy(i) for i in scene.images]
    depths = torch.linspace(*scene.depth_range(0.03), 4)
    ours = dropin.build_cost_volume(ref, plain[1:], frames[0], frames[1:],
                                    depths, Config())
    theirs = AQ.plane_sweep.build_cost_volume(ref, plain[1:], frames[0],
                                              frames[1:], depths, Config())
    unmoved = dropin.build_cost_volume(plain[0], plain[1:], frames[0],
                                       frames[1:], depths, Config())
    assert (ours - unmoved).abs().max() > 0.05
    assert (ours - theirs).abs().max() < 5e-5


@needs_aquamvs
def test_a_method_set_on_the_instance_is_honoured(scene):
    models = aquamvs_models(AQ, scene.cameras)
    frames = [torch.from_numpy(i) for i in scene.images]
    depth = float(scene.depth_range(0.03)[1])
    grid = AQ.plane_sweep._make_pixel_grid(H, W)
    before = dropin.warp_source_image(models[0], models[1], frames[1],
                                      depth, grid)
    original = models[1].project
    models[1].project = lambda p: (original(p)[0] + 1.0, original(p)[1])
    after = dropin.warp_source_image(models[0], models[1], frames[1],
                                     depth, grid)
    theirs = AQ.plane_sweep.warp_source_image(models[0], models[1],
                                              frames[1], depth, grid)
    seen = ~theirs.isnan()
    assert (after - before)[seen].abs().max() > 0.05
    # AquaMVS's float32 grid_sample against the drop-in's float64 one
    assert (after - theirs)[seen].abs().max() < 1e-4


@needs_aquamvs
def test_aquamvss_own_model_and_its_plain_subclasses_run_the_kernels(
        scene, monkeypatch):
    class Renamed(AQ.refractive.RefractiveProjectionModel):
        """Overrides nothing the sweep calls."""
        def to(self, device):
            return super().to(device)
    calls = []
    native = plane_sweep.build_cost_volume
    monkeypatch.setattr(plane_sweep, "build_cost_volume",
                        lambda *a, **k: calls.append(1) or native(*a, **k))
    frames = [torch.from_numpy(i) for i in scene.images]
    depths = torch.linspace(*scene.depth_range(0.03), 3)
    for cls in (None, Renamed):
        models = aquamvs_models(AQ, scene.cameras, cls)
        dropin.build_cost_volume(models[0], models[1:], frames[0],
                                 frames[1:], depths, Config())
    assert len(calls) == 2
    # an overridden project reaches no kernel
    moved = aquamvs_models(AQ, scene.cameras, shifted(AQ, 0.5))
    dropin.build_cost_volume(moved[0], moved[1:], frames[0], frames[1:],
                             depths, Config())
    assert len(calls) == 2


class BrokenProject(Pinhole):
    def project(self, points):
        return super().project(points)[0]      # the pixels only


class BrokenCast(Pinhole):
    def cast_ray(self, pixels):
        origins, directions = super().cast_ray(pixels)
        return origins[:, :2], directions


@pytest.mark.parametrize("broken,name,message", [
    (BrokenProject, "src_models[0].project",
     r"returned Tensor \(3072, 2\) for N = 3072: AquaMVS's "
     r"projection protocol returns pixels \(N, 2\) and valid \(N,\)"),
    (BrokenCast, "ref_model.cast_ray",
     r"returned Tensor \(3072, 2\), Tensor \(3072, 3\) for N = 3072: "
     r"AquaMVS's projection protocol returns origins \(N, 3\) and "
     r"directions \(N, 3\)"),
])
def test_a_model_breaking_the_protocol_is_refused_with_the_reason(
        pinhole_scene, broken, name, message):
    sc = pinhole_scene
    models = [Pinhole(c) for c in sc.cameras]
    if broken is BrokenProject:
        models[1] = BrokenProject(sc.cameras[1])
    else:
        models[0] = BrokenCast(sc.cameras[0])
    frames = [torch.from_numpy(i) for i in sc.images]
    with pytest.raises(ValueError, match=re.escape(name) + " " + message):
        dropin.build_cost_volume(models[0], models[1:], frames[0],
                                 frames[1:], torch.tensor([1.0, 1.1]),
                                 Config())


def test_a_model_with_neither_methods_nor_attributes_is_refused():
    frame = torch.rand(16, 16)
    with pytest.raises(TypeError, match=r"src_models\[0\] \(object\) has no "
                       r"K, R, .*or implement AquaMVS's projection "
                       r"protocol \(its own project\(\)"):
        dropin.build_cost_volume(Pinhole(scenes.make_scene(
            "flat", "pinhole", 2, 16, 16).cameras[0]), [object()], frame,
            [frame], torch.tensor([1.0]), Config())
