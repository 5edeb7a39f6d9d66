"""The drop-in's functions beyond the sweep, as AquaMVS's users call them:
the per-pair costs (differentiable), the depth-map files, windows wider
than the kernels hold, what a sample off the source image is
(`outside`), and a tilted surface refracted exactly (`tilt`)."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from aquaprof import _mvs  # noqa: E402
from aquaprof.mvs import aquamvs, plane_sweep, scenes  # noqa: E402
from aquaprof.mvs.camera import Camera  # noqa: E402
from aquaprof.mvs import _aquamvs_inputs  # noqa: E402

H, W = 40, 56


class Model:
    """A projection model carrying AquaMVS's attributes only."""

    def __init__(self, cam, normal=(0.0, 0.0, -1.0)):
        self.K, self.R = torch.tensor(cam.K), torch.tensor(cam.R)
        self.t, self.water_z = torch.tensor(cam.t), cam.water_z
        self.normal = torch.tensor(normal, dtype=torch.float64)
        self.n_air, self.n_water = cam.n_air, cam.n_water


class Config:
    def __init__(self, cost="ncc", window=11, num_depths=4):
        self.cost_function, self.window_size = cost, window
        self.num_depths = num_depths


@pytest.fixture(autouse=True)
def tilt_warning_rearmed(monkeypatch):
    monkeypatch.setattr(_aquamvs_inputs, "_tilt_warned", False)


@pytest.fixture(scope="module")
def scene():
    return scenes.make_scene("wavy", "refractive", 3, H, W)


def pair(seed=0):
    g = torch.Generator().manual_seed(seed)
    ref = torch.rand(H, W, generator=g)
    src = 0.6 * ref + 0.3 + 0.05 * torch.rand(H, W, generator=g)
    src[10:20, 15:25] = float("nan")
    return ref, src


@pytest.mark.parametrize("parity", ["aquamvs", "textbook"])
@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_per_pair_costs_match_and_differentiate(parity, cost):
    ref, src = pair()
    c = aquamvs.compute_cost(ref, src, cost, 11, parity=parity)
    assert c.dtype == torch.float32 and c.shape == (H, W)
    same = aquamvs.compute_cost(ref, ref.clone(), cost, 11, parity=parity)
    assert same[6:-6, 6:-6].abs().max() < 1e-5      # identical: no cost
    assert c[15, 20] == 1.0                         # too few seen
    assert 0.0 < c[30, 45] < 0.5                    # brightened copy
    named = aquamvs.compute_ncc if cost == "ncc" else aquamvs.compute_ssim
    assert torch.equal(named(ref, src, 11, parity=parity), c)
    r = ref.clone().requires_grad_()
    aquamvs.compute_cost(r, src, cost, 11, parity=parity).mean().backward()
    assert r.grad.isfinite().all() and r.grad.abs().max() > 0
    # float64 in, float64 out
    assert aquamvs.compute_cost(ref.double(), src.double(), cost,
                                11).dtype == torch.float64


def test_the_parities_differ_where_their_definitions_do():
    ref, src = pair()
    ours = aquamvs.compute_ncc(ref, src, parity="textbook")
    theirs = aquamvs.compute_ncc(ref, src, parity="aquamvs")
    assert (ours - theirs).abs().max() > 1e-2


def test_aggregate_costs_is_the_differentiable_mean():
    maps = [torch.full((4, 5), v, requires_grad=True) for v in (0.2, 0.4)]
    mean = aquamvs.aggregate_costs(maps)
    assert torch.allclose(mean, torch.full((4, 5), 0.3))
    mean.sum().backward()
    assert torch.equal(maps[0].grad, torch.full((4, 5), 0.5))


@pytest.mark.parametrize("call,error,message", [
    (lambda: aquamvs.compute_cost(*pair(), "sad"), ValueError,
     r"Unknown cost function: 'sad'. Expected 'ncc' or 'ssim'."),
    (lambda: aquamvs.compute_ncc(*pair(), 10), ValueError,
     r"window_size must be an odd int >= 3, got 10"),
    (lambda: aquamvs.compute_ssim(pair()[0], pair()[1][:5]), ValueError,
     r"ref and src must be one shape on one device, got \(40, 56\)"),
    (lambda: aquamvs.compute_ncc(pair()[0].numpy(), pair()[1]), ValueError,
     r"ref must be a float \(H, W\) tensor, got ndarray"),
    (lambda: aquamvs.compute_ncc(*pair(), parity="opencv"), ValueError,
     r"parity must be one of"),
    (lambda: aquamvs.aggregate_costs([]), ValueError,
     r"costs must be a non-empty list"),
    (lambda: aquamvs.save_depth_map(torch.zeros(3, 4), torch.zeros(4, 3),
                                    "x.npz"), ValueError,
     r"depth_map and confidence must be \(H, W\) of one shape"),
])
def test_bad_calls_say_why(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_depth_map_files_round_trip_as_aquamvs_writes_them(tmp_path):
    depth = torch.rand(5, 7, requires_grad=True)
    confidence = torch.rand(5, 7)
    aquamvs.save_depth_map(depth, confidence, str(tmp_path / "frame"))
    # np.savez's rule, as in AquaMVS: a path without .npz gets it
    with np.load(tmp_path / "frame.npz") as data:
        assert data.files == ["depth", "confidence"]
        np.testing.assert_array_equal(data["depth"], depth.detach().numpy())
    d, c = aquamvs.load_depth_map(tmp_path / "frame.npz")
    assert torch.equal(d, depth.detach()) and torch.equal(c, confidence)
    np.savez(tmp_path / "other.npz", depth=np.zeros(3))
    with pytest.raises(ValueError, match=r"holds no confidence array: not "
                       r"a depth map file \(it holds \['depth'\]\)"):
        aquamvs.load_depth_map(tmp_path / "other.npz")


def grid(h=H, w=W):
    v, u = np.mgrid[0:h, 0:w]
    return torch.from_numpy(np.stack([u.ravel(), v.ravel()], 1)
                            .astype(np.float32))


def same(a, b):
    """Equal, NaN where the other is NaN."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(
        a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize("parity", ["aquamvs", "textbook"])
def test_windows_wider_than_the_kernels_hold_run_in_torch(parity):
    assert _mvs.MAX_WINDOW < 65
    # an image larger than the window, so that textbook windows see half
    wide = scenes.make_scene("wavy", "refractive", 2, 80, 96)
    models = [Model(c) for c in wide.cameras]
    frames = [torch.from_numpy(i) for i in wide.images]
    depths = torch.linspace(*wide.depth_range(0.03), 3)
    volume = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                       frames[1:], depths, Config(window=65),
                                       parity=parity)
    assert volume.shape == (80, 96, 3) and (volume < 1).float().mean() > 0.1
    for k, depth in enumerate(depths.tolist()):
        warped = aquamvs.warp_source_image(models[0], models[1], frames[1],
                                           depth, grid(80, 96),
                                           parity=parity)
        per_pair = aquamvs.compute_cost(frames[0], warped, "ncc", 65,
                                        parity=parity)
        assert (volume[:, :, k] - per_pair).abs().max() < 1e-5


def test_outside_defaults_to_the_paritys_way_and_can_be_chosen(scene):
    ref, src = (Model(c) for c in scene.cameras[:2])
    frame = torch.from_numpy(scene.images[1])
    depth = float(scene.depth_range(0.03)[1])
    warp = aquamvs.warp_source_image
    zero = warp(ref, src, frame, depth, grid())
    nan = warp(ref, src, frame, depth, grid(), parity="textbook")
    assert not zero.isnan().any() and nan.isnan().any()
    assert same(warp(ref, src, frame, depth, grid(), outside="nan"), nan)
    assert same(warp(ref, src, frame, depth, grid(), parity="textbook",
                     outside="zero"), zero)
    seen = ~nan.isnan()
    assert torch.equal(zero[seen], nan[seen])
    with pytest.raises(ValueError, match=r"outside must be one of "
                       r"\['nan', 'zero'\], got 'border'"):
        warp(ref, src, frame, depth, grid(), outside="border")


@pytest.mark.parametrize("parity,outside", [("aquamvs", "nan"),
                                            ("textbook", "zero")])
def test_the_other_outside_gives_the_per_pair_costs_of_that_warp(
        scene, parity, outside):
    models = [Model(c) for c in scene.cameras[:2]]
    frames = [torch.from_numpy(i) for i in scene.images[:2]]
    depths = torch.linspace(*scene.depth_range(0.03), 3)
    volume = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                       frames[1:], depths, Config(),
                                       parity=parity, outside=outside)
    default = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                        frames[1:], depths, Config(),
                                        parity=parity)
    assert (volume - default).abs().max() > 1e-2    # the border views
    for k, depth in enumerate(depths.tolist()):
        warped = aquamvs.warp_source_image(models[0], models[1], frames[1],
                                           depth, grid(), outside=outside)
        per_pair = aquamvs.compute_cost(frames[0], warped, "ncc", 11,
                                        parity=parity)
        assert (volume[:, :, k] - per_pair).abs().max() < 1e-5


def test_tilt_exact_refracts_at_the_tilted_surface(scene):
    normal = np.array([0.05, 0.0, -1.0])
    models = [Model(c, normal=normal) for c in scene.cameras]
    frames = [torch.from_numpy(i) for i in scene.images]
    depths = torch.linspace(*scene.depth_range(0.03), 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # nothing to warn about
        exact = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                          frames[1:], depths, Config(),
                                          tilt="exact")
    cams = [Camera.refractive(c.K, c.R, c.t, c.water_z, normal=normal,
                              n_air=c.n_air, n_water=c.n_water)
            for c in scene.cameras]
    native = plane_sweep.build_cost_volume(
        scene.images[0], scene.images[1:], cams[0], cams[1:],
        depths.double().numpy(), "ncc", 11, parity="aquamvs")
    assert torch.equal(exact, torch.from_numpy(native))
    with pytest.warns(aquamvs.TiltedSurfaceWarning, match='tilt="exact"'):
        as_aquamvs = aquamvs.build_cost_volume(models[0], models[1:],
                                               frames[0], frames[1:],
                                               depths, Config())
    assert (exact - as_aquamvs).abs().max() > 1e-2
    with pytest.raises(ValueError, match=r"tilt must be one of "
                       r"\['aquamvs', 'exact'\], got 'level'"):
        aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                  frames[1:], depths, Config(), tilt="level")
