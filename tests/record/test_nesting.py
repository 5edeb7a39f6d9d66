"""Profilers nest: one started while another runs reports what ran while
it did, with the paths it would record alone, and the outer one records
on unchanged. The arithmetic (aquaprof.record.nesting.subtract) is checked
against the core's own merge of the same calls; the semantics in real
runs, threads, `aquaprof run` and `pytest --aquaprof` included."""
import gc
import os
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aquaprof as ap
from aquaprof import _core
from aquaprof.record.nesting import GPU_STATUS, subtract
from plugin_args import PLUGIN
from profiled import busy
from repo_paths import ROOT

pytest_plugins = ["pytester"]


# ------------------------------------------------------------ arithmetic

def one_call(wall, items=0, raised=0, mem=0):
    """A stage dict of one call of `wall` ns, as the core records it."""
    bucket = int(np.searchsorted(_core.HIST_LOWER_NS, wall, "right")) - 1
    return {"name": "s", "parent": -1, "depth": 0, "count": 1,
            "raised": raised, "unclosed": 0, "total_ns": wall,
            "self_ns": wall // 2, "min_ns": wall, "max_ns": wall,
            "mean_ns": float(wall), "m2": 0.0, "cpu_ns": wall // 3,
            "items": items, "mem_peak": mem, "mem_delta": mem // 7,
            "hist": [(bucket, 1)]}


def stats_of(walls, mems=None, first=0):
    """The core's aggregates of these calls (numbered from first, which
    sets their items and raised): its own merge, call by call."""
    d = dict(one_call(1), count=0, total_ns=0, self_ns=0, cpu_ns=0,
             min_ns=0, max_ns=0, mean_ns=0.0, mem_peak=0, mem_delta=0,
             hist=[])
    for i, w in enumerate(walls, first):
        d = _core.merge_stage(d, one_call(w, i % 3, i % 2,
                                          mems[i - first] if mems else 0))
    return d


durations = st.lists(st.integers(1, 10**10), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(durations, durations)
def test_a_difference_is_exact_where_it_can_be_and_bounded_elsewhere(
        before, during):
    d = subtract(stats_of(before + during), stats_of(before))
    truth = stats_of(during, first=len(before))
    for key in ("count", "raised", "unclosed", "total_ns", "self_ns",
                "cpu_ns", "items", "mem_delta"):
        assert d[key] == truth[key], key
    assert sorted(d["hist"]) == sorted(truth["hist"])
    assert d["mean_ns"] == pytest.approx(truth["mean_ns"], rel=1e-9)
    # the extremes enclose the true ones, within the bucket of each
    assert d["min_ns"] <= truth["min_ns"] <= truth["max_ns"] <= d["max_ns"]
    assert d["min_ns"] >= truth["min_ns"] * 31 / 32 - 1
    assert d["max_ns"] <= truth["max_ns"] * 33 / 32 + 1
    if max(during) > max(before) or len(during) == 1:
        assert d["max_ns"] == truth["max_ns"]
    if min(during) < min(before) or len(during) == 1:
        assert d["min_ns"] == truth["min_ns"]
    spread = d["max_ns"] - d["min_ns"]
    assert 0 <= d["m2"] <= len(during) * spread * spread / 4 + 1e-6
    # Chan's merge backwards: exact but for rounding, or clamped by the
    # extremes where rounding would go past what they allow
    assert d["m2"] == pytest.approx(truth["m2"], rel=1e-6, abs=1e-3 * (
        sum(before + during) / len(before + during)) ** 2) \
        or d["m2"] == len(during) * spread * spread / 4


def test_a_stage_new_in_the_run_is_taken_whole():
    end = stats_of([5, 700, 90])
    assert subtract(end, None) == end
    assert subtract(end, stats_of([])) == end


def test_a_stage_without_calls_in_the_run_is_empty():
    same = stats_of([5, 700])
    d = subtract(same, same)
    assert d["count"] == 0 and d["hist"] == [] and d["total_ns"] == 0
    assert d["min_ns"] == d["max_ns"] == d["mem_peak"] == 0


def test_the_memory_peak_is_exact_at_a_new_high_else_bounded_by_the_run():
    high = subtract(stats_of([1, 2, 3], [10, 50, 80]),
                    stats_of([1], [10]), rss_peak=60)
    assert high["mem_peak"] == 80
    lower = subtract(stats_of([1, 2, 3], [90, 50, 40]),
                     stats_of([1], [90]), rss_peak=60)
    assert lower["mem_peak"] == 60


def test_a_memory_rise_is_the_windows_only_where_a_call_in_it_made_it():
    start = dict(stats_of([1]), mem_rise=50)
    same = dict(stats_of([1, 2]), mem_rise=50)
    assert subtract(same, start)["mem_rise"] == 0
    higher = dict(same, mem_rise=80)
    assert subtract(higher, start)["mem_rise"] == 80


# ------------------------------------------------------------- semantics

def work(prefix, n):
    for _ in range(n):
        with ap.stage(prefix, items=2):
            with ap.stage("leaf"):
                pass


def test_an_inner_report_holds_what_ran_inside_it_and_the_outer_goes_on():
    with ap.Profiler() as outer:
        work("before", 2)
        with ap.stage("step"):
            pass
        with ap.Profiler() as inner:
            assert inner.nested and inner.running and ap.active()
            work("during", 3)
            with ap.stage("step"):
                pass
        assert not inner.running and ap.active()
        work("after", 1)
    assert not outer.nested
    rep, whole = inner.report(), outer.report()
    # (the order of paths first entered in other sessions is the
    # process's, not this test's)
    assert sorted(s.path for s in rep.stages) == ["during", "during/leaf",
                                                  "step"]
    assert rep["during"].count == 3 and rep["during"].items == 6
    assert rep["step"].count == 1
    assert rep.meta["nested"] is True and "nested" not in whole.meta
    assert rep.gpu_status == GPU_STATUS
    # the outer's report is that of a run without the inner
    assert {s.path: s.count for s in whole.stages} == {
        "before": 2, "before/leaf": 2, "step": 2, "during": 3,
        "during/leaf": 3, "after": 1, "after/leaf": 1}
    assert whole.unclosed == 0 and whole.spans_recorded == 14
    # a stage the inner alone saw: the very figures the outer has
    for path in ("during", "during/leaf"):
        mine, its = rep[path], whole[path]
        assert (mine.wall.total, mine.self_time, mine.cpu, mine.wall.min,
                mine.wall.max, mine.wall.mean) == (
            its.wall.total, its.self_time, its.cpu, its.wall.min,
            its.wall.max, its.wall.mean)
    # its spans: those entered in its run, parents among them
    spans = rep.spans()
    assert len(spans) == 7 and rep.spans_recorded == 7
    names = [rep.stage_names[s] for s in spans["stage"]]
    assert names == ["during", "during/leaf"] * 3 + ["step"]
    assert list(spans["parent"]) == [-1, 0, -1, 2, -1, 4, -1]
    assert rep.meta["start_ns"] <= spans["start_ns"].min()
    assert spans["end_ns"].max() <= rep.meta["stop_ns"]
    assert len(rep.threads) == 1


def test_an_inner_report_has_the_paths_it_would_record_alone():
    with ap.Profiler():
        with ap.stage("run script.py"):
            with ap.stage("setup"):
                pass
            with ap.Profiler() as inner:
                work("load", 2)
    rep = inner.report()
    assert [s.path for s in rep.stages] == ["load", "load/leaf"]
    assert rep["load"].depth == 0 and rep["load/leaf"].parent == "load"


def test_calls_open_at_the_inner_stop_are_closed_there_in_its_report_only():
    with ap.Profiler() as outer:
        held = ap.stage("held")
        inner = ap.Profiler()
        inner.start()
        held.__enter__()
        with ap.stage("held-child"):
            pass
        inner.stop()
        held.__exit__(None, None, None)
    rep = inner.report()
    assert rep.unclosed == 1 and rep["held"].unclosed == 1
    assert rep["held"].count == 1 and rep["held/held-child"].count == 1
    assert rep["held"].wall.total - rep["held"].self_time == \
        pytest.approx(rep["held/held-child"].wall.total, abs=1e-9)
    flagged = rep.spans()["flags"] & _core.SPAN_UNCLOSED
    assert list(flagged) == [_core.SPAN_UNCLOSED, 0]
    whole = outer.report()
    assert whole.unclosed == 0 and whole["held"].unclosed == 0


def test_inners_in_sequence_and_inside_each_other_each_report_their_own():
    with ap.Profiler():
        with ap.Profiler() as first:
            work("a", 1)
        with ap.Profiler() as middle:
            work("a", 2)
            with ap.Profiler() as innermost:
                work("b", 3)
            work("a", 1)
    assert first.report()["a"].count == 1
    assert middle.report()["a"].count == 3
    assert middle.report()["b"].count == 3
    assert innermost.report()["b"].count == 3
    assert "a" not in innermost.report()


def test_an_inner_outliving_its_outer_ends_with_it():
    outer = ap.Profiler()
    outer.start()
    inner = ap.Profiler()
    inner.start()
    work("kept", 2)
    ap.stage("left-open").__enter__()
    outer.stop()                      # ends the session: and the inner
    assert not inner.running and not ap.active()
    with ap.stage("not-kept"):
        pass
    inner.stop()                      # nothing more to do, no error
    rep = inner.report()
    assert rep["kept"].count == 2 and "not-kept" not in rep
    assert rep["left-open"].unclosed == 1
    assert rep.meta["stop_ns"] <= outer.report().meta["stop_ns"]
    assert inner.report() is rep


def test_an_inner_dropped_while_running_leaves_the_outer_recording():
    with ap.Profiler() as outer:
        inner = ap.Profiler()
        inner.start()
        work("a", 1)
        del inner
        gc.collect()
        assert ap.active()
        work("a", 1)
    assert outer.report()["a"].count == 2


def test_the_outer_dropped_while_an_inner_runs_ends_the_inner():
    outer = ap.Profiler()
    outer.start()
    inner = ap.Profiler()
    inner.start()
    work("a", 1)
    del outer
    gc.collect()
    assert not ap.active() and not inner.running
    assert inner.report()["a"].count == 1


def test_an_inner_uses_the_outers_settings_and_says_so():
    with ap.Profiler(max_spans=3, memory=False, compensate=False):
        with ap.Profiler(max_spans=100, memory=True, window=5,
                         compensate=False) as inner:
            work("a", 4)
    rep = inner.report()
    assert rep.meta["max_spans"] == 3 and rep.meta["memory"] is False
    assert rep["a"].count == 4 and rep["a/leaf"].count == 4
    assert rep.spans_recorded == 3 and rep.spans_dropped == 5
    assert "overhead" not in rep.meta
    assert "nested in another Profiler" in str(rep)


def test_an_inner_is_compensated_with_the_outers_calibration():
    with ap.Profiler() as outer:
        with ap.Profiler() as inner:
            work("a", 3)
    assert inner.report().meta["overhead"] == outer.report().meta["overhead"]
    assert inner.report()["a"].compensated_total is not None


def test_an_inner_report_saves_and_loads(tmp_path):
    with ap.Profiler():
        with ap.stage("wrap"):
            with ap.Profiler() as inner:
                work("a", 2)
    rep = inner.report()
    back = ap.Report.load(rep.save(tmp_path / "inner.json"))
    assert back.to_dict() == rep.to_dict() and back.meta["nested"] is True


def test_other_threads_are_reported_whole_with_their_own_paths():
    started, go, done, leave = (threading.Event() for _ in range(4))

    def serve():
        with ap.stage("serve"):
            with ap.stage("request"):
                pass
            started.set()
            go.wait()
            for _ in range(3):
                with ap.stage("request"):
                    pass
            done.set()
            leave.wait()

    with ap.Profiler() as outer:
        worker = threading.Thread(target=serve)
        worker.start()
        started.wait()
        with ap.stage("main"):
            with ap.Profiler() as inner:
                go.set()
                done.wait()
                with ap.stage("mine"):
                    pass
        leave.set()
        worker.join()
    rep = inner.report()
    # "serve", open since before, keeps its place above its calls
    assert rep["serve"].count == 0 and rep["serve/request"].count == 3
    assert rep["mine"].count == 1 and "main" not in rep
    assert len(rep.threads) == 2
    assert sorted(set(rep.spans()["thread"])) == [0, 1]
    assert outer.report()["serve/request"].count == 4


def test_a_nested_snapshot_shows_the_inners_figures():
    with ap.Profiler(window=10):
        work("a", 4)
        with ap.Profiler(window=3) as inner:
            work("a", 2)
            snap = inner.snapshot()
    assert snap.stages["a"].count == 2
    assert snap.recent["a"].calls == 2
    with ap.Profiler():
        with ap.Profiler() as inner:
            with pytest.raises(RuntimeError, match="window"):
                inner.snapshot()


def test_a_nested_profiler_refuses_to_report_while_running():
    with ap.Profiler():
        with ap.Profiler() as inner:
            with pytest.raises(RuntimeError, match="still running"):
                inner.report()
        with pytest.raises(RuntimeError, match="already run"):
            inner.start()


def test_nest_false_refuses_to_nest():
    with ap.Profiler():
        raw = _core.Profiler()
        with pytest.raises(RuntimeError, match="nest=False"):
            raw.start(nest=False)
        assert not raw.running and not raw.nested and raw.nest_base is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_nested_profiler_in_a_forked_child_has_no_report():
    read_end, write_end = os.pipe()
    with ap.Profiler():
        with ap.Profiler() as inner:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    inner.stop()
                    try:
                        inner.report()
                        said = "reported"
                    except RuntimeError as e:
                        said = str("forked child" in str(e))
                    with ap.Profiler() as own:
                        with ap.Profiler() as nested_own:
                            work("c", 1)
                    said += f" {nested_own.report()['c'].count}"
                    said += f" {own.report()['c'].count}"
                    os.write(write_end, said.encode())
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            work("p", 1)
    os.close(write_end)
    said = os.read(read_end, 100).decode()
    os.close(read_end)
    assert status == 0 and said == "True 1 1"
    assert inner.report()["p"].count == 1


# ---------------------------------------------------------- integrations

SELF_PROFILING = """
import aquaprof as ap

with ap.Profiler() as prof:
    for _ in range(3):
        with ap.stage("load"):
            pass
rep = prof.report()
assert rep["load"].count == 3, rep
print("OWN REPORT", [s.path for s in rep.stages], rep.meta["nested"])
"""


def test_aquaprof_run_on_a_script_that_profiles_itself(tmp_path):
    script = tmp_path / "selfprof.py"
    script.write_text(SELF_PROFILING)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "aquaprof", "run",
                          str(script)], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "OWN REPORT ['load'] True" in out.stdout
    whole = ap.Report.load(tmp_path / "selfprof.aquaprof.json")
    assert whole["run selfprof.py/load"].count == 3


def test_pytest_aquaprof_on_a_test_that_profiles_itself(pytester):
    pytester.makepyfile(test_self=textwrap.dedent("""
        import aquaprof as ap

        def test_profiles_itself():
            with ap.Profiler() as prof:
                with ap.stage("mine"):
                    pass
            assert prof.nested
            assert prof.report()["mine"].count == 1
        """))
    out = pytester.path / "profiles"
    result = pytester.runpytest(*PLUGIN, f"--aquaprof={out}")
    result.assert_outcomes(passed=1)
    [path] = out.glob("test_self.py__test_profiles_itself*.json")
    saved = ap.Report.load(path)
    assert saved["mine"].count == 1 and "nested" not in saved.meta


def test_a_library_that_profiles_each_call_under_an_outer_profiler():
    reports = []

    def library_call(n):
        with ap.Profiler() as own:
            with ap.stage("lib"):
                for _ in range(n):
                    with ap.stage("part"):
                        pass
        reports.append(own.report())

    with ap.Profiler() as app:
        for n in (1, 2, 3):
            with ap.stage("request"):
                library_call(n)
    assert [r["lib/part"].count for r in reports] == [1, 2, 3]
    assert all([s.path for s in r.stages] == ["lib", "lib/part"]
               for r in reports)
    whole = app.report()
    assert whole["request/lib"].count == 3
    assert whole["request/lib/part"].count == 6
    # ... and the same library without any outer profiler
    library_call(2)
    assert "nested" not in reports[-1].meta
    assert reports[-1]["lib/part"].count == 2


def test_nesting_from_threads_at_once():
    errors = []
    barrier = threading.Barrier(4)

    def job(i):
        try:
            barrier.wait()
            with ap.Profiler(compensate=False) as prof:
                for _ in range(50):
                    with ap.stage(f"job{i}"):
                        busy(1e-5)
            assert prof.report()[f"job{i}"].count == 50
        except Exception as e:   # reported below, with the thread's name
            errors.append((i, repr(e)))

    with ap.Profiler() as outer:
        threads = [threading.Thread(target=job, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    whole = outer.report()
    assert all(whole[f"job{i}"].count == 50 for i in range(4))
