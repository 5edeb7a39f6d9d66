"""End to end: a real PyTorch training loop profiled as a user would."""
import numpy as np
import pytest

import aquaprof as ap

torch = pytest.importorskip("torch")  # installed by `make test`


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8 * 16 * 16, 10)

    @ap.stage("forward")
    def forward(self, x):
        with ap.stage("conv"):
            x = torch.relu(self.conv(x))
        with ap.stage("head"):
            return self.head(x.flatten(1))


@ap.stage("backward")
def backward(loss, optimizer):
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def test_training_loop_stages_nest_and_count():
    torch.manual_seed(0)
    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    steps, batch = 12, 16
    losses = []
    with ap.Profiler() as prof:
        for _ in range(steps):
            with ap.stage("step", items=batch):
                with ap.stage("data", items=batch):
                    x = torch.randn(batch, 3, 16, 16)
                    y = torch.randint(0, 10, (batch,))
                loss = torch.nn.functional.cross_entropy(net(x), y)
                backward(loss, optimizer)
                losses.append(loss.item())
    rep = prof.report()
    for path in ("step", "step/data", "step/forward", "step/forward/conv",
                 "step/forward/head", "step/backward"):
        assert rep[path].count == steps, path
    assert rep["step"].items == steps * batch
    assert rep["step"].throughput == pytest.approx(
        steps * batch / rep["step"].wall.total)
    children = sum(rep[p].wall.total for p in
                   ("step/data", "step/forward", "step/backward"))
    assert rep["step"].self_time == pytest.approx(
        rep["step"].wall.total - children, abs=1e-9)
    assert rep["step/backward"].cpu > 0
    assert all(np.isfinite(losses))
    # spans reproduce the call tree: every forward sits inside a step
    spans = rep.spans()
    names = np.array(rep.stage_names)[spans["stage"]]
    forward = spans[names == "step/forward"]
    assert (names[forward["parent"]] == "step").all()
    assert str(rep).count("\n") > 8
