"""AquaMVS's own dense tests, each listed with what it reaches and how
it fares through the drop-in, and the runner that runs them (through
plugin.py) in a pytest of their own.

AquaMVS 1.7.3 ships no tests in its wheel or its sdist (``pip download
--no-binary :all: aquamvs==1.7.3`` holds tests/, without test_dense/);
they are in its repository, github.com/tlancaster6/AquaMVS, under
tests/test_dense (tagged v1.5.2 there; its dense code, cost.py,
plane_sweep.py and projection/, is the same file for file as 1.7.3's).
AQUAMVS_TESTS names that tests/ folder of a checkout; without it the
runner's test skips and says so. Their code is not copied here."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, Optional

REPO = Path(__file__).resolve().parents[3]
FILES = ("test_dense/test_cost.py", "test_dense/test_depth_extraction.py",
         "test_dense/test_plane_sweep.py")
#: files of test_dense/ not run, and why
NOT_RUN = {
    "test_dense/test_roma_depth.py": "the RoMa path (needs romav2): "
    "dense matching, not the plane sweep; the drop-in has none of its "
    "functions",
}
WHY_MISSING = ("AquaMVS's dense tests do not ship in its wheel or sdist: "
               "set AQUAMVS_TESTS to the tests/ folder of a checkout of "
               "github.com/tlancaster6/AquaMVS")

DROPIN = "the drop-in's"
THEIRS = "AquaMVS's own: private, the drop-in has no such function"
#: every test (its id without parameters) and the functions it reaches
REACHES = {
    "test_cost.py::TestComputeNCC::test_identical_images_zero_cost":
        "compute_ncc",
    "test_cost.py::TestComputeNCC::test_uncorrelated_images_high_cost":
        "compute_ncc",
    "test_cost.py::TestComputeNCC::test_linear_shift_robustness":
        "compute_ncc",
    "test_cost.py::TestComputeNCC::test_nan_handling": "compute_ncc",
    "test_cost.py::TestComputeNCC::test_output_shape_various_sizes":
        "compute_ncc",
    "test_cost.py::TestComputeNCC::test_differentiability":
        "compute_ncc (autograd)",
    "test_cost.py::TestComputeSSIM::test_identical_images_zero_cost":
        "compute_ssim",
    "test_cost.py::TestComputeSSIM::test_uncorrelated_images_high_cost":
        "compute_ssim",
    "test_cost.py::TestComputeSSIM::test_linear_shift_sensitivity":
        "compute_ssim",
    "test_cost.py::TestComputeSSIM::test_nan_handling": "compute_ssim",
    "test_cost.py::TestComputeSSIM::test_output_shape_various_sizes":
        "compute_ssim",
    "test_cost.py::TestComputeSSIM::test_differentiability":
        "compute_ssim (autograd)",
    "test_cost.py::TestComputeCost::test_dispatch_ncc": "compute_cost",
    "test_cost.py::TestComputeCost::test_dispatch_ssim": "compute_cost",
    "test_cost.py::TestComputeCost::test_unknown_cost_function_raises":
        "compute_cost (its error)",
    "test_cost.py::TestAggregateCosts::test_mean_aggregation":
        "aggregate_costs",
    "test_cost.py::TestAggregateCosts::test_single_cost_map":
        "aggregate_costs",
    "test_cost.py::TestWindowSizeEffect::test_larger_window_smoother":
        "compute_ncc",
    "test_cost.py::TestCostRange::test_ncc_range": "compute_ncc",
    "test_cost.py::TestCostRange::test_ssim_range": "compute_ssim",
    "test_depth_extraction.py::test_wta_picks_correct_minimum":
        "extract_depth",
    "test_depth_extraction.py::test_subpixel_parabola_accuracy":
        "extract_depth",
    "test_depth_extraction.py::test_parabola_clamp": "extract_depth",
    "test_depth_extraction.py::test_boundary_masking": "extract_depth",
    "test_depth_extraction.py::test_confidence_range": "extract_depth",
    "test_depth_extraction.py::test_confidence_zero_for_invalid":
        "extract_depth",
    "test_depth_extraction.py::test_save_load_roundtrip":
        "save_depth_map, load_depth_map",
    "test_depth_extraction.py::test_save_load_path_types":
        "save_depth_map, load_depth_map",
    "test_depth_extraction.py::test_extract_depth_output_shapes":
        "extract_depth",
    "test_depth_extraction.py::test_extract_depth_with_all_boundary_minima":
        "extract_depth",
    "test_depth_extraction.py::test_extract_depth_numerical_stability":
        "extract_depth",
    "test_plane_sweep.py::TestGenerateDepthHypotheses::test_basic":
        "generate_depth_hypotheses",
    "test_plane_sweep.py::TestGenerateDepthHypotheses::test_single_depth":
        "generate_depth_hypotheses",
    "test_plane_sweep.py::TestGenerateDepthHypotheses::test_two_depths":
        "generate_depth_hypotheses",
    "test_plane_sweep.py::TestBgrToGray::test_uint8_conversion":
        "_bgr_to_gray",
    "test_plane_sweep.py::TestBgrToGray::test_float32_conversion":
        "_bgr_to_gray",
    "test_plane_sweep.py::TestBgrToGray::test_grayscale_weights":
        "_bgr_to_gray",
    "test_plane_sweep.py::TestMakePixelGrid::test_basic":
        "_make_pixel_grid",
    "test_plane_sweep.py::TestMakePixelGrid::test_pixel_ordering":
        "_make_pixel_grid",
    "test_plane_sweep.py::TestWarpSourceImage::test_identity_warp":
        "warp_source_image",
    "test_plane_sweep.py::TestWarpSourceImage::test_out_of_bounds_nan":
        "warp_source_image",
    "test_plane_sweep.py::TestBuildCostVolume::test_identical_images":
        "build_cost_volume",
    "test_plane_sweep.py::TestBuildCostVolume::test_cost_volume_shape":
        "build_cost_volume",
    "test_plane_sweep.py::TestPlaneSweepStereo::test_end_to_end_structure":
        "plane_sweep_stereo",
    "test_plane_sweep.py::TestPlaneSweepStereo::test_uint8_image_input":
        "plane_sweep_stereo",
    "test_plane_sweep.py::TestDepthBatching::test_batch_size_consistency":
        "build_cost_volume",
}
#: tests whose assertion a run's documented convention contradicts:
#: they must fail there (a pass would mean the convention changed)
FAILS = {
    ("textbook", "test_plane_sweep.py::TestWarpSourceImage::"
                 "test_out_of_bounds_nan"):
        "asserts that a source camera 1 m aside still sees some samples: "
        "AquaMVS zero-pads samples off the image; textbook parity marks "
        "them NaN (outside='nan', its documented default), and every "
        "sample of that pair is off the image",
}
#: a test's CUDA parameter runs where torch sees a CUDA device
CUDA = ("AquaMVS's own fixture skips it where torch sees no CUDA device; "
        "it runs on a GPU machine")


def tests_folder() -> Optional[Path]:
    folder = os.environ.get("AQUAMVS_TESTS")
    return Path(folder) if folder else None


def base_id(nodeid: str) -> str:
    """test_dense/test_cost.py::TestX::test_y[cpu] -> test_cost.py::TestX::
    test_y"""
    return nodeid.split("[", 1)[0].split("test_dense/", 1)[-1]


def expected(run: str, nodeid: str) -> str:
    if nodeid.endswith("[cuda]"):
        return "skipped"
    return "failed" if (run, base_id(nodeid)) in FAILS else "passed"


def run(folder: Path, which: str, timeout: float = 600) -> Dict[str, dict]:
    """AquaMVS's dense tests in `folder` run with `which` (plugin.RUNS)
    in a pytest of their own: {"outcomes": {nodeid: outcome}, "imported":
    {module: {name: is the drop-in's}}}."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        env = dict(os.environ, AQUAPROF_AQUAMVS_RUN=which,
                   AQUAPROF_AQUAMVS_REPORT=str(report),
                   PYTHONPATH=os.pathsep.join([str(REPO / "tests" / "support"),
                                               str(REPO)]))
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *[str(folder / f)
                                               for f in FILES],
             "-p", "aquamvs_harness.plugin", "-q", "-p", "no:cacheprovider",
             "--rootdir", str(folder.parent)],
            env=env, cwd=str(folder.parent), capture_output=True, text=True,
            timeout=timeout)
        if not report.exists():
            raise RuntimeError(f"AquaMVS's tests did not run "
                               f"(rc {done.returncode}):\n{done.stdout}"
                               f"\n{done.stderr}")
        return json.loads(report.read_text())
