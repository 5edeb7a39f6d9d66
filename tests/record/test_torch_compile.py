"""torch.compile under Profiler(torch_modules=True): compiled models run
as without the profiler (fullgraph too, compiled before the start or
during it, in place or a function), a compiled module's call is one
stage '<name> (compiled)', eager modules around it stay timed one by
one, and the modules compiled away are counted and said. Most use
dynamo's "eager" backend (the hooks matter to dynamo's tracing, not to
the backend); one runs the default backend, inductor (slow)."""
import warnings

import pytest

import aquaprof as ap
from aquaprof.integrations import torch_hooks

torch = pytest.importorskip("torch")
nn = torch.nn
from torch.nn.modules import module as nn_module  # noqa: E402

N = 3


class Net(nn.Module):
    def __init__(self, graph_break=False):
        super().__init__()
        self.graph_break = graph_break
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(),
                                  nn.Linear(16, 4))

    def forward(self, x):
        x = self.body[0](x)
        if self.graph_break:
            torch._dynamo.graph_break()
        return self.body[2](self.body[1](x))


class Outer(nn.Module):
    """Eager, around a compiled sub-module."""

    def __init__(self):
        super().__init__()
        self.enc = torch.compile(Net(), backend="eager")
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.enc(x))


ENGINE = torch.autograd.Variable._execution_engine


def hooks_left():
    return (len(nn_module._global_forward_pre_hooks),
            len(nn_module._global_forward_hooks),
            torch._C._len_torch_function_stack(),
            int(torch.autograd.Variable._execution_engine is not ENGINE))


@pytest.fixture(autouse=True)
def nothing_left_hooked():
    assert hooks_left() == (0, 0, 0, 0)
    # each test compiles Net.forward afresh: dynamo's cache of it is
    # capped (recompile_limit), and fullgraph fails past the cap
    torch._dynamo.reset()
    yield
    assert hooks_left() == (0, 0, 0, 0), "hooks left after the test"


@pytest.fixture
def x():
    torch.manual_seed(1)
    return torch.randn(2, 8)


def net():
    torch.manual_seed(0)
    return Net()


def profiled(fn, **options):
    """fn's results, N calls under a Profiler, the report, and what
    aquaprof said (its warnings)."""
    options.setdefault("torch_modules", True)
    errors = torch_hooks.errors()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with ap.Profiler(**options) as prof:
            out = [fn() for _ in range(N)]
    assert torch_hooks.errors() == errors, [str(w.message) for w in said]
    ours = [str(w.message) for w in said
            if str(w.message).startswith("aquaprof:")]
    return out, prof.report(), ours


def says_compiled(ours):
    return any("torch.compile" in m and "not timed one by one" in m
               for m in ours)


def test_a_model_compiled_inside_the_run(x):
    model = net()
    expected = model(x)
    compiled = {}

    def step():
        if "m" not in compiled:
            compiled["m"] = torch.compile(model, backend="eager")
        return compiled["m"](x)
    before = torch_hooks.compiled()
    out, rep, ours = profiled(step)
    for y in out:
        torch.testing.assert_close(y, expected)
    assert {s.path for s in rep} == {"Net (compiled)"}
    assert rep["Net (compiled)"].count == N
    assert rep.unclosed == 0 and rep["Net (compiled)"].raised == 0
    # Net's three sub-modules, traced; Net's own hooks run uncompiled
    assert torch_hooks.compiled() - before >= 3
    assert says_compiled(ours) and len(ours) == 1


def test_fullgraph(x):
    model = net()
    expected = model(x)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    out, rep, ours = profiled(lambda: compiled(x))
    for y in out:
        torch.testing.assert_close(y, expected)
    assert rep["Net (compiled)"].count == N
    assert says_compiled(ours)


def test_a_model_compiled_and_run_before_the_start(x):
    compiled = torch.compile(net(), backend="eager")
    expected = compiled(x)
    before = torch_hooks.compiled()
    out, rep, ours = profiled(lambda: compiled(x))
    for y in out:
        torch.testing.assert_close(y, expected)
    assert {s.path for s in rep} == {"Net (compiled)"}
    assert rep["Net (compiled)"].count == N
    assert torch_hooks.compiled() == before      # nothing traced again
    assert says_compiled(ours)


@pytest.mark.parametrize("when", ["before", "inside"])
def test_a_module_compiled_in_place(x, when):
    model = net()
    expected = model(x)
    model.compile(backend="eager")
    if when == "before":
        model(x)
    out, rep, ours = profiled(lambda: model(x))
    for y in out:
        torch.testing.assert_close(y, expected)
    # timed whole, from the hooks its uncompiled _call_impl calls
    assert {s.path for s in rep} == {"Net (compiled)"}
    assert rep["Net (compiled)"].count == N
    assert says_compiled(ours)


def test_a_compiled_function_calling_a_model(x):
    model = net()
    expected = model(x) * 2
    fn = torch.compile(lambda y: model(y) * 2, backend="eager")
    before = torch_hooks.compiled()
    out, rep, ours = profiled(lambda: fn(x))
    for y in out:
        torch.testing.assert_close(y, expected)
    assert len(rep) == 0          # all of it compiled: no module hook ran
    assert torch_hooks.compiled() - before >= 4
    assert says_compiled(ours) and "Net" in ours[0]


def test_eager_modules_around_a_compiled_one_stay_timed(x):
    torch.manual_seed(0)
    model = Outer()
    expected = model(x)
    out, rep, ours = profiled(lambda: model(x))
    for y in out:
        torch.testing.assert_close(y, expected)
    assert {s.path for s in rep} == {
        "Outer", "Outer/enc (Net) (compiled)", "Outer/head (Linear)"}
    for s in rep:
        assert s.count == N, s.path
    assert says_compiled(ours)


def test_a_graph_break_inside_the_compiled_model(x):
    torch.manual_seed(0)
    model = Net(graph_break=True)
    expected = model(x)
    compiled = torch.compile(model, backend="eager")
    out, rep, ours = profiled(lambda: compiled(x))
    for y in out:
        torch.testing.assert_close(y, expected)
    assert rep["Net (compiled)"].count == N
    assert rep.unclosed == 0


def test_backward_of_a_compiled_model(x):
    model = net()
    compiled = torch.compile(model, backend="eager")

    def step():
        model.zero_grad()
        compiled(x).sum().backward()
        return model.body[0].weight.grad.clone()
    model(x).sum().backward()
    expected = model.body[0].weight.grad.clone()
    out, rep, _ = profiled(step)
    for g in out:
        torch.testing.assert_close(g, expected)
    assert rep["Net (compiled)"].count == N
    assert rep["Net (compiled) (backward)"].count == N


@pytest.mark.parametrize("fullgraph", [False, True])
def test_ops_and_modules_with_a_compiled_model(x, fullgraph):
    model = net()
    expected = model(x)
    compiled = torch.compile(model, backend="eager", fullgraph=fullgraph)
    out, rep, _ = profiled(lambda: compiled(x), torch_ops=True)
    for y in out:
        torch.testing.assert_close(y, expected)
    assert rep["Net (compiled)"].count == N


def test_ops_alone_with_a_compiled_model(x):
    model = net()
    expected = model(x)
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    out, _, ours = profiled(lambda: compiled(x), torch_ops=True,
                            torch_modules=False)
    for y in out:
        torch.testing.assert_close(y, expected)
    assert not ours


def test_the_hooks_are_not_in_the_graph(x):
    """The compiled graph computes the same with the hooks in as
    without (its inputs may come in another order)."""
    graphs = []

    def backend(gm, inputs):
        graphs.append([(n.op, str(n.target)) for n in gm.graph.nodes
                       if n.op != "placeholder"])
        return gm.forward
    torch.compile(net(), backend=backend, fullgraph=True)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with ap.Profiler(torch_modules=True, torch_ops=True):
            torch.compile(net(), backend=backend, fullgraph=True)(x)
    assert len(graphs) == 2 and graphs[0] == graphs[1]


@pytest.mark.slow
def test_the_default_backend(x):
    model = net()
    expected = model(x)
    compiled = torch.compile(model)
    out, rep, ours = profiled(lambda: compiled(x))
    for y in out:
        torch.testing.assert_close(y, expected)
    assert rep["Net (compiled)"].count == N
    assert says_compiled(ours)
