"""The sampler's late rounds on a busy machine, on planted cases whose
truth the program measures itself: each case a real program run in a
fresh process, pinned whole (the sampler's threads with it) to one CPU
beside busy processes pinned there too ("quiet" cases: no hogs, not
pinned), sampled every 2 ms. For each stage the program sums its calls'
wall time (perf_counter), thread CPU time (thread_time) and run delay
(its thread's /proc schedstat read at the call's edges), and the time
each planted function took inside it; the run's report says what the
samples hold (stage_waits), what hot() gives each function and what
diagnose() calls the stage.

- compute+sleep: one stage computes 20 ms then sleeps 20 ms a call;
- compute+lock: the same, blocked 20 ms on a lock another thread holds;
- alternating: a computing stage and a sleeping stage, 20 ms each, in
  turn;
- outside: a computing stage, then a sleep of 20 ms outside any stage,
  in turn;
- worker: a thread's computing stage starved while the main thread
  sleeps in a stage of its own;
- gil: eight threads running Python in a stage each;
- asyncio: three tasks, each computing 10 ms then awaiting 10 ms in its
  stage.

Checked on every stage (the "sums"): its sampled wall time past its
wall time, its sampled run delay past its sampled wall less CPU time,
and its sampled wall less CPU, delay and GIL time below 0 (what
stage_waits' blocked_s clamps), each in samples (intervals).

    python benchmarks/late_rounds.py [--runs N] [--root TREE]
                                     [--only CASE ...]

--root runs the cases against the aquaprof tree at TREE (built in
place), to set a version before a change against this one.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
INTERVAL = 0.002
HOGS = 3
HOG = "while True: pass"

#: per (stage, planted function or "" for the whole call): wall, CPU
#: and run delay seconds summed over calls, as the program measured them
TRUTH: Dict[str, List[float]] = {}
TRUTH_LOCK = threading.Lock()


def run_delay_s() -> float:
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat"
              ) as f:
        return int(f.read().split()[1]) / 1e9


class measured:
    """Adds the wall, CPU and run delay of its block to TRUTH[key]."""

    def __init__(self, key: str):
        self.key = key

    def __enter__(self):
        self.t = (time.perf_counter(), time.thread_time(), run_delay_s())

    def __exit__(self, *exc):
        now = (time.perf_counter(), time.thread_time(), run_delay_s())
        with TRUTH_LOCK:    # the gil case's eight threads add up here
            sums = TRUTH.setdefault(self.key, [0.0, 0.0, 0.0])
            for i in range(3):
                sums[i] += now[i] - self.t[i]


def spin_cpu(seconds: float) -> None:
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(2000):
            x += i * i


def nap(seconds: float) -> None:
    time.sleep(seconds)


def held_lock(seconds: float) -> None:
    blocked.acquire(timeout=seconds)


blocked = threading.Lock()


def in_stage(ap: Any, name: str, *parts) -> None:
    """One call of stage `name` running each (function, seconds) part,
    each part and the call measured."""
    with ap.stage(name), measured(name):
        for fn, seconds in parts:
            with measured(f"{name}:{fn.__name__}"):
                fn(seconds)


def compute_sleep(ap):
    for _ in range(12):
        in_stage(ap, "step", (spin_cpu, 0.02), (nap, 0.02))


def compute_lock(ap):
    blocked.acquire()
    try:
        for _ in range(12):
            in_stage(ap, "step", (spin_cpu, 0.02), (held_lock, 0.02))
    finally:
        blocked.release()


def alternating(ap):
    for _ in range(12):
        in_stage(ap, "crunch", (spin_cpu, 0.02))
        in_stage(ap, "rest", (nap, 0.02))


def unstaged_sleep(ap):
    for _ in range(12):
        in_stage(ap, "crunch", (spin_cpu, 0.02))
        nap(0.02)


def worker(ap):
    def work():
        for _ in range(6):
            in_stage(ap, "work", (spin_cpu, 0.03))
    thread = threading.Thread(target=work)
    thread.start()
    while thread.is_alive():
        in_stage(ap, "wait", (nap, 0.01))
    thread.join()


def gil(ap):
    def work():
        for _ in range(3):
            in_stage(ap, "py_work", (spin_cpu, 0.03))
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def tasks(ap):
    import asyncio

    async def task():
        for _ in range(6):
            with ap.stage("task"):
                spin_cpu(0.01)
                await asyncio.sleep(0.01)

    async def main():
        await asyncio.gather(*(task() for _ in range(3)))
    asyncio.run(main())


CASES = {"compute+sleep": compute_sleep, "compute+lock": compute_lock,
         "alternating": alternating, "outside": unstaged_sleep,
         "worker": worker, "gil": gil,
         "asyncio": tasks}
QUIET = ["compute+sleep", "alternating", "worker"]


def child(case: str, busy: bool) -> None:
    import aquaprof as ap
    from aquaprof.analysis.samples import stage_waits
    hogs = []
    if busy:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        hogs = [subprocess.Popen([sys.executable, "-c", HOG])
                for _ in range(HOGS)]
        for hog in hogs:
            os.sched_setaffinity(hog.pid, {cpu})
        time.sleep(0.2)
    try:
        with ap.Profiler(sample=INTERVAL) as prof:
            CASES[case](ap)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    rep = prof.report()
    kinds = {f.path: f.kind for f in rep.diagnose(top=10)}
    out = {"unseen_s": rep.samples["unseen_ns"] / 1e9, "stages": {}}
    for stage in rep.stages:
        w = stage_waits(rep, stage.path)
        hot = {h.function: h.own for h in stage.hot(10)}
        out["stages"][stage.path] = {
            "kind": kinds.get(stage.path),
            "wall": stage.wall.total, "cpu": stage.cpu,
            "sampled": [w.wall_s, w.cpu_s, w.delay_s, w.gil_s] if w
            else None,
            "hot": hot}
    out["truth"] = TRUTH
    print(json.dumps(out))


def run_case(case: str, busy: bool, root: Path) -> Dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", case]
        + ([] if busy else ["--quiet"]), cwd=str(root),
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=str(root)))
    if out.returncode:
        raise SystemExit(f"{case}: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def per_stage(runs: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Each stage's figures over the runs: kinds said, sampled over true
    (wall, CPU, delay), planted functions' hot() own share against their
    true share of the stage's wall time, and the worst sums in samples."""
    rows: Dict[str, Dict[str, Any]] = {}
    for run in runs:
        truth = run["truth"]
        for path, s in run["stages"].items():
            row = rows.setdefault(path, {"kinds": [], "wall": [], "cpu": [],
                                         "delay": [], "hot": {},
                                         "over": -1e9, "past": -1e9,
                                         "neg": -1e9})
            row["kinds"].append(s["kind"] or "-")
            if not s["sampled"]:
                continue
            wall, cpu, delay, gil = s["sampled"]
            row["over"] = max(row["over"], (wall - s["wall"]) / INTERVAL)
            row["past"] = max(row["past"],
                              (delay - (wall - cpu)) / INTERVAL)
            row["neg"] = max(row["neg"],
                             -(wall - cpu - delay - gil) / INTERVAL)
            if path not in truth:
                continue
            t_wall, t_cpu, t_delay = truth[path]
            row["wall"].append((wall, t_wall))
            row["cpu"].append((cpu, t_cpu))
            row["delay"].append((delay, t_delay))
            for key, (f_wall, _c, _d) in truth.items():
                if key.startswith(path + ":"):
                    fn = key.split(":", 1)[1]
                    row["hot"].setdefault(fn, []).append(
                        (s["hot"].get(fn, 0.0), f_wall / t_wall))
    return rows


def ratio(pairs) -> str:
    got = sum(p[0] for p in pairs)
    true = sum(p[1] for p in pairs)
    return f"{got:.2f}/{true:.2f}" if pairs else "-"


def share(pairs) -> str:
    lo = min(p[0] for p in pairs)
    hi = max(p[0] for p in pairs)
    true = sum(p[1] for p in pairs) / len(pairs)
    return f"{lo * 100:.0f}-{hi * 100:.0f} % (true {true * 100:.0f} %)"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--root", type=Path, default=ROOT)
    p.add_argument("--only", nargs="*", default=None)
    p.add_argument("--child", default=None)
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args()
    if a.child:
        child(a.child, not a.quiet)
        return
    root = a.root.resolve()
    print(f"aquaprof tree: {root}; Python {sys.version.split()[0]}; "
          f"{a.runs} runs a case, sampled every {INTERVAL * 1e3:.0f} ms")
    print("case | stage | diagnose() | sampled/true s: wall, CPU, run "
          "delay | hot() own share of each planted function | worst, in "
          "samples: wall past wall, delay past wall-CPU, negative blocked")
    plan = [(c, True) for c in CASES] + [(c, False) for c in QUIET]
    for case, busy in plan:
        name = case if busy else f"{case}, quiet"
        if a.only and case not in a.only and name not in a.only:
            continue
        runs = [run_case(case, busy, root) for _ in range(a.runs)]
        for path, row in sorted(per_stage(runs).items()):
            kinds = ", ".join(f"{k} x{row['kinds'].count(k)}"
                              for k in sorted(set(row["kinds"])))
            hot = "; ".join(f"{fn} {share(v)}"
                            for fn, v in row["hot"].items()) or "-"
            print(f"{name} | {path} | {kinds} | {ratio(row['wall'])}, "
                  f"{ratio(row['cpu'])}, {ratio(row['delay'])} | {hot} | "
                  f"{row['over']:.1f}, {row['past']:.1f}, "
                  f"{row['neg']:.1f}")


if __name__ == "__main__":
    main()
