"""Every bad argument is refused with an error naming it."""
import math

import pytest

import aquaprof as ap
from profiled import run_profiled


@pytest.mark.parametrize("call, error, message", [
    (lambda: ap.stage(123), TypeError, "name \\(str\\) or a function"),
    (lambda: ap.stage("x", items=-1), ValueError, "items must be >= 0"),
    (lambda: ap.stage("x", items=-2**70), ValueError, "items must be >= 0"),
    (lambda: ap.stage("x", items="3"), TypeError, "items must be an int"),
    (lambda: ap.stage("x", items=True), TypeError, "items must be an int"),
    (lambda: ap.stage("x", items=2**70), ValueError, "< 2\\*\\*63"),
    (lambda: ap.stage("x", colour=1), TypeError, "unexpected keyword"),
    (lambda: ap.stage("a", "b"), TypeError, "only positional"),
    (lambda: ap.stage(""), ValueError, "must not be empty"),
    (lambda: ap.stage(name="a/b"), ValueError, "contains '/'"),
    (lambda: ap.stage("x")(42), TypeError, "decorates callables"),
    (lambda: ap.stage("x")(print, extra=1), TypeError,
     "takes the function only"),
    (lambda: ap.Profiler(max_spans=-1), ValueError,
     "max_spans must be between 0"),
    (lambda: ap.Profiler(max_spans=2**31), ValueError,
     "max_spans must be between 0"),
    (lambda: ap.Profiler(max_spans=2**80), ValueError,
     "max_spans must be between 0"),
    (lambda: ap.Profiler(max_spans="10"), TypeError,
     "max_spans must be an int"),
    (lambda: ap.Profiler(max_spans=1.5), TypeError,
     "max_spans must be an int"),
    (lambda: ap.Profiler(memory_interval=0), ValueError,
     "memory_interval must be between"),
    (lambda: ap.Profiler(memory_interval=math.nan), ValueError,
     "memory_interval must be between"),
    (lambda: ap.Profiler(memory_interval="fast"), TypeError,
     "memory_interval must be a number"),
    (lambda: ap.Profiler(cpu_resolution=-1e-6), ValueError,
     "cpu_resolution must be between"),
    (lambda: ap.Profiler(cpu_resolution=math.inf), ValueError,
     "cpu_resolution must be between"),
    # a string such as "false" is truthy: taken, it would turn them on
    (lambda: ap.Profiler(memory="false"), TypeError,
     "memory must be True or False, got 'false'"),
    (lambda: ap.Profiler(compensate="no"), TypeError,
     "compensate must be True or False, got 'no'"),
    (lambda: ap.Profiler(memory=1), TypeError, "memory must be True or"),
    (lambda: ap.Profiler(1), TypeError, "positional"),
    (lambda: ap.Profiler(colour=1), TypeError, "colour"),
])
def test_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_stage_type_is_made_by_the_factory_only():
    with pytest.raises(TypeError):
        ap.Stage("x")


def test_bad_report_queries():
    rep = run_profiled(lambda: None)
    with pytest.raises(KeyError, match="no stage 'missing'"):
        rep["missing"]
    with pytest.raises(ValueError, match="n must be an int >= 0"):
        rep.top(-1)
    with pytest.raises(ValueError, match="n must be an int >= 0"):
        rep.top(1.5)

    def one():
        with ap.stage("s"):
            pass
    with pytest.raises(ValueError, match="percentile q must be in"):
        run_profiled(one)["s"].wall.percentile(101)


def test_the_profilers_keywords_are_its_options():
    """Profiler(...) and record.options.Options take the same keywords
    with the same defaults: the signature users read is the one checked.
    All but save=, the file this process's report goes to, which the
    options its children record with must not hold (theirs go to it)."""
    import dataclasses
    import inspect

    from aquaprof.record.options import Options
    params = inspect.signature(ap.Profiler).parameters
    assert all(p.kind is p.KEYWORD_ONLY for p in params.values())
    fields = [f for f in dataclasses.fields(Options) if f.init]
    assert [(p.name, p.default) for p in params.values()
            if p.name != "save"] == [(f.name, f.default) for f in fields]
    assert params["save"].default is None


def test_options_pickle_and_give_the_childs():
    import pickle

    from aquaprof.record.options import Options
    options = Options(max_spans=10, memory=False, window=4, sample=0.001,
                      cuda_sync=True, max_children=3)
    back = pickle.loads(pickle.dumps(options))
    assert back == options and back.sample_ns == 1_000_000
    child = options.for_child()
    assert pickle.loads(pickle.dumps(child)) == child
    assert (child.max_spans, child.memory, child.sample) == (10, False,
                                                             0.001)
    assert (child.compensate, child.cuda, child.children,
            child.dataloaders) == (False, False, False, False)
    # what a child never takes from its parent stays at its default
    assert (child.window, child.cuda_sync, child.max_children) == \
        (0, False, 1000)
    with pytest.raises(ValueError, match="max_spans must be between 0"):
        Options(max_spans=-1)
