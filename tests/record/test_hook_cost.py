"""What the torch hooks cost, told and taken out: their calibration (per
op call, per module call, per backward stage call, per torch call passed
through and per module call that only carries the op hook), the torch
stages told apart by name, the printed report's cost line (stages, torch
hooks, sampler, the total as a share of the run), and the compensated
figures of the layers. The arithmetic is checked on reports with planted
figures; a run of a small model checks that a Profiler measures and
reports the hooks' cost, and that a tiny layer's compensated time loses
what its hooks added."""
import re

import pytest

import aquaprof as ap
from aquaprof.analysis.run_cost import (
    BACKWARD, MODULE, OP, QUIET, run_cost, torch_kinds)
from aquaprof.record.torch import cost as hook_cost
from aquaprof.record.torch import hooks
from aquaprof.model.schema import ReportError

import crafted

torch = pytest.importorskip("torch")
nn = torch.nn

NS = 1e-9
# planted costs, large enough that nothing else in a line's share counts
COST = {"span_ns": 100.0, "inside_ns": 40.0, "read_ns": 0.0,
        "torch_op_ns": 1_000_000.0, "torch_module_ns": 2_000_000.0,
        "torch_module_inside_ns": 500_000.0,
        "torch_module_nograd_ns": 1_000_000.0,
        "torch_module_nograd_inside_ns": 250_000.0,
        "torch_backward_ns": 300_000.0,
        "torch_backward_inside_ns": 100_000.0,
        "torch_quiet_ns": 10_000.0, "torch_carry_ns": 20_000.0}


def planted(overhead=COST, **run):
    """A report of a step as the torch hooks record it, 10 calls of each:

        step                              (the program's)
          Net                             (outermost module, class only)
            conv (Conv2d)
              aten::conv2d (1×3×8×8, 4×3×3×3, 4)
            act (ReLU)
              aten::relu
          aten::backward
            Net (backward)
              conv (Conv2d) (backward)
          load (fast)                     (the program's, not a module)
    """
    S = crafted.stage
    stages = [S("step", count=10, ns=20_000_000),
              S("Net", 0, 1, count=10, ns=6_000_000),
              S("conv (Conv2d)", 1, 2, count=10, ns=3_000_000),
              S("aten::conv2d (1×3×8×8, 4×3×3×3, 4)", 2, 3, count=10,
                ns=1_000_000),
              S("act (ReLU)", 1, 2, count=10, ns=2_000_000),
              S("aten::relu", 4, 3, count=10, ns=1_000_000),
              S("aten::backward", 0, 1, count=10, ns=2_000_000),
              S("Net (backward)", 6, 2, count=10, ns=1_500_000),
              S("conv (Conv2d) (backward)", 7, 3, count=10, ns=1_000_000),
              S("load (fast)", 0, 1, count=10, ns=100_000)]
    data = crafted.report(stages, **run)
    if overhead is not None:
        data["overhead"] = dict(overhead)
    return ap.Report.from_dict(data)


def cost_line(rep):
    return next(line for line in str(rep).splitlines()
                if line.startswith("profiler cost:"))


# ------------------------------------------------------------ told apart

def test_torch_stages_are_told_apart_by_name():
    kinds = torch_kinds(planted())
    assert kinds == {
        "step/Net": MODULE, "step/Net/conv (Conv2d)": MODULE,
        "step/Net/act (ReLU)": MODULE,
        "step/Net/conv (Conv2d)/aten::conv2d (1×3×8×8, 4×3×3×3, 4)": OP,
        "step/Net/act (ReLU)/aten::relu": OP, "step/aten::backward": OP,
        "step/aten::backward/Net (backward)": BACKWARD,
        "step/aten::backward/Net (backward)/conv (Conv2d) (backward)":
            BACKWARD}
    # the program's own stages stay its own: "step", "load (fast)"


def test_an_outermost_module_without_sub_modules_is_told_by_its_backward():
    S = crafted.stage
    rep = ap.Report.from_dict(crafted.report([
        S("CrossEntropyLoss", count=3), S("Model", count=3),
        S("aten::backward", count=3),
        S("CrossEntropyLoss (backward)", 2, 1, count=3)]))
    kinds = torch_kinds(rep)
    assert kinds["CrossEntropyLoss"] == MODULE
    assert "Model" not in kinds          # a stage of the program's


def test_a_run_without_torch_keeps_its_stages_named_alike():
    S = crafted.stage
    data = crafted.report([S("Loader::next", count=5),
                           S("decode (JPEG)", 0, 1, count=5)])
    data["overhead"] = {"span_ns": 100.0, "inside_ns": 40.0}
    rep = ap.Report.from_dict(data)
    assert torch_kinds(rep) == {}
    line = cost_line(rep)
    assert "torch" not in line and "(10 calls at 100 ns)" in line


# ------------------------------------------------------------ the line

def test_the_cost_line_charges_each_kind_of_torch_call():
    counts = {"torch_quiet_calls": 40, "torch_carried_calls": 0}
    rep = planted(dict(COST, **counts))
    cost = run_cost(rep)
    by_kind = {h.kind: h for h in cost.hooks}
    # 30 op calls, 30 module calls (Net's with grad, as its backward
    # says, conv's too; act's without), 20 backward stage calls, and
    # the 40 calls the op hook passed through
    assert {k: h.calls for k, h in by_kind.items()} == {
        OP: 30, MODULE: 30, BACKWARD: 20, QUIET: 40}
    assert by_kind[OP].seconds == pytest.approx(30 * 1e-3)
    assert by_kind[MODULE].seconds == pytest.approx(
        20 * 2e-3 + 10 * 1e-3)
    assert by_kind[BACKWARD].seconds == pytest.approx(20 * 3e-4)
    assert by_kind[QUIET].seconds == pytest.approx(40 * 1e-5)
    assert cost.stage_calls == 20                  # step, load (fast)
    total = 30e-3 + 50e-3 + 6e-3 + 4e-4 + 20 * 100 * NS
    assert cost.total == pytest.approx(total)
    line = cost_line(rep)
    # the run is 1 s: the total is its share of it
    assert line.startswith(f"profiler cost: about {total * 100:.1f}% of "
                           f"the run: stages ")
    assert "torch hooks 8.6% (30 op calls at 1.0 ms, 40 other torch calls" \
        " at 10.0 us, 30 module calls at 1.7 ms, 20 backward stage calls " \
        "at 300.0 us)" in line
    assert "compensated times: StageStats.compensated_total/_self" in line


def test_the_sampler_is_charged_the_time_its_rounds_held_the_gil():
    rep = planted()
    data = rep.to_dict()
    data["samples"] = {"interval_ns": 10**6, "rounds": 900, "late": 0,
                       "lost": 0, "frames": [], "stacks": [],
                       "held_ns": 50_000_000}
    line = cost_line(ap.Report.from_dict(data))
    assert "sampler 5.0% (GIL held 50.0 ms)" in line


def test_hooks_not_calibrated_are_counted_and_said():
    cost = {k: v for k, v in COST.items() if not k.startswith("torch_")}
    line = cost_line(planted(cost))
    assert "torch hooks not calibrated in this run (30 op calls, 30 module" \
        " calls, 20 backward stage calls" in line


def test_an_uncalibrated_sampled_run_still_says_what_sampling_cost():
    data = planted(None).to_dict()
    data["samples"] = {"interval_ns": 10**6, "rounds": 1, "late": 0,
                       "lost": 0, "frames": [], "stacks": [],
                       "held_ns": 2_000_000}
    line = cost_line(ap.Report.from_dict(data))
    assert "sampler 0.20% (GIL held 2.0 ms)" in line
    assert line.endswith("stage calls not calibrated (compensate=False)")
    assert "profiler cost" not in str(planted(None))


def test_a_report_of_several_processes_says_its_cost_is_summed():
    data = ap.merge([planted(), planted()]).to_dict()
    data["overhead"] = COST
    merged = ap.Report.from_dict(data)
    line = cost_line(merged)
    assert ", summed over 2 processes:" in line
    assert run_cost(merged).hooks[0].calls == 60


@pytest.mark.parametrize("bad", ["1 us", -5.0, float("nan"),
                                 float("inf"), True, None])
def test_torch_figures_that_are_no_cost_are_refused(bad):
    with pytest.raises(ReportError, match="torch_op_ns"):
        planted(dict(COST, torch_op_ns=bad))


def test_a_report_without_the_torch_figures_says_they_were_not_calibrated():
    cost = {k: v for k, v in COST.items() if not k.startswith("torch_")}
    rep = planted(cost)
    by_kind = {h.kind: h for h in run_cost(rep).hooks}
    assert not by_kind[OP].calibrated and by_kind[OP].seconds == 0
    assert QUIET not in by_kind
    op = rep["step/Net/act (ReLU)/aten::relu"]
    assert op.compensated_total == pytest.approx(
        op.wall.total - 10 * 40 * NS)
    assert "not calibrated in this run (30 op calls" in cost_line(rep)


# ------------------------------------------------------ compensation

def test_each_layer_loses_its_own_hooks_and_those_below_it():
    rep = planted()
    ms, us = 1e-3, 1e-6
    span, inside = 100 * NS, 40 * NS
    conv_op = rep["step/Net/conv (Conv2d)/"
                  "aten::conv2d (1×3×8×8, 4×3×3×3, 4)"]
    # an op: a plain pair's inside (its hook runs only the op in there)
    assert conv_op.compensated_total == pytest.approx(10 * ms - 10 * inside)
    # conv with grad: its own inside part, and its op all told
    conv = rep["step/Net/conv (Conv2d)"]
    assert conv.compensated_total == pytest.approx(
        30 * ms - 10 * 500 * us - 10 * span - 10 * (1 * ms - span))
    # act, without grad (no backward stage of its name)
    act = rep["step/Net/act (ReLU)"]
    assert act.compensated_total == pytest.approx(
        20 * ms - 10 * 250 * us - 10 * span - 10 * (1 * ms - span))
    # Net: two module calls and two ops below each call
    net = rep["step/Net"]
    below = 10 * (2 * ms - span) + 10 * (1 * ms - span) \
        + 20 * (1 * ms - span)
    assert net.compensated_total == pytest.approx(
        60 * ms - 10 * 500 * us - 40 * span - below)
    backward = rep["step/aten::backward/Net (backward)/conv (Conv2d) "
                   "(backward)"]
    assert backward.compensated_total == pytest.approx(10 * ms - 10 * 100 * us)
    # the program's step loses every torch call below it, all told
    step = rep["step"]
    assert step.compensated_total < step.wall.total - 80 * ms
    assert step.compensated_self == pytest.approx(
        step.compensated_total - sum(
            rep[p].compensated_total for p in
            ("step/Net", "step/aten::backward", "step/load (fast)")))


def test_without_torch_figures_compensation_is_the_stage_pairs_alone():
    plain = {k: v for k, v in COST.items() if not k.startswith("torch_")}
    rep = planted(plain)
    conv = rep["step/Net/conv (Conv2d)"]
    assert conv.compensated_total == pytest.approx(
        conv.wall.total - 10 * 40 * NS - 10 * 100 * NS)


# ------------------------------------------------------- calibration

def test_the_calibration_measures_each_kind_once():
    figures = hooks.calibrate_hooks(True, False, True, rounds=3)
    for kind in ("torch_op", "torch_quiet", "torch_carry"):
        assert 0 < figures[f"{kind}_ns"] < 1_000_000, kind
    for kind in ("torch_module", "torch_module_nograd", "torch_backward"):
        assert 0 < figures[f"{kind}_ns"] < 1_000_000, kind
        assert 0 <= figures[f"{kind}_inside_ns"] <= figures[f"{kind}_ns"]
    # a call walking its autograd node costs more than one without grad
    assert figures["torch_module_ns"] > figures["torch_module_nograd_ns"]
    assert hooks.calibrate_hooks(True, False, True) == figures
    assert hooks.calibrated_hooks(True, False, True, True) == figures
    assert hooks.calibrated_hooks(False, False, False, True) == {}


def test_shapes_in_names_cost_more_than_names_alone():
    plain = hooks.calibrate_hooks(True, False, False, rounds=3)
    shaped = hooks.calibrate_hooks(True, True, False, rounds=3)
    assert shaped["torch_op_ns"] > plain["torch_op_ns"]


def test_calibration_leaves_nothing_hooked_and_refuses_a_running_session():
    with ap.Profiler(compensate=False):
        with pytest.raises(RuntimeError, match="calibration needs none"):
            hook_cost._calibrated.clear()
            hooks.calibrate_hooks(False, False, True, rounds=1)
    from torch.nn.modules import module as nn_module
    assert not nn_module._global_forward_pre_hooks
    assert torch._C._len_torch_function_stack() == 0


# ------------------------------------------------------ what no stage counts

def test_the_hooks_count_the_calls_no_stage_counts():
    model, x = Tiny(), torch.ones(4, requires_grad=True)
    x.grad = torch.ones(4)
    before = hooks.tally()
    watch = hooks.watch_torch(True, False, False)
    try:
        for _ in range(5):
            x.grad                   # passed through: no stage
            x.shape
        model(x)                     # 22 module calls carry the op hook
        mid = watch.counts()
    finally:
        watch()
    x.grad                           # after the watch: not its
    assert mid == watch.counts() == {"torch_quiet_calls": 10,
                                     "torch_carried_calls": 22}
    after = hooks.tally()
    assert {k: after[k] - before[k] for k in after} == watch.counts()
    # with modules recorded, module calls are stages, not carried
    watch = hooks.watch_torch(True, False, True)
    try:
        model(x)
    finally:
        watch()
    assert watch.counts()["torch_carried_calls"] == 0


# ------------------------------------------------------------ a run

class Tiny(nn.Module):
    """Many layers of almost no work: what the hooks inflate most."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*(nn.Identity() for _ in range(20)))

    def forward(self, x):
        return self.layers(x) * 2


def test_a_run_reports_and_charges_what_its_hooks_cost():
    model, x = Tiny(), torch.ones(4, requires_grad=True)
    with ap.Profiler(torch_ops=True, torch_modules=True) as prof:
        for _ in range(30):
            with ap.stage("step"):
                model(x).sum().backward()
                x.grad                     # a call passed through
    rep = prof.report()
    cost = rep.meta["overhead"]
    assert cost["torch_op_ns"] > 0 and cost["torch_module_ns"] > 0
    assert cost["torch_quiet_calls"] >= 30
    assert cost["torch_carried_calls"] == 0        # modules are recorded
    line = cost_line(rep)
    assert re.search(r"torch hooks \d+\.\d+% \(\d[\d,]* op calls at ", line)
    assert "other torch calls at" in line and "module calls at" in line
    # hooks on 22 module calls and 3 ops a step cost more than the step's
    # own stage pair
    hooks = sum(h.seconds for h in run_cost(rep).hooks)
    assert hooks > 10 * run_cost(rep).stages
    # an Identity layer runs no op and makes no autograd node: what its
    # stage holds is its hooks' part inside it, taken out whole
    layer = rep["step/Tiny/layers (Sequential)/layers.3 (Identity)"]
    assert layer.count == 30
    inside = 30 * cost["torch_module_nograd_inside_ns"] * NS
    assert inside > 0
    assert layer.compensated_total == pytest.approx(
        max(layer.wall.total - inside, 0.0), abs=1e-9)
