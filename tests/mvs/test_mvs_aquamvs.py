"""aquaprof.mvs.aquamvs, the drop-in for AquaMVS's dense stage, against
AquaMVS's conventions written in torch (benchmarks/mvs/aquamvs_torch.py, run
in float64), with inputs shaped as AquaMVS's users make them: a plain
model class, a dataclass config, BGR frames."""
import os
import shutil
import sys
import warnings
from dataclasses import dataclass

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import aquaprof.mvs as mvs  # noqa: E402
from aquaprof.mvs import _aquamvs_inputs, aquamvs, plane_sweep  # noqa: E402
from aquaprof.mvs import scenes  # noqa: E402

from repo_paths import ROOT  # noqa: E402
sys.path.insert(0, str(ROOT / "benchmarks" / "mvs"))
import aquamvs_torch as reference  # noqa: E402
import alternating  # noqa: E402
import bench_aquamvs  # noqa: E402
import bench_aquamvs_dropin  # noqa: E402
import mvs_accuracy  # noqa: E402
import mvs_instructions  # noqa: E402
import mvs_per_sample  # noqa: E402
import mvs_stage_split  # noqa: E402

CUDA = torch.cuda.is_available()
H, W, D = 96, 128, 16


class Model:
    """A projection model as AquaMVS's users hold one: attributes only."""

    def __init__(self, cam, dtype=torch.float64, normal=(0.0, 0.0, -1.0)):
        self.K = torch.tensor(cam.K, dtype=dtype)
        self.R = torch.tensor(cam.R, dtype=dtype)
        self.t = torch.tensor(cam.t, dtype=dtype)
        self.water_z = cam.water_z
        self.normal = torch.tensor(normal, dtype=dtype)
        self.n_air = cam.n_air
        self.n_water = cam.n_water


@dataclass
class Config:
    num_depths: int = D
    cost_function: str = "ncc"
    window_size: int = 11
    depth_margin: float = 0.05


@pytest.fixture(autouse=True)
def tilt_warning_rearmed(monkeypatch):
    """Each test sees the once-per-process warning as a fresh process."""
    monkeypatch.setattr(_aquamvs_inputs, "_tilt_warned", False)


@pytest.fixture(scope="module", params=["flat", "wavy"])
def scene(request):
    return scenes.make_scene(request.param, "refractive", 4, H, W)


def bgr_frames(scene, dtype):
    """Colour frames whose channels differ, (H, W, 3) BGR."""
    frames = []
    for gray in scene.images:
        g = torch.from_numpy(gray)
        bgr = torch.stack([g * 0.8 + 0.1, g, g * 0.9], dim=-1)
        frames.append((bgr * 255).round().to(torch.uint8)
                      if dtype == torch.uint8 else bgr.to(dtype))
    return frames


def their_gray(frame):
    """AquaMVS's conversion, written out: the specification."""
    if frame.dtype == torch.uint8:
        frame = frame.float() / 255.0
    return 0.114 * frame[..., 0] + 0.587 * frame[..., 1] \
        + 0.299 * frame[..., 2]


def names(scene):
    return [f"cam{i}" for i in range(len(scene.cameras))]


def run_stereo(scene, config, frames, depth_range, **options):
    cams = names(scene)
    models = {n: Model(c) for n, c in zip(cams, scene.cameras)}
    return aquamvs.plane_sweep_stereo(
        cams[0], models[cams[0]], cams[1:], models, frames[0],
        dict(zip(cams, frames)), depth_range, config, **options)


def reference_volume(scene, frames, depths, config):
    models = [reference.RefractiveModel.from_camera(c, torch.float64)
              for c in scene.cameras]
    grays = [their_gray(f).double() for f in frames]
    return reference.build_cost_volume(
        models[0], models[1:], grays[0], grays[1:], depths.double(),
        config.cost_function, config.window_size)


@pytest.mark.parametrize("cost,dtype", [("ncc", torch.uint8),
                                        ("ssim", torch.float32)])
def test_plane_sweep_stereo_gives_aquamvss_numbers(scene, cost, dtype):
    config = Config(cost_function=cost)
    frames = bgr_frames(scene, dtype)
    out = run_stereo(scene, config, frames, scene.depth_range(0.03))
    assert out["ref_name"] == "cam0"
    volume, depths = out["cost_volume"], out["depths"]
    assert volume.dtype == torch.float32 and volume.shape == (H, W, D)
    assert depths.dtype == torch.float32
    assert torch.equal(depths, torch.linspace(*scene.depth_range(0.03), D))
    expected = reference_volume(scene, frames, depths, config)
    assert (volume.double() - expected).abs().max() < 1e-5
    depth, confidence = aquamvs.extract_depth(volume, depths)
    want_depth, want_confidence = reference.extract_depth(expected,
                                                         depths.double())
    finite = torch.isfinite(want_depth)
    assert finite.float().mean() > 0.5
    assert torch.equal(torch.isfinite(depth), finite)
    step = float(depths[1] - depths[0])
    assert (depth.double() - want_depth)[finite].abs().max() < 1e-3 * step
    assert (confidence.double() - want_confidence).abs().max() < 1e-3


def test_gray_frames_and_float64_frames_are_taken(scene):
    frames = bgr_frames(scene, torch.float32)
    grays = [their_gray(f) for f in frames]
    depth_range = scene.depth_range(0.03)
    from_bgr = run_stereo(scene, Config(), frames, depth_range)
    from_gray = run_stereo(scene, Config(), grays, depth_range)
    from_double = run_stereo(scene, Config(),
                             [g.double() for g in grays], depth_range)
    assert torch.equal(from_bgr["cost_volume"], from_gray["cost_volume"])
    assert torch.equal(from_gray["cost_volume"], from_double["cost_volume"])


def test_a_range_from_zero_costs_one_on_the_surface_plane():
    scene = scenes.make_scene("flat", "refractive", 3, H, W)
    frames = bgr_frames(scene, torch.float32)
    top = float(scene.depth_range(0.03)[1])
    out = run_stereo(scene, Config(num_depths=8), frames, (0.0, top))
    volume, depths = out["cost_volume"], out["depths"]
    assert depths[0] == 0
    assert torch.equal(volume[:, :, 0], torch.ones(H, W))
    expected = reference_volume(scene, frames, depths, Config(num_depths=8))
    assert (volume.double() - expected).abs().max() < 1e-5


def test_depths_in_any_order_and_spacing_are_swept_as_given(scene):
    frames = [their_gray(f) for f in bgr_frames(scene, torch.float32)]
    models = [Model(c) for c in scene.cameras]
    lo, hi = scene.depth_range(0.03)
    uneven = torch.tensor(np.geomspace(lo, hi, D), dtype=torch.float32)
    shuffled = uneven[torch.randperm(D, generator=torch.Generator()
                                     .manual_seed(0))]
    with_repeats = torch.cat([uneven[:3], uneven[:3], torch.tensor([-0.1])])
    volume = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                       frames[1:], uneven, Config())
    native = mvs.build_cost_volume(
        frames[0].numpy(), [f.numpy() for f in frames[1:]],
        scene.cameras[0], scene.cameras[1:], uneven.double().numpy(),
        "ncc", 11, parity="aquamvs")
    assert torch.equal(volume, torch.from_numpy(native))
    for depths in (shuffled, with_repeats):
        out = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                        frames[1:], depths, Config())
        for k, d in enumerate(depths.tolist()):
            expected = (torch.ones(H, W) if d <= 0 else
                        volume[:, :, int((uneven == d).nonzero()[0, 0])])
            # a sweep's Newton guess fits its depth span: another span
            # lands within 1e-8 m, not on the same bits
            assert (out[:, :, k] - expected).abs().max() < 1e-6


def test_textbook_parity_gives_the_native_results(scene):
    frames = bgr_frames(scene, torch.float32)
    depth_range = scene.depth_range(0.03)
    out = run_stereo(scene, Config(cost_function="ssim", window_size=7),
                     frames, depth_range, parity="textbook")
    grays = [their_gray(f).numpy() for f in frames]
    native = mvs.build_cost_volume(
        grays[0], grays[1:], scene.cameras[0], scene.cameras[1:],
        out["depths"].double().numpy(), "ssim", 7)
    assert torch.equal(out["cost_volume"], torch.from_numpy(native))
    aquamvs_parity = run_stereo(scene, Config(cost_function="ssim",
                                              window_size=7),
                                frames, depth_range)["cost_volume"]
    assert not torch.equal(aquamvs_parity, out["cost_volume"])


def test_cpu_float32_frames_reach_the_kernels_without_copies(scene,
                                                             monkeypatch):
    seen = {}
    native = plane_sweep.build_cost_volume

    def spy(ref, srcs, *args, **kwargs):
        seen["ref"], seen["srcs"] = ref, srcs
        return native(ref, srcs, *args, **kwargs)

    monkeypatch.setattr(plane_sweep, "build_cost_volume", spy)
    frames = [torch.from_numpy(g.copy()) for g in scene.images]
    models = [Model(c) for c in scene.cameras]
    aquamvs.build_cost_volume(models[0], models[1:], frames[0], frames[1:],
                              torch.linspace(1.1, 1.2, 3), Config())
    assert np.shares_memory(seen["ref"], frames[0].numpy())
    for src, frame in zip(seen["srcs"], frames[1:]):
        assert np.shares_memory(src, frame.numpy())


def models_volume(models, frames, depths, config):
    """The reference's float64 volume for AquaMVS-style models."""
    ref_models = [reference.RefractiveModel(
        m.K.double(), m.R.double(), m.t.double(), m.water_z,
        m.normal.double(), m.n_air, m.n_water) for m in models]
    return reference.build_cost_volume(
        ref_models[0], ref_models[1:], frames[0].double(),
        [f.double() for f in frames[1:]], depths.double(),
        config.cost_function, config.window_size)


def test_a_tilted_normal_warns_once_and_bends_rays_as_aquamvs_does(scene):
    # AquaMVS meets the plane z = water_z and projects through a level
    # surface, but bends its cast rays about the normal it is given
    frames = [their_gray(f) for f in bgr_frames(scene, torch.float32)]
    level = [Model(c) for c in scene.cameras]
    tilted = [Model(c, normal=(0.1, 0.0, -1.0)) for c in scene.cameras]
    depths = torch.linspace(*scene.depth_range(0.03), 4)
    with pytest.warns(aquamvs.TiltedSurfaceWarning,
                      match=r"ref_model.normal is \[0.1, 0.0, -1.0\].*"
                            r"bends the rays.*native API.*handles a "
                            r"tilted") as caught:
        out = aquamvs.build_cost_volume(tilted[0], tilted[1:], frames[0],
                                        frames[1:], depths, Config())
    assert caught[0].filename == __file__   # the user's call
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = aquamvs.build_cost_volume(tilted[0], tilted[1:], frames[0],
                                          frames[1:], depths, Config())
    assert torch.equal(out, again)
    expected = models_volume(tilted, frames, depths, Config())
    assert (out.double() - expected).abs().max() < 1e-5
    flat = aquamvs.build_cost_volume(level[0], level[1:], frames[0],
                                     frames[1:], depths, Config())
    assert (out - flat).abs().max() > 1e-2     # the tilt is not ignored


def test_a_tilted_source_normal_warns_at_the_users_call(scene):
    frames = [their_gray(f) for f in bgr_frames(scene, torch.float32)]
    models = [Model(c) for c in scene.cameras]
    models[2] = Model(scene.cameras[2], normal=(0.0, 0.05, -1.0))
    with pytest.warns(aquamvs.TiltedSurfaceWarning,
                      match=r"src_models\[1\].normal") as caught:
        aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                  frames[1:], torch.tensor([1.1, 1.2]),
                                  Config())
    assert caught[0].filename == __file__


def test_a_tilt_warning_hidden_by_a_filter_is_kept_for_a_later_call(scene):
    # "once per process" means once seen: a first call made under an
    # "ignore" filter must not spend it
    frames = [their_gray(f) for f in bgr_frames(scene, torch.float32)]
    models = [Model(c, normal=(0.1, 0.0, -1.0)) for c in scene.cameras]
    depths = torch.tensor([1.1, 1.2])
    with warnings.catch_warnings(record=True) as hidden:
        warnings.simplefilter("ignore", aquamvs.TiltedSurfaceWarning)
        aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                  frames[1:], depths, Config())
    assert hidden == []
    with pytest.warns(aquamvs.TiltedSurfaceWarning) as caught:
        aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                  frames[1:], depths, Config())
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # and then it is spent
        aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                  frames[1:], depths, Config())


def test_filters_holding_plain_strings_are_read_as_warnings_reads_them(
        scene):
    # warnings.filters may hold a string pattern (its own defaults do),
    # matched exactly: one for another module leaves the warning shown
    frames = [their_gray(f) for f in bgr_frames(scene, torch.float32)]
    models = [Model(c, normal=(0.1, 0.0, -1.0)) for c in scene.cameras]
    with pytest.warns(aquamvs.TiltedSurfaceWarning):
        warnings.filters.insert(0, ("ignore", None, UserWarning,
                                    "elsewhere", 0))
        warnings.filters.insert(0, ("ignore", "no such message",
                                    UserWarning, None, 0))
        aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                  frames[1:], torch.tensor([1.1, 1.2]),
                                  Config())


def test_a_normal_of_another_length_warns_and_bends_as_aquamvs_does(scene):
    frames = [their_gray(f) for f in bgr_frames(scene, torch.float32)]
    models = [Model(c, normal=(0.0, 0.0, -2.0)) for c in scene.cameras]
    depths = torch.linspace(*scene.depth_range(0.03), 3)
    with pytest.warns(aquamvs.TiltedSurfaceWarning, match=r"its length"):
        out = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                        frames[1:], depths, Config())
    expected = models_volume(models, frames, depths, Config())
    assert (out.double() - expected).abs().max() < 1e-5


def test_level_normals_in_float32_do_not_warn(scene):
    # (0, 0, -1) rotated and back in float32 keeps a trace of rounding
    frames = [their_gray(f) for f in bgr_frames(scene, torch.float32)]
    models = [Model(c, torch.float32, normal=(3e-8, -2e-8, -1.0 + 6e-8))
              for c in scene.cameras]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                  frames[1:], torch.tensor([1.1, 1.2]),
                                  Config())


def test_pixels_looking_above_the_horizon_cast_as_aquamvs_does():
    # cameras pitched so that the reference's bottom rows look up: AquaMVS
    # still meets the plane (behind the camera) and bends the ray into
    # the water, so those pixels sample the sources as any other
    sc = scenes.make_scene("flat", "refractive", 3, 48, 64)
    models = [Model(scenes.pitched(cam, 75.0)) for cam in sc.cameras]
    theirs = [reference.RefractiveModel(m.K, m.R, m.t, m.water_z, m.normal,
                                        m.n_air, m.n_water) for m in models]
    grid = reference.pixel_grid(48, 64, torch.float64)
    in_air = torch.cat([grid, torch.ones(len(grid), 1, dtype=torch.float64)],
                       1) @ torch.linalg.inv(models[0].K).T @ models[0].R
    up = (in_air[:, 2] < 0).numpy()
    assert 0 < up.sum() < len(up) / 4
    origins, directions, valid = _aquamvs_inputs.camera(
        models[0], "ref_model").cast_rays(grid.numpy())
    their_origins, their_directions = theirs[0].cast_ray(grid)
    assert valid.all()
    np.testing.assert_allclose(origins, their_origins.numpy(), atol=1e-9)
    np.testing.assert_allclose(directions, their_directions.numpy(),
                               atol=1e-12)
    frame = torch.from_numpy(sc.images[1].copy())
    seen = 0
    for depth in (1.0, 8.0):   # far enough for the sources to see some
        ours = aquamvs.warp_source_image(models[0], models[1], frame, depth,
                                         grid).reshape(-1).numpy()[up]
        want = reference.warp(their_origins, their_directions, theirs[1],
                              frame.double(), depth).reshape(-1).numpy()[up]
        np.testing.assert_allclose(ours, want, atol=1e-5)
        seen += np.isfinite(want).sum()
    assert seen > 0
    # and the volume, whose rays just under the horizon reach the water
    # hundreds of metres out (the sweep solves those boxes cold)
    frames = [torch.from_numpy(g.copy()) for g in sc.images]
    depths = torch.tensor([0.5, 8.0])
    config = Config(window_size=5)
    out = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                    frames[1:], depths, config)
    expected = models_volume(models, frames, depths, config)
    assert (out.double() - expected).abs().max() < 1e-5


def test_extract_depth_takes_the_first_step_for_all():
    volume = torch.tensor([[[0.9, 0.5, 0.2, 0.6, 0.9],
                            [0.1, 0.5, 0.6, 0.7, 0.8],
                            [0.9, 0.8, 0.7, 0.6, 0.5],
                            [0.7, 0.7, 0.7, 0.7, 0.7]]])
    depths = torch.tensor([1.0, 1.1, 1.5, 2.0, 3.0])
    depth, confidence = aquamvs.extract_depth(volume, depths)
    offset = 0.5 * (0.5 - 0.6) / (0.5 - 2 * 0.2 + 0.6 + 1e-8)
    expected = torch.tensor(1.5) + torch.tensor(offset) * (
        depths[1] - depths[0])
    assert torch.allclose(depth[0, 0], expected, rtol=0, atol=1e-6)
    distinct = 1 - 0.2 / (volume[0, 0].mean() + 1e-8)
    assert torch.allclose(confidence[0, 0], torch.sqrt(0.8 * distinct))
    # best at the first or last hypothesis (a tie goes to the first)
    assert torch.isnan(depth[0, 1:]).all()
    assert (confidence[0, 1:] == 0).all()
    want_depth, want_confidence = reference.extract_depth(volume, depths)
    assert torch.equal(depth.isnan(), want_depth.isnan())
    assert torch.equal(depth[0, :1], want_depth[0, :1])
    assert torch.equal(confidence, want_confidence)


def test_warp_source_image_matches_aquamvss_warp(scene):
    ref_model, src_model = (Model(c) for c in scene.cameras[:2])
    grid = reference.pixel_grid(H, W, torch.float64)
    src = torch.from_numpy(scene.images[1])
    origins, directions = reference.RefractiveModel.from_camera(
        scene.cameras[0], torch.float64).cast_ray(grid)
    src64 = reference.RefractiveModel.from_camera(scene.cameras[1],
                                                  torch.float64)
    lo, hi = scene.depth_range(0.03)
    for depth in (lo, hi, 3.0 * hi, 0.0, -0.1):
        warped = aquamvs.warp_source_image(ref_model, src_model, src, depth,
                                           grid)
        expected = reference.warp(origins, directions, src64, src.double(),
                                  depth)
        assert torch.equal(warped.isnan(), expected.isnan())
        seen = ~expected.isnan()
        if seen.any():
            assert (warped.double() - expected)[seen].abs().max() < 1e-5
        if depth <= 0:
            assert warped.isnan().all()


def test_warp_source_image_with_textbook_parity_is_the_native_warp(scene):
    ref_model, src_model = (Model(c) for c in scene.cameras[:2])
    grid = reference.pixel_grid(H, W)
    depth = float(scene.depth_range(0.03)[1])
    warped = aquamvs.warp_source_image(ref_model, src_model,
                                       torch.from_numpy(scene.images[1]),
                                       depth, grid, parity="textbook")
    native = torch.from_numpy(mvs.warp(scene.images[1], scene.cameras[0],
                                       scene.cameras[1], depth))
    assert torch.equal(warped.isnan(), native.isnan())
    assert native.isnan().any()
    seen = ~native.isnan()
    assert (warped - native)[seen].abs().max() < 1e-5


def test_generate_depth_hypotheses_is_linspace():
    assert torch.equal(aquamvs.generate_depth_hypotheses(0.5, 1.5, 11),
                       torch.linspace(0.5, 1.5, 11))


def test_the_accuracy_script_prints_both_parities_per_scene_and_cost(
        capsys):
    assert mvs_accuracy.main(["--height", "48", "--width", "64",
                              "--views", "3", "--depths", "12",
                              "--window", "5"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            [2:]]
    assert [r[:3] for r in rows] == [
        [kind, cost, parity] for kind in ("flat", "wavy")
        for cost in ("ncc", "ssim") for parity in ("aquamvs", "textbook")]
    for row in rows:
        error, complete, differ = map(float, row[3:])
        assert error > 0 and 0 < complete <= 100 and 0 <= differ <= 100


def test_the_speed_script_times_both_and_says_how_far_apart(capsys):
    assert bench_aquamvs_dropin.main(["--height", "24", "--width", "32",
                                      "--views", "3", "--depths", "4",
                                      "--window", "5", "--repeats", "1"]) \
        == 0
    out = capsys.readouterr().out
    # the kernels, as AquaMVS's own models run them: not the torch path
    # that a model with its own methods takes
    assert "drop-in geometry: native, the kernels" in out
    assert out.count("x faster") == 2
    gap = float(out.rsplit(":", 1)[1])
    assert gap < 1e-4


@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_the_row_then_column_window_sums_are_aquamvs_conv2d_sums(cost):
    """The fast-conv stand-in that the speed target is judged against
    computes AquaMVS's costs, borders and unseen samples included."""
    scene = scenes.make_scene("wavy", "refractive", 2, 40, 56)
    ref = torch.from_numpy(scene.ref.astype(np.float64))
    warped = torch.from_numpy(scene.images[1].astype(np.float64))
    warped[:, :9] = float("nan")
    warped[30:, 20:31] = float("nan")
    whole = reference.window_cost(ref, warped, cost, 11)
    rows_then_columns = reference.window_cost(ref, warped, cost, 11,
                                              separable=True)
    assert torch.allclose(whole, rows_then_columns, atol=1e-10, rtol=0)
    assert (whole == 1).any() and (whole < 1).any()


def test_the_cpu_speed_script_judges_against_the_faster_aquamvs(
        capsys, monkeypatch):
    made = []

    def separable_conv(*args):
        made.append(args[0])
        return real(*args)
    real = reference.separable_conv
    monkeypatch.setattr(reference, "separable_conv", separable_conv)
    threads = torch.get_num_threads()
    try:
        assert bench_aquamvs.main(["--height", "24", "--width", "32",
                                   "--views", "2", "--depths", "3",
                                   "--window", "5", "--threads", "1",
                                   "--repeats", "1", "--torch-planes",
                                   "1"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()
            if line.startswith(("ncc ", "ssim "))]
    assert [r[:3] for r in rows] == [[c, "1", m] for c in ("ncc", "ssim")
                                     for m in ("textbook", "aquamvs")]
    for row in rows:
        ours, written, fast = map(float, row[3:6])
        ratio = float(row[6].rstrip("x"))
        assert ratio == pytest.approx(min(written, fast) / ours, rel=0.02,
                                      abs=0.06)
    assert "targets (NCC >= 40x, SSIM >= 20x): " in out
    # the fast-conv column is AquaMVS with its window sums separable
    assert set(made) == {"ncc", "ssim"}


def test_the_cpu_speed_script_alternates_the_sides_round_by_round():
    # a busy spell of a shared machine must slow both sides, not one
    calls = []
    best = alternating.interleaved(
        {"theirs": lambda i: calls.append(("theirs", i)),
         "ours": lambda i: calls.append(("ours", i))}, 3)
    assert calls == [("theirs", 0), ("ours", 0), ("theirs", 1),
                     ("ours", 1), ("theirs", 2), ("ours", 2)]
    assert set(best) == {"theirs", "ours"}
    assert all(0 <= t < 1 for t in best.values())


def test_the_per_sample_script_times_each_width(capsys):
    assert mvs_per_sample.main(["--widths", "16,24", "--height", "16",
                                "--views", "2", "--depths", "3",
                                "--repeats", "1"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            [2:]]
    assert [r[0] for r in rows] == ["16", "24"]
    assert all(float(r[1]) > 0 for r in rows)


@pytest.mark.skipif(shutil.which("valgrind") is None,
                    reason="valgrind is not installed")
@pytest.mark.skipif(os.environ.get("AQUAPROF_SANITIZED") == "1",
                    reason="valgrind cannot run AddressSanitizer's runtime; "
                           "the normal run of the suite checks this")
def test_the_instruction_count_script_counts_the_sweep_by_function(capsys):
    assert mvs_instructions.main(["--height", "16", "--width", "20",
                                  "--views", "1", "--planes", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    counts = {line.split()[0]: float(line.split()[1]) for line in lines[2:]
              if len(line.split()) == 3}
    # the bilinear sample runs once a sample, whatever the setup
    assert counts["sample_edges_chunk"] > 1
    shares = [float(line.split()[2].rstrip("%")) for line in lines[2:]
              if len(line.split()) == 3]
    assert sum(shares) <= 100.5 and shares == sorted(shares, reverse=True)
    total = float(lines[-2].split()[-1])
    assert total == pytest.approx(counts["sample_edges_chunk"] * 100
                                  / shares[list(counts).index(
                                      "sample_edges_chunk")], rel=0.01)
    assert "instructions a cycle" in lines[-1]


@pytest.mark.parametrize("bad", [["--planes", "0"], ["--views", "0"],
                                 ["--height", "8"], ["--cost", "l2"]])
def test_the_instruction_count_script_refuses_bad_arguments(bad):
    with pytest.raises(SystemExit):
        mvs_instructions.main(bad)


def test_the_per_sample_script_pitches_the_cameras(capsys):
    assert mvs_per_sample.main(["--widths", "24", "--height", "16",
                                "--views", "1", "--depths", "2",
                                "--repeats", "1", "--pitch", "75"]) == 0
    out = capsys.readouterr().out
    assert "cameras pitched 75 degrees" in out
    assert float(out.splitlines()[-1].split()[1]) > 0


@pytest.mark.parametrize("bad", [["--widths", "0"], ["--widths", "x"],
                                 ["--repeats", "0"], ["--pitch", "90"]])
def test_the_per_sample_script_refuses_bad_counts(bad):
    with pytest.raises(SystemExit):
        mvs_per_sample.main(bad)


def test_the_stage_split_script_times_five_volumes_and_their_shares(
        capsys):
    assert mvs_stage_split.main(["--height", "16", "--width", "24",
                                 "--views", "1", "--depths", "2",
                                 "--rounds", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    times = {tuple(line.split()[:2]): float(line.split()[2])
             for line in lines[1:6]}
    assert set(times) == {("sad", "refractive"), ("ncc", "refractive"),
                          ("ssim", "refractive"), ("ncc", "pinhole"),
                          ("ssim", "pinhole")}
    assert all(t > 0 for t in times.values())
    # from times printed to 4 figures
    share = float(lines[6].split()[-1].rstrip("%")) / 100
    assert share == pytest.approx(
        1 - times[("ncc", "pinhole")] / times[("ncc", "refractive")],
        abs=0.005)
    assert lines[-1].startswith("SSIM's Gaussian sums beyond SAD's")


@pytest.mark.parametrize("bad", [["--views", "0"], ["--rounds", "0"],
                                 ["--height", "15"], ["--parity", "torch"]])
def test_the_stage_split_script_refuses_bad_arguments(bad):
    with pytest.raises(SystemExit):
        mvs_stage_split.main(bad)


@pytest.mark.parametrize("threads", ["one", "0", "1,-2"])
def test_the_cpu_speed_script_refuses_a_bad_thread_list(threads):
    with pytest.raises(SystemExit):
        bench_aquamvs.main(["--threads", threads])


# -- bad inputs ------------------------------------------------------------

class Partial:
    K = torch.eye(3)
    water_z = 0.2


def small_inputs():
    cam = scenes.make_scene("flat", "refractive", 2, 16, 16).cameras[0]
    return Model(cam), torch.rand(16, 16, 3)


def stereo(model=None, image=None, config=None, depth_range=(1.0, 1.2),
           src_names=("b",), src_models=None, src_images=None, **options):
    good_model, good_image = small_inputs()
    model = good_model if model is None else model
    image = good_image if image is None else image
    return aquamvs.plane_sweep_stereo(
        "a", model, src_names,
        {"b": model} if src_models is None else src_models, image,
        {"b": image} if src_images is None else src_images, depth_range,
        Config() if config is None else config, **options)


def with_attribute(name, value):
    model = small_inputs()[0]
    setattr(model, name, value)
    return model


@dataclass
class NoCost:
    window_size: int = 11


BAD = [
    (lambda: stereo(model=Partial()), TypeError,
     r"ref_model \(Partial\) has no R, t, normal, n_air, n_water: a "
     r"projection model must carry K, R, t, water_z, normal, n_air, "
     r"n_water, or implement AquaMVS's projection protocol \(its own "
     r"cast_ray\(\)"),
    (lambda: stereo(model=with_attribute("K", "eye")), ValueError,
     r"ref_model.K must be numbers, got str"),
    (lambda: stereo(model=with_attribute("water_z", torch.zeros(2))),
     ValueError, r"ref_model.water_z must be one number, got shape \(2,\)"),
    (lambda: stereo(model=with_attribute("normal", torch.zeros(3))),
     ValueError, r"ref_model.normal is the zero vector"),
    (lambda: stereo(model=with_attribute("normal", torch.ones(2))),
     ValueError, r"ref_model.normal must be 3 finite numbers"),
    (lambda: stereo(model=with_attribute("water_z", -1.0)), ValueError,
     r"ref_model: not a valid camera: the camera centre .* below its "
     r"water"),
    (lambda: stereo(model=with_attribute("n_water", -1.0)), ValueError,
     r"ref_model: n_water is -1.0"),
    (lambda: stereo(config=object()), TypeError,
     r"config \(object\) has no cost_function, window_size, num_depths"),
    (lambda: aquamvs.build_cost_volume(*small_inputs()[:1], [small_inputs()[0]],
                                       small_inputs()[1], [small_inputs()[1]],
                                       torch.tensor([1.0, 1.1]), NoCost()),
     TypeError, r"config \(NoCost\) has no cost_function: a dense stereo "
     r"config must carry cost_function, window_size$"),
    (lambda: stereo(config=Config(cost_function="sad")), ValueError,
     r"unknown cost function 'sad', expected 'ncc' or 'ssim'"),
    (lambda: stereo(config=Config(window_size=10)), ValueError,
     r"config.window_size must be an odd int >= 3, got 10"),
    (lambda: stereo(config=Config(window_size=True)), ValueError,
     r"config.window_size must be an odd int"),
    (lambda: stereo(config=Config(window_size=1)), ValueError,
     r"config.window_size must be an odd int"),
    (lambda: stereo(config=Config(num_depths=0)), ValueError,
     r"config.num_depths must be an int >= 1"),
    (lambda: stereo(config=Config(num_depths=8.0)), ValueError,
     r"config.num_depths must be an int >= 1"),
    (lambda: stereo(parity="opencv"), ValueError,
     r"parity must be one of \['aquamvs', 'textbook'\], got 'opencv'"),
    (lambda: stereo(depth_range=(1.0, float("nan"))), ValueError,
     r"depth range must be finite"),
    (lambda: stereo(depth_range=(1.0,)), ValueError,
     r"depth_range must be \(d_min, d_max\)"),
    (lambda: stereo(src_names=()), ValueError,
     r"src_names must name at least one source camera"),
    (lambda: stereo(src_names="b"), TypeError,
     r"src_names must be a list of camera names, got str"),
    (lambda: stereo(src_names=("b", "c", "d")), KeyError,
     r"src_models has no entry for 'c', 'd'"),
    (lambda: stereo(src_images=[torch.rand(16, 16, 3)]), TypeError,
     r"src_images must map camera names to entries, got list"),
    (lambda: stereo(image=np.zeros((16, 16, 3), np.float32).tolist()),
     TypeError, r"ref_image must be a torch tensor, got list"),
    (lambda: stereo(image=torch.zeros(16, 16, 3, dtype=torch.int32)),
     ValueError, r"ref_image must be \(H, W, 3\) BGR or \(H, W\) gray, "
     r"uint8 or float32, got torch.int32 \(16, 16, 3\)"),
    (lambda: stereo(image=torch.zeros(16, 16, 4)), ValueError,
     r"ref_image must be \(H, W, 3\) BGR or \(H, W\) gray"),
    (lambda: stereo(image=torch.zeros(1, 16)), ValueError,
     r"ref_image must be at least 2 x 2 pixels"),
    (lambda: stereo(image=torch.full((16, 16), float("nan"))), ValueError,
     r"ref_image must be finite"),
    (lambda: stereo(src_images={"b": torch.rand(16, 8)}), ValueError,
     r"src_images\['b'\] is \(16, 8\), ref_image \(16, 16\)"),
    (lambda: aquamvs.build_cost_volume(small_inputs()[0], [small_inputs()[0]] * 2,
                                       small_inputs()[1], [small_inputs()[1]],
                                       torch.tensor([1.0]), Config()),
     ValueError, r"src_models and src_images must hold one entry per "
     r"source view, at least one: got 2 and 1"),
    (lambda: aquamvs.build_cost_volume(small_inputs()[0], {"b": small_inputs()[0]},
                                       small_inputs()[1], [small_inputs()[1]],
                                       torch.tensor([1.0]), Config()),
     TypeError, r"src_models must be a list of projection models, got "
     r"dict"),
    (lambda: aquamvs.build_cost_volume(small_inputs()[0], [small_inputs()[0]],
                                       small_inputs()[1], [small_inputs()[1]],
                                       torch.tensor([1.0, float("inf")]),
                                       Config()),
     ValueError, r"depths must be finite"),
    (lambda: aquamvs.build_cost_volume(small_inputs()[0], [small_inputs()[0]],
                                       small_inputs()[1], [small_inputs()[1]],
                                       torch.ones(2, 2), Config()),
     ValueError, r"depths must be a non-empty 1-D tensor, got shape "
     r"\(2, 2\)"),
    (lambda: aquamvs.extract_depth(np.zeros((4, 4, 3), np.float32),
                                   torch.ones(3)),
     ValueError, r"cost_volume must be a float \(H, W, D\) tensor, got "
     r"ndarray"),
    (lambda: aquamvs.extract_depth(torch.zeros(4, 4, 3, dtype=torch.int32),
                                   torch.ones(3)),
     ValueError, r"cost_volume must be a float \(H, W, D\) tensor, got "
     r"torch.int32 \(4, 4, 3\)"),
    (lambda: aquamvs.extract_depth(torch.zeros(4, 4, 3), torch.ones(4)),
     ValueError, r"depths must be \(D,\) with D = 3, the cost_volume's "
     r"planes, got \(4,\)"),
    (lambda: aquamvs.extract_depth(torch.zeros(4, 4, 1), torch.ones(1)),
     ValueError, r"at least 2 depth hypotheses"),
    (lambda: aquamvs.warp_source_image(small_inputs()[0], small_inputs()[0], small_inputs()[1],
                                       1.0, torch.zeros(10, 2)),
     ValueError, r"pixel_grid must hold one \(u, v\) per pixel of "
     r"src_image, \(256, 2\) numbers, got float32 \(10, 2\)"),
    (lambda: aquamvs.warp_source_image(small_inputs()[0], small_inputs()[0], small_inputs()[1],
                                       float("nan"),
                                       reference.pixel_grid(16, 16)),
     ValueError, r"depth must be finite"),
    (lambda: aquamvs.generate_depth_hypotheses(1.0, 2.0, 0), ValueError,
     r"num_depths must be an int >= 1, got 0"),
]


@pytest.mark.parametrize("call,error,message", BAD)
def test_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_numpy_ints_in_the_config_are_ints():
    # a config read from YAML through NumPy, say: AquaMVS takes them
    model, image = small_inputs()
    plain = stereo(model=model, image=image)["cost_volume"]
    numpy_ints = stereo(model=model, image=image,
                        config=Config(window_size=np.int64(11),
                                      num_depths=np.int32(16)))
    assert torch.equal(plain, numpy_ints["cost_volume"])


def test_tensors_that_require_grad_are_read_as_their_values():
    # AquaMVS runs on them; the volume has no gradient either way
    model, image = small_inputs()
    plain = stereo(model=model, image=image)["cost_volume"]
    frame = image.clone().requires_grad_()
    lo = torch.tensor(1.0, requires_grad=True)
    model.t = model.t.clone().requires_grad_()
    out = stereo(model=model, image=frame, depth_range=(lo, 1.2))
    assert torch.equal(plain, out["cost_volume"])
    assert not out["cost_volume"].requires_grad
    warped = aquamvs.warp_source_image(
        model, model, frame, torch.tensor(1.1, requires_grad=True),
        reference.pixel_grid(16, 16).requires_grad_())
    assert warped.shape == (16, 16)


def test_ranges_and_counts_run_as_aquamvs_runs_them():
    # a reversed range sweeps down, an empty one one depth many times, a
    # single depth gives a volume (whose depth extraction AquaMVS cannot
    # do either); source images may come stacked
    model, image = small_inputs()
    up = stereo(model=model, image=image, config=Config(num_depths=4),
                depth_range=(1.0, 1.3))
    down = stereo(model=model, image=image, config=Config(num_depths=4),
                  depth_range=(1.3, 1.0))
    assert torch.equal(down["depths"], torch.linspace(1.3, 1.0, 4))
    assert torch.equal(down["cost_volume"], up["cost_volume"].flip(2))
    same = stereo(model=model, image=image, config=Config(num_depths=3),
                  depth_range=(1.1, 1.1))["cost_volume"]
    assert torch.equal(same[..., 0], same[..., 2])
    one = stereo(model=model, image=image, config=Config(num_depths=1))
    assert one["cost_volume"].shape == (16, 16, 1)
    with pytest.raises(ValueError, match="at least 2 depth hypotheses"):
        aquamvs.extract_depth(one["cost_volume"], one["depths"])
    gray = their_gray(image)
    listed = aquamvs.build_cost_volume(model, [model, model], gray,
                                       [gray, gray], down["depths"],
                                       Config())
    for stack in (torch.stack([gray, gray]), np.stack([gray, gray])):
        stacked = aquamvs.build_cost_volume(model, [model, model], gray,
                                            stack, down["depths"], Config())
        assert torch.equal(listed, stacked)


def test_without_torch_the_error_says_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match=r"pip install torch"):
        aquamvs.generate_depth_hypotheses(1.0, 2.0, 3)


# -- on a GPU ----------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="no CUDA device for torch")
@pytest.mark.parametrize("parity", ["aquamvs", "textbook"])
def test_cuda_tensors_run_on_the_gpu_and_match_the_cpu(scene, parity):
    frames = bgr_frames(scene, torch.uint8)
    depth_range = scene.depth_range(0.03)
    cpu = run_stereo(scene, Config(), frames, depth_range, parity=parity)
    gpu = run_stereo(scene, Config(), frames, depth_range, device="cuda",
                     parity=parity)
    assert gpu["cost_volume"].is_cuda and gpu["depths"].is_cuda
    assert (gpu["cost_volume"].cpu() - cpu["cost_volume"]).abs().max() \
        < 1e-4
    depth, confidence = aquamvs.extract_depth(gpu["cost_volume"],
                                              gpu["depths"])
    assert depth.is_cuda and confidence.is_cuda
    cpu_depth = aquamvs.extract_depth(cpu["cost_volume"], cpu["depths"])[0]
    assert (depth.cpu().isnan() != cpu_depth.isnan()).float().mean() < 1e-3


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="no CUDA device for torch")
def test_cuda_tensors_cast_as_aquamvs_does_with_tilted_pitched_models():
    # the CUDA ray kernel bends about the normal as given and casts the
    # pixels looking up, as the CPU does
    sc = scenes.make_scene("flat", "refractive", 3, 48, 64)
    models = [Model(scenes.pitched(cam, 75.0), normal=(0.05, 0.0, -1.1))
              for cam in sc.cameras]
    frames = [torch.from_numpy(g.copy()) for g in sc.images]
    depths = torch.tensor([0.5, 8.0])
    config = Config(window_size=5)
    with pytest.warns(aquamvs.TiltedSurfaceWarning):
        cpu = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                        frames[1:], depths, config)
    gpu = aquamvs.build_cost_volume(models[0], models[1:], frames[0].cuda(),
                                    [f.cuda() for f in frames[1:]],
                                    depths.cuda(), config)
    assert (gpu.cpu() - cpu).abs().max() < 1e-4
    expected = models_volume(models, frames, depths, config)
    assert (cpu.double() - expected).abs().max() < 1e-5


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="no CUDA device for torch")
def test_cuda_tensors_with_uneven_depths_from_zero(scene):
    frames = [their_gray(f).cuda() for f in bgr_frames(scene,
                                                        torch.float32)]
    models = [Model(c) for c in scene.cameras]
    depths = torch.tensor([0.0, 1.15, 1.1, 1.2], device="cuda")
    volume = aquamvs.build_cost_volume(models[0], models[1:], frames[0],
                                       frames[1:], depths, Config())
    cpu = aquamvs.build_cost_volume(models[0], models[1:],
                                    frames[0].cpu(),
                                    [f.cpu() for f in frames[1:]],
                                    depths.cpu(), Config())
    assert volume.is_cuda
    assert (volume.cpu() - cpu).abs().max() < 1e-4
    assert torch.equal(volume[:, :, 0].cpu(), torch.ones(H, W))
    warped = aquamvs.warp_source_image(models[0], models[1], frames[1],
                                       1.15, reference.pixel_grid(H, W))
    assert warped.is_cuda
