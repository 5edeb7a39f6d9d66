"""torch ops and nn.Module calls as stages (Profiler(torch_ops=...,
torch_modules=...)), on a small CNN on the CPU: the stage paths and
counts, backward stages, input shapes in names, hooks gone after stop,
errors in the hooks kept from the program, forwards that raise, threads,
nested profilers, the mode stack shared with the program's own modes,
and kernels attributed to an op or a module through the fake CUPTI."""
import os
import re
import textwrap
import threading
import warnings

import pytest

import aquaprof as ap
from aquaprof import _core
from aquaprof.integrations import torch_hooks
from aquaprof.record.torch import backward, modules, ops, switch
from fake_gpu import scenario

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional
from torch.nn.modules import module as nn_module  # noqa: E402
from torch.overrides import TorchFunctionMode  # noqa: E402

N = 4
# a module call's stage: its attribute path and its class
FEATURES, HEAD = "features (Sequential)", "head (Linear)"
LAYERS = [f"features.{i} ({kind})" for i, kind in enumerate(
    ("Conv2d", "ReLU", "MaxPool2d", "Conv2d", "ReLU", "MaxPool2d"))]
CONVS = (LAYERS[0], LAYERS[3])
# An exception thrown in torch's C++ aborts a process that preloads ASan's
# runtime (`make asan`: its __cxa_throw interceptor has no libstdc++ to
# call); the normal run of the suite runs these.
throws_in_cxx = pytest.mark.skipif(
    os.environ.get("AQUAPROF_SANITIZED") == "1",
    reason="torch throws a C++ exception, which aborts under ASan's "
           "preloaded runtime; the normal run checks this")


class SmallCNN(nn.Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(inplace=inplace),
            nn.MaxPool2d(2))
        self.head = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


ENGINE = torch.autograd.Variable._execution_engine


def hooks_left():
    """What of ours torch still holds: global module hooks, modes on this
    thread's stack, the autograd engine's stand-in."""
    return (len(nn_module._global_forward_pre_hooks),
            len(nn_module._global_forward_hooks),
            len(nn_module._global_forward_hooks_always_called),
            torch._C._len_torch_function_stack(),
            int(torch.autograd.Variable._execution_engine is not ENGINE))


@pytest.fixture(autouse=True)
def nothing_left_hooked():
    assert hooks_left() == (0, 0, 0, 0, 0)
    yield
    assert hooks_left() == (0, 0, 0, 0, 0), "hooks left after the test"


@pytest.fixture
def model():
    torch.manual_seed(0)
    return SmallCNN()


@pytest.fixture
def x():
    torch.manual_seed(1)
    return torch.randn(2, 3, 32, 32)


def profiled(fn, **options):
    with ap.Profiler(compensate=False, **options) as prof:
        fn()
    return prof.report()


def forwards(model, x, n=N, grad=False):
    def run():
        for _ in range(n):
            with ap.stage("model"):
                if grad:
                    model(x).sum().backward()
                else:
                    with torch.no_grad():
                        model(x)
    return run


def children_total(rep, path):
    return sum(s.wall.total for s in rep if s.parent == path)


# ---------------------------------------------------------------- modules

def test_modules_are_stages_named_by_attribute_path(model, x):
    rep = profiled(forwards(model, x), torch_modules=True)
    root = "model/SmallCNN"
    expected = [root, f"{root}/{FEATURES}", f"{root}/{HEAD}"] + [
        f"{root}/{FEATURES}/{layer}" for layer in LAYERS]
    for path in expected:
        assert rep[path].count == N, path
        assert rep[path].raised == rep[path].unclosed == 0
    # nothing else: no ops, no backward without grad
    assert sorted(s.path for s in rep) == sorted(["model"] + expected)


def test_module_totals_hold_their_children(model, x):
    rep = profiled(forwards(model, x), torch_modules=True)
    for path in ("model/SmallCNN", f"model/SmallCNN/{FEATURES}"):
        s = rep[path]
        assert s.wall.total >= children_total(rep, path)
        assert s.self_time == pytest.approx(
            s.wall.total - children_total(rep, path), abs=1e-6)


def test_modules_in_lists_and_foreign_modules():
    class Blocks(nn.Module):
        def __init__(self, other):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
            self.other = [other]       # held, but not one of its modules

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.other[0](x)

    outsider = nn.Sequential(nn.Tanh())
    net = Blocks(outsider)
    rep = profiled(lambda: net(torch.ones(1, 4)), torch_modules=True)
    assert {s.path for s in rep} == {
        "Blocks", "Blocks/layers.0 (Linear)", "Blocks/layers.1 (Linear)",
        "Blocks/Sequential", "Blocks/Sequential/0 (Tanh)"}


def test_a_forward_that_raises_closes_its_stages(model, x):
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(3, 3)

        def forward(self, x):
            self.inner(x)
            raise ValueError("bad batch")

    broken = Broken()

    def run():
        for _ in range(N):
            with pytest.raises(ValueError, match="bad batch"):
                broken(torch.ones(1, 3))
        model(x)      # after the failures, paths are whole again

    rep = profiled(run, torch_modules=True, torch_ops=True)
    assert rep["Broken"].count == rep["Broken"].raised == N
    inner = rep["Broken/inner (Linear)"]
    assert inner.count == N and inner.raised == 0
    assert rep[f"SmallCNN/{FEATURES}/{LAYERS[0]}"].count == 1
    assert rep.unclosed == 0 and all(s.unclosed == 0 for s in rep)


def test_backward_stages_count_each_pass(model, x):
    rep = profiled(forwards(model, x, grad=True), torch_modules=True)
    bw = "model/SmallCNN (backward)"
    for path in (bw, f"{bw}/{HEAD} (backward)", f"{bw}/{FEATURES} (backward)",
                 *(f"{bw}/{FEATURES} (backward)/{c} (backward)"
                   for c in CONVS)):
        assert rep[path].count == N, path
    assert rep[bw].wall.total >= children_total(rep, bw)
    assert rep.unclosed == 0


def test_backward_of_branching_modules_stays_nested():
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(8, 8), nn.Tanh())

        def forward(self, t):
            return t + self.body(t)

    net = nn.Sequential(nn.Linear(4, 8), Residual(), Residual())
    t = torch.randn(3, 4)

    def run():
        for _ in range(N):
            with ap.stage("step"):
                net(t).sum().backward()

    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no stage closed out of order
        rep = profiled(run, torch_modules=True)
    bw = "step/Sequential (backward)"
    for path in (bw, f"{bw}/0 (Linear) (backward)",
                 f"{bw}/1 (Residual) (backward)",
                 f"{bw}/2 (Residual) (backward)/2.body (Sequential) "
                 f"(backward)/2.body.0 (Linear) (backward)"):
        assert rep[path].count == N, path
    assert rep.unclosed == 0 and rep["step"].count == N


def test_backward_leaves_outputs_and_gradients_unchanged(x):
    def grads(profile):
        torch.manual_seed(0)
        net = SmallCNN(inplace=True)       # in-place ReLU on a conv output
        out = []

        def run():
            y = net(x)
            y.sum().backward()
            out.append((y.detach(), type(y), y.grad_fn.name(),
                        [p.grad.clone() for p in net.parameters()]))
        if profile:
            profiled(run, torch_modules=True, torch_ops=True)
        else:
            run()
        return out[0]

    y0, t0, fn0, g0 = grads(False)
    y1, t1, fn1, g1 = grads(True)
    assert torch.equal(y0, y1) and t0 is t1 and fn0 == fn1
    assert all(torch.equal(a, b) for a, b in zip(g0, g1))


@throws_in_cxx
def test_a_backward_that_raises_leaves_the_next_pass_whole(model, x):
    class Fails(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):
            return t * 1

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("no gradient today")

    class Wrapped(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = model

        def forward(self, t):
            return self.net(Fails.apply(t))

    wrapped = Wrapped()
    xg = x.clone().requires_grad_()

    def run():
        with pytest.raises(RuntimeError, match="no gradient today"):
            wrapped(xg).sum().backward()
        for _ in range(N):
            with ap.stage("step"):
                model(x).sum().backward()

    rep = profiled(run, torch_modules=True)
    assert rep[f"step/SmallCNN (backward)/{HEAD} (backward)"].count == N
    assert rep["step/SmallCNN"].count == N


def test_graphs_made_in_a_run_record_nothing_after_it(model, x):
    holder = []
    profiled(lambda: holder.append(model(x).sum()), torch_modules=True)
    rep = profiled(lambda: holder[0].backward())
    assert len(rep) == 0


# -------------------------------------------------------------------- ops

def test_ops_nest_under_the_open_stage(model, x):
    rep = profiled(forwards(model, x), torch_ops=True)
    assert {s.path for s in rep} == {
        "model", "model/aten::conv2d", "model/aten::relu",
        "model/aten::max_pool2d", "model/aten::flatten",
        "model/aten::linear"}
    assert rep["model/aten::conv2d"].count == 2 * N
    assert rep["model/aten::linear"].count == N


def test_ops_nest_under_modules(model, x):
    rep = profiled(forwards(model, x), torch_ops=True, torch_modules=True)
    root = "model/SmallCNN"
    for path, count in ((f"{root}/{FEATURES}/{LAYERS[0]}/aten::conv2d", N),
                        (f"{root}/{FEATURES}/{LAYERS[1]}/aten::relu", N),
                        (f"{root}/{HEAD}/aten::linear", N),
                        (f"{root}/aten::flatten", N)):
        assert rep[path].count == count, path
    conv = rep[f"{root}/{FEATURES}/{LAYERS[0]}"]
    assert conv.wall.total >= children_total(rep, conv.path)
    assert conv.self_time == pytest.approx(
        conv.wall.total - children_total(rep, conv.path), abs=1e-6)


def test_an_op_inside_an_op_is_part_of_it():
    # F.relu calls torch.relu; F.normalize calls norm, clamp_min, expand_as
    t = torch.randn(8)
    rep = profiled(lambda: (F.relu(t), F.normalize(t, dim=0)),
                   torch_ops=True)
    assert {s.path: s.count for s in rep} == {"aten::relu": 1,
                                              "aten::normalize": 1}


def test_operators_getters_and_printing(model):
    a = torch.ones(3)

    def run():
        b = a + 1
        b = 2 * b
        b += a
        b[0]
        a.shape, a.size(), a.dim(), a.dtype, repr(a), len(a)
        with torch.no_grad():
            a.sum().item()

    rep = profiled(run, torch_ops=True)
    assert {s.path: s.count for s in rep} == {
        "aten::add": 1, "aten::mul": 1, "aten::add_": 1,
        "aten::__getitem__": 1, "aten::sum": 1, "aten::item": 1}


def test_shapes_in_names(model, x):
    rep = profiled(forwards(model, x, n=1), torch_ops="shapes")
    names = {s.name for s in rep}
    assert "aten::conv2d (2×3×32×32, 8×3×3×3, 8)" in names
    assert "aten::conv2d (2×8×16×16, 16×8×3×3, 16)" in names
    assert "aten::linear (2×1024, 10×1024, 10)" in names
    rep = profiled(lambda: (torch.cat([torch.ones(2), torch.ones(3)]),
                            torch.ones(2, 2).sum(),
                            torch.zeros(()) + 1), torch_ops="shapes")
    assert {s.name for s in rep} >= {"aten::cat ([2, 3])", "aten::ones",
                                     "aten::sum (2×2)", "aten::add (scalar)"}


def test_many_shapes_are_left_out_whole_and_counted():
    parts = [torch.ones(2, i + 1) for i in range(10)]
    rep = profiled(lambda: (torch.cat(parts, 1),
                            torch.stack([torch.ones(3)] * 4),
                            torch.einsum("i,i,i,i,i,i,i->", *[torch.ones(2)]
                                         * 7)), torch_ops="shapes")
    names = {s.name for s in rep}
    # a list shows its first shapes, then how many more it holds
    shown = ", ".join(f"2×{i + 1}" for i in range(ops.LIST_SHOWN))
    more = 10 - ops.LIST_SHOWN
    assert f"aten::cat ([{shown}, … {more} more])" in names
    assert "aten::stack ([3, 3, 3, 3])" in names      # as many as shown
    # so do an op's arguments (einsum takes its tensors one by one)
    shown = ", ".join(["2"] * ops.SHAPES_SHOWN)
    assert f"aten::einsum ({shown}, … {7 - ops.SHAPES_SHOWN} " \
        f"more)" in names
    for name in names - {"aten::ones"}:
        # every shape is whole: dimensions joined by ×, nothing cut
        for shape in name.partition(" (")[2].strip("()[]").split(", "):
            assert shape.startswith("…") or re.fullmatch(
                r"\[?(\d+(×\d+)*|scalar)\]?", shape), (name, shape)


def test_record_function_ranges_are_not_the_programs_ops():
    from torch.autograd.profiler import record_function

    def run():
        with record_function("my range"):
            torch.ones(2).sum()
        with torch.profiler.record_function("another"):
            torch.ones(2) * 2

    rep = profiled(run, torch_ops=True)
    assert {s.path for s in rep} == {"aten::ones", "aten::sum", "aten::mul"}
    assert not any(s.name.startswith("profiler::") for s in rep)


def test_a_module_stage_is_its_path_and_its_class():
    assert modules.module_name("features.0", "Conv2d") == \
        "features.0 (Conv2d)"
    assert modules.module_name(None, "SmallCNN") == "SmallCNN"
    # a path or class holding the separator of stage paths keeps no "/"
    assert modules.module_name("a/b", "My/Net") == \
        "a\u2215b (My\u2215Net)"


@throws_in_cxx
def test_ops_that_raise_are_counted_and_reach_the_program():
    def run():
        with pytest.raises(RuntimeError):
            torch.mm(torch.ones(2, 3), torch.ones(2, 3))
    rep = profiled(run, torch_ops=True)
    assert rep["aten::mm"].raised == 1 and rep.unclosed == 0


def test_backward_of_modules_nests_in_the_backward_op(model, x):
    rep = profiled(forwards(model, x, grad=True), torch_ops=True,
                   torch_modules=True)
    assert rep[f"model/aten::backward/SmallCNN (backward)/{HEAD} "
               f"(backward)"].count == N
    assert rep["model/aten::sum"].count == N


def test_a_torch_library_op_keeps_its_name():
    lib = torch.library.Library("aqtest", "FRAGMENT")
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda t: t * 2, "CompositeExplicitAutograd")
    rep = profiled(lambda: torch.ops.aqtest.twice(torch.ones(2)),
                   torch_ops=True)
    assert {s.path for s in rep} == {"aten::ones", "aqtest::twice"}


# ----------------------------------------------------- never break the program

def test_errors_inside_hooks_never_reach_the_program(model, x, monkeypatch):
    expected = model(x)

    def broken(*args):
        raise KeyError("boom")
    before = torch_hooks.errors()
    monkeypatch.setattr(ops, "_op_name", broken)
    monkeypatch.setattr(modules, "_sub_name", broken)
    monkeypatch.setattr(backward, "claim_backward", broken)
    monkeypatch.setattr(ops, "_names", {})
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        out = []
        rep = profiled(lambda: out.append(model(x)), torch_ops=True,
                       torch_modules=True)
    assert torch.equal(out[0], expected)
    assert torch_hooks.errors() > before
    # said once per run
    assert [str(w.message) for w in said].count(str(said[0].message)) == 1
    assert "KeyError" in str(said[0].message)
    assert rep["SmallCNN"].count == 1 and rep.unclosed == 0


def test_errors_stay_inside_even_as_warnings_are_errors(model, x,
                                                        monkeypatch):
    def broken(*args):
        raise KeyError("boom")
    monkeypatch.setattr(ops, "_op_name", broken)
    monkeypatch.setattr(ops, "_names", {})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        profiled(lambda: model(x), torch_ops=True)


def test_errors_in_backward_hooks_never_reach_the_program(x, monkeypatch):
    def grads(profile):
        torch.manual_seed(0)
        net = SmallCNN()
        if profile:
            profiled(lambda: net(x).sum().backward(), torch_modules=True)
        else:
            net(x).sum().backward()
        return [p.grad for p in net.parameters()]

    def broken(*args):
        raise KeyError("boom")
    expected = grads(False)
    monkeypatch.setattr(backward, "_to_chain", broken)
    before = torch_hooks.errors()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = grads(True)
    assert all(torch.equal(a, b) for a, b in zip(expected, got))
    assert torch_hooks.errors() > before


def test_tensor_subclasses_still_dispatch():
    class Logged(torch.Tensor):
        calls = []

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.calls.append(func.__name__)
            return super().__torch_function__(func, types, args,
                                              kwargs or {})

    t = torch.ones(3).as_subclass(Logged)
    out = []
    rep = profiled(lambda: out.append(torch.add(t, 1)), torch_ops=True)
    assert type(out[0]) is Logged and torch.equal(out[0], torch.full((3,), 2.))
    assert "add" in Logged.calls
    assert rep["aten::add"].count == 1


def test_torch_is_imported_at_start_only():
    imported = scenario("""
        p = ap.Profiler(torch_ops=True, torch_modules=True)
        before = "torch" in sys.modules
        p.start()
        import torch
        torch.relu(torch.ones(2))
        p.stop()
        print(json.dumps([before, sorted(s.path for s in p.report())]))
    """)
    assert imported == [False, ["aten::ones", "aten::relu"]]


def test_hooks_are_removed_at_stop(model, x):
    with ap.Profiler(compensate=False, torch_ops=True, torch_modules=True):
        assert hooks_left() == (1, 1, 1, 1, 1)
        model(x)
    assert hooks_left() == (0, 0, 0, 0, 0)
    rep = profiled(forwards(model, x))      # a forward after: nothing
    assert {s.path for s in rep} == {"model"}


def test_hooks_are_removed_when_stop_is_interrupted(model, x, monkeypatch):
    prof = ap.Profiler(compensate=False, torch_ops=True, torch_modules=True)
    prof.start()
    original = prof._collect_children

    def interrupted():
        original()
        raise KeyboardInterrupt
    monkeypatch.setattr(prof, "_collect_children", interrupted)
    with pytest.raises(KeyboardInterrupt):
        prof.stop()
    assert hooks_left() == (0, 0, 0, 0, 0)


def test_a_dropped_profiler_takes_its_hooks_with_it(model, x):
    import gc
    ap.Profiler(compensate=False, torch_modules=True,
                torch_ops=True).start()
    gc.collect()
    assert not ap.active()
    assert hooks_left() == (0, 0, 0, 0, 0)


def test_hooks_whose_owner_stopped_without_unwatching_are_dropped(model, x):
    # a Profiler whose stop was cut short before its unwatch: the next
    # watch drops its watch, the last unwatch takes the hooks out
    prof = ap.Profiler(compensate=False, torch_modules=True,
                       torch_ops=True)
    prof.start()
    prof._unwatch_torch.detach()        # as if the interrupt came first
    prof._unwatch_torch = None
    prof.stop()
    assert hooks_left()[:4] == (1, 1, 1, 1)
    rep = profiled(forwards(model, x, n=1), torch_ops=True)
    assert "model/aten::conv2d" in rep and "model/SmallCNN" not in rep
    assert hooks_left() == (0, 0, 0, 0, 0)


def test_nested_profilers_share_the_hooks(model, x):
    with ap.Profiler(compensate=False, torch_modules=True) as outer:
        with ap.Profiler(compensate=False, torch_ops="shapes") as inner:
            model(x)
        assert hooks_left()[:3] == (1, 1, 1)
        assert torch._C._len_torch_function_stack() == 0
        model(x)
    linear = f"SmallCNN/{HEAD}/aten::linear (2×1024, 10×1024, 10)"
    assert inner.report()[linear].count == 1
    # the outer one records the ops while the inner one runs, no longer
    assert outer.report()["SmallCNN"].count == 2
    assert outer.report()[linear].count == 1


def test_programs_modes_keep_their_order(x):
    seen = []

    class Spy(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func.__name__)
            return func(*args, **(kwargs or {}))

    spy = Spy()
    prof = ap.Profiler(compensate=False, torch_ops=True)
    spy.__enter__()               # entered before start, left during the run
    prof.start()
    torch.relu(x)
    spy.__exit__(None, None, None)
    torch.tanh(x)
    with Spy():
        torch.sigmoid(x)
    prof.stop()
    assert seen == ["relu", "sigmoid"]
    assert {s.path for s in prof.report()} == {
        "aten::relu", "aten::tanh", "aten::sigmoid"}


def test_default_device_mode_stays_at_the_bottom(x):
    def run():
        torch.set_default_device("cpu")
        try:
            torch.ones(2)
        finally:
            torch.set_default_device(None)
        torch.zeros(2)
    with torch.device("cpu"):
        rep = profiled(run, torch_ops=True)
        assert torch._C._len_torch_function_stack() == 1
    assert {"aten::ones", "aten::zeros"} <= {s.path for s in rep}


# ------------------------------------------------------------------ threads

def test_a_second_threads_forward(model, x):
    stacks = []

    def worker():
        with ap.stage("worker"):
            with torch.no_grad():
                for _ in range(N):
                    model(x)
            torch.relu(x)         # outside any module: not seen here
        stacks.append(torch._C._len_torch_function_stack())

    def run():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        with torch.no_grad():
            model(x)

    rep = profiled(run, torch_ops=True, torch_modules=True)
    assert rep[f"worker/SmallCNN/{FEATURES}/{LAYERS[0]}/aten::conv2d"
               ].count == N
    assert rep[f"worker/SmallCNN/{HEAD}"].count == N
    assert "worker/aten::relu" not in rep
    assert rep[f"SmallCNN/{HEAD}/aten::linear"].count == 1
    assert stacks == [0]


def test_stop_on_another_thread_leaves_the_mode_inert(x):
    prof = ap.Profiler(compensate=False, torch_ops=True)
    prof.start()
    torch.relu(x)
    t = threading.Thread(target=prof.stop)
    t.start()
    t.join()
    assert hooks_left()[:3] == (0, 0, 0)
    rep = profiled(lambda: torch.relu(x))         # passes calls through
    assert len(rep) == 0
    assert {s.path for s in prof.report()} == {"aten::relu"}
    # a Profiler started here takes it back, and off at its stop
    rep = profiled(lambda: torch.tanh(x), torch_ops=True)
    assert {s.path for s in rep} == {"aten::tanh"}


def _hooks_in_child(queue):
    torch.relu(torch.ones(2))
    queue.put(hooks_left()[:4])


def test_a_forked_child_keeps_none_of_the_hooks(model, x):
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    with ap.Profiler(compensate=False, torch_ops=True, torch_modules=True,
                     children=False):
        child = ctx.Process(target=_hooks_in_child, args=(queue,))
        child.start()
        in_child = queue.get(timeout=60)
        child.join(60)
        assert hooks_left()[:4] == (1, 1, 1, 1)      # the parent's, on
    assert in_child == (0, 0, 0, 0) and child.exitcode == 0


# ------------------------------------------------------------------ options

@pytest.mark.parametrize("options, error, text", [
    (dict(torch_ops="yes"), ValueError,
     "torch_ops must be False, True or 'shapes', got 'yes'"),
    (dict(torch_ops=1), TypeError,
     "torch_ops must be False, True or 'shapes', got 1"),
    (dict(torch_ops=None), TypeError, "got None"),
    (dict(torch_modules="shapes"), TypeError,
     "torch_modules must be True or False, got 'shapes'"),
    (dict(torch_modules=1), TypeError, "torch_modules must be True or"),
])
def test_bad_options_are_refused(options, error, text):
    with pytest.raises(error, match=text.replace("(", r"\(")):
        ap.Profiler(**options)


def test_without_torch_the_options_are_refused(monkeypatch):
    monkeypatch.setattr(switch, "torch_available", lambda: False)
    for options in (dict(torch_ops=True), dict(torch_modules=True)):
        with pytest.raises(RuntimeError, match="torch cannot be imported"):
            ap.Profiler(**options)
    ap.Profiler()         # off: torch is not needed


def test_torch_available_reads_without_importing(monkeypatch):
    assert torch_hooks.torch_available()
    monkeypatch.setitem(__import__("sys").modules, "torch", None)
    assert not torch_hooks.torch_available()


# --------------------------------------------------------------------- GPU

GPU = """
    import torch
    lib = torch.library.Library("aqgpu", "FRAGMENT")
    lib.define("launch(Tensor x) -> Tensor")
    def launch(t):
        fake.fake_kernel(b"op_kernel", 0, 5000, 1, 1, 32, 8, 0)
        return t.clone()
    lib.impl("launch", launch, "CompositeExplicitAutograd")

    class Conv(torch.nn.Module):
        def forward(self, t):
            fake.fake_kernel(b"conv_kernel", 0, 7000, 1, 1, 32, 8, 0)
            return torch.ops.aqgpu.launch(t)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = Conv()
        def forward(self, t):
            return self.conv(t)

    net = Net()
    with ap.Profiler(torch_ops=True, torch_modules=True) as prof:
        with ap.stage("model"):
            for _ in range(3):
                net(torch.ones(2))
    rep = prof.report()
    cuda = {s.path: (s.cuda.kernels, s.cuda.self_kernel_time)
            for s in rep if s.cuda is not None}
    print(json.dumps(cuda))
"""


def test_kernels_are_attributed_to_the_op_or_module(fakes):
    if not _core.HAVE_CUPTI:
        pytest.skip("built without cupti.h")
    cuda = scenario(textwrap.dedent(GPU),
                    {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")},
                    [fakes / "libcupti.so"])
    op = "model/Net/conv (Conv)/aqgpu::launch"
    assert cuda[op] == [3, pytest.approx(3 * 5e-6)]
    assert cuda["model/Net/conv (Conv)"] == [6, pytest.approx(3 * 7e-6)]
    assert cuda["model/Net"][0] == 6 and cuda["model"][0] == 6
