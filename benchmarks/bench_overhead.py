"""Cost of one stage pair (enter + exit) and of a decorated call, profiler
off and on, against what users write instead, all measured in this run.

    python benchmarks/bench_overhead.py [--loops N] [--repeats R]
                                        [--runs P] [--json F]

Each figure is the median over R rounds of (time of N iterations of the
construct - time of N iterations of an empty loop) / N, in ns; every round
measures every construct once, in turn. With --runs P the whole measurement
runs in P fresh processes (new address layout, new hash seed: the main
source of run-to-run spread) and each figure is the median over them, with
its range. Targets: off adds <= 15 ns over a plain call; on costs
<= 120 ns per pair and is >= 10x cheaper than a contextmanager timing
with perf_counter.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402

try:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
except ImportError:  # the comparison is printed only where torch exists
    torch = None


def load_floor():
    """Compiles floor_cm.c (do-nothing context managers) into a temporary
    folder; None where no compiler is at hand."""
    from setuptools import Distribution, Extension
    from setuptools.command.build_ext import build_ext
    out = tempfile.mkdtemp(prefix="aquaprof-floor-")
    source = Path(__file__).with_name("floor_cm.c")
    dist = Distribution({"ext_modules": [Extension("floor_cm",
                                                   [str(source)])]})
    cmd = build_ext(dist)
    cmd.build_lib = cmd.build_temp = out
    try:
        with contextlib.redirect_stdout(sys.stderr):
            cmd.ensure_finalized()
            cmd.run()
    except Exception as e:  # noqa: BLE001 - any build failure: no floor
        print(f"floor context managers not built: {e}", file=sys.stderr)
        return None
    sys.path.insert(0, out)
    import floor_cm
    return floor_cm


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
    # (name, loop, setup, share of --loops): microsecond-scale cases need
    # fewer iterations for the same precision
    floor = load_floor()
    cases = [
        ("plain call", plain_call_loop, None, 1),
        ("stage pair, off", make_stage_loop(stage), None, 1),
        ("stage('x') inline, off", inline_stage_loop, None, 1),
        ("decorated call, off", make_call_loop(staged), None, 1),
        ("stage pair, on", make_stage_loop(stage), profiler_on, 1),
        ("stage pair, on, no raw spans kept", make_stage_loop(stage),
         lambda: ap.Profiler(max_spans=0), 1),
        ("stage pair, on, window=1000", make_stage_loop(stage),
         lambda: ap.Profiler(max_spans=2**31 - 1, window=1000), 1),
        ("stage('x') inline, on", inline_stage_loop, profiler_on, 1),
        ("decorated call, on", make_call_loop(staged), profiler_on, 1),
        ("contextmanager + perf_counter", contextmanager_loop, None, 0.1),
    ]
    if floor is not None:
        cases += [
            ("floor: do-nothing C cm, aquaprof's protocol",
             make_stage_loop(floor.Protocol()), None, 1),
            ("floor: do-nothing C cm, bound methods",
             make_stage_loop(floor.Methods()), None, 1),
        ]
    if torch is not None:
        cases += [
            ("torch record_function, off", record_function_loop, None,
             0.02),
            ("torch record_function, on", record_function_loop,
             torch_profiler_on, 0.02),
        ]
    for _, loop, setup, share in cases:
        measure_once(loop, max(100, int(loops * share) // 10), setup)
    # Round-robin: each round measures every case once, so drifts of the
    # machine (clock speed, the other core) hit all cases alike.
    samples: Dict[str, list] = {case[0]: [] for case in cases}
    for _ in range(repeats):
        for name, loop, setup, share in cases:
            samples[name].append(
                measure_once(loop, max(1000, int(loops * share)), setup))
    return {name: statistics.median(v) for name, v in samples.items()}


def checks(r: Dict[str, float]) -> Dict[str, float]:
    """The figures the targets speak of, from one run's results."""
    plain, on = r["plain call"], r["stage pair, on"]
    out = {
        "stage pair off, ns added over a plain call":
            r["stage pair, off"] - plain,
        "decorated call off, ns added over a plain call":
            r["decorated call, off"] - plain,
        "stage pair on, ns": on,
        "decorated call on, ns added over a plain call":
            r["decorated call, on"] - plain,
        "contextmanager / stage pair on":
            r["contextmanager + perf_counter"] / on,
        "window=1000, ns added per pair":
            r["stage pair, on, window=1000"] - on,
    }
    floor = r.get("floor: do-nothing C cm, aquaprof's protocol")
    if floor is not None:
        out["floor (do-nothing C cm), ns added over a plain call"] = \
            floor - plain
        out["stage pair off, ns added over that floor"] = \
            r["stage pair, off"] - floor
    if "torch record_function, on" in r:
        out["torch record_function on / stage pair on"] = \
            r["torch record_function, on"] / on
    return out


TARGETS = {
    "stage pair off, ns added over a plain call": ("<=", 15),
    "decorated call off, ns added over a plain call": ("<=", 15),
    "stage pair on, ns": ("<=", 120),
    "decorated call on, ns added over a plain call": ("<=", 120),
    "contextmanager / stage pair on": (">=", 10),
}


def report(runs: List[Dict[str, float]]) -> str:
    """Medians over runs (each figure and each check computed per run)."""
    lines = []
    for title, per_run in (("construct (ns per pair)", runs),
                           ("ratios and targets", [checks(r) for r in runs])):
        width = max(len(k) for k in per_run[0]) + 2
        spread = "   min .. max over runs" if len(runs) > 1 else ""
        lines += ["", f"{title:<{width}}  median{spread}", "-" * (width + 8)]
        for key in per_run[0]:
            values = [r[key] for r in per_run]
            row = f"{key:<{width}}{statistics.median(values):8.1f}"
            if len(runs) > 1:
                row += f"  {min(values):8.1f} .. {max(values):.1f}"
            if key in TARGETS:
                op, target = TARGETS[key]
                v = statistics.median(values)
                ok = v <= target if op == "<=" else v >= target
                row += f"   target {op} {target}: {'met' if ok else 'MISSED'}"
            lines.append(row)
    return "\n".join(lines[1:])


def run_in_processes(runs: int, loops: int,
                     repeats: int) -> List[Dict[str, float]]:
    """Each run in a fresh interpreter."""
    results = []
    for i in range(runs):
        out = subprocess.run(
            [sys.executable, __file__, "--loops", str(loops), "--repeats",
             str(repeats), "--raw"], capture_output=True, text=True,
            check=True).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(f"run {i + 1}/{runs} done", file=sys.stderr)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--loops", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--runs", type=int, default=1,
                        help="fresh processes to measure in (default 1)")
    parser.add_argument("--json", type=Path, help="also write results here")
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.loops < 1000 or args.repeats < 1 or args.runs < 1:
        parser.error("--loops must be >= 1000, --repeats and --runs >= 1")
    if args.raw:
        print(json.dumps(run(args.loops, args.repeats)))
        return 0
    if args.runs > 1:
        runs = run_in_processes(args.runs, args.loops, args.repeats)
    else:
        runs = [run(args.loops, args.repeats)]
    print(f"aquaprof {ap.__version__}, Python {platform.python_version()}, "
          f"{platform.machine()}, torch "
          f"{torch.__version__ if torch is not None else 'not installed'}, "
          f"{args.loops} loops x {args.repeats} rounds x {args.runs} "
          f"process(es)")
    print(report(runs))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
