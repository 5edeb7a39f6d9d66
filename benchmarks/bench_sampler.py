"""What sampling call stacks costs, and whether the shares it reports are
right: aquaprof's sampler next to pyinstrument and py-spy, the same run.

Cost: the 200-frame pipeline of pipeline_workload.py (load, preprocess,
a small CNN, Python-heavy postprocess), run bare; under pyinstrument at
1 ms; under py-spy record at 1000 Hz (another process that stops this
one to read its stacks); under aquaprof with stages only; under aquaprof
sampling every 1 ms. Each run is a fresh process that builds its inputs
and model, warms up, then times the pipeline alone (what it prints is
that time, not the process's startup nor py-spy's). The configurations
are interleaved, their order rotated each repeat; a configuration's
slowdown is the median over repeats of its time over the same repeat's
bare time. Target: aquaprof at 1 kHz at most 3 % slower than bare.

Shares: a stage whose body calls a() (a pure-Python loop, 75 % of the
stage) then b() (25 %: time.sleep in one case, a NumPy sort in the
other). Each call is timed in the run, so the shares a tool should
report are the measured ones (a tracing profiler slows a() and moves
them); aquaprof's hot() and pyinstrument's samples give theirs, as each
function's total share of the stage's sampled wall time. Target: within
10 points.

    python benchmarks/bench_sampler.py [--repeats 5] [--frames 200]
        [--planted-seconds 1.5] [--planted-period 0.01]
        [--skip pipeline|planted]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import aquaprof as ap  # noqa: E402
import pipeline_workload as workload  # noqa: E402

INTERVAL = 0.001              # seconds: 1 kHz, the target's rate
TARGET_SLOWDOWN = 3.0         # percent
TARGET_POINTS = 10.0          # share error allowed, percentage points
MIN_REPEATS_JUDGED = 5        # fewer repeats: figures only, no verdict
MARK = "BENCH "               # a child's result line on its stdout

# name shown, child mode (None: py-spy around a bare child)
CONFIGS: Tuple[Tuple[str, Optional[str]], ...] = (
    ("bare", "bare"),
    ("pyinstrument 1 ms", "pyinstrument"),
    ("py-spy 1000 Hz", None),
    ("aquaprof stages", "stages"),
    ("aquaprof sample 1 ms", "sample"),
)
PIPELINE_CHILDREN = ("bare", "pyinstrument", "stages", "sample")
PLANTED_TOOLS = ("aquaprof", "pyinstrument")
PLANTED_KINDS = ("sleep", "numpy")
SHARE_A = 0.75


# ---------------------------------------------------------------- children

def child_pipeline(mode: str, frames: int) -> dict:
    """One pipeline run under `mode`, in this process; what it measured:
    wall seconds of the pipeline, and the CPU seconds meanwhile of the
    thread that runs it and of the whole process (all its threads: a
    sampler thread's work counts; another process's, py-spy's, does
    not). CPU seconds move less than wall time when other programs share
    the machine."""
    inputs = workload.make_frames(frames)
    model = workload.build_model()
    workload.run(inputs[:2], model)                  # torch's first call
    out: dict = {"mode": mode}
    prof = session = None
    if mode == "pyinstrument":
        from pyinstrument import Profiler as PyinstrumentProfiler
        prof = PyinstrumentProfiler(interval=INTERVAL)
    elif mode != "bare":
        kwargs = {"sample": INTERVAL} if mode == "sample" else {}
        try:
            prof = ap.Profiler(**kwargs)
        except (TypeError, ValueError) as err:
            return {"mode": mode, "error": f"Profiler({kwargs}) refused: "
                                           f"{type(err).__name__}: {err}"}
    if prof is not None:
        prof.start()
    cpu0, main0 = time.process_time(), time.thread_time()
    out["seconds"], out["counts"] = workload.timed_run(inputs, model)
    out["main_cpu"] = time.thread_time() - main0
    out["cpu"] = time.process_time() - cpu0
    if prof is not None:
        session = prof.stop()
    if mode == "pyinstrument":
        out["samples"] = session.sample_count
    elif mode == "sample":
        out.update(aquaprof_samples(prof.report()))
    return out


def aquaprof_samples(rep: ap.Report) -> dict:
    """Sample counts of a report, and the postprocess stage's hottest
    functions (evidence that the samples land where the time goes)."""
    samples = rep.to_dict().get("samples")
    if not samples:
        return {"error": "the report has no samples"}
    out = {"samples": sum(s[4] for s in samples["stacks"]),
           "rounds": samples["rounds"], "late": samples["late"],
           "lost": samples["lost"]}
    out["hot"] = [[h.function, round(h.own, 3)]
                  for h in rep["postprocess"].hot(3)]
    return out


def a(loops: int) -> int:
    """The planted pure-Python function."""
    total = 0
    for i in range(loops):
        total += i * i % 7
    return total


def b(kind: str, arg) -> None:
    """The planted other function: a sleep, or one NumPy call."""
    if kind == "sleep":
        time.sleep(arg)
    else:
        np.sort(arg)


def median_seconds(fn, *args, calls: int = 5) -> float:
    took = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn(*args)
        took.append(time.perf_counter() - t0)
    return statistics.median(took)


def calibrate(kind: str, a_seconds: float) -> Tuple[int, object]:
    """Arguments that make a() take `a_seconds` and b() a third of it,
    each timed warm (the interpreter specialises a()'s loop after its
    first calls; a sleep overshoots what it is asked)."""
    loops = 20_000
    for _ in range(3):
        loops = max(1, int(loops * a_seconds / median_seconds(a, loops)))
    b_seconds = a_seconds * (1 - SHARE_A) / SHARE_A
    if kind == "sleep":
        asked = b_seconds
        for _ in range(2):
            over = median_seconds(time.sleep, asked) - asked
            asked = max(1e-4, b_seconds - over)
        return loops, asked
    size = 100_000
    for _ in range(3):                           # sort is about n log n
        x = np.random.default_rng(0).random(size)
        size = max(1000, int(size * b_seconds / median_seconds(np.sort, x)))
    return loops, np.random.default_rng(0).random(size)


def stage_body(kind: str, rounds: int, loops: int, arg) -> Tuple[float,
                                                                  float]:
    """The planted stage's work; seconds spent in a() and in b()."""
    in_a = in_b = 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        a(loops)
        t1 = time.perf_counter()
        b(kind, arg)
        t2 = time.perf_counter()
        in_a += t1 - t0
        in_b += t2 - t1
    return in_a, in_b


def child_planted(tool: str, kind: str, seconds: float,
                  period: float) -> dict:
    """The planted stage under `tool`, a() then b() every `period`
    seconds; its measured shares and the tool's."""
    a_seconds = period * SHARE_A
    loops, arg = calibrate(kind, a_seconds)
    rounds = max(1, int(seconds / period))
    stage_body(kind, 2, loops, arg)                  # warm up
    out: dict = {"tool": tool, "kind": kind, "rounds": rounds}
    if tool == "aquaprof":
        try:
            prof = ap.Profiler(sample=INTERVAL)
        except (TypeError, ValueError) as err:
            return {**out, "error": f"Profiler(sample={INTERVAL}) refused: "
                                    f"{type(err).__name__}: {err}"}
        with prof:
            t0 = time.perf_counter()
            with ap.stage("planted"):
                in_a, in_b = stage_body(kind, rounds, loops, arg)
            wall = time.perf_counter() - t0
        rep = prof.report()
        out["reported"], out["source"] = aquaprof_shares(rep)
        out["samples"] = sum(s[4] for s in
                             rep.to_dict()["samples"]["stacks"])
    else:
        from pyinstrument import Profiler as PyinstrumentProfiler
        prof = PyinstrumentProfiler(interval=INTERVAL)
        prof.start()
        t0 = time.perf_counter()
        with ap.stage("planted"):
            in_a, in_b = stage_body(kind, rounds, loops, arg)
        wall = time.perf_counter() - t0
        session = prof.stop()
        out["reported"] = pyinstrument_shares(session.frame_records)
        out["samples"] = session.sample_count
    out["measured"] = {"a": in_a / wall, "b": in_b / wall}
    return out


def aquaprof_shares(rep: ap.Report) -> Tuple[Dict[str, float], str]:
    """Total shares of a() and b() in the planted stage, from hot(); from
    the report's samples data as the format defines it where this build
    has no hot() yet. Also: which of the two gave them."""
    stats = rep["planted"]
    if hasattr(stats, "hot"):
        mine = {h.function: h for h in stats.hot(50)
                if h.file == __file__ and h.function in ("a", "b")}
        return ({f: (mine[f].total if f in mine else 0.0)
                 for f in ("a", "b")}, "hot()")
    data = rep.to_dict()
    names = [st["name"] for st in data["stages"]]
    frames = [tuple(f[:2]) for f in data["samples"]["frames"]]
    stage = names.index("planted")
    wall = {"a": 0, "b": 0}
    total = 0
    for _, _, where, stack, _, wall_ns, _ in data["samples"]["stacks"]:
        if where != stage:
            continue
        total += wall_ns
        on_stack = {frames[i] for i in stack}
        for f in wall:
            if (f, __file__) in on_stack:
                wall[f] += wall_ns
    return ({f: w / total if total else 0.0 for f, w in wall.items()},
            "samples data")


def pyinstrument_shares(records) -> Dict[str, float]:
    """Total shares of a() and b() in the sampled time of stage_body()."""
    def functions(stack) -> List[Tuple[str, str]]:
        return [tuple(f.split("\x00")[:2]) for f in stack]
    stage = in_a = in_b = 0.0
    for stack, seconds in records:
        names = functions(stack)
        if ("stage_body", __file__) not in names:
            continue
        stage += seconds
        in_a += seconds if ("a", __file__) in names else 0.0
        in_b += seconds if ("b", __file__) in names else 0.0
    if stage == 0.0:
        return {"a": 0.0, "b": 0.0}
    return {"a": in_a / stage, "b": in_b / stage}


# ------------------------------------------------------------------ parent

def py_spy() -> Optional[str]:
    """The py-spy next to this interpreter, else on PATH."""
    near = Path(sys.executable).parent / "py-spy"
    return str(near) if near.exists() else shutil.which("py-spy")


def parse_child(stdout: str) -> Optional[dict]:
    for line in stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    return None


def pyspy_window_samples(raw: str) -> int:
    """Samples of py-spy's raw output taken inside the timed pipeline
    (stacks through pipeline_workload's run())."""
    count = 0
    for line in raw.splitlines():
        stack, _, n = line.rpartition(" ")
        if "run (pipeline_workload.py" in stack and n.isdigit():
            count += int(n)
    return count


def run_child(args: Sequence[str], spy: bool = False,
              timeout: float = 600) -> dict:
    """A child of this script in a fresh interpreter; under py-spy record
    at 1000 Hz with `spy`. Never raises: failures come back as 'error'."""
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    raw_path = None
    if spy:
        exe = py_spy()
        if exe is None:
            return {"error": "py-spy is not installed"}
        fd, raw_path = tempfile.mkstemp(suffix=".txt")
        os.close(fd)
        cmd = [exe, "record", "-r", "1000", "-o", raw_path, "-f", "raw",
               "--", *cmd]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=timeout)
        result = parse_child(done.stdout)
        if result is None:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return {"error": f"exit {done.returncode}: " + " | ".join(tail)}
        if spy and raw_path is not None:
            result["samples"] = pyspy_window_samples(
                Path(raw_path).read_text())
        return result
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {timeout:.0f} s"}
    finally:
        if raw_path is not None:
            os.unlink(raw_path)


def percent(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.1f} %"


def paired(runs: List[dict], bare: List[dict], key: str) -> List[float]:
    """Each repeat's figure over the same repeat's bare one."""
    return [r[key] / b0[key] for r, b0 in zip(runs, bare)
            if key in r and key in b0 and b0[key] > 0]


def slowdown(results: Dict[str, List[dict]], name: str) -> Optional[float]:
    ratios = paired(results[name], results["bare"], "seconds")
    return statistics.median(ratios) if ratios else None


def pipeline_table(results: Dict[str, List[dict]]) -> None:
    """Prints the cost table, one row per configuration."""
    bare = results["bare"]
    print(f"{'configuration':21} {'median s':>8} {'slowdown':>9} "
          f"{'spread':>17} {'min/min':>8} {'main CPU':>8} {'CPU':>7} "
          f"{'samples':>7} "
          f"{'expected':>8}")
    for name, _ in CONFIGS:
        runs = results[name]
        errors = [r["error"] for r in runs if "error" in r]
        ok = [r for r in runs if "seconds" in r]
        if not ok:
            print(f"{name:21} not measured: "
                  f"{errors[0] if errors else 'no runs'}")
            continue
        secs = statistics.median(r["seconds"] for r in ok)
        samples = [r["samples"] for r in ok if "samples" in r]
        if name == "bare":
            times = [r["seconds"] for r in ok]
            spread = (f"{percent(min(times) / secs)}.."
                      f"{percent(max(times) / secs)}")
            cells = ["-", spread, "-", "-", "-"]
        else:
            ratios = paired(runs, bare, "seconds")
            cpu = paired(runs, bare, "cpu")
            main = paired(runs, bare, "main_cpu")
            best = min(r["seconds"] for r in ok) / min(
                r["seconds"] for r in bare if "seconds" in r)
            cells = [percent(statistics.median(ratios)),
                     f"{percent(min(ratios))}..{percent(max(ratios))}",
                     percent(best),
                     percent(statistics.median(main)) if main else "-",
                     percent(statistics.median(cpu)) if cpu else "-"]
        print(f"{name:21} {secs:8.3f} {cells[0]:>9} {cells[1]:>17} "
              f"{cells[2]:>8} {cells[3]:>8} {cells[4]:>7} "
              f"{statistics.median_low(samples) if samples else '-':>7} "
              f"{'-' if name == 'bare' else f'{secs / INTERVAL:.0f}':>8}")
        if errors:
            print(f"{'':21} {len(errors)} of {len(runs)} runs failed: "
                  f"{errors[0]}")
        last = ok[-1]
        if "rounds" in last:
            print(f"{'':21} last run: {last['rounds']} rounds, "
                  f"{last['late']} late, {last['lost']} lost; postprocess's "
                  f"hottest (own share): {last.get('hot')}")
    print("slowdown: median over repeats of time / the same repeat's bare "
          "time; spread: their min..max (bare: its times against their "
          "median); min/min: fastest run over fastest bare run; main CPU, "
          "CPU: the same median ratio of the CPU seconds of the thread "
          "running the pipeline, of the whole process (py-spy's own "
          "process not counted); samples: median count inside the timed "
          "pipeline; expected: its median seconds at 1 kHz")


def verdict(results: Dict[str, List[dict]], repeats: int) -> bool:
    """The target's line; True when aquaprof's sampler met it (judged
    only with MIN_REPEATS_JUDGED repeats or more)."""
    med = slowdown(results, "aquaprof sample 1 ms")
    if med is None:
        print("aquaprof sampler at 1 kHz: NOT MEASURED (see above)")
        return False
    if repeats < MIN_REPEATS_JUDGED:
        print(f"aquaprof sampler at 1 kHz: {percent(med)}: not judged "
              f"(fewer than {MIN_REPEATS_JUDGED} repeats)")
        return False
    ok = 100 * (med - 1) <= TARGET_SLOWDOWN
    print(f"aquaprof sampler at 1 kHz: {percent(med)} vs bare, target "
          f"<= {TARGET_SLOWDOWN:.0f} %: {'PASS' if ok else 'FAIL'}")
    return ok


def measure_pipeline(repeats: int, frames: int) -> bool:
    print(f"pipeline: {frames} frames, {repeats} repeats interleaved, each "
          f"run a fresh process")
    if py_spy() is None:
        print("py-spy: not installed, its row is skipped")
    results: Dict[str, List[dict]] = {name: [] for name, _ in CONFIGS}
    for rep in range(repeats):
        order = CONFIGS[rep % len(CONFIGS):] + CONFIGS[:rep % len(CONFIGS)]
        for name, mode in order:
            if mode is None:
                got = run_child(["--child", "bare", "--frames", str(frames)],
                                spy=True)
            else:
                got = run_child(["--child", mode, "--frames", str(frames)])
            results[name].append(got)
        print(f"  repeat {rep + 1}/{repeats} done", flush=True)
    counts = {json.dumps(r["counts"]) for runs in results.values()
              for r in runs if "counts" in r}
    if len(counts) > 1:
        print(f"the pipeline's results differ between runs: {counts}")
    spy_errors = [r["error"] for r in results["py-spy 1000 Hz"]
                  if "error" in r]
    if spy_errors:
        print(f"py-spy could not profile the child: {spy_errors[0]} "
              f"(it needs ptrace: CAP_SYS_PTRACE, or ptrace_scope 0)")
    pipeline_table(results)
    bare = [r["seconds"] for r in results["bare"] if "seconds" in r]
    if len(bare) > 1 and 100 * (max(bare) / min(bare) - 1) > 2 * \
            TARGET_SLOWDOWN:
        print(f"noise: bare runs spread {percent(max(bare) / min(bare))} "
              f"(load average {os.getloadavg()[0]:.2f} at the end): more "
              f"than the target; other work on this machine moves wall "
              f"times, more --repeats steady the medians")
    return verdict(results, repeats)


def measure_planted(seconds: float, period: float) -> bool:
    print(f"\nplanted stage: a() {SHARE_A:.0%} pure Python, b() "
          f"{1 - SHARE_A:.0%} (sleep / NumPy sort), one of each every "
          f"{1000 * period:g} ms for {seconds:g} s; shares: total share of "
          f"the stage's sampled wall time (measured: each call timed in "
          f"the run)")
    print(f"{'tool':14} {'b() is':7} {'a measured':>10} {'a reported':>10} "
          f"{'b measured':>10} {'b reported':>10} {'samples':>8}  verdict")
    ok = True
    for kind in PLANTED_KINDS:
        for tool in PLANTED_TOOLS:
            got = run_child(["--child", "planted", "--tool", tool,
                             "--kind", kind,
                             "--planted-seconds", str(seconds),
                             "--planted-period", str(period)])
            if "error" in got:
                print(f"{tool:14} {kind:7} not measured: {got['error']}")
                if tool == "aquaprof":
                    ok = False
                continue
            m, r = got["measured"], got["reported"]
            worst = 100 * max(abs(m[f] - r[f]) for f in ("a", "b"))
            passed = worst <= TARGET_POINTS
            if tool == "aquaprof":
                ok = ok and passed
            print(f"{tool:14} {kind:7} {m['a']:10.1%} {r['a']:10.1%} "
                  f"{m['b']:10.1%} {r['b']:10.1%} {got['samples']:8}  "
                  f"{'PASS' if passed else 'FAIL'} (off by "
                  f"{worst:.1f} points)"
                  + (f" [{got['source']}]" if "source" in got else ""))
    print(f"aquaprof shares within {TARGET_POINTS:.0f} points: "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got "
                                         f"{text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got "
                                         f"{text!r}") from None
    if not value > 0 or value > 600:
        raise argparse.ArgumentTypeError(f"must be in (0, 600], got "
                                         f"{text}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=positive_int, default=5,
                   help="runs of each configuration (verdict from 5)")
    p.add_argument("--frames", type=positive_int, default=200)
    p.add_argument("--planted-seconds", type=positive_seconds, default=1.5,
                   help="length of each planted stage run")
    p.add_argument("--planted-period", type=positive_seconds, default=0.01,
                   help="seconds of one a() and one b() call together")
    p.add_argument("--skip", choices=("pipeline", "planted"),
                   help="leave one of the two measures out")
    # internal: one measured configuration, run in a fresh interpreter
    p.add_argument("--child", choices=PIPELINE_CHILDREN + ("planted",),
                   help=argparse.SUPPRESS)
    p.add_argument("--tool", choices=PLANTED_TOOLS, help=argparse.SUPPRESS)
    p.add_argument("--kind", choices=PLANTED_KINDS, help=argparse.SUPPRESS)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.planted_period > args.planted_seconds:
        p.error(f"--planted-period ({args.planted_period:g} s) is longer "
                f"than --planted-seconds ({args.planted_seconds:g} s)")
    if args.child == "planted":
        if args.tool is None or args.kind is None:
            p.error("--child planted needs --tool and --kind")
        out = child_planted(args.tool, args.kind, args.planted_seconds,
                            args.planted_period)
    elif args.child is not None:
        out = child_pipeline(args.child, args.frames)
    else:
        ok = True
        if args.skip != "pipeline":
            ok = measure_pipeline(args.repeats, args.frames) and ok
        if args.skip != "planted":
            ok = measure_planted(args.planted_seconds,
                                 args.planted_period) and ok
        return 0 if ok else 1
    print(MARK + json.dumps(out), flush=True)
    return 3 if "error" in out else 0


if __name__ == "__main__":
    sys.exit(main())
