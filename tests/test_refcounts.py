"""The C entry points leave no reference and no memory behind, on success
and on every error path."""
import gc
import sys

import pytest

import aquaprof as ap


def blocks_after(fn, rounds=3000):
    """Blocks still allocated after rounds calls of fn; a leak of one
    block a call would show thousands."""
    for _ in range(rounds // 2):  # free lists and caches settle first
        fn()
    gc.collect()
    before = sys.getallocatedblocks()
    for _ in range(rounds):
        fn()
    gc.collect()
    return sys.getallocatedblocks() - before


def test_staged_call_keeps_argument_and_result_counts():
    arg, result = object(), object()
    staged = ap.stage("ref")(lambda x: result)
    counts = sys.getrefcount(arg), sys.getrefcount(result)
    with ap.Profiler():
        for _ in range(1000):
            assert staged(arg) is result
    assert (sys.getrefcount(arg), sys.getrefcount(result)) == counts


def test_stage_enter_exit_keeps_counts():
    s = ap.stage("ref")
    count = sys.getrefcount(s)
    with ap.Profiler():
        for _ in range(1000):
            with s:
                pass
    assert sys.getrefcount(s) == count


def test_raising_call_keeps_counts():
    err = ValueError("x")

    @ap.stage("raises")
    def raises():
        raise err
    with ap.Profiler():
        for _ in range(100):
            with pytest.raises(ValueError):
                raises()
    err.__traceback__ = None
    assert sys.getrefcount(err) == 2


def errors():
    for call in (lambda: ap.stage(123), lambda: ap.stage(""),
                 lambda: ap.stage("a/b"), lambda: ap.stage("x", items=-1),
                 lambda: ap.Profiler(max_spans=-1),
                 lambda: ap.Profiler(memory_interval=0),
                 lambda: ap.stage("x")(42)):
        try:
            call()
        except (TypeError, ValueError):
            pass


def test_error_paths_allocate_nothing_that_stays():
    assert blocks_after(errors) < 20


def test_profiling_cycles_allocate_nothing_that_stays():
    def cycle():
        with ap.Profiler() as prof:
            with ap.stage("cycle", items=1):
                pass
        prof.report()
    assert blocks_after(cycle, rounds=300) < 20
