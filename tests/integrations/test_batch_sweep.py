"""ap.sweep: the best batch size of a synthetic function with a planted
memory cliff, out-of-memory handling, and the plane sweep's depth_batch."""

import numpy as np
import pytest

import aquaprof as ap
from aquaprof import mvs
from aquaprof.mvs import scenes
from profiled import busy


def model(batch):
    """A fixed cost a call, so bigger batches pay off; from 32 on it needs
    a 300 MiB workspace: the memory cliff."""
    busy(0.004 + 0.0001 * batch)
    if batch >= 32:
        workspace = np.ones(300 << 20 >> 3)
        workspace[::4096] += 1


def test_the_best_batch_is_found_below_the_memory_cliff():
    result = ap.sweep(model, [1, 4, 16, 32, 64], repeats=3,
                      memory_limit=200 << 20)
    assert [r.batch for r in result.rows] == [1, 4, 16, 32]   # 64 not tried
    assert result.best == 16
    assert result.pressure_point == 32
    assert result.rows[-1].status == "over memory"
    assert result.rows[-1].host_peak > 250 << 20
    throughput = [r.throughput for r in result.rows[:3]]
    assert throughput == sorted(throughput)
    assert result.report["sweep batch=16"].count == 3
    assert result.report["sweep batch=16"].items == 3 * 16
    assert "best batch size: 16" in str(result)


def test_out_of_memory_stops_the_sweep():
    def fails_big(batch):
        if batch > 8:
            raise MemoryError("planted")
    result = ap.sweep(fails_big, [2, 8, 16, 32], repeats=1)
    assert [r.status for r in result.rows] == [
        "ok", "ok", "out of memory (MemoryError)"]
    assert result.pressure_point == 16 and result.best in (2, 8)


def test_other_errors_are_the_callers(capsys):
    def broken(batch):
        raise KeyError("bug")
    with pytest.raises(KeyError):
        ap.sweep(broken, [1])
    assert not ap.active()          # the sweep's profiler was stopped


def test_inside_a_callers_profiler_the_stages_go_there():
    with ap.Profiler() as prof:
        result = ap.sweep(lambda b: busy(0.001), [1, 2], repeats=2)
    assert result.report is None
    assert prof.report()["sweep batch=2"].count == 2


def test_depth_batch_of_the_plane_sweep():
    sc = scenes.make_scene("flat", views=3, height=48, width=64)
    depths = np.linspace(*sc.depth_range(0.03), 16)
    result = ap.sweep(
        lambda b: mvs.build_cost_volume(sc.ref, sc.images[1:], sc.ref_cam,
                                        sc.cameras[1:], depths,
                                        depth_batch=b),
        [1, 4, 16], items=lambda b: depths.size, repeats=2)
    assert [r.status for r in result.rows] == ["ok"] * 3
    assert result.best in (1, 4, 16)


@pytest.mark.parametrize("sizes", [[], [0], [2.5], [True]])
def test_bad_batch_sizes(sizes):
    with pytest.raises(ValueError, match="batch_sizes"):
        ap.sweep(lambda b: None, sizes)


def test_bad_function_and_repeats():
    with pytest.raises(TypeError, match="callable"):
        ap.sweep(42, [1])
    with pytest.raises(ValueError, match="repeats"):
        ap.sweep(lambda b: None, [1], repeats=0)


def test_the_summary_line_says_what_it_found_in_words():
    # a sweep that never met a memory limit, and one where nothing fitted:
    # the line names no Python None
    fine = ap.sweep(lambda b: None, [2], repeats=1)
    assert str(fine).splitlines()[-1] == (
        "best batch size: 2; no memory pressure up to batch 2")

    def out_of_memory(batch):
        raise MemoryError
    none_fit = ap.sweep(out_of_memory, [4, 8], repeats=1)
    assert str(none_fit).splitlines()[-1] == (
        "best batch size: none ran within memory; memory pressure from "
        "batch 4")
