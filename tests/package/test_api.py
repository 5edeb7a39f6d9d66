"""The API as a user writes it (the README's example), and what it shows."""
import time

import numpy as np
import pytest

import aquaprof as ap
from profiled import run_profiled


@ap.stage("depth_estimation")
def estimate(x, scale=1):
    return x * scale


@ap.stage
def bare(x):
    return x + 1


class Model:
    @ap.stage("forward")
    def forward(self, x):
        return x * 2

    @ap.stage
    def loss(self, y):
        return -y

    @staticmethod
    @ap.stage("static")
    def helper(v):
        return v


def test_readme_example():
    with ap.Profiler() as prof:
        with ap.stage("load", items=16):
            time.sleep(0.002)
        assert estimate(3, scale=2) == 6
    rep = prof.report()
    text = str(rep)
    assert rep["load"].count == 1 and rep["depth_estimation"].count == 1
    assert rep["load"].items == 16
    assert rep["load"].throughput == pytest.approx(
        16 / rep["load"].wall.total)
    for column in ("count", "total", "self", "mean", "p50", "p95", "max",
                   "cpu", "share", "mem delta", "items/s"):
        assert column in text
    assert "Top 2 bottlenecks by self time:" in text
    assert text.isascii()


def test_start_stop_form_equals_with_form():
    prof = ap.Profiler()
    prof.start()
    assert prof.running and ap.active()
    bare(1)
    prof.stop()
    assert not prof.running and not ap.active()
    assert prof.report()["bare"].count == 1


def test_decorator_forms_keep_function_identity():
    assert bare.__name__ == "bare" and bare.__wrapped__(1) == 2
    assert bare.stage_name == "bare"
    assert estimate.stage_name == "depth_estimation"
    assert Model.loss.stage_name == "Model.loss"
    assert "Model.loss" == Model.loss.__qualname__


def test_methods_static_methods_and_bare_decorator_names():
    m = Model()
    rep = run_profiled(lambda: (m.forward(2), m.loss(1), Model.helper(3),
                                Model.forward(m, 5)))
    assert rep["forward"].count == 2
    assert rep["Model.loss"].count == 1
    assert rep["static"].count == 1


def test_nested_paths_and_typed_stats():
    def work():
        for _ in range(4):
            with ap.stage("outer"):
                with ap.stage("inner", items=10):
                    time.sleep(0.001)
    rep = run_profiled(work)
    outer, inner = rep["outer"], rep["outer/inner"]
    assert isinstance(outer.count, int) and isinstance(outer.wall.total,
                                                      float)
    assert inner.parent == "outer" and inner.depth == 1
    assert inner.count == 4 and inner.items == 40
    assert inner.wall.min >= 0.001
    assert outer.wall.total >= inner.wall.total
    assert outer.self_time == pytest.approx(
        outer.wall.total - inner.wall.total, abs=1e-9)
    assert inner.wall.min <= inner.wall.p50 <= inner.wall.p95 \
        <= inner.wall.max
    assert [s.path for s in rep.stages] == ["outer", "outer/inner"]
    assert [s.path for s in rep] == ["outer", "outer/inner"]
    assert "outer/inner" in rep and "inner" not in rep


def test_table_indents_children_under_parents():
    def work():
        with ap.stage("a"):
            with ap.stage("b"):
                with ap.stage("c"):
                    pass
    lines = str(run_profiled(work)).splitlines()
    header = next(i for i, ln in enumerate(lines) if ln.startswith("stage "))
    labels = [ln[:6] for ln in lines[header + 1:header + 4]]
    assert labels == ["a     ", "  b   ", "    c "]


def test_percentiles_follow_the_data():
    durations = [0.001] * 90 + [0.02] * 10

    def work():
        for d in durations:
            with ap.stage("step"):
                time.sleep(d)
    w = run_profiled(work)["step"].wall
    assert 0.001 <= w.p50 < 0.005
    assert w.p95 >= 0.02 and w.p99 >= 0.02
    assert w.percentile(0) == w.min and w.percentile(100) == w.max
    assert w.mean == pytest.approx(np.mean(durations), rel=0.2)


def test_top_ranks_by_self_time():
    def work():
        with ap.stage("parent"):
            with ap.stage("slow"):
                time.sleep(0.03)
            with ap.stage("fast"):
                time.sleep(0.005)
    rep = run_profiled(work)
    top = rep.top(2)
    assert [s.path for s in top] == ["parent/slow", "parent/fast"]
    assert len(rep.top(10)) == 3 and rep.top(0) == []
    assert "1. parent/slow" in str(rep)


def test_spans_array_and_stage_names():
    def work():
        for i in range(3):
            with ap.stage("outer", items=i):
                with ap.stage("inner"):
                    pass
    rep = run_profiled(work)
    spans = rep.spans()
    assert spans is rep.spans()               # built once, handed over
    assert not spans.flags.owndata and not spans.flags.writeable
    assert spans.dtype.names == ("stage", "thread", "parent", "flags",
                                 "start_ns", "end_ns", "cpu_ns", "items")
    assert spans.dtype.itemsize == 48
    names = [rep.stage_names[s] for s in spans["stage"]]
    assert names == ["outer", "outer/inner"] * 3
    outers = np.flatnonzero(spans["parent"] == -1)
    assert list(spans["items"][outers]) == [0, 1, 2]
    for i in np.flatnonzero(spans["parent"] >= 0):
        p = spans[spans["parent"][i]]
        assert p["start_ns"] <= spans["start_ns"][i] <= spans["end_ns"][i] \
            <= p["end_ns"]
    assert (spans["end_ns"] >= spans["start_ns"]).all()


def test_stage_is_a_no_op_when_no_profiler_runs():
    s = ap.stage("idle")
    with s as entered:
        assert entered is s
    assert bare(1) == 2
    assert not ap.active()
    rep = run_profiled(lambda: None)
    assert len(rep) == 0 and rep.spans_recorded == 0
    assert "no stages were recorded" in str(rep)


def test_a_stage_object_can_be_reused_and_shared():
    shared = ap.stage("shared", items=2)

    def work():
        for _ in range(5):
            with shared:
                pass
    rep = run_profiled(work)
    assert rep["shared"].count == 5 and rep["shared"].items == 10
    assert repr(shared) == "<aquaprof.stage 'shared' items=2>"
    assert shared.name == "shared" and shared.items == 2


def test_unnamed_stage_names_itself_after_the_function():
    @ap.stage(items=3)
    def step():
        return 1

    rep = run_profiled(step)
    assert rep[step.__qualname__].items == 3


def test_context_manager_protocol_through_the_type():
    """contextlib.ExitStack calls type(cm).__enter__(cm) and
    type(cm).__exit__(cm, ...): a stage supports that form too."""
    import contextlib

    def work():
        with contextlib.ExitStack() as stack:
            stack.enter_context(ap.stage("outer"))
            stack.enter_context(ap.stage("inner"))
    rep = run_profiled(work)
    assert rep["outer"].count == 1 and rep["outer/inner"].count == 1
    s = ap.stage("direct")
    assert type(s).__enter__(s) is s and s.__enter__() is s
    assert type(s).__exit__(s, None, None, None) is False
    assert s.__exit__(None, None, None) is False
    with pytest.raises(TypeError, match="__enter__ takes 1"):
        type(s).__enter__()
    with pytest.raises(TypeError, match="expected an aquaprof stage"):
        type(s).__exit__(object(), None, None, None)


def test_inline_stages_are_reused_only_when_nobody_holds_them():
    first = ap.stage("reuse", items=1)
    second = ap.stage("reuse", items=2)
    assert first is not second and first.items == 1  # held: not reused
    del first, second
    a = id(ap.stage("reuse", items=3))
    assert id(ap.stage("reuse", items=4)) == a        # free: reused

    def work():
        for i in range(3):
            with ap.stage("reuse", items=i):
                with ap.stage("reuse", items=10):    # nested, same name
                    pass
    rep = run_profiled(work)
    assert rep["reuse"].items == 0 + 1 + 2
    assert rep["reuse/reuse"].items == 30
