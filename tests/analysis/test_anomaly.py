"""Anomalies: a planted slow iteration is flagged, noise is not.

The detector's arithmetic is checked on spans whose durations are set
exactly (a real run's report with its step durations rewritten), so that
a preemption of the test machine cannot add or hide a flag; one end-to-end
run checks it on measured time with a planted step far above any
scheduling noise."""
import base64
import zlib

import numpy as np
import pytest

import aquaprof as ap
from profiled import busy


def recorded(steps):
    with ap.Profiler() as prof:
        for _ in range(steps):
            with ap.stage("step"):
                pass
    return prof.report()


def with_durations(rep, durations_ns):
    """The report with its "step" calls, in start order, lasting exactly
    `durations_ns`."""
    spans = rep.spans().copy()
    index = np.flatnonzero(spans["stage"] == rep.stage_names.index("step"))
    index = index[np.argsort(spans["start_ns"][index], kind="stable")]
    assert len(index) == len(durations_ns)
    spans["end_ns"][index] = spans["start_ns"][index] + durations_ns
    data = rep.to_dict()
    data["spans"] = dict(data["spans"], data=base64.b64encode(
        zlib.compress(spans.tobytes())).decode())
    return ap.Report.from_dict(data), index


def noisy_steps(steps=60, slow_step=None, seed=0):
    """About 1 ms a step, +-10 %, the `slow_step`-th five times longer."""
    rng = np.random.default_rng(seed)
    d = 1e6 * (1 + rng.uniform(-0.1, 0.1, steps))
    if slow_step is not None:
        d[slow_step] *= 5
    rep, index = with_durations(recorded(steps), d.astype(np.int64))
    return rep, index


def test_a_planted_slow_iteration_is_flagged():
    rep, index = noisy_steps(slow_step=40)
    found = rep.anomalies()
    assert [(a.path, a.span) for a in found] == [("step", index[40])]
    a = found[0]
    assert a.duration > 4 * a.usual and a.score > 6
    assert a.usual == pytest.approx(1e-3, rel=0.1)


def test_noise_is_not_flagged():
    for seed in range(5):
        assert noisy_steps(seed=seed)[0].anomalies() == []


def test_the_floors_keep_steady_and_tiny_stages_quiet():
    steady = np.full(60, 1_000_000)
    steady[30] = 1_400_000            # 40 % up: below min_ratio
    rep, _ = with_durations(recorded(60), steady)
    assert rep.anomalies() == []
    tiny = np.full(60, 500)
    tiny[30] = 5_000                  # 10x, but only 4.5 us longer
    rep, index = with_durations(recorded(60), tiny)
    assert rep.anomalies() == []
    assert [a.span for a in rep.anomalies(min_excess=1e-6)] == [index[30]]


def test_measured_time_end_to_end():
    with ap.Profiler() as prof:
        for i in range(40):
            with ap.stage("step"):
                busy(0.05 if i == 30 else 0.001)
    rep = prof.report()
    spans = rep.spans()
    steps = np.sort(spans["start_ns"][spans["stage"] ==
                                      rep.stage_names.index("step")])
    # a preempted step may be flagged too; the planted one must be
    flagged = {int(spans["start_ns"][a.span]) for a in rep.anomalies()}
    assert int(steps[30]) in flagged


def test_too_few_calls_and_bad_arguments():
    rep, _ = noisy_steps(steps=8, slow_step=5)
    assert rep.anomalies() == []                 # no history
    rep = recorded(12)
    with pytest.raises(ValueError, match="window"):
        rep.anomalies(window=3)
    with pytest.raises(ValueError, match="window"):
        rep.anomalies(window=True)
    with pytest.raises(ValueError, match="threshold"):
        rep.anomalies(threshold=0)
    with pytest.raises(ValueError, match="min_ratio"):
        rep.anomalies(min_ratio=0.5)


def test_calls_past_max_spans_are_counted_and_said_not_found_clean():
    # the kept spans are the run's first: a slow call after them cannot
    # be found, and an empty list alone would read as none
    with ap.Profiler(max_spans=200) as prof:
        for i in range(400):
            with ap.stage("step"):
                busy(0.02 if i == 350 else 0.0005)
    rep = prof.report()
    with pytest.warns(UserWarning, match="200 calls whose spans were not "
                      r"\(max_spans: the run's last\) were not examined"):
        found = rep.anomalies()
    # the planted call is past the kept spans: found among none of them
    assert not [a for a in found if a.duration > 0.015]
    assert rep["step"].wall.max > 0.015
    assert (found.examined, found.not_examined) == (200, 200)
    assert "not examined" in found.note


def test_a_run_that_kept_every_span_says_nothing_more(recwarn):
    with ap.Profiler() as prof:
        for _ in range(30):
            with ap.stage("step"):
                pass
    found = prof.report().anomalies()
    assert found.not_examined == 0 and found.note == ""
    assert not [w for w in recwarn if "aquaprof" in str(w.message)]
