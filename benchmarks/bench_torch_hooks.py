"""What Profiler(torch_ops=...) adds to each torch call and
Profiler(torch_modules=True) to each nn.Module call, against no
profiling and against torch.profiler's record_function, measured in the
same run: each repeat times every setting once, in turn; the figures are
medians over --runs repeats.

- adds: --ops small tensor adds (torch.add of two 4-float tensors) per
  repeat; the cost of a setting is its time less that of no profiling,
  per add. Besides aquaprof's settings: a record_function range around
  each add (no torch.profiler running, as in a program instrumented for
  it), torch.profiler.profile() recording every op (CPU activity), and
  the alternative this project did not take for ops, a
  TorchDispatchMode entering the same stages.
- cnn: --iters forwards (no_grad) of a small CNN (2 conv, 2 relu, 2
  pool, flatten, linear: 8 ops in 9 module calls) on a 1×3×32×32 input;
  per op for torch_ops, per module call for torch_modules (and for a
  record_function range entered and left in global module hooks).
- train: --iters / 4 forward and backward passes of the same CNN
  (batch 8): what torch_modules adds per module call, backward stages
  included, and the dispatch mode's cost on a training step. Measured
  first: once torch.profiler has run, torch's own calls in the process
  can be slower for a while, which would blur the figures.

torch runs on one thread (torch.set_num_threads(1)) so that the
figures do not move with its thread pool.

Needs torch; says so and exits 2 without it.

    python benchmarks/bench_torch_hooks.py [--runs 31] [--ops 10000]
        [--iters 200]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402
from aquaprof import _core  # noqa: E402


def profiler(**torch_options: Any) -> Any:
    return ap.Profiler(compensate=False, cuda=False, children=False,
                       dataloaders=False, **torch_options)


def settings(torch: Any) -> Dict[str, Callable[[], Any]]:
    """name -> a context manager factory that runs the code under it."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.nn.modules import module as nn_module

    stages: Dict[str, Any] = {}

    class DispatchStages(TorchDispatchMode):
        """The alternative for ops: every aten op below autograd, a
        stage."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name
            stage = stages.get(name)
            if stage is None:
                stage = stages[name] = _core.stage(name)
            with stage:
                return func(*args, **(kwargs or {}))

    @contextlib.contextmanager
    def dispatch_mode():
        with profiler(), DispatchStages():
            yield

    @contextlib.contextmanager
    def ranges_per_module():
        """A record_function range around each module call, entered and
        left in global module hooks."""
        from torch.autograd.profiler import record_function
        open_ranges: List[Any] = []

        def pre(module, args):
            rf = record_function(type(module).__name__)
            rf.__enter__()
            open_ranges.append(rf)

        def post(module, args, output):
            open_ranges.pop().__exit__(None, None, None)

        handles = [nn_module.register_module_forward_pre_hook(pre),
                   nn_module.register_module_forward_hook(post)]
        try:
            yield
        finally:
            for h in handles:
                h.remove()

    @contextlib.contextmanager
    def torch_profiler():
        prof = torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU])
        with quiet_stderr():        # kineto's start and stop lines
            prof.__enter__()
        try:
            yield
        finally:
            with quiet_stderr():
                prof.__exit__(None, None, None)

    return {
        "no profiling": contextlib.nullcontext,
        "aquaprof, torch options off": profiler,
        "torch_ops=True": lambda: profiler(torch_ops=True),
        'torch_ops="shapes"': lambda: profiler(torch_ops="shapes"),
        "torch_modules=True": lambda: profiler(torch_modules=True),
        "both": lambda: profiler(torch_ops=True, torch_modules=True),
        "TorchDispatchMode stages": dispatch_mode,
        "record_function per module": ranges_per_module,
        "torch.profiler.profile()": torch_profiler,
    }


@contextlib.contextmanager
def quiet_stderr():
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def measure(work: Callable[[], None], names: List[str],
            make: Dict[str, Callable[[], Any]], runs: int,
            other_work: Optional[Dict[str, Callable[[], None]]] = None
            ) -> Dict[str, float]:
    """Median seconds of work() (or other_work[name]()) under each
    setting, the settings interleaved within each repeat."""
    other_work = other_work or {}
    times: Dict[str, List[float]] = {n: [] for n in names}
    for _ in range(runs + 1):             # the first round warms up
        for n in names:
            run = other_work.get(n, work)
            with make[n]():
                start = time.perf_counter()
                run()
                times[n].append(time.perf_counter() - start)
    return {n: statistics.median(t[1:]) for n, t in times.items()}


def table(title: str, medians: Dict[str, float], per: Dict[str, int],
          unit: str, base: float) -> None:
    print(f"\n{title}")
    print(f"| setting | median run | added per {unit} |")
    print("|---|---:|---:|")
    for name, t in medians.items():
        n = per.get(name, 0)
        added = f"{(t - base) / n * 1e6:.2f} us" if n else "-"
        print(f"| {name} | {t * 1e3:.1f} ms | {added} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--iters", type=int, default=200)
    args = parser.parse_args()
    try:
        import torch
        from torch import nn
    except ImportError:
        print("torch is not installed: nothing to measure")
        return 2
    torch.set_num_threads(1)
    make = settings(torch)

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
            self.head = nn.Linear(16 * 8 * 8, 10)

        def forward(self, x):
            return self.head(torch.flatten(self.features(x), 1))

    ops, modules = 8, 9
    print(f"torch {torch.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, torch threads 1; medians of {args.runs}")

    torch.manual_seed(0)
    model = SmallCNN()
    xb = torch.randn(8, 3, 32, 32)
    steps = max(1, args.iters // 4)

    def train():
        for _ in range(steps):
            model.zero_grad(set_to_none=True)
            model(xb).sum().backward()

    names = ["no profiling", "aquaprof, torch options off",
             "torch_modules=True", "torch_ops=True",
             "TorchDispatchMode stages"]
    medians = measure(train, names, make, args.runs)
    per = {"torch_modules=True": steps * modules}
    table(f"train: {steps} steps (forward and backward, batch 8); per "
          f"module call for torch_modules (its backward stages included)",
          medians, per, "module call", medians["no profiling"])
    print(f"\ntrain, per step: " + ", ".join(
        f"{n} {t / steps * 1e3:.2f} ms" for n, t in medians.items()))

    a, b = torch.ones(4), torch.ones(4)

    def adds():
        for _ in range(args.ops):
            torch.add(a, b)

    def ranged_adds():
        from torch.autograd.profiler import record_function
        for _ in range(args.ops):
            with record_function("add"):
                torch.add(a, b)

    make["record_function per add"] = contextlib.nullcontext
    names = ["no profiling", "aquaprof, torch options off",
             "torch_ops=True", 'torch_ops="shapes"',
             "TorchDispatchMode stages", "torch.profiler.profile()",
             "record_function per add"]
    medians = measure(adds, names, make, args.runs,
                      {"record_function per add": ranged_adds})
    table(f"adds: {args.ops} torch.add of 4 floats per run", medians,
          {n: args.ops for n in medians}, "add",
          medians["no profiling"])

    model.eval()
    x = torch.randn(1, 3, 32, 32)

    def forwards():
        with torch.no_grad():
            for _ in range(args.iters):
                model(x)

    names = ["no profiling", "aquaprof, torch options off",
             "torch_ops=True", 'torch_ops="shapes"', "torch_modules=True",
             "both", "TorchDispatchMode stages",
             "record_function per module", "torch.profiler.profile()"]
    medians = measure(forwards, names, make, args.runs)
    per = {n: args.iters * ops for n in names}
    per.update({n: args.iters * modules for n in
                ("torch_modules=True", "record_function per module")})
    per["both"] = args.iters * (ops + modules)
    table(f"cnn: {args.iters} forwards (no_grad), {ops} ops and {modules} "
          f"module calls each; per op, per module call, per both for "
          f"'both'", medians, per, "op or module call",
          medians["no profiling"])

    return 0


if __name__ == "__main__":
    sys.exit(main())
