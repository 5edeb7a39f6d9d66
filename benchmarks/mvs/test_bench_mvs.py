"""The plane-sweep kernels at a modest size (bench_mvs.py has the full
comparison with torch): 240x320, 4 source views, 32 depths, NCC 11."""
import numpy as np
import pytest

from aquaprof import mvs
from aquaprof.mvs import scenes

SCENE = scenes.make_scene("flat", "refractive", 5, 240, 320)
DEPTHS = np.linspace(*SCENE.depth_range(0.03), 32)


def sweep(ref, srcs):
    return mvs.build_cost_volume(ref, srcs, SCENE.ref_cam, SCENE.cameras[1:],
                                 DEPTHS, "ncc", 11)


def test_cost_volume_cpu(benchmark):
    benchmark.extra_info["samples"] = 4 * 32 * 240 * 320
    benchmark.pedantic(sweep, args=(SCENE.ref, SCENE.images[1:]), rounds=5)


@pytest.mark.gpu
def test_cost_volume_cuda(benchmark):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    ref = torch.from_numpy(SCENE.ref).cuda()
    srcs = torch.from_numpy(np.stack(SCENE.images[1:])).cuda()
    benchmark.extra_info["samples"] = 4 * 32 * 240 * 320

    def run():
        out = sweep(ref, srcs)
        torch.cuda.synchronize()
        return out

    benchmark.pedantic(run, rounds=20, warmup_rounds=3)
