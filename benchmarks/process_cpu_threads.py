"""What the memory sampler's reading of the process's CPU time costs a
process with many threads. CLOCK_PROCESS_CPUTIME_ID sums every thread's
time in the kernel, so one read grows with the threads; the sampler reads
it once an interval (1 ms while stages are entered) beside RSS.

Each run is a fresh process holding N extra threads parked on an Event
(the same to the kernel as a native pool's idle workers), which runs a
loop of stage pairs for a fixed number of pairs with memory=True and
with memory=False, alternating. Per N it prints:
- the clock read alone, from Python (time.clock_gettime_ns; about 50 ns
  of it is the interpreter's call);
- the loop's ns per stage pair with memory on and off (median of the
  runs): what a stage-heavy program pays;
- the CPUs the process's other threads (the sampler) used beside the
  loop's thread, on and off: what the sampling costs the machine.

    python benchmarks/process_cpu_threads.py [--threads 0,64,256]
        [--runs 5] [--pairs 2000000] [--root DIR]

--root runs the cases against the aquaprof tree at DIR (built in place),
as a git worktree of an earlier commit, to compare before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]

_CASE = r"""
import json, sys, threading, time
import aquaprof as ap

threads, memory, pairs = int(sys.argv[1]), sys.argv[2] == "on", \
    int(sys.argv[3])
park = threading.Event()
parked = [threading.Thread(target=park.wait) for _ in range(threads)]
for t in parked:
    t.start()
reads = 20000
t0 = time.perf_counter_ns()
for _ in range(reads):
    time.clock_gettime_ns(time.CLOCK_PROCESS_CPUTIME_ID)
read_ns = (time.perf_counter_ns() - t0) / reads
st = ap.stage("s")
with ap.Profiler(memory=memory, compensate=False):
    for _ in range(10000):      # the sampler at its pace
        with st:
            pass
    w0, p0, t0 = time.perf_counter(), time.process_time(), \
        time.thread_time()
    for _ in range(pairs):
        with st:
            pass
    wall = time.perf_counter() - w0
    others = max((time.process_time() - p0) - (time.thread_time() - t0),
                 0.0)
park.set()
for t in parked:
    t.join()
print(json.dumps({"read_ns": read_ns, "pair_ns": wall / pairs * 1e9,
                  "others_cpus": others / wall}))
"""


def run(root: Path, threads: int, memory: str, pairs: int
        ) -> Dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", _CASE, str(threads), memory, str(pairs)],
        env=dict(os.environ, PYTHONPATH=str(root)), cwd=str(root),
        capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{threads} threads, memory {memory} failed: "
                         f"{out.stderr.strip()[-400:]}")
    return json.loads(out.stdout)


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", default="0,64,256")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--pairs", type=int, default=2000000)
    p.add_argument("--root", type=Path, default=ROOT)
    a = p.parse_args(argv)
    counts = [int(n) for n in a.threads.split(",")]
    if a.runs < 1 or a.pairs < 1 or min(counts) < 0:
        p.error("--runs and --pairs must be at least 1, threads >= 0")
    print(f"aquaprof tree: {a.root.resolve()}; Python "
          f"{sys.version.split()[0]}; {os.cpu_count()} CPUs; {a.runs} runs "
          f"of {a.pairs:,} stage pairs each, medians")
    print("threads | clock read, ns | ns a pair, memory on / off | "
          "other threads' CPUs, on / off")
    for n in counts:
        got: Dict[str, List[Dict[str, float]]] = {"on": [], "off": []}
        for _ in range(a.runs):
            for memory in ("on", "off"):
                got[memory].append(run(a.root, n, memory, a.pairs))

        def med(memory: str, key: str) -> float:
            return statistics.median(r[key] for r in got[memory])
        read = statistics.median(r["read_ns"] for r in got["on"] +
                                 got["off"])
        print(f"{n} | {read:.0f} | {med('on', 'pair_ns'):.1f} / "
              f"{med('off', 'pair_ns'):.1f} | "
              f"{med('on', 'others_cpus'):.4f} / "
              f"{med('off', 'others_cpus'):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
