"""What an installed wheel must do on a machine without a compiler, run
by tests/support/wheel_check.sh in a fresh virtual environment whose PATH holds
that environment alone: profile, report, save and load, the plane-sweep
kit on a small scene, and GPU statuses that say why there is no GPU (the
kit's: the words given as the first argument). Exits non-zero, saying
what failed."""
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

import aquaprof as ap
from aquaprof import _mvs, mvs
from aquaprof.mvs import scenes


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"wheel smoke test: {what}")


def main() -> None:
    here = Path(ap.__file__).resolve()
    source = Path(__file__).resolve().parents[2]
    check(source not in here.parents,
          f"aquaprof imported from the source tree ({here}), not the wheel")
    for compiler in ("cc", "gcc", "clang", "nvcc"):
        check(shutil.which(compiler) is None,
              f"{compiler} is on the PATH: the check needs none")

    with ap.Profiler() as prof:
        for _ in range(10):
            with ap.stage("work", items=2):
                sum(range(1000))
    report = prof.report()
    check(report["work"].count == 10, "the stage was not recorded")
    with tempfile.TemporaryDirectory() as tmp:
        path = report.save(os.path.join(tmp, "run.json"))
        check(ap.Report.load(path) == report, "a saved report loads unequal")

    scene = scenes.make_scene("flat", "refractive", 3, 24, 32)
    depths = np.linspace(*scene.depth_range(0.03), 16)
    volume = mvs.build_cost_volume(scene.images[0], scene.images[1:],
                                   scene.ref_cam, scene.cameras[1:], depths)
    depth, confidence = mvs.extract_depth(volume, depths)
    check(depth.shape == (24, 32) and np.isfinite(depth).any(),
          "the plane-sweep kit gave no depth")

    status = report.gpu_status
    check(bool(status) and status != "not recorded",
          f"no GPU status: {status!r}")
    try:
        _mvs.gpu_check(0)
        kit = "a GPU is here"
    except RuntimeError as e:
        kit = str(e)
    check(sys.argv[1] in kit, f"the kit's GPU status {kit!r} does not say "
          f"{sys.argv[1]!r}")
    print(f"wheel smoke test passed: aquaprof {ap.__version__} from {here}; "
          f"profiler GPU status: {status}; kit: {kit}")


if __name__ == "__main__":
    main()
