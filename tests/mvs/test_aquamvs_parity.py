"""Parity as a contract, against AquaMVS as it runs: AquaMVS 1.7.3's own
unmodified dense code (tests/support/aquamvs_harness) on the same scenes, frames
and float32 models as the drop-in, flat and wavy, NCC and SSIM.

The contract, in numbers (benchmarks/mvs/bench_aquamvs_parity.py prints
them at any size):
- costs: the drop-in is within 5e-5 of AquaMVS run with its geometry in
  float64, and so within AquaMVS's own float32-vs-float64 spread (plus
  that) of AquaMVS as it runs in float32;
- depth maps (AquaMVS's extract_depth): a pixel's winning depth differs
  from AquaMVS's only at a near-tie, where AquaMVS's own two costs are
  closer than its spread; where the winners agree, the refined depths
  differ by no more than AquaMVS's own float64 run moves them (x 1.25,
  + 1e-3 of a step)."""
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from repo_paths import ROOT  # noqa: E402
sys.path.insert(0, str(ROOT / "benchmarks" / "mvs"))
import aquamvs_harness as harness  # noqa: E402
import bench_aquamvs_parity as bench  # noqa: E402

from aquaprof.mvs import aquamvs as dropin  # noqa: E402
from aquaprof.mvs import scenes  # noqa: E402

try:
    AQ = harness.load()
except ImportError as e:
    pytest.skip(str(e), allow_module_level=True)

#: the drop-in against AquaMVS's float64 geometry: the float32 arithmetic
#: of AquaMVS's cost functions, which cannot run in float64 (2.2e-5 for
#: NCC at 240 x 320, benchmarks/mvs/bench_aquamvs_parity.py)
COST_TOLERANCE = 5e-5
H, W, VIEWS, D = 96, 128, 3, 16


@dataclass
class Config:
    cost_function: str
    window_size: int = 11


@pytest.mark.parametrize("kind", ["flat", "wavy"])
@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_the_dropin_is_aquamvs_within_its_own_float32_spread(kind, cost):
    r = bench.compare(AQ, kind, cost, H, W, VIEWS, D, 11)
    assert r["spread"] > 0      # AquaMVS's float32 geometry moves it
    assert r["ours_f64"] < COST_TOLERANCE
    assert r["ours_f32"] <= r["spread"] + COST_TOLERANCE
    ours, f64 = r["ours"], r["f64"]
    assert ours["max_gap"] <= r["spread"]      # near-ties only
    assert ours["winners_differ"] < 0.01 * H * W
    assert ours["nan_differ_elsewhere"] == 0
    assert ours["max_depth_steps"] <= 1.25 * f64["max_depth_steps"] + 1e-3


def test_extract_depth_is_aquamvss_to_the_bit():
    scene = scenes.make_scene("wavy", "refractive", 3, 48, 64)
    depths = torch.linspace(*scene.depth_range(0.03), 16)
    volume = harness.cost_volume(AQ, scene.cameras, scene.images, depths,
                                 "ncc", 7, torch.float32)
    ours = dropin.extract_depth(volume, depths)
    theirs = AQ.plane_sweep.extract_depth(volume, depths)
    for a, b in zip(ours, theirs):
        assert torch.equal(a.isnan(), b.isnan())
        assert torch.equal(a.nan_to_num(), b.nan_to_num())


def warped_pair(seed=0, h=40, w=56):
    """A reference and a warped source with unseen (NaN) patches, the
    source a noisy, brightened copy so that costs span their range."""
    g = torch.Generator().manual_seed(seed)
    ref = torch.rand(h, w, generator=g)
    src = 0.7 * ref + 0.2 + 0.05 * torch.rand(h, w, generator=g)
    src[:, :9] = float("nan")
    src[25:, 20:31] = float("nan")
    return ref, src


@pytest.mark.parametrize("cost", ["ncc", "ssim"])
@pytest.mark.parametrize("window", [5, 11, 21])
def test_per_pair_costs_are_aquamvss(cost, window):
    ref, src = warped_pair()
    ours = dropin.compute_cost(ref, src, cost, window)
    theirs = AQ.cost.compute_cost(ref, src, cost, window)
    assert ours.dtype == theirs.dtype == torch.float32
    # AquaMVS's float32 convolutions against the drop-in's float64
    assert (ours - theirs).abs().max() < 2e-5
    assert ((ours == 1) == (theirs == 1)).float().mean() > 0.999


@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_per_pair_gradients_are_aquamvss(cost):
    ref, src = warped_pair(h=32, w=40)
    grads = []
    for fn in (dropin.compute_cost, AQ.cost.compute_cost):
        r = ref.clone().requires_grad_()
        fn(r, src, cost, 11).mean().backward()
        grads.append(r.grad)
    ours, theirs = grads
    # AquaMVS's sqrt(0) of windows without variance passes NaN back, over
    # half of this pair's pixels; the drop-in's gradient is finite there
    assert ours.isfinite().all()
    finite = theirs.isfinite()
    assert finite.float().mean() > 0.3 and ours.abs().max() > 0
    assert (ours - theirs)[finite].abs().max() < 1e-3 * theirs[
        finite].abs().max()


def test_depth_map_files_are_aquamvss_both_ways(tmp_path):
    depth = torch.rand(6, 8)
    depth[1, 2] = float("nan")
    confidence = torch.rand(6, 8)
    dropin.save_depth_map(depth, confidence, tmp_path / "ours.npz")
    AQ.plane_sweep.save_depth_map(depth, confidence, tmp_path / "theirs.npz")
    for name in ("ours", "theirs"):
        for load in (dropin.load_depth_map, AQ.plane_sweep.load_depth_map):
            d, c = load(tmp_path / f"{name}.npz")
            np.testing.assert_array_equal(d.numpy(), depth.numpy())
            np.testing.assert_array_equal(c.numpy(), confidence.numpy())
    with np.load(tmp_path / "ours.npz") as ours, \
            np.load(tmp_path / "theirs.npz") as theirs:
        assert ours.files == theirs.files == ["depth", "confidence"]


def test_warp_source_image_is_aquamvss_as_it_runs():
    scene = scenes.make_scene("flat", "refractive", 2, 48, 64)
    models = harness.models(AQ, scene.cameras, torch.float32)
    grid = AQ.plane_sweep._make_pixel_grid(48, 64)
    src = torch.from_numpy(scene.images[1])
    for depth in scene.depth_range(0.03):
        ours = dropin.warp_source_image(models[0], models[1], src, depth,
                                        grid)
        theirs = AQ.plane_sweep.warp_source_image(models[0], models[1], src,
                                                  depth, grid)
        assert torch.equal(ours.isnan(), theirs.isnan())
        seen = ~theirs.isnan()
        assert seen.float().mean() > 0.5
        # AquaMVS's float32 geometry places its samples within ~1e-4 px
        assert (ours - theirs)[seen].abs().max() < 1e-4


@pytest.mark.parametrize("cost", ["ncc", "ssim"])
def test_windows_wider_than_the_kernels_hold_are_aquamvss(cost):
    # window 65 runs in torch (the kernels hold up to 63), as AquaMVS's
    scene = scenes.make_scene("flat", "refractive", 2, 72, 80)
    depths = torch.linspace(*scene.depth_range(0.03), 3)
    theirs = harness.cost_volume(AQ, scene.cameras, scene.images, depths,
                                 cost, 65, torch.float32)
    models = harness.models(AQ, scene.cameras, torch.float32)
    frames = [torch.from_numpy(i) for i in scene.images]
    ours = dropin.build_cost_volume(models[0], models[1:], frames[0],
                                    frames[1:], depths, Config(cost, 65))
    assert (theirs < 1).float().mean() > 0.5
    assert (ours - theirs).abs().max() < 5e-5


def test_the_parity_script_prints_a_row_per_scene_and_cost(capsys):
    assert bench.main(["--height", "24", "--width", "32", "--views", "2",
                       "--depths", "4", "--window", "5"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            [2:]]
    assert [r[:2] for r in rows] == [[k, c] for k in ("flat", "wavy")
                                     for c in ("ncc", "ssim")]
    for row in rows:
        spread, ours_f64, ours_f32 = map(float, row[2:5])
        assert ours_f64 < 5e-5 and ours_f32 <= spread + 5e-5
