"""Verdicts of Report.compare: a real shift is called, noise is not."""

import numpy as np
import pytest

import aquaprof as ap
from aquaprof.analysis.compare import mann_whitney_p, verdict
from conftest import busy


def timings(rng, n, median, spread=0.05):
    """Call durations as benchmarks see them: log-normal around median,
    a few slow outliers."""
    x = median * np.exp(rng.normal(0, spread, n))
    x[rng.random(n) < 0.03] *= 1.5
    return x


def test_exact_and_approximate_p_values():
    # completely separated samples of 5: 2 arrangements of 252
    assert mann_whitney_p(np.arange(5.0), np.arange(5.0) + 10) == \
        pytest.approx(2 / 252)
    # U = 3 of 9 for 3 against 3: 14 of the 20 arrangements as far out
    assert mann_whitney_p(np.arange(3.0), np.array([0.5, 1.5, 2.5])) == \
        pytest.approx(0.7)
    # large samples from one distribution: p roughly uniform, rarely small
    rng = np.random.default_rng(1)
    ps = [mann_whitney_p(rng.normal(size=60), rng.normal(size=60))
          for _ in range(200)]
    assert 0.3 < np.mean(ps) < 0.7
    assert np.mean(np.array(ps) < 0.05) < 0.1
    # ties everywhere: no evidence, no error
    assert mann_whitney_p(np.ones(30), np.ones(30)) == 1.0


def test_a_ten_percent_shift_is_detected_and_noise_is_not():
    rng = np.random.default_rng(7)
    detected = noise_flagged = 0
    for _ in range(100):
        base = timings(rng, 40, 1e-3)
        word, change, p = verdict(base, timings(rng, 40, 1.1e-3), 0.05)
        detected += word == "slower"
        word, _, _ = verdict(base, timings(rng, 40, 1e-3), 0.05)
        noise_flagged += word != "same"
    assert detected >= 95
    assert noise_flagged <= 2
    word, change, p = verdict(timings(rng, 40, 1e-3),
                              timings(rng, 40, 0.8e-3))
    assert word == "faster" and change == pytest.approx(-0.2, abs=0.05)


def test_a_shift_under_the_threshold_is_the_same():
    rng = np.random.default_rng(3)
    base, new = timings(rng, 500, 1e-3, 0.01), timings(rng, 500, 1.02e-3,
                                                       0.01)
    word, change, p = verdict(base, new, threshold=0.05)
    assert p < 1e-6 and word == "same"     # real, but smaller than asked


def test_too_few_calls_give_a_hedged_verdict():
    word, change, p = verdict(np.array([1.0, 1.1]), np.array([1.5, 1.6]))
    assert word == "slower?" and p is None


def run():
    with ap.Profiler() as prof:
        for _ in range(12):
            with ap.stage("step"):
                busy(0.0005)
        with ap.stage("once"):
            busy(0.0005)
    return prof.report()


def timed(scale, seed):
    """run()'s report with each span's duration set: "step" from a known
    spread around scale times 0.5 ms, "once" 0.5 ms. The verdicts judged
    below are then those of the data, not of how busy the machine was
    while the stages ran (a single call 5 % slower by chance is a hedged
    regression, rightly). Report.compare reads the spans alone, not the
    stages' totals, which keep the times measured."""
    report = run()
    rng = np.random.default_rng(seed)
    spans = report.spans().copy()
    step = report.stage_names.index("step")
    is_step = spans["stage"] == step
    seconds = np.where(is_step, timings(rng, len(spans), 5e-4 * scale, 0.02),
                       5e-4)
    spans["end_ns"] = spans["start_ns"] + (seconds * 1e9).astype(np.int64)
    return ap.Report(dict(report._data, spans=spans))


def test_report_compare_names_the_regression():
    base, slow, same = timed(1.0, 1), timed(1.6, 2), timed(1.0, 3)
    comparison = slow.compare(base)
    assert [c.path for c in comparison.regressions] == ["step"]
    change = {c.path: c for c in comparison.changes}["step"]
    assert change.verdict == "slower" and change.p_value < 0.01
    assert change.base_calls == change.new_calls == 12
    assert "step:" in str(comparison)
    assert not same.compare(base).regressions
    with pytest.raises(TypeError, match="base must be a Report"):
        slow.compare("base.json")
    with pytest.raises(ValueError, match="alpha"):
        slow.compare(base, alpha=2)


def test_new_and_gone_stages_are_listed():
    with ap.Profiler() as prof:
        with ap.stage("other"):
            pass
    comparison = prof.report().compare(run())
    verdicts = {c.path: c.verdict for c in comparison.changes}
    assert verdicts == {"other": "new", "step": "gone", "once": "gone"}
    assert not comparison.regressions
