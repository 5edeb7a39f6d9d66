"""How close a stage's process CPU time (StageStats.process_cpu: all the
process's threads while its calls were open, from the memory sampler's
readings carried to each edge) comes to time.process_time() read around
the same calls in the same run, and what reading it costs a stage pair.

Cases, each in a fresh process:
- computing: 20 calls of 10 ms computing on the stage's own thread;
- handed: 4 calls each waiting for two threads hashing 50 ms without
  the GIL;
- quiet: one call of 300 ms held open with no stage entered while two
  threads hash (the sampler slows to 250 ms; the exit reads the clock);
- short: 400 calls of 0.2 ms beside a thread hashing all along, each
  call shorter than the sampler's 1 ms;
- torch: 30 calls of torch matmuls with four times as many torch
  threads as the 2 CPUs the process is pinned to.

    python benchmarks/process_cpu_accuracy.py [--runs N]

Prints, per case, the stage's process CPU time against the clock around
its calls, over N runs, and the worst relative difference.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]

_CASE = r"""
import json, os, sys, threading, time
sys.path[:0] = [ROOT, SUPPORT]
import aquaprof as ap
from planted_waits import hash_cpu, spin_cpu

around = 0.0

class Around:
    def __enter__(self):
        self.stage = ap.stage("s")
        self.cpu0 = time.process_time()
        self.stage.__enter__()

    def __exit__(self, *exc):
        global around
        self.stage.__exit__(*exc)
        around += time.process_time() - self.cpu0

def threads(seconds, n=2):
    ws = [threading.Thread(target=hash_cpu, args=(seconds,)) for _ in range(n)]
    for w in ws: w.start()
    for w in ws: w.join()

case = sys.argv[1]
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
done = threading.Event()
def busy():
    while not done.is_set():
        hash_cpu(0.01)
worker = threading.Thread(target=busy)
if case == "torch":
    import torch
    torch.set_num_threads(4 * len(os.sched_getaffinity(0)))
    a = torch.randn(500, 500)
with ap.Profiler(compensate=False) as prof:
    if case == "computing":
        for _ in range(20):
            with Around(): spin_cpu(0.01)
    elif case == "handed":
        for _ in range(4):
            with Around(): threads(0.05)
    elif case == "quiet":
        with Around(): threads(0.3)
    elif case == "short":
        worker.start()
        for _ in range(400):
            with Around(): spin_cpu(0.0002)
            time.sleep(0.0002)
        done.set(); worker.join()
    elif case == "torch":
        for _ in range(30):
            with Around():
                for _ in range(4): a @ a
s = prof.report()["s"]
print(json.dumps([s.process_cpu, around, s.cpu]))
"""

CASES = ("computing", "handed", "quiet", "short", "torch")


def run(case: str) -> List[float]:
    code = _CASE.replace("ROOT", repr(str(ROOT))).replace(
        "SUPPORT", repr(str(ROOT / "tests" / "support")))
    out = subprocess.run([sys.executable, "-c", code, case],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"{case} failed: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout)


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args(argv)
    if a.runs < 1:
        p.error("--runs must be at least 1")
    print(f"Python {sys.version.split()[0]}; {os.cpu_count()} CPUs; "
          f"{a.runs} runs a case; figures in ms: process_cpu / around "
          f"(the stage's own thread)")
    for case in CASES:
        got = [run(case) for _ in range(a.runs)]
        worst = max(abs(p - t) / t for p, t, _ in got)
        print(f"{case}: " + "; ".join(
            f"{p * 1e3:.1f} / {t * 1e3:.1f} ({c * 1e3:.1f})"
            for p, t, c in got) + f"; worst {worst * 100:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
