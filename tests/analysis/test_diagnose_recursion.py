"""diagnose() looks at the stages the report names as its bottlenecks,
and classifies a recursive one on all its levels, as it ranks: its
outermost level may hold nothing but the calls down to the work."""
import time

import aquaprof as ap

from planted_parser import profiled


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@ap.stage("descend")
def descend(depth):
    # the levels above the last only call down: all the wait is deep
    if depth:
        descend(depth - 1)
    else:
        time.sleep(0.02)


def test_a_recursion_that_waits_at_its_depth_is_diagnosed_waiting():
    with ap.Profiler(compensate=False) as prof:
        for _ in range(3):
            descend(6)
            with ap.stage("compute"):
                spin(0.005)
    rep = prof.report()
    assert [s.path for s, _ in rep.bottlenecks(2)] == ["descend", "compute"]
    found = {f.path: f for f in rep.diagnose(2)}
    assert list(found) == ["descend", "compute"]
    # its outermost level alone computed: cpu-bound on a few microseconds
    assert found["descend"].kind == "waiting"
    assert "of its 7 levels" in found["descend"].evidence
    assert found["compute"].kind == "cpu-bound"


def test_the_rules_of_a_parser_are_diagnosed_as_they_rank():
    rep, _own = profiled(("expr", "term", "factor"))
    named = [s.path for s, _ in rep.bottlenecks(3)]
    diagnosis = rep.diagnose(3)
    assert [f.path for f in diagnosis] == named
    assert all(f.kind == "cpu-bound" for f in diagnosis)
    assert all("of its 7 levels" in f.evidence for f in diagnosis)
