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


def periodic_steps(period, steps=200, seed=0):
    """1 ms calls, identical (over half the window equal: MAD 0), but every
    `period`-th call about 3 ms, each a little longer or shorter than the
    last (a refill, as a DataLoader's wait every few batches)."""
    rng = np.random.default_rng(seed)
    d = np.full(steps, 1e6)
    d[::period] = 3e6 * (1 + rng.uniform(-0.02, 0.02, len(d[::period])))
    return d


@pytest.mark.parametrize("period", [4, 8, 20])
def test_periodic_long_calls_are_the_stage_s_pattern(period):
    rep, _ = with_durations(recorded(200), periodic_steps(period).astype(
        np.int64))
    assert rep.anomalies() == []
    # nor with a longer window, nor the shortest one
    assert rep.anomalies(window=120) == []
    assert rep.anomalies(window=20) == []


@pytest.mark.parametrize("period", [4, 8, 20])
def test_a_spike_among_periodic_calls_is_still_flagged(period):
    d = periodic_steps(period)
    d[151] = 20e6                     # not a periodic call's place
    rep, index = with_durations(recorded(200), d.astype(np.int64))
    (a,) = rep.anomalies()
    assert a.span == index[151] and a.usual == pytest.approx(1e-3)
    assert a.score > 6


def test_steady_calls_with_ties_are_quiet_and_a_spike_is_not():
    # over half the calls exactly equal (MAD 0), the others a few percent
    # off: none is an anomaly, a 3x call is
    rng = np.random.default_rng(1)
    d = np.where(rng.uniform(size=80) < 0.6, 1e6,
                 1e6 * (1 + rng.uniform(-0.05, 0.05, 80)))
    rep, _ = with_durations(recorded(80), d.astype(np.int64))
    assert rep.anomalies() == []
    d[60] = 3e6
    rep, index = with_durations(recorded(80), d.astype(np.int64))
    assert [a.span for a in rep.anomalies()] == [index[60]]
    # a long call that comes back, at no period, tied: the first is news,
    # the others are as long as one in 40 of the calls before them
    d[60] = 1e6
    d[[20, 33, 41, 58, 70]] = 2.5e6
    rep, index = with_durations(recorded(80), d.astype(np.int64))
    assert [a.span for a in rep.anomalies()] == [index[20]]


def test_one_earlier_spike_does_not_hide_the_next():
    d = np.full(120, 1e6)
    d[[60, 80]] = 20e6
    rep, index = with_durations(recorded(120), d.astype(np.int64))
    assert [a.span for a in rep.anomalies()] == [index[60], index[80]]
    # a third, with two as long among the 50 before it, is the stage's
    # tail: an anomaly is rarer than one in 40 of its window's calls
    d[100] = 20e6
    rep, index = with_durations(recorded(120), d.astype(np.int64))
    assert [a.span for a in rep.anomalies()] == [index[60], index[80]]
