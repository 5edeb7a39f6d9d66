"""Cost of one stage pair (enter + exit) and of a decorated call, profiler
off and on, against what users write instead, all measured in this run.

    python benchmarks/bench_overhead.py [--loops N] [--repeats R] [--json F]

Each figure is the median over R rounds of (time of N iterations of the
construct - time of N iterations of an empty loop) / N, in ns; every round
measures every construct once, in turn. Targets
(issue 2): off adds <= 15 ns over a plain call; on costs <= 120 ns per pair
and is >= 10x cheaper than a contextmanager timing with perf_counter.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Dict, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402

try:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
except ImportError:  # the comparison is printed only where torch exists
    torch = None


def empty():
    pass


def empty_loop(n):
    for _ in range(n):
        pass


def plain_call_loop(n):
    f = empty
    for _ in range(n):
        f()


def make_stage_loop(stage):
    def loop(n):
        for _ in range(n):
            with stage:
                pass
    return loop


def inline_stage_loop(n):
    stage = ap.stage
    for _ in range(n):
        with stage("inline"):
            pass


def make_call_loop(fn):
    def loop(n):
        for _ in range(n):
            fn()
    return loop


_totals: Dict[str, float] = defaultdict(float)


@contextlib.contextmanager
def timed(name):
    """The style aquaprof replaces: a Python context manager per stage."""
    start = time.perf_counter()
    try:
        yield
    finally:
        _totals[name] += time.perf_counter() - start


def contextmanager_loop(n):
    for _ in range(n):
        with timed("stage"):
            pass


def record_function_loop(n):
    for _ in range(n):
        with record_function("stage"):
            pass


def measure_once(loop: Callable[[int], None], loops: int,
                 setup: Optional[Callable]) -> float:
    """ns per iteration of loop, the empty loop's time subtracted."""
    with (setup() if setup else contextlib.nullcontext()):
        t0 = time.perf_counter_ns()
        loop(loops)
        t1 = time.perf_counter_ns()
    empty_loop(loops)
    t2 = time.perf_counter_ns()
    return ((t1 - t0) - (t2 - t1)) / loops


def profiler_on():
    # large enough to keep every span, as a user's default run would
    return ap.Profiler(max_spans=2**31 - 1)


def torch_profiler_on():
    return profile(activities=[ProfilerActivity.CPU])


def run(loops: int, repeats: int) -> Dict[str, float]:
    staged = ap.stage("decorated")(empty)
    stage = ap.stage("pair")
    cases = [
        ("plain call", plain_call_loop, None),
        ("stage pair, off", make_stage_loop(stage), None),
        ("stage('x') inline, off", inline_stage_loop, None),
        ("decorated call, off", make_call_loop(staged), None),
        ("stage pair, on", make_stage_loop(stage), profiler_on),
        ("stage('x') inline, on", inline_stage_loop, profiler_on),
        ("decorated call, on", make_call_loop(staged), profiler_on),
        ("contextmanager + perf_counter", contextmanager_loop, None),
    ]
    if torch is not None:
        cases += [
            ("torch record_function, off", record_function_loop, None),
            ("torch record_function, on", record_function_loop,
             torch_profiler_on),
        ]
    for _, loop, setup in cases:
        measure_once(loop, loops // 10, setup)  # warm up
    # Round-robin: each round measures every case once, so drifts of the
    # machine (clock speed, the other core) hit all cases alike.
    samples: Dict[str, list] = {name: [] for name, _, _ in cases}
    for _ in range(repeats):
        for name, loop, setup in cases:
            samples[name].append(measure_once(loop, loops, setup))
    return {name: statistics.median(v) for name, v in samples.items()}


def report(r: Dict[str, float]) -> str:
    plain = r["plain call"]
    on = r["stage pair, on"]
    rows = [(name, f"{ns:8.1f}") for name, ns in r.items()]
    width = max(len(n) for n, _ in rows)
    lines = [f"{'construct':<{width}}  ns/pair", "-" * (width + 10)]
    lines += [f"{n:<{width}}  {v}" for n, v in rows]
    checks = [
        ("stage pair off, ns added over a plain call",
         r["stage pair, off"] - plain, 15, "<="),
        ("decorated call off, ns added over a plain call",
         r["decorated call, off"] - plain, 15, "<="),
        ("stage pair on, ns", on, 120, "<="),
        ("decorated call on, ns added over a plain call",
         r["decorated call, on"] - plain, 120, "<="),
        ("contextmanager / stage pair on", r["contextmanager + perf_counter"]
         / on, 10, ">="),
    ]
    if "torch record_function, on" in r:
        checks.append(("torch record_function on / stage pair on",
                       r["torch record_function, on"] / on, None, ""))
        checks.append(("torch record_function off / stage pair off",
                       r["torch record_function, off"]
                       / max(r["stage pair, off"], 1e-9), None, ""))
    lines += ["", "ratios and targets"]
    for label, value, target, op in checks:
        verdict = ""
        if target is not None:
            ok = value <= target if op == "<=" else value >= target
            verdict = f"target {op} {target}: {'met' if ok else 'MISSED'}"
        lines.append(f"  {label:<48} {value:8.1f}   {verdict}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loops", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", type=Path, help="also write results here")
    args = parser.parse_args()
    if args.loops < 1000 or args.repeats < 1:
        parser.error("--loops must be >= 1000 and --repeats >= 1")
    results = run(args.loops, args.repeats)
    print(f"aquaprof {ap.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, torch "
          f"{torch.__version__ if torch is not None else 'not installed'}, "
          f"{args.loops} loops x {args.repeats} repeats")
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
