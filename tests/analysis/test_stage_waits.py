"""A stage's sampled waits, summed from its stacks."""
from types import SimpleNamespace

import pytest

from aquaprof.analysis.samples import stage_waits


def report_of(stacks):
    stages = [SimpleNamespace(path="step", id=0, parent=None),
              SimpleNamespace(path="step/load", id=1, parent="step")]
    return SimpleNamespace(stages=stages, samples={
        "stacks": stacks, "delay_ns": 0, "gil_ns": 0, "lock_ns": 0})


def test_a_wait_told_late_never_makes_run_delay_exceed_time_off_the_cpu():
    """A round that learns of run delay late files it back under the
    stack that held it, whose time off the CPU was already counted asleep
    then: summed, the stage's run delay could pass its time off the CPU.
    It is held to it, and nothing is left blocked."""
    # wall, cpu, delay, gil, lock (ns): 10 ms, 6 ms on the CPU, then the
    # late 5 ms of delay of which 4 ms fit
    rep = report_of([[0, 1, 1, [0], 2, 10_000_000, 6_000_000, 5_000_000,
                      0, 0]])
    waits = stage_waits(rep, "step")
    assert waits.delay_s == pytest.approx(0.004)
    assert waits.cpu_s + waits.delay_s == pytest.approx(waits.wall_s)
    assert waits.blocked_s == 0.0


def test_run_delay_within_time_off_the_cpu_is_kept_whole():
    rep = report_of([[0, 1, 0, [0], 1, 10_000_000, 2_000_000, 3_000_000,
                      1_000_000, 0],
                     [0, 1, 1, [0], 1, 10_000_000, 2_000_000, 1_000_000,
                      0, 2_000_000]])
    waits = stage_waits(rep, "step")
    assert waits.delay_s == pytest.approx(0.004)
    assert waits.blocked_s == pytest.approx(0.02 - 0.004 - 0.004 - 0.001
                                            - 0.002)
    alone = stage_waits(rep, "step", sub_stages=False)
    assert alone.wall_s == pytest.approx(0.01)
    assert alone.delay_s == pytest.approx(0.003)


def test_sleeps_share_what_a_late_run_delay_leaves_of_the_time_off_the_cpu():
    """The late delay filed under a stack counted asleep on a lock or the
    GIL then: the stage's waits add up to its time off the CPU, the
    sleeps sharing what the run delay, measured, leaves."""
    # 10 ms off the CPU, 6 ms on a lock and 4 ms on the GIL, then 5 ms
    # of delay told late
    rep = report_of([[0, 1, 1, [0], 2, 10_000_000, 0, 5_000_000,
                      4_000_000, 6_000_000]])
    waits = stage_waits(rep, "step")
    assert waits.delay_s == pytest.approx(0.005)
    assert waits.lock_s == pytest.approx(0.003)
    assert waits.gil_s == pytest.approx(0.002)
    assert waits.blocked_s == 0.0
