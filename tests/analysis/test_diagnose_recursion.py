"""diagnose() looks at the stages the report names as its bottlenecks,
and classifies a recursive one on all its levels, as it ranks: its
outermost level may hold nothing but the calls down to the work."""
import time

import pytest

import aquaprof as ap

from planted_parser import profiled

#: the share of their wall time the planted computations must have on the
#: CPU, all together by the thread's own clock, for the plant to hold: a
#: margin over diagnose's cpu-bound threshold (0.8). A busy machine can
#: take the CPU from them, and the stage then truly waited for one
#: (cpu-starved?)
ON_CPU = 0.9


def spin(seconds, times):
    """Computes for `seconds` of wall time; appends to `times` this
    thread's CPU time and the wall time it took."""
    wall, cpu = time.perf_counter(), time.thread_time()
    end = wall + seconds
    while time.perf_counter() < end:
        pass
    times.append((time.thread_time() - cpu, time.perf_counter() - wall))


def held(run):
    """run() (a report, and the CPU and wall times of its planted
    computations) rerun up to 3 times until they were ON_CPU or more on
    the CPU; fails saying the machine was too busy where they never were."""
    for _ in range(3):
        rep, times = run()
        if sum(c for c, _w in times) >= ON_CPU * sum(w for _c, w in times):
            return rep
    pytest.fail("the machine was too busy: in 3 runs the planted "
                f"computation never had {ON_CPU:.0%} of its time on the CPU")


@ap.stage("descend")
def descend(depth):
    # the levels above the last only call down: all the wait is deep
    if depth:
        descend(depth - 1)
    else:
        time.sleep(0.02)


def waits_deep_then_computes():
    times = []
    with ap.Profiler(compensate=False) as prof:
        for _ in range(3):
            descend(6)
            with ap.stage("compute"):
                spin(0.005, times)
    return prof.report(), times


def test_a_recursion_that_waits_at_its_depth_is_diagnosed_waiting():
    rep = held(waits_deep_then_computes)
    assert [s.path for s, _ in rep.bottlenecks(2)] == ["descend", "compute"]
    found = {f.path: f for f in rep.diagnose(2)}
    assert list(found) == ["descend", "compute"]
    # its outermost level alone computed: cpu-bound on a few microseconds
    assert found["descend"].kind == "waiting"
    assert "of its 7 levels" in found["descend"].evidence
    assert found["compute"].kind == "cpu-bound"


def parsed():
    """The parser's run, all computing: its CPU and wall time, which
    bound each rule's time off the CPU."""
    wall, cpu = time.perf_counter(), time.thread_time()
    rep, _own = profiled(("expr", "term", "factor"))
    return rep, [(time.thread_time() - cpu, time.perf_counter() - wall)]


def test_the_rules_of_a_parser_are_diagnosed_as_they_rank():
    rep = held(parsed)
    named = [s.path for s, _ in rep.bottlenecks(3)]
    diagnosis = rep.diagnose(3)
    assert [f.path for f in diagnosis] == named
    assert all(f.kind == "cpu-bound" for f in diagnosis)
    assert all("of its 7 levels" in f.evidence for f in diagnosis)
