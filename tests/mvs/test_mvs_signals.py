"""A long CPU sweep runs the program's signal handlers while it works: one
that raises (Ctrl-C's KeyboardInterrupt, or any other) ends the sweep
within 0.1 s and a work item, on one thread or several, in both parity
modes; one that does not raise changes nothing in the result."""
import signal
import time

import numpy as np
import pytest

import aquaprof.mvs as mvs
from aquaprof import _mvs
from aquaprof.mvs import scenes
from aquaprof.mvs.plane_sweep import COSTS, PARITIES


class Stop(Exception):
    """What the test's handler raises."""


def raise_stop(signum, frame):
    raise Stop()


@pytest.fixture(scope="module")
def scene():
    # about 52 M samples (about 0.35 s on one thread of the development
    # VM): far more than a work item (16 planes of a band of 128 rows)
    # and the 0.1 s between looks at the signals, so that an early signal
    # finds most planes unwritten
    sc = scenes.make_scene("flat", views=5, height=160, width=160)
    return sc, np.linspace(*sc.depth_range(0.03), 512)


@pytest.fixture
def alarm():
    """arm(handler, delay, interval): SIGALRM through the handler; the
    timer and the previous handler are put back afterwards."""
    previous = signal.getsignal(signal.SIGALRM)

    def arm(handler, delay, interval=0.0):
        signal.signal(signal.SIGALRM, handler)
        signal.setitimer(signal.ITIMER_REAL, delay, interval)

    yield arm
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("parity", ["textbook", "aquamvs"])
@pytest.mark.parametrize("cost", ["ncc", "ssim"])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_handler_that_raises_ends_the_sweep_early(scene, alarm, parity,
                                                     cost, threads):
    sc, depths = scene
    out = np.full((160, 160, depths.size), -7.0, np.float32)
    cams = np.stack([c.params for c in sc.cameras[1:]])
    alarm(raise_stop, 0.02)
    with pytest.raises(Stop):
        _mvs.cost_volume(sc.ref, np.stack(sc.images[1:]), sc.ref_cam.params,
                         cams, depths, 0, depths.size, COSTS[cost], 11,
                         threads, out, PARITIES[parity])
    written = (out != -7.0).any(axis=(0, 1))
    # it stopped: the last planes were never started
    assert not written.all()
    assert not written[-1]


def test_a_sweep_run_by_a_handler_leaves_the_outer_sweep_stoppable(scene,
                                                                   alarm):
    sc, depths = scene
    small = scenes.make_scene("flat", views=2, height=24, width=24)
    small_args = (small.ref, small.images[1:], small.ref_cam,
                  small.cameras[1:], np.linspace(*small.depth_range(0.03),
                                                 4))
    calls = []

    def sweep_then_stop(signum, frame):
        calls.append(signum)
        if len(calls) == 1:     # a sweep of its own, inside the outer one
            mvs.build_cost_volume(*small_args, threads=1)
        else:
            signal.setitimer(signal.ITIMER_REAL, 0)
            raise Stop()

    out = np.full((160, 160, depths.size), -7.0, np.float32)
    cams = np.stack([c.params for c in sc.cameras[1:]])
    alarm(sweep_then_stop, 0.02, 0.02)
    with pytest.raises(Stop):
        _mvs.cost_volume(sc.ref, np.stack(sc.images[1:]), sc.ref_cam.params,
                         cams, depths, 0, depths.size, COSTS["ncc"], 11, 1,
                         out, PARITIES["textbook"])
    assert not (out != -7.0).any(axis=(0, 1))[-1]


def test_ctrl_c_ends_build_cost_volume(scene, alarm):
    sc, depths = scene
    # four times the planes: the whole call (about 2 s) is then far
    # longer than the 0.1 s between looks at the signals, so that half of
    # it is a bound a busy machine keeps
    depths = np.linspace(depths[0], depths[-1], 4 * depths.size)
    args = (sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:], depths)
    start = time.perf_counter()
    mvs.build_cost_volume(*args, threads=1)
    whole = time.perf_counter() - start

    def ctrl_c(signum, frame):      # what Python's SIGINT handler does
        raise KeyboardInterrupt

    alarm(ctrl_c, 0.02)
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        try:
            mvs.build_cost_volume(*args, threads=1)
        finally:    # a late signal still lands in this block
            signal.setitimer(signal.ITIMER_REAL, 0)
    # a handler left for the call's end would have run after all of it;
    # this one ends it within 0.1 s and a work item (1/256 of it)
    assert time.perf_counter() - start < whole / 2


def test_handlers_that_do_not_raise_run_during_the_sweep(scene, alarm):
    sc, depths = scene
    args = (sc.ref, sc.images[1:], sc.ref_cam, sc.cameras[1:], depths[:256])
    quiet = mvs.build_cost_volume(*args, threads=1)
    ticks = []
    alarm(lambda signum, frame: ticks.append(signum), 0.01, 0.01)
    busy = mvs.build_cost_volume(*args, threads=1)
    signal.setitimer(signal.ITIMER_REAL, 0)
    assert np.array_equal(quiet, busy)
    # a handler left waiting for the call's end would have run once: the
    # signals pending meanwhile are one
    assert len(ticks) >= 2
