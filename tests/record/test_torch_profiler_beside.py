"""torch.profiler recording in the same process as a Profiler with the
torch hooks: what torch.profiler records is the program's, whichever is
started first (the hooks' calibration at start() runs torch ops of its
own, which torch.profiler must not take for the program's)."""
import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import aquaprof as ap  # noqa: E402
from aquaprof.record.torch import cost  # noqa: E402


def _program():
    a = torch.ones(4)
    for _ in range(5):
        a = torch.add(a, 1)
    lin = torch.nn.Linear(4, 4)
    for _ in range(3):
        lin(a).sum().backward()


def _counts(tp):
    return {e.key: e.count for e in tp.key_averages()}


def test_calibration_inside_torch_profiler_is_not_recorded_by_it(
        monkeypatch):
    # a process whose first Profiler with the hooks starts inside
    # torch.profiler: the calibration runs then
    monkeypatch.setattr(cost, "_calibrated", {})
    with profile(activities=[ProfilerActivity.CPU]) as tp:
        with ap.Profiler(torch_ops=True, torch_modules=True) as prof:
            _program()
        assert torch._C._autograd._profiler_enabled()
        torch.mul(torch.ones(2), 2)      # still recorded after our start
    counts = _counts(tp)
    assert counts.get("aten::add") == 5
    assert counts.get("aten::linear") == 3
    assert counts.get("aten::mul") == 1
    assert "aten::conv2d" not in counts       # the calibration's ops
    assert cost._calibrated                   # it did calibrate
    rep = prof.report()
    assert rep["aten::add"].count == 5
    assert rep["Linear/aten::linear"].count == 3
    assert rep.meta["overhead"]["torch_op_ns"] > 0


def test_record_function_stays_on_without_torch_profiler(monkeypatch):
    monkeypatch.setattr(cost, "_calibrated", {})
    with ap.Profiler(torch_ops=True):
        pass
    with profile(activities=[ProfilerActivity.CPU]) as tp:
        torch.add(torch.ones(2), 1)
    assert _counts(tp).get("aten::add") == 1
