"""The bottlenecks rank the code that took the run's time: a recursive
stage is one stage whose self time is spread over a path a level
(`walk`, `walk/walk`, ...), none of which alone need rank."""
import time

import aquaprof as ap


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


@ap.stage("walk")
def walk(depth):
    spin(0.002)
    if depth:
        walk(depth - 1)


def planted():
    # a round: walk's 8 levels compute 16 ms, c 10 ms, decode 3 ms under
    # each of two parents
    with ap.Profiler(compensate=False) as prof:
        for _ in range(5):
            walk(7)
            with ap.stage("c"):
                spin(0.010)
            for parent in ("a", "b"):
                with ap.stage(parent):
                    with ap.stage("decode"):
                        spin(0.003)
    return prof.report()


def test_a_recursive_stage_ranks_once_with_every_level_of_its_self_time():
    rep = planted()
    top = rep.top(3)
    assert top[0].path == "walk"
    levels = rep.recursion(rep["walk"])
    assert [s.path for s in levels] == ["/".join(["walk"] * n)
                                        for n in range(1, 9)]
    assert rep.ranked_self(top[0]) == sum(s.self_wall for s in levels)
    assert rep.ranked_self(top[0]) > 1.3 * rep.ranked_self(rep["c"])
    # no deeper level ranks apart from its outermost
    assert not any(s.path.startswith("walk/") for s in rep.top(100))
    line = next(x for x in str(rep).splitlines() if "1. walk" in x)
    assert "with its recursion: 8 paths" in line


def test_a_stage_under_two_parents_keeps_a_path_each():
    rep = planted()
    assert [len(rep.recursion(rep[p])) for p in ("a/decode", "b/decode",
                                                 "c")] == [1, 1, 1]
    assert rep.ranked_self(rep["c"]) == rep["c"].self_wall
