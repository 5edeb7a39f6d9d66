"""The sizes the plane-sweep kernels index with C ints (2^31 - 1 pixels
per image or volume plane; 2^31 - 1 planes, views, depths) refused on
every CPU path, in Python and in the C binding, with the sizes and the
limit named, before anything is copied: the huge inputs here are
broadcast views that hold a few bytes. The GPU paths are in
test_mvs_gpu.py."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aquaprof.mvs as mvs
from aquaprof import _mvs
from aquaprof.mvs import scenes

K = np.array([[20, 0, 8], [0, 20, 6], [0, 0, 1.0]])
CAM = mvs.Camera.pinhole(K, np.eye(3), np.zeros(3))
IMG = np.zeros((12, 16), np.float32)
LIMIT = r"more than the 2147483647 \(2\^31 - 1\) the kernels index"
# 2^31 pixels, one more than the kernels index
HUGE = np.broadcast_to(np.float32(0.5), (1 << 16, 1 << 15))
TOO_MANY = r"65536 x 32768 = 2147483648 pixels, " + LIMIT
MANY_VIEWS = np.broadcast_to(IMG, (1 << 31,) + IMG.shape)
MANY_DEPTHS = np.broadcast_to(np.float64(1.0), (1 << 31,))
HUGE_VOLUME = np.broadcast_to(np.float32(0.5), (1 << 16, 1 << 15, 3))
DEEP_VOLUME = np.broadcast_to(np.float32(0.5), (2, 2, 1 << 31))


@pytest.mark.parametrize("call, message", [
    (lambda: mvs.warp(HUGE, CAM, CAM, 1.0), "src has " + TOO_MANY),
    (lambda: mvs.build_cost_volume(HUGE, [HUGE], CAM, [CAM], [1.0]),
     "ref has " + TOO_MANY),
    (lambda: mvs.build_cost_volume(IMG, [IMG, HUGE], CAM, [CAM, CAM],
                                   [1.0]), r"srcs\[1\] has " + TOO_MANY),
    (lambda: mvs.build_cost_volume(IMG, MANY_VIEWS, CAM, [CAM], [1.0]),
     "srcs has 2147483648 views, " + LIMIT),
    (lambda: mvs.build_cost_volume(IMG, [IMG], CAM, [CAM], MANY_DEPTHS),
     "depths has 2147483648 entries, " + LIMIT),
    (lambda: mvs.warp(IMG, CAM, CAM, MANY_DEPTHS),
     "depths has 2147483648 entries, " + LIMIT),
    (lambda: mvs.extract_depth(HUGE_VOLUME, [1.0, 2.0, 3.0]),
     "cost_volume has " + TOO_MANY),
    (lambda: mvs.extract_depth(DEEP_VOLUME, [1.0, 2.0, 3.0]),
     "cost_volume has 2147483648 planes, " + LIMIT),
    (lambda: mvs.extract_depth(DEEP_VOLUME, MANY_DEPTHS),
     "depths has 2147483648 entries, " + LIMIT),
    (lambda: scenes.make_scene(height=1 << 16, width=1 << 15),
     "the scene has " + TOO_MANY),
])
def test_the_python_layer_refuses_sizes_the_kernels_cannot_index(call,
                                                                 message):
    with pytest.raises(ValueError, match=message):
        call()


OUT = np.empty((12, 16, 1), np.float32)


def cost_volume(ref=IMG, srcs=IMG[None], depths=np.ones(1)):
    _mvs.cost_volume(ref, srcs, CAM.params, CAM.params[None], depths, 0, 1,
                     0, 5, 1, OUT)


@pytest.mark.parametrize("call, message", [
    (lambda: _mvs.warp(HUGE, CAM.params, CAM.params, 1.0),
     "src has " + TOO_MANY),
    (lambda: cost_volume(ref=HUGE), "ref has " + TOO_MANY),
    (lambda: cost_volume(srcs=HUGE[None]), "srcs has " + TOO_MANY),
    (lambda: cost_volume(srcs=MANY_VIEWS),
     "srcs has 2147483648 views, " + LIMIT),
    (lambda: cost_volume(depths=MANY_DEPTHS),
     "depths has 2147483648 entries, " + LIMIT),
    (lambda: _mvs.extract_depth(HUGE_VOLUME, np.ones(3)),
     "cost_volume has " + TOO_MANY),
    (lambda: _mvs.extract_depth(DEEP_VOLUME, np.ones(3)),
     "cost_volume has 2147483648 planes, " + LIMIT),
    (lambda: _mvs.extract_depth(np.zeros((2, 2, 3), np.float32),
                                MANY_DEPTHS),
     "depths has 2147483648 entries, " + LIMIT),
    # a wrong shape is refused before a conversion would copy it
    (lambda: _mvs.warp(HUGE_VOLUME, CAM.params, CAM.params, 1.0),
     "src must be 2-D .* got 3-D"),
    (lambda: _mvs.extract_depth(HUGE, np.ones(3)),
     "cost_volume must be 3-D .* got 2-D"),
])
def test_the_binding_refuses_them_before_any_copy(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_the_binding_refuses_images_under_2_x_2():
    """A 1-row image would be sampled from the row before it."""
    for image in (np.zeros((1, 5), np.float32), [[0.0] * 5],   # a list too
                  np.zeros((5, 1), np.float32)):
        with pytest.raises(ValueError, match="src must have images of at "
                                             r"least 2 x 2 pixels, got \d x"):
            _mvs.warp(image, CAM.params, CAM.params, 1.0)
    with pytest.raises(ValueError, match=r"srcs must have images of at "
                                         r"least 2 x 2 pixels, got 12 x 1"):
        cost_volume(srcs=np.zeros((1, 12, 1), np.float32))


def test_volumes_of_one_pixel_row_are_within_the_limits():
    volume = np.array([[[0.5, 0.2, 0.4], [0.1, 0.3, 0.2]]], np.float32)
    depth, confidence = mvs.extract_depth(volume, [1.0, 2.0, 3.0])
    assert depth.shape == (1, 2)
    assert np.isfinite(depth[0, 0]) and np.isnan(depth[0, 1])


THREADS_CANNOT_START = r"""
import resource, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
from aquaprof import mvs
from aquaprof.mvs import scenes
sc = scenes.make_scene("flat", "refractive", 2, 16, 16)
depths = np.linspace(*sc.depth_range(0.03), 2)
for parity in ("textbook", "aquamvs"):
    mvs.build_cost_volume(sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:],
                          depths, threads=1, parity=parity)
# room for the setup's small buffers, none for a thread's stack
used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (4 << 20),
                                        resource.RLIM_INFINITY))
for parity in ("textbook", "aquamvs"):
    try:
        mvs.build_cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                              sc.cameras[1:], depths, threads=2,
                              parity=parity)
        print("no error")
    except Exception as e:
        print(type(e).__name__, e)
"""


@pytest.mark.skipif(not Path("/proc/self/statm").exists(),
                    reason="reads its memory from /proc")
@pytest.mark.skipif(os.environ.get("AQUAPROF_SANITIZED") == "1",
                    reason="AddressSanitizer aborts where a capped address "
                           "space makes its own allocations fail")
def test_threads_that_cannot_start_are_said_so_not_called_memory():
    # the setup's threads (rays, guesses, reference sums) as well as the
    # sweep's: an OSError, not a MemoryError
    from repo_paths import ROOT
    root = str(ROOT)
    done = subprocess.run([sys.executable, "-c", THREADS_CANNOT_START, root],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "OSError cannot start worker threads"] * 2
