"""Conclusions on planted cases whose right answer is known: each case a
small real program run in a fresh process, what aquaprof concluded, and
how many runs concluded right.

- parked: an asyncio server stopped while 50 tasks wait in a stage; right:
  the stage awaiting, no CPU time of its own;
- wrapped loader: a model-bound DataLoader loop (torch, num_workers=0)
  whose next() sits in a stage of its own; right: not data-loading-bound;
- stall: the one-run-a-side verdict on unchanged code whose new run was
  1 % slower all through and had one of its 40 calls of 500 us stalled to
  3.3 ms; right: not slower;
- starved unsampled: a computing stage beside two busy processes on its
  one CPU, unsampled; right: not waiting;
- late sampler: a thread computing 30 ms outside any stage, holding the
  GIL, then sleeping 3 ms in a stage, sampled at 1 kHz; right: the
  sleep's sampled time no more than its wall time, and waiting;
- periodic: 200 calls of 1 ms, every 4th 3 ms, judged by anomalies();
  right: none;
- names: 200,000 stage names, one a request, under max_stages=100; right:
  the process's memory flat (printed: MiB added);
- monitor: a Monitor checking every 0.25 s; a 30 ms call followed by 400
  steady ones of 2 ms, then a call hung 1 s; right: one alert each;
- task lanes: three asyncio tasks of one stage, each computing in its
  own function, sampled; right: no task's lane in speedscope holds
  another's code;
- pool run: `aquaprof run` on a script whose work runs in a thread
  pool; right: its output names the work.

    python benchmarks/planted_conclusions.py [--runs N] [--root DIR]
                                             [--only CASE ...]

--root runs the cases against the aquaprof tree at DIR (built in
place), to set a version before a change against this one.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]

_PARKED = r"""
import asyncio
import aquaprof as ap

async def parked():
    with ap.stage("parked"):
        await asyncio.sleep(60)

async def main():
    prof = ap.Profiler()
    prof.start()
    tasks = [asyncio.create_task(parked()) for _ in range(50)]
    await asyncio.sleep(0.01)
    with ap.stage("busy"):
        sum(range(3_000_000))
    prof.stop()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return prof.report()

rep = asyncio.run(main())
kind = {f.path: f.kind for f in rep.diagnose(top=3)}["parked"]
print(f"{kind}, {rep['parked'].cpu * 1e3:.0f} ms CPU", kind == "awaiting")
"""

_WRAPPED_LOADER = r"""
import torch
from torch.utils.data import DataLoader, TensorDataset
import aquaprof as ap

torch.manual_seed(0)
torch.set_num_threads(1)
data = TensorDataset(torch.randn(30 * 8, 512), torch.randn(30 * 8, 1))
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
with ap.Profiler() as prof:
    batches = iter(DataLoader(data, batch_size=8))
    for _ in range(30):
        with ap.stage("load"):
            x, y = next(batches)
        with ap.stage("step"):
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
rep = prof.report()
wait = rep["load/next(DataLoader)"].wall.total / rep.wall
kinds = {f.path: f.kind for f in rep.diagnose(top=3)}
kind = kinds.get("load/next(DataLoader)", "no finding")
print(f"{kind} (the wait {wait * 100:.0f} % of the run)",
      kind != "data-loading-bound")
"""

_STALL = r"""
import time
import aquaprof as ap

def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

def run(call, stall_at=None):
    with ap.Profiler() as prof:
        for i in range(40):
            with ap.stage("parse"):
                spin(3.3e-3 if i == stall_at else call)
    return prof.report()

base = run(500e-6)
new = run(505e-6, stall_at=25)
v = next(c for c in new.compare(base).changes if c.path == "parse")
print(f"{v.verdict}, total {v.change * 100:+.0f} %",
      v.verdict not in ("slower", "slower?"))
"""

_STARVED = r"""
import os, subprocess, sys, time
import aquaprof as ap

cpu = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cpu})
hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(2)]
try:
    for hog in hogs:
        os.sched_setaffinity(hog.pid, {cpu})
    with ap.Profiler() as prof:
        time.sleep(0.2)
        with ap.stage("compute"):
            end = time.thread_time() + 0.3
            while time.thread_time() < end:
                sum(range(2000))
finally:
    for hog in hogs:
        hog.kill()
        hog.wait()
rep = prof.report()
s = rep["compute"]
kind = {f.path: f.kind for f in rep.diagnose(top=3)}["compute"]
print(f"{kind}, {s.cpu / s.wall.total * 100:.0f} % on the CPU",
      kind not in ("waiting", "mixed"))
"""

_LATE = r"""
import sys, threading, time
import aquaprof as ap
from aquaprof.analysis.samples import stage_waits

def compute(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(2000))

def worker():
    for _ in range(10):
        compute(0.03)
        with ap.stage("sleep"):
            time.sleep(0.003)

sys.setswitchinterval(0.1)
with ap.Profiler(sample=0.001) as prof:
    t = threading.Thread(target=worker)
    t.start()
    t.join()
rep = prof.report()
w = stage_waits(rep, "sleep")
kind = {f.path: f.kind for f in rep.diagnose(top=3)}["sleep"]
ratio = w.wall_s / rep["sleep"].wall.total
print(f"{kind}, sampled {ratio:.1f}x its wall time, "
      f"{w.cpu_s / w.wall_s * 100:.0f} % of it on the CPU",
      kind == "waiting" and ratio <= 1.05)
"""

_PERIODIC = r"""
import time
import aquaprof as ap

def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

with ap.Profiler() as prof:
    for i in range(200):
        with ap.stage("fetch"):
            spin(3e-3 if i % 4 == 3 else 1e-3)
found = prof.report().anomalies()
said = ", ".join(f"span {a.span}: {a.duration * 1e3:.1f} ms"
                 for a in found[:3]) + (", ..." if len(found) > 3 else "")
print(f"{len(found)} anomalies{' (' + said + ')' if found else ''}",
      not found)
"""

_NAMES = r"""
import os
import aquaprof as ap

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

before = rss_mib()
with ap.Profiler(max_spans=1000, max_stages=100) as prof:
    for i in range(200_000):
        with ap.stage(f"request-{i:07d}-with-a-suffix-of-some-length"):
            pass
prof.report()
added = rss_mib() - before
print(f"+{added:.1f} MiB", added < 5)
"""

_MONITOR = r"""
import time
import aquaprof as ap

alerts = []
with ap.Profiler(window=200) as prof:
    for _ in range(100):
        with ap.stage("step"):
            time.sleep(0.002)
    mon = prof.monitor(interval=0.25, on_alert=alerts.append)
    with ap.stage("step"):
        time.sleep(0.03)             # a spike, then steady calls
    for _ in range(400):
        with ap.stage("step"):
            time.sleep(0.002)
    with ap.stage("step"):
        time.sleep(1.0)              # a hang, seen by four checks
    time.sleep(0.3)
spike = sum(0.02 < a.value < 0.1 for a in alerts)
hang = sum(a.value >= 0.1 for a in alerts)
print(f"the spike alerted {spike}x, the hang {hang}x", spike == 1 and hang == 1)
"""

_TASK_LANES = r"""
import asyncio, json, os, tempfile, time
import aquaprof as ap

def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

def work_0(): spin(0.003)
def work_1(): spin(0.003)
def work_2(): spin(0.003)

async def task(work):
    with ap.stage("task"):
        for _ in range(40):
            work()
            await asyncio.sleep(0)

async def main():
    await asyncio.gather(task(work_0), task(work_1), task(work_2))

with ap.Profiler(sample=0.001) as prof:
    asyncio.run(main())
path = os.path.join(tempfile.mkdtemp(), "s.json")
doc = json.load(open(prof.report().to_speedscope(path)))
names = [f["name"].split(" ")[0] for f in doc["shared"]["frames"]]
most = max(len({names[e["frame"]] for e in p["events"]
                if names[e["frame"]].startswith("work_")})
           for p in doc["profiles"])
print(f"up to {most} tasks' code in one task's lane", most <= 1)
"""

_POOL_RUN = r"""
import os, subprocess, sys, tempfile
folder = tempfile.mkdtemp()
with open(os.path.join(folder, "pool.py"), "w") as f:
    f.write("import concurrent.futures, time\n"
            "def crunch(i):\n"
            "    end = time.perf_counter() + 0.01\n"
            "    while time.perf_counter() < end:\n"
            "        pass\n"
            "with concurrent.futures.ThreadPoolExecutor(2) as pool:\n"
            "    list(pool.map(crunch, range(20)))\n")
out = subprocess.run([sys.executable, "-m", "aquaprof", "run", "pool.py"],
                     capture_output=True, text=True, cwd=folder).stdout
named = "crunch (pool.py" in out
print("the pool's work named" if named else "the pool's work not shown",
      named)
"""

CASES: Dict[str, Tuple[str, str]] = {
    "parked": (_PARKED, "awaiting, no CPU"),
    "wrapped loader": (_WRAPPED_LOADER, "not data-loading-bound"),
    "stall": (_STALL, "not slower"),
    "starved unsampled": (_STARVED, "not waiting"),
    "late sampler": (_LATE, "waiting, sampled <= wall"),
    "periodic": (_PERIODIC, "no anomaly"),
    "names": (_NAMES, "memory flat"),
    "monitor": (_MONITOR, "the spike and the hang alerted once each"),
    "task lanes": (_TASK_LANES, "no task's code in another's lane"),
    "pool run": (_POOL_RUN, "aquaprof run names the pool's work"),
}


def run_case(code: str, root: Path) -> Tuple[str, bool]:
    """What the case printed and whether it was right."""
    out = subprocess.run([sys.executable, "-c", code], cwd=str(root),
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(root)))
    if out.returncode != 0:
        return f"failed: {out.stderr.strip().splitlines()[-1:]}", False
    said, _, right = out.stdout.strip().rpartition(" ")
    return said, right == "True"


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--root", type=Path, default=ROOT)
    p.add_argument("--only", nargs="*", choices=sorted(CASES))
    a = p.parse_args(argv)
    if a.runs < 1:
        p.error("--runs must be at least 1")
    print(f"aquaprof tree: {a.root.resolve()}; Python "
          f"{sys.version.split()[0]}; {a.runs} runs a case")
    for name in a.only or CASES:
        code, answer = CASES[name]
        said = [run_case(code, a.root) for _ in range(a.runs)]
        right = sum(ok for _, ok in said)
        print(f"{name} (right: {answer}): {right} of {a.runs} right; "
              + "; ".join(text for text, _ in said))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
