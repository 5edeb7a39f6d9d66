"""Verdicts of Report.compare: a real shift is called, noise is not."""

import time

import numpy as np
import pytest

import aquaprof as ap
from aquaprof import _core
import crafted
from crafted import on_machine
from profiled import busy


from aquaprof.analysis.compare import BUSY_SLOWER
from aquaprof.analysis.verdict import (RESAMPLES, SLOWER, RunFigures,
                                       describe, judge, own_spread, runs_p,
                                       t_two_sided_p)


def timings(rng, n, median, spread=0.05):
    """Call durations as benchmarks see them: log-normal around median,
    a few slow outliers."""
    x = median * np.exp(rng.normal(0, spread, n))
    x[rng.random(n) < 0.03] *= 1.5
    return x


def loader(rng, n=40, slow_every=10, slow=10e-3, fast=1e-3):
    """A DataLoader's waits as a stage sees them: most calls instant
    (a batch was ready), every slow_every-th a long wait for a worker."""
    x = timings(rng, n, fast)
    x[::slow_every] = timings(rng, len(x[::slow_every]), slow)
    return x


def one(calls):
    return [RunFigures.of(calls)]


def test_student_t_p_values():
    assert t_two_sided_p(2.776445, 4) == pytest.approx(0.05, abs=1e-5)
    assert t_two_sided_p(63.65674, 1) == pytest.approx(0.01, abs=1e-6)
    assert t_two_sided_p(1.959964, 100000) == pytest.approx(0.05, abs=1e-4)
    assert t_two_sided_p(0.0, 3) == pytest.approx(1.0)
    assert t_two_sided_p(float("inf"), 3) == 0.0


def test_a_slower_loader_with_an_unchanged_median_is_slower():
    # the share of long waits tripled: the median call did not move, the
    # total the user pays did
    rng = np.random.default_rng(5)
    v = judge(one(loader(rng, slow_every=10)), one(loader(rng, slow_every=3)))
    assert abs(v.new_p50 / v.base_p50 - 1) < 0.05
    assert v.word == "slower" and v.figure == "total"
    assert v.change > 1.0
    assert "14 of 40 calls a run over" in v.detail
    assert "were 4 of 40" in v.detail
    assert v.evidence == "1 run a side"


def test_a_slower_tail_is_slower():
    # 10 % of calls 3.5x slower: the total +25 %, the median unchanged
    rng = np.random.default_rng(6)
    base = timings(rng, 100, 1e-3, 0.02)
    new = timings(rng, 100, 1e-3, 0.02)
    new[5::10] *= 3.5
    v = judge(one(base), one(new), threshold=0.1)
    assert v.word == "slower" and v.figure in ("total", "tail")
    assert v.tail_change > 1.0


def test_every_call_slower_and_faster():
    # one run a side: the total of 40 calls must be shown to have grown
    # past half the 5 % threshold, which a change of three times the
    # threshold nearly always is, and of twice it most of the time
    rng = np.random.default_rng(7)
    detected = {1.1: 0, 1.15: 0}
    noise_flagged = 0
    for _ in range(100):
        base = one(timings(rng, 40, 1e-3))
        for factor in detected:
            detected[factor] += judge(
                base, one(timings(rng, 40, factor * 1e-3))).word == "slower"
        noise_flagged += judge(base, one(timings(rng, 40, 1e-3))).word != \
            "same"
    assert detected[1.15] >= 95 and detected[1.1] >= 60, detected
    assert noise_flagged <= 2
    v = judge(one(timings(rng, 40, 1e-3)), one(timings(rng, 40, 0.8e-3)))
    assert v.word == "faster" and v.change == pytest.approx(-0.2, abs=0.05)


def test_a_shift_under_the_threshold_is_the_same():
    rng = np.random.default_rng(3)
    v = judge(one(timings(rng, 500, 1e-3, 0.01)),
              one(timings(rng, 500, 1.02e-3, 0.01)), threshold=0.05)
    assert v.change == pytest.approx(0.02, abs=0.01) and v.word == "same"


@pytest.mark.parametrize("drift", [0.001, 0.01, 0.02])
def test_one_stalled_call_on_a_run_that_drifted_is_no_regression(drift):
    """Unchanged code, one run a side: the machine made every call of the
    new run a little slower and stalled one of its 40 calls 6.6x (a
    preemption). The total reads +14 % and that it grew at all is sure;
    that it grew past the threshold rests on the one call, which the
    resamples that leave it out (a quarter) do not show."""
    rng = np.random.default_rng(1)
    alarms = 0
    for _ in range(20):
        base = 500e-6 * np.exp(rng.normal(0, 0.01, 40))
        new = 500e-6 * (1 + drift) * np.exp(rng.normal(0, 0.01, 40))
        new[rng.integers(40)] = 3.3e-3
        v = judge(one(base), one(new))
        assert v.change > 0.1
        alarms += v.word in SLOWER
    assert alarms == 0


@pytest.mark.parametrize("where", [1, 10, 18])
def test_every_call_slower_is_proven_past_one_long_base_call(where):
    """One run a side of 20 calls, every call 4x slower, and one base call
    of 7.9 ms (a collection in a long test session). The total's
    resamples that repeat the long call hide the change (p=0.04,
    "noisy"); the median call, the total's witness, proves it."""
    rng = np.random.default_rng(where)
    base = 500e-6 * np.exp(rng.normal(0, 0.003, 20))
    base[where] = 7.9e-3
    new = 2e-3 * np.exp(rng.normal(0, 0.003, 20))
    v = judge(one(base), one(new), threshold=0.5)
    assert v.word == "slower" and v.figure == "median", describe(v)
    assert "slower (median: the median call +" in describe(v)


def test_against_several_runs_the_median_is_no_witness():
    """The noise between runs is learned from their totals: every call
    15 % slower in a run whose total is within what the base runs' long
    calls (0 to 3 of 8 ms) move theirs by is unproven, whatever its
    median (a machine busier for the whole run moves it so)."""
    rng = np.random.default_rng(3)

    def run(factor, long_calls):
        x = factor * 1e-3 * np.exp(rng.normal(0, 0.01, 40))
        x[rng.choice(40, long_calls, replace=False)] = 8e-3
        return RunFigures.of(x)
    base = [run(1, 1), run(1, 3), run(1, 0)]
    v = judge(base, [run(1.15, 2)])
    assert v.new_p50 > 1.1 * v.base_p50 and v.word == "noisy", describe(v)


def test_every_call_slower_is_proven_though_a_preempted_call_holds_the_total():
    """40 calls of 2 ms, one of them preempted to 40 ms, against 40 calls
    of 3 ms: the total reads +3 %, every call is 1.5x slower."""
    rng = np.random.default_rng(9)
    base = 2e-3 * np.exp(rng.normal(0, 0.02, 40))
    base[17] = 40e-3
    new = 3e-3 * np.exp(rng.normal(0, 0.02, 40))
    v = judge(one(base), one(new), threshold=0.1)
    assert 0 < v.change < 0.1, describe(v)
    assert v.word == "slower" and v.figure == "median", describe(v)


def test_the_median_never_turns_a_verdict_against_the_total():
    # every call 1.25x slower, but the base's one 16 ms call outweighs
    # it: the total fell, and the run is not called slower for its median
    rng = np.random.default_rng(2)
    base = 1e-3 * np.exp(rng.normal(0, 0.02, 40))
    base[7] = 16e-3
    new = 1.25e-3 * np.exp(rng.normal(0, 0.02, 40))
    v = judge(one(base), one(new))
    assert v.change < -0.05 and v.word not in SLOWER, describe(v)
    # a loader's median jumped from its instant calls to its waits, its
    # total the same: no regression
    base = np.r_[np.full(21, 1e-3), np.full(19, 10e-3)]
    new = np.r_[np.full(19, 0.5e-3), np.full(21, 10e-3)]
    base, new = (rng.permutation(x) * np.exp(rng.normal(0, 0.01, 40))
                 for x in (base, new))
    v = judge(one(base), one(new))
    assert v.new_p50 > 5 * v.base_p50 and abs(v.change) < 0.05
    assert v.word == "same", describe(v)


def test_a_median_that_cannot_be_judged_takes_no_share_of_alpha():
    """One run a side whose calls were not kept (a history's, a run that
    dropped spans), the median moved with the total: no witness is judged,
    so the total keeps all of alpha (its p=0.007 proves it at 0.01)."""
    spread = (0.004678, None)
    base = RunFigures(1.0, 10, 0.1, 0.1, spread=spread, kept=10)
    new = RunFigures(1.3, 10, 0.13, 0.13, spread=spread, kept=10)
    v = judge([base], [new], alpha=0.01)
    assert 0.005 < v.p_value < 0.01, describe(v)
    assert v.word == "slower" and v.figure == "total", describe(v)


def test_a_loaders_median_between_its_groups_raises_no_more_alarms():
    """Unchanged code: half a loader's calls wait (10 ms), half are
    instant (1 ms), so its median call jumps between the two groups from
    run to run. Judging the median beside the total must not call such
    runs slower more often than the total alone does."""
    rng = np.random.default_rng(4)

    def run():
        x = timings(rng, 40, 1e-3)
        waits = rng.random(40) < 0.5
        x[waits] = timings(rng, int(waits.sum()), 10e-3)
        return x
    alarms = sum(judge(one(run()), one(run())).word in SLOWER
                 for _ in range(200))
    assert alarms <= 4


def test_a_small_sure_drift_and_two_stray_calls_are_no_slower_tail():
    # unchanged code: the whole run 1 % slower (the machine), and two
    # stray slow calls: the p95 of 30 calls sits on the second-longest
    # and reads +20 %; that it grew at all is sure, that it grew past
    # 5 % is not
    rng = np.random.default_rng(5)
    base = 2e-3 * np.exp(rng.normal(0, 0.002, 30))
    new = 2.02e-3 * np.exp(rng.normal(0, 0.002, 30))
    new[[9, 23]] = 2.5e-3
    v = judge(one(base), one(new), threshold=0.05)
    assert v.tail_change > 0.15 and v.word == "same", describe(v)


def test_one_base_run_against_two_new_ones_can_prove_a_large_change():
    # the two new runs' spread alone has one degree of freedom, which
    # no change passes at alpha 1 %: the runs' own calls pin it down
    rng = np.random.default_rng(8)
    base = [RunFigures.of(timings(rng, 30, 2e-3))]
    new = [RunFigures.of(timings(rng, 30, 5.6e-3)) for _ in range(2)]
    v = judge(base, new)
    assert v.word == "slower" and v.evidence == "1 vs 2 runs", describe(v)
    same = [RunFigures.of(timings(rng, 30, 2e-3)) for _ in range(2)]
    assert judge(base, same).word == "same"


def test_one_run_a_side_never_claims_certainty():
    # the machine got busy for the second half of the candidate run: the
    # calls there are slower together, and resampling blocks of
    # consecutive calls keeps them together, so the evidence is no
    # stronger than the run's own spread (a test on the calls as
    # independent samples gave p = 1e-11 for such runs)
    rng = np.random.default_rng(11)
    base = timings(rng, 60, 1e-3, 0.02)
    drifted = timings(rng, 60, 1e-3, 0.02)
    drifted[30:] *= 1.08
    v = judge(one(base), one(drifted), threshold=0.1)
    assert v.word == "same"
    # the clearest change one run can show is still 1 in RESAMPLES
    v = judge(one(base), one(base * 3))
    assert v.word == "slower" and v.p_value == 1 / RESAMPLES


def test_drift_between_runs_is_learned_from_the_base_runs():
    # six base runs, on a machine whose speed moves +-8 % from run to
    # run; an unchanged candidate on its slowest day is within that
    # noise, where against one base run it looks slower
    rng = np.random.default_rng(12)
    speeds = [1.0, 1.08, 0.93, 1.05, 0.96, 1.02]
    base = [RunFigures.of(timings(rng, 40, 1e-3 * s, 0.02)) for s in speeds]
    unchanged = [RunFigures.of(timings(rng, 40, 1.09e-3, 0.02))]
    assert judge(base[:1], unchanged).word == "slower"
    v = judge(base, unchanged)
    assert v.word == "same" and v.evidence == "6 vs 1 runs"
    slower = [RunFigures.of(timings(rng, 40, 1.4e-3, 0.02))]
    assert judge(base, slower).word == "slower"


def waits(rng, count, wait=3e-3, n=40):
    """One run of a DataLoader that keeps up: n instant calls but count
    waits for a batch, scattered."""
    x = timings(rng, n, 0.05e-3)
    x[rng.choice(n, count, replace=False)] = timings(rng, count, wait)
    return RunFigures.of(x)


def test_runs_that_agree_by_chance_do_not_prove_a_tail_moved():
    # five base runs with two waits each put their p95 (the 38th of 40
    # calls) on an instant call; a rerun with three puts it on a wait,
    # 60x longer. The runs' p95s agree far more closely than 40 calls
    # can tell them: that is chance, and the verdict may not call it
    rng = np.random.default_rng(21)
    base = [waits(rng, 2) for _ in range(5)]
    rerun = [waits(rng, 3)]
    assert rerun[0].p95 > 30 * max(b.p95 for b in base)
    v = judge(base, rerun)
    assert v.word not in SLOWER, describe(v)
    assert v.tail_change > 30 and v.p_value > 0.005
    # what the runs' figures alone said (a t-test on five near-equal p95s)
    assert runs_p([b.p95 for b in base], [rerun[0].p95])[0] < 1e-4
    # the waits twice as long and six times as many in every run: slower
    # (two waits more of 40 calls are within what a run's own calls
    # show by chance: the one-run bootstrap does not prove them either)
    slow = [waits(rng, 12, wait=6e-3) for _ in range(3)]
    v = judge(base, slow)
    assert v.word == "slower" and v.change > 1, describe(v)


def test_a_runs_own_spread_is_what_its_calls_make_of_its_figure():
    rng = np.random.default_rng(22)
    steady = 1e-3 * np.exp(rng.normal(0, 0.01, 400))     # no outliers
    assert own_spread("total", steady) < 1e-4
    assert own_spread("tail", steady) < 1e-3
    # the p95 on the edge of two groups: the calls alone move it 60x
    assert own_spread("tail", waits(rng, 2).calls) > 1
    # unknown: no calls, too few, or all of them 0
    assert own_spread("total", None) is None
    assert own_spread("tail", steady[:4]) is None
    assert own_spread("total", np.zeros(40)) is None
    # a waiting stage's CPU time: mostly 0, a few calls' worth; the
    # resamples with none of them count as the least call, not as 0
    waiting = np.zeros(40)
    waiting[[3, 17, 30]] = 2e-5
    assert own_spread("total", waiting) > 0.1
    assert own_spread("tail", steady) == own_spread("tail", steady.copy())


def test_runs_without_calls_are_judged_by_their_figures():
    # what a history keeps of a run: the figures, not the calls
    base = [RunFigures(t, 10, t / 10, t / 8) for t in (1.0, 1.02, 0.98)]
    assert judge(base, [RunFigures(1.5, 10, 0.15, 0.19)]).word == "slower"
    assert judge(base, [RunFigures(1.01, 10, 0.1, 0.13)]).word == "same"
    # one run a side and no calls: only the figures against the threshold
    v = judge(base[:1], [RunFigures(1.5, 10, 0.15, 0.19)])
    assert v.word == "slower?" and v.p_value is None


def test_too_few_calls_give_a_hedged_verdict():
    v = judge(one(np.array([1.0, 1.1])), one(np.array([1.5, 1.6])))
    assert v.word == "slower?" and v.p_value is None


def run():
    with ap.Profiler() as prof:
        for _ in range(12):
            with ap.stage("step"):
                busy(0.0005)
        with ap.stage("once"):
            busy(0.0005)
    return prof.report()


def timed(scale, seed, report=None):
    """run()'s report with each span's duration set: "step" from a known
    spread around scale times 0.5 ms, "once" 0.5 ms. The verdicts judged
    below are then those of the data, not of how busy the machine was
    while the stages ran (a single call 5 % slower by chance is a hedged
    regression, rightly). Report.compare reads the spans alone, not the
    stages' totals, which keep the times measured."""
    report = report or run()
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
    with pytest.raises(TypeError, match="base must be a Report or a"):
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


def test_repeated_runs_and_cpu_time_compare():
    base = [timed(1.0, seed) for seed in (1, 4, 5)]
    comparison = timed(1.6, 2).compare(base)
    assert comparison.runs == (3, 1)
    assert [c.path for c in comparison.regressions] == ["step"]
    assert "3 base and 1 new runs" in str(comparison)
    # the spans' thread CPU time, not their wall time: one run's spans
    # with two sets of planted wall times, their CPU times unchanged
    one_run = run()
    slow, same = timed(1.6, 2, one_run), timed(1.0, 1, one_run)
    assert slow.compare(same).regressions
    cpu = slow.compare(same, measure="cpu")
    assert cpu.measure == "cpu" and not cpu.regressions
    assert "cpu time per stage" in str(cpu)
    with pytest.raises(ValueError, match="measure must be one of"):
        timed(1.0, 1).compare(base, measure="gpu")
    with pytest.raises(TypeError, match="non-empty list of Reports"):
        timed(1.0, 1).compare([])


def test_a_million_calls_a_run_are_judged_in_bounded_memory():
    import tracemalloc
    rng = np.random.default_rng(2)
    base = timings(rng, 1_000_000, 1e-5)
    new = base * 1.2
    tracemalloc.start()
    try:
        v = judge(one(base), one(new))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert v.word == "slower"
    assert peak < 80 << 20, peak       # the calls themselves are 8 MB


def test_a_change_the_clock_cannot_resolve_is_no_change():
    # a sleeping stage's CPU time: 13 us a call grown to 18 us, where the
    # thread CPU clock is read at most every 20 us
    rng = np.random.default_rng(4)
    base, new = one(timings(rng, 20, 13e-6)), one(timings(rng, 20, 18e-6))
    assert judge(base, new, 0.3).word == "slower"
    v = judge(base, new, 0.3, resolution=20e-6)
    assert v.word == "same" and not v.suspect
    assert v.change > 0.3                  # shown as measured
    # a change well past it still counts
    far = one(timings(rng, 20, 13e-6 + 200e-6))
    assert judge(base, far, 0.3, resolution=20e-6).word == "slower"


def test_the_tables_p50_and_compares_median_agree():
    # both nearest-rank; the table's from its histogram (buckets at most
    # 1/32 of their value wide), compare's from the spans
    from aquaprof.analysis.compare import run_figures
    report = run()
    stats, figures = report["step"], run_figures(report)["step"]
    assert figures.count == stats.count
    assert figures.p50 == pytest.approx(stats.wall.p50, rel=1 / 32)
    assert figures.p95 == pytest.approx(stats.wall.p95, rel=1 / 32)


def test_a_stage_one_base_run_never_called_is_no_regression():
    # the stage ran in two base runs of three: no evidence against a
    # candidate like the runs that called it, which pays 50 % more than
    # their mean: noisy, never a regression and never "same"
    called = RunFigures(0.010, 10, 0.001, 0.0012)
    never = RunFigures(0.0, 0, 0.0, 0.0, np.zeros(0))
    v = judge([called, never, called], [RunFigures(0.010, 10, 0.001, 0.0012)])
    assert v.word == "noisy" and v.change == pytest.approx(0.5), v
    assert "more runs would tell" in describe(v)
    # all the base runs called it at a tenth of the new cost: slower
    tenth = RunFigures(0.001, 10, 0.0001, 0.00012)
    assert judge([tenth, tenth, tenth], [called]).word == "slower"


def with_cpu_of(report, scale):
    """The report with each "step" call's thread CPU time scale times
    that of run()'s."""
    spans = report.spans().copy()
    is_step = spans["stage"] == report.stage_names.index("step")
    spans["cpu_ns"] = np.where(is_step, spans["cpu_ns"] * scale,
                               spans["cpu_ns"]).astype(spans["cpu_ns"].dtype)
    return ap.Report(dict(report._data, spans=spans))


def test_a_busier_machine_in_the_new_run_is_said():
    base = [on_machine(timed(1.0, seed), other_cpus=c, steal=0.0)
            for seed, c in ((1, 0.05), (4, 0.2), (5, 0.1))]
    busy = on_machine(timed(1.6, 2), other_cpus=1.04, steal=0.0)
    comparison = busy.compare(base)
    note = ("note: the machine was busier during the new run: other "
            "processes kept 1.0 CPUs busy on average (0.1-0.2 CPUs in the "
            "base runs). "
            "A busier machine slows unchanged code")
    assert note in str(comparison)
    assert comparison.machine in str(comparison)
    # wall time 1.6x, its CPU time as before: what a busier machine does
    # to unchanged code, said as such and not failed
    assert comparison.regressions == []
    suspect = {c.path: c for c in comparison.changes}["step"]
    assert suspect.verdict == BUSY_SLOWER == \
        "slower? the machine was busy"
    assert suspect in comparison.busy_suspects and suspect.cpu is not None
    assert "? step: total" in str(comparison)
    assert "its CPU time a run" in suspect.summary() and \
        suspect.summary().endswith("on a busier machine: slower? the "
                                   "machine was busy")
    # its CPU time 1.6x as well: slower code, caught on a busy machine
    slower = busy.compare(base, measure="cpu")
    cpu_too = on_machine(with_cpu_of(timed(1.6, 2), 1.6), other_cpus=1.04,
                         steal=0.0)
    assert [c.path for c in cpu_too.compare(base).regressions] == ["step"]
    assert slower.busy_suspects == []     # judged on CPU time: as it is
    # a hypervisor's steal, and the other way round: a quieter machine
    quiet = [on_machine(timed(1.0, seed), other_cpus=0.0, steal=0.12)
             for seed in (6, 7)]
    assert quiet[0].compare(base[:1]).machine.startswith(
        "the machine was busier during the new run: a hypervisor took 12 % "
        "of the CPU time (0 % in the base run)")
    assert base[0].compare(quiet).machine.startswith(
        "the machine was quieter during the new run: a hypervisor took 0 % "
        "of the CPU time (12 % in the base runs)")
    both = on_machine(timed(1.0, 8), other_cpus=0.9, steal=0.0)
    assert both.compare(quiet).machine.startswith(
        "the machine was busier by one measure and quieter by another "
        "during the new run: other processes kept 0.9 CPUs busy on average "
        "(0.0 CPUs in the base runs); a "
        "hypervisor took 0 % of the CPU time (12 % in the base runs)")


def test_no_machine_note_within_the_base_runs_or_where_a_run_is_silent():
    base = [on_machine(timed(1.0, seed), other_cpus=c, steal=0.0)
            for seed, c in ((1, 0.1), (4, 1.0))]
    within = on_machine(timed(1.0, 2), other_cpus=0.9, steal=0.02)
    assert within.compare(base).machine == ""
    assert "note:" not in str(within.compare(base))
    # a run made before the machine was measured, or off Linux
    made = timed(1.0, 3)
    silent = ap.Report(dict(made._data, host={
        k: v for k, v in made.meta["host"].items() if k != "other_cpus"}))
    busy = on_machine(timed(1.0, 5), other_cpus=1.9, steal=0.0)
    assert busy.compare([*base, silent]).machine == ""


def test_the_machine_note_counts_the_runs_own_children_as_others():
    # a DataLoader's workers are processes of their own to the kernel's
    # ticks: the note says that they are among the "other processes"
    base = [on_machine(timed(1.0, 1), other_cpus=0.1, steal=0.0)]
    busy = on_machine(timed(1.0, 2), other_cpus=1.2, steal=0.0)
    workers = ap.Report(dict(busy._data, children={
        "started": 2, "reported": 2, "lost": []}))
    assert "other processes (the runs' own child processes among them) " \
           "kept 1.2 CPUs busy" in workers.compare(base).machine
    assert "other processes kept 1.2 CPUs busy" in \
        busy.compare(base).machine


def test_the_load_of_runs_too_short_to_tell_is_said_unknown_with_a_regression():
    made = timed(1.0, 3)
    silent = ap.Report(dict(made._data, host={
        k: v for k, v in made.meta["host"].items() if k != "other_cpus"}))
    slower = on_machine(timed(1.6, 2), other_cpus=0.1, steal=0.0)
    said = str(slower.compare(silent))
    assert "note: how busy the machine was is not known for 1 of the 2 " \
        "runs (a run too short to tell, under 0.25 s on 2 CPUs" in said
    # no regression: nothing to explain
    assert "how busy" not in str(on_machine(
        timed(1.0, 4), other_cpus=0.1, steal=0.0).compare(silent))


def planted(seconds, max_spans):
    with ap.Profiler(max_spans=max_spans) as prof:
        for _ in range(30):
            with ap.stage("decode"):
                time.sleep(seconds)
            with ap.stage("steady"):
                time.sleep(0.001)
    return prof.report()


def test_dropped_spans_leave_a_stage_judged_on_its_exact_total():
    # the new run kept 10 of its 60 spans: its kept calls alone would
    # read 5 calls of the slower stage against 30, a run less costly
    base = planted(0.001, 1_000_000)
    new = planted(0.0028, 10)
    assert new.spans_dropped == 50
    comparison = new.compare(base)
    decode = {c.path: c for c in comparison.changes}["decode"]
    assert decode.verdict == "slower" and decode.new_calls == 30
    assert decode.change > 1.0
    assert "the new run dropped 50 of 60 spans (max_spans)" in \
        str(comparison)
    # (steady, one run a side, may read slower on a machine that got
    # busier between the runs: the verdict's header says so)
    assert "decode" in [c.path for c in comparison.regressions]


def tail_late(slow_late, kept=20):
    """A run of 60 calls of 1 ms, written by hand; with slow_late, every
    4th of the last 30 takes 1.6 ms: a tail that grew after the `kept`
    calls whose spans the run kept (max_spans)."""
    ms = np.full(60, 1_000_000)
    if slow_late:
        ms[30::4] = 1_600_000
    buckets = np.searchsorted(_core.HIST_LOWER_NS, ms, "right") - 1
    hist = [[int(b), int((buckets == b).sum())] for b in np.unique(buckets)]
    stages = [dict(crafted.stage("resize", count=60), total_ns=int(ms.sum()),
                   self_ns=int(ms.sum()), cpu_ns=int(ms.sum()),
                   min_ns=int(ms.min()), max_ns=int(ms.max()),
                   mean_ns=float(ms.mean()), hist=hist)]
    spans = np.zeros(kept, _core.SPAN_DTYPE)
    spans["start_ns"] = crafted.START + np.arange(kept) * 2_000_000
    spans["end_ns"] = spans["start_ns"] + ms[:kept]
    spans["parent"] = -1
    data = crafted.report(stages, spans, spans_dropped=60 - kept,
                          max_spans=kept)
    data["threads"][0]["dropped"] = 60 - kept
    return ap.Report.from_dict(data)


def test_a_tail_that_grew_after_the_calls_kept_is_judged_on_every_call():
    # the kept calls are a run's first: their p95 would read no change;
    # the histogram, which every call went into, reads the late tail
    base, new = tail_late(False), tail_late(True)
    assert new.spans_dropped == base.spans_dropped == 40
    change = {c.path: c for c in new.compare(base).changes}["resize"]
    assert change.judgement.new_p95 == pytest.approx(new["resize"].wall.p95)
    assert change.judgement.new_p95 == pytest.approx(1.6e-3, rel=0.02)
    assert change.judgement.base_p95 == pytest.approx(1e-3, rel=0.02)
    assert change.verdict == "slower"
    assert "the histogram's" in str(new.compare(base))


def test_a_tail_is_not_judged_on_fewer_kept_calls_than_a_tail_needs():
    # 10 kept calls cannot say how far the p95 of 60 moves by chance
    base, new = tail_late(False, kept=10), tail_late(True, kept=10)
    change = {c.path: c for c in new.compare(base).changes}["resize"]
    assert change.judgement.tail_change is None
    assert change.judgement.figure != "tail"


def test_one_run_given_twice_or_a_whole_number_threshold_is_refused():
    run = timed(1.0, 1)
    with pytest.raises(ValueError, match="base runs 1 and 3 are the same"):
        timed(1.0, 3).compare([run, timed(1.0, 2), run])
    with pytest.raises(ValueError, match=r"threshold=5 would be 500 %"):
        run.compare(timed(1.0, 2), threshold=5)
    with pytest.raises(ValueError, match=r"threshold=1 would be 100 %"):
        run.compare(timed(1.0, 2), threshold=np.int64(1))


def test_an_empty_stage_within_what_timing_costs_has_not_moved():
    """An empty stage called twice a run, 190 ns -> 390 ns: the jitter of
    the clock pair that times it (calibrated at 60 ns a pair), not a
    regression; it failed a pytest gate on unchanged code. A report
    without the calibration judges it as before."""
    def run(ns, **meta):
        return ap.Report.from_dict(crafted.report(
            [crafted.stage("common", count=2, ns=ns)], **meta))

    def word(base, new):
        (change,) = new.compare(base, threshold=0.5).changes
        return change.verdict

    calibrated = {"overhead": {"span_ns": 60.0, "inside_ns": 20.0}}
    assert word(run(95, **calibrated), run(195, **calibrated)) == "same"
    assert word(run(95), run(195)) in ("slower", "slower?")
    # past it, the move is judged as ever
    assert word(run(950, **calibrated), run(1950, **calibrated)) in \
        ("slower", "slower?")
