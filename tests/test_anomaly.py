"""Anomalies: a planted slow iteration is flagged, noise is not."""

import numpy as np
import pytest

import aquaprof as ap
from conftest import busy


def training(slow_step=None, steps=60, seed=0):
    rng = np.random.default_rng(seed)
    with ap.Profiler() as prof:
        for i in range(steps):
            with ap.stage("step"):
                # noise: +-10 % around 1 ms
                busy(0.001 * (1 + rng.uniform(-0.1, 0.1))
                     * (5 if i == slow_step else 1))
    return prof.report()


def test_a_planted_slow_iteration_is_flagged():
    rep = training(slow_step=40)
    found = rep.anomalies()
    assert [a.path for a in found] == ["step"]
    a = found[0]
    spans = rep.spans()
    steps = np.sort(spans["start_ns"][spans["stage"] ==
                                      rep.stage_names.index("step")])
    assert spans["start_ns"][a.span] == steps[40]
    assert a.duration > 4 * a.usual and a.score > 6


def test_noise_is_not_flagged():
    for seed in range(5):
        assert training(seed=seed).anomalies() == []


def test_too_few_calls_and_bad_arguments():
    assert training(steps=8, slow_step=5).anomalies() == []   # no history
    rep = training(steps=12)
    with pytest.raises(ValueError, match="window"):
        rep.anomalies(window=3)
    with pytest.raises(ValueError, match="threshold"):
        rep.anomalies(threshold=0)
