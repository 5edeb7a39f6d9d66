"""The profiler's defined behaviours (docs/profiler.md), each pinned by
a test."""
import os
import sys
import threading
import warnings

import numpy as np
import pytest

import aquaprof as ap
from aquaprof import _core
from profiled import run_profiled
from repo_paths import ROOT


def test_exception_inside_stage_closes_it_and_propagates_unchanged():
    err = ValueError("boom")

    @ap.stage("decorated")
    def failing():
        raise KeyError("inner")

    with ap.Profiler() as prof:
        with pytest.raises(ValueError) as info:
            with ap.stage("failing"):
                raise err
        assert info.value is err
        assert info.traceback[-1].name == \
            "test_exception_inside_stage_closes_it_and_propagates_unchanged"
        with pytest.raises(KeyError, match="inner"):
            failing()
        with ap.stage("after"):
            pass
    rep = prof.report()
    assert rep["failing"].count == 1 and rep["failing"].raised == 1
    assert rep["decorated"].raised == 1
    assert "after" in rep and "failing/after" not in rep
    flags = rep.spans()["flags"]
    assert list(flags) == [_core.SPAN_RAISED, _core.SPAN_RAISED, 0]
    assert "failing: 1 of 1 call raised" in str(rep)


def test_an_outer_stage_exiting_first_closes_the_inner_with_one_warning():
    """Misnesting (a generator abandoned inside a stage, a context manager
    closed out of order) never raises into the program: the stages left
    open inside are closed with the outer one, counted as unclosed, and
    the run warns once."""
    a, b, c = ap.stage("a"), ap.stage("b"), ap.stage("c")
    with ap.Profiler() as prof:
        a.__enter__()
        b.__enter__()
        with pytest.warns(RuntimeWarning, match="'a' closed while stages"):
            a.__exit__(None, None, None)
        b.__exit__(None, None, None)           # already closed: ignored
        with warnings.catch_warnings():
            warnings.simplefilter("error")     # said once: no second one
            a.__enter__()
            c.__enter__()
            a.__exit__(None, None, None)
    rep = prof.report()
    assert rep["a"].count == 2 and rep["a"].unclosed == 0
    assert rep["a/b"].count == 1 and rep["a/b"].unclosed == 1
    assert rep["a/c"].unclosed == 1 and rep.unclosed == 2
    assert "2 stage calls were not closed by their own exit" in str(rep)


def test_misnesting_never_raises_even_with_warnings_as_errors():
    leak = ap.stage("leak")

    @ap.stage("caller")
    def caller():
        leak.__enter__()
        return 1

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ap.Profiler() as prof:
            assert caller() == 1
            assert caller() == 1
            leak.__exit__(None, None, None)    # closed by caller: ignored
    rep = prof.report()
    assert rep["caller"].count == 2 and rep["caller"].unclosed == 0
    assert rep["caller/leak"].count == 2 and rep["caller/leak"].unclosed == 2
    assert rep.unclosed == 2


def test_a_profiler_runs_once_and_reports_after_stop():
    prof = ap.Profiler()
    with pytest.raises(RuntimeError, match="never started"):
        prof.stop()
    prof.start()
    with pytest.raises(RuntimeError, match="already run"):
        prof.start()
    with pytest.raises(RuntimeError, match="still running"):
        prof.report()
    prof.stop()
    prof.stop()  # a second stop is harmless
    with pytest.raises(RuntimeError, match="already run"):
        prof.start()
    assert prof.report().spans_recorded == 0


def test_report_called_twice_gives_the_same_report():
    prof = ap.Profiler()
    with prof:
        with ap.stage("x"):
            pass
    first, second = prof.report(), prof.report()
    assert first == second and str(first) == str(second)


def test_eight_threads_of_200k_stages_count_exactly():
    threads, per_thread = 8, 200_000
    barrier = threading.Barrier(threads)

    def worker():
        s = ap.stage("work", items=1)
        barrier.wait()
        for _ in range(per_thread):
            with s:
                pass

    def run():
        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()

    rep = run_profiled(run)
    total = threads * per_thread
    assert rep["work"].count == total and rep["work"].items == total
    assert len(rep.threads) == threads
    assert rep.spans_recorded + rep.spans_dropped == total
    # threads reserve room in blocks of 4096 spans: when the default cap of
    # 1M is reached, each thread may leave part of its last block unused
    assert 1_000_000 - threads * 4096 < rep.spans_recorded <= 1_000_000
    assert sum(t["spans"] + t["dropped"] for t in rep.threads) == total
    assert set(np.unique(rep.spans()["thread"])) <= set(range(threads))


def test_stages_in_threads_nest_per_thread():
    def worker(i):
        with ap.stage("job"):
            with ap.stage(f"step{i % 2}"):
                pass

    def run():
        with ap.stage("main"):
            pool = [threading.Thread(target=worker, args=(i,))
                    for i in range(4)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()

    rep = run_profiled(run)
    # a thread's stages start their own tree: they are not under "main"
    assert rep["job"].count == 4
    assert rep["job/step0"].count == 2 and rep["job/step1"].count == 2
    assert "main/job" not in rep


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_neither_corrupts_nor_reports_parent_data():
    read_end, write_end = os.pipe()
    with ap.Profiler() as prof:
        with ap.stage("before"):
            pass
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                with ap.stage("child-only"):
                    pass
                inherited_inactive = not ap.active()
                prof.stop()
                try:
                    prof.report()
                    refused = False
                except RuntimeError as e:
                    refused = "forked child" in str(e)
                with ap.Profiler() as own:
                    with ap.stage("in-child"):
                        pass
                own_ok = own.report()["in-child"].count == 1
                os.write(write_end,
                         f"{inherited_inactive} {refused} {own_ok}".encode())
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        with ap.stage("after"):
            pass
    os.close(write_end)
    child_said = os.read(read_end, 100).decode()
    os.close(read_end)
    assert status == 0
    assert child_said == "True True True"
    rep = prof.report()
    assert rep["before"].count == 1 and rep["after"].count == 1
    assert "child-only" not in rep and "in-child" not in rep
    assert rep.meta["pid"] == os.getpid()


def test_recursion_of_the_same_stage_builds_a_path_per_level():
    @ap.stage("fact")
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    rep = run_profiled(lambda: fact(10))
    paths = ["/".join(["fact"] * k) for k in range(1, 11)]
    assert [s.path for s in rep.stages] == paths
    assert all(rep[p].count == 1 for p in paths)
    total_self = sum(rep[p].self_time for p in paths)
    assert total_self == pytest.approx(rep["fact"].wall.total, abs=1e-9)


def test_recursion_through_one_stage_object():
    s = ap.stage("again")

    def work():
        with s:
            with s:
                pass
    rep = run_profiled(work)
    assert rep["again"].count == 1 and rep["again/again"].count == 1


def test_stage_left_open_at_stop_is_closed_and_flagged():
    s = ap.stage("left-open")
    prof = ap.Profiler()
    prof.start()
    s.__enter__()
    prof.stop()
    s.__exit__(None, None, None)  # late exit is ignored, not an error
    rep = prof.report()
    assert rep.unclosed == 1 and rep["left-open"].unclosed == 1
    span = rep.spans()[0]
    assert span["flags"] == _core.SPAN_UNCLOSED
    assert span["end_ns"] == rep.meta["stop_ns"]
    assert "1 stage call was not closed by its own exit" in str(rep)
    assert "left-open" in str(rep)


def test_stage_entered_before_start_is_not_recorded():
    s = ap.stage("early")
    s.__enter__()
    with ap.Profiler() as prof:
        s.__exit__(None, None, None)  # its enter was never recorded
    assert "early" not in prof.report()


def test_max_spans_keeps_aggregates_exact_and_counts_drops():
    def work():
        for _ in range(10_000):
            with ap.stage("tick", items=2):
                pass
    rep = run_profiled(work, max_spans=1000)
    assert rep["tick"].count == 10_000 and rep["tick"].items == 20_000
    assert rep.spans_recorded == 1000 and rep.spans_dropped == 9000
    assert "9,000 spans beyond max_spans=1,000" in str(rep)
    rep0 = run_profiled(work, max_spans=0)
    assert rep0.spans_recorded == 0 and rep0["tick"].count == 10_000


def test_unicode_names_and_empty_names():
    def work():
        with ap.stage("深度推定"):
            with ap.stage("étape ✓"):
                pass
    rep = run_profiled(work)
    assert rep["深度推定/étape ✓"].count == 1
    assert "深度推定" in str(rep)
    with pytest.raises(ValueError, match="must not be empty"):
        ap.stage("")
    with pytest.raises(ValueError, match="contains '/'"):
        ap.stage("a/b")


def test_dropped_profiler_object_deactivates():
    ap.Profiler().start()
    import gc
    gc.collect()
    assert not ap.active()


def test_stage_in_a_fresh_interpreter_subprocess():
    """Import, profile and report in a process of its own (no test state)."""
    import subprocess
    code = ("import aquaprof as ap\n"
            "with ap.Profiler() as p:\n"
            "    with ap.stage('x'): pass\n"
            "print(p.report()['x'].count)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True,
                         cwd=str(ROOT))
    assert out.stdout.strip() == "1"
