"""benchmarks/mvs/bench_mvs.py's GPU report, checked without a GPU: the
ways it times set the variables the launcher reads, and its depth map's
comparison with the CPU counts what it says it counts."""
import os
import sys

import numpy as np
import pytest

from repo_paths import ROOT
sys.path.insert(0, str(ROOT / "benchmarks" / "mvs"))
import bench_mvs  # noqa: E402
from aquaprof.mvs import _cuda  # noqa: E402


@pytest.mark.parametrize("how,warp,order", [
    ("strip", "strip", "planes"), ("strip-tiles", "strip", "tiles"),
    ("tile", "tile", "planes"), ("planes", "planes", "planes")])
def test_each_way_sets_the_launchers_variables(how, warp, order,
                                               monkeypatch):
    monkeypatch.setenv(_cuda.WARP_ENV, "x")
    monkeypatch.setenv(_cuda.ORDER_ENV, "x")
    bench_mvs.use_way(how)
    assert os.environ[_cuda.WARP_ENV] == warp
    assert os.environ[_cuda.ORDER_ENV] == order
    # values the package itself takes
    assert _cuda.warp_mode() == warp and _cuda.order_mode() == order


def test_the_depth_maps_agreement_counts_bits_planes_nans_confidence():
    """Planted: a value that is not its volume's extraction's bits; pixels
    a plane off the CPU's and two neighbours' swap refined to within half
    a step, which is no lost plane; NaN on one side; a confidence off."""
    rng = np.random.default_rng(3)
    want = rng.uniform(1.0, 2.0, (30, 40)).astype(np.float32)
    want_conf = rng.random((30, 40)).astype(np.float32)
    want[0, :5] = np.nan
    depth, conf = want.copy(), want_conf.copy()
    step = 0.01
    depth[5, 5] += step              # a plane away
    depth[6, 6] -= 2 * step
    depth[7, 7] += 0.4 * step        # a swap, refined within half a step
    depth[8, 8] = np.nan             # NaN here only
    depth[0, 0] = 1.5                # a depth where the CPU has none
    conf[9, 9] += 0.25
    volume_depth, volume_conf = depth.copy(), conf.copy()
    volume_conf[1, 1] = np.nextafter(conf[1, 1], np.float32(2))
    said = bench_mvs.depth_agreement(depth, conf, volume_depth, volume_conf,
                                     want, want_conf, step)
    assert said == ("1 values not the bits of its volume's extraction; "
                    "against the CPU: 2 of 1200 pixels over half a step "
                    "apart (at most 2 steps), 2 NaN on one side only, "
                    "confidence within 2.5e-01")
    same = bench_mvs.depth_agreement(want, want_conf, want, want_conf, want,
                                     want_conf, step)
    assert same.startswith("0 values not the bits") and \
        "0 of 1200 pixels" in same and "0 NaN" in same
