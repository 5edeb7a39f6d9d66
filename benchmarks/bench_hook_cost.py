"""What the torch hooks add to a small CNN's training step, measured,
against what the printed report says they cost (its "profiler cost"
line: the calibrated figures per op call, module call and backward stage
call, times the calls the report holds).

Each repeat runs --steps training steps (forward, cross-entropy,
zero_grad, backward, SGD step) under each setting in turn, in one
Profiler each: torch options off, torch_ops=True, torch_modules=True,
both. Each step's thread CPU time is kept; the added cost of a setting is
the 10th percentile of its steps less that of "torch options off" (the
quieter steps: other processes on a shared machine slow a step's CPU too,
through the caches and a busy sibling core), the medians beside it. The
calibrated figure is what aquaprof.analysis.run_cost.run_cost charges the
hooks, from the report of the setting's last repeat, the calls the
Profiler counts beside its stages, and the calibration of this process
(aquaprof.record.torch.hooks.calibrate_hooks, made before the
repeats, as Profiler.start() makes it).

torch runs on one thread (torch.set_num_threads(1)). Needs torch; says so
and exits 2 without it.

    python benchmarks/bench_hook_cost.py [--repeats 21] [--steps 20]
        [--batch 4] [--size 32]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402
from aquaprof.analysis.run_cost import run_cost  # noqa: E402
from aquaprof.record.calibration import calibrate  # noqa: E402
from aquaprof.views.text import cost_line  # noqa: E402
from aquaprof.record.torch.hooks import calibrate_hooks, tally

SETTINGS = {
    "torch options off": {},
    "torch_ops=True": {"torch_ops": True},
    "torch_modules=True": {"torch_modules": True},
    "both": {"torch_ops": True, "torch_modules": True},
}


def training(torch: Any, batch: int, size: int):
    """A step of a small CNN's training (that of tests/record/test_torch_hooks.py
    and benchmarks/bench_torch_hooks.py), and the model."""
    nn = torch.nn

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            self.head = nn.Linear(16 * (size // 4) ** 2, 10)

        def forward(self, x):
            return self.head(torch.flatten(self.features(x), 1))

    torch.manual_seed(0)
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, size, size)
    y = torch.randint(0, 10, (batch,))
    step_stage = ap.stage("step")

    def step() -> None:
        with step_stage:
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return step


def run(step, steps: int, options: Dict[str, Any]):
    """The thread CPU ns of each step under a Profiler with these options,
    its report, and what the hooks did that no stage counts."""
    before = tally()
    took = []
    with ap.Profiler(compensate=False, cuda=False, children=False,
                     dataloaders=False, **options) as prof:
        for _ in range(steps):
            start = time.thread_time_ns()
            step()
            took.append(time.thread_time_ns() - start)
    counts = {key: n - before[key] for key, n in tally().items()}
    return took, (prof.report(), counts)


def calibrated(run_: Any, overhead: Dict[str, float]) -> ap.Report:
    """The report with this process's calibration in it, and the counts
    the Profiler adds to it."""
    report, counts = run_
    data = report.to_dict()
    data["overhead"] = dict(overhead, **counts)
    return ap.Report.from_dict(data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--size", type=int, default=32)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing to measure")
        return 2
    torch.set_num_threads(1)
    step = training(torch, args.batch, args.size)
    for _ in range(5):
        step()
    overhead = calibrate()
    overhead.update(calibrate_hooks(True, False, True))
    print(f"torch {torch.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, torch threads 1; a training step of a "
          f"small CNN, batch {args.batch} of 3x{args.size}x{args.size}; "
          f"{args.repeats} repeats of {args.steps} steps per setting")
    print("calibrated: " + ", ".join(
        f"{key} {value / 1e3:.2f} us" for key, value in overhead.items()
        if key.startswith("torch_")))
    samples: Dict[str, List[float]] = {name: [] for name in SETTINGS}
    reports: Dict[str, Any] = {}
    for repeat in range(args.repeats + 1):   # the first one warms up
        for name, options in SETTINGS.items():
            took, reports[name] = run(step, args.steps, options)
            if repeat:
                samples[name].extend(took)
    # a shared machine's other processes slow a step's CPU too (caches,
    # a busy sibling core): the quieter steps, a low quantile, say what
    # the hooks add; the median is what a step took
    low = {name: statistics.quantiles(t, n=10)[0] for name, t in
           samples.items()}
    middle = {name: statistics.median(t) for name, t in samples.items()}
    base = "torch options off"
    print(f"\nCPU per step with torch options off: {middle[base] / 1e3:.0f} "
          f"us (median), {low[base] / 1e3:.0f} us (10th percentile)")
    kinds = ("torch_op", "torch_quiet", "torch_module", "torch_carry",
             "torch_backward")
    print("\n| setting | calls per step: op, other torch, module, module "
          "carrying the op hook, backward stage | CPU added per step, "
          "measured: 10th percentiles (medians) | the report's calibrated "
          "charge per step | charge / measured |")
    print("|---|---|---:|---:|---:|")
    for name in list(SETTINGS)[1:]:
        cost = run_cost(calibrated(reports[name], overhead))
        calls = {h.kind: h.calls / args.steps for h in cost.hooks}
        charge = sum(h.seconds for h in cost.hooks) * 1e9 / args.steps
        added = low[name] - low[base]
        typical = middle[name] - middle[base]
        print(f"| {name} | "
              + ", ".join(f"{calls.get(k, 0):.0f}" for k in kinds)
              + f" | {added / 1e3:.0f} us ({typical / 1e3:.0f} us) | "
              f"{charge / 1e3:.0f} us | {charge / added:.2f} |")
    print(f"\nThe printed report's cost line, both, the last repeat:\n"
          f"{cost_line(calibrated(reports['both'], overhead))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
