"""The profiler's own cost: stage pairs off and on, a decorated call,
nesting, and building the report of 1 M and 10 M spans. Per-operation
figures divide by extra_info["ops"]; `plain_call` is the reference of the
same run."""
import resource

import pytest

import aquaprof as ap

from conftest import LOOP


def nothing():
    return None


@ap.stage("decorated")
def decorated():
    return None


def loop_plain():
    for _ in range(LOOP):
        nothing()


def loop_with(stage):
    def run():
        for _ in range(LOOP):
            with stage:
                pass
    return run


def loop_nested(a, b, c):
    def run():
        for _ in range(LOOP):
            with a:
                with b:
                    with c:
                        pass
    return run


def loop_decorated():
    for _ in range(LOOP):
        decorated()


@pytest.fixture
def profiling():
    prof = ap.Profiler(max_spans=10_000, memory=False)
    prof.start()
    yield
    prof.stop()


def test_plain_call(benchmark):
    benchmark.extra_info["ops"] = LOOP
    benchmark(loop_plain)


def test_stage_pair_off(benchmark):
    benchmark.extra_info["ops"] = LOOP
    benchmark(loop_with(ap.stage("off")))


def test_stage_pair_on(benchmark, profiling):
    benchmark.extra_info["ops"] = LOOP
    benchmark(loop_with(ap.stage("on")))


def test_decorated_call_off(benchmark):
    benchmark.extra_info["ops"] = LOOP
    benchmark(loop_decorated)


def test_decorated_call_on(benchmark, profiling):
    benchmark.extra_info["ops"] = LOOP
    benchmark(loop_decorated)


def test_nested_three_on(benchmark, profiling):
    benchmark.extra_info["ops"] = LOOP
    benchmark(loop_nested(ap.stage("a"), ap.stage("b"), ap.stage("c")))


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


@pytest.mark.parametrize("spans", [1_000_000, 10_000_000],
                         ids=["1M", "10M"])
def test_report_building(benchmark, spans):
    """Profiler.report() of `spans` recorded spans (target: 10 M in < 1 s,
    < 48 bytes a span)."""
    state = {"grown": 0}

    def setup():
        state.pop("report", None)      # the last round's, freed first
        outer, inner = ap.stage("outer"), ap.stage("inner")
        prof = ap.Profiler(max_spans=spans, memory=False)
        with prof:
            for _ in range(spans // 2):
                with outer:
                    with inner:
                        pass
        return (prof,), {}

    def build(prof):
        before = rss_bytes()
        state["report"] = prof.report()
        state["grown"] = max(state["grown"], rss_bytes() - before)

    benchmark.pedantic(build, setup=setup, rounds=3, iterations=1)
    benchmark.extra_info["spans"] = spans
    # what building the report adds to the process, at worst over rounds
    benchmark.extra_info["bytes_per_span"] = state["grown"] / spans
    assert state["report"].spans_recorded == spans


def test_stage_pair_on_window(benchmark):
    """A stage pair with window=1000 (else as test_stage_pair_on): the
    ring write it adds."""
    benchmark.extra_info["ops"] = LOOP
    with ap.Profiler(max_spans=10_000, memory=False, window=1000):
        benchmark(loop_with(ap.stage("on")))


def test_snapshot_50_stages_full_windows(benchmark):
    """prof.snapshot() with 50 stages of 1000 kept calls each: what a
    monitor check or a Prometheus scrape costs (under the GIL)."""
    stages = [ap.stage(f"s{i}") for i in range(50)]
    with ap.Profiler(window=1000, max_spans=0) as prof:
        for stage in stages:
            for _ in range(1000):
                with stage:
                    pass
        snap = benchmark(prof.snapshot)
    benchmark.extra_info["calls_kept"] = 50_000
    assert sum(r.calls for r in snap.recent.values()) == 50_000
