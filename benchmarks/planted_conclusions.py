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
- shared core unsampled: a computing stage whose thread shares its CPU
  with one busy process, the machine's other CPUs idle, unsampled (the
  machine's figures leave CPUs free); right: not waiting;
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
- loop held: an asyncio server, 20 requests awaiting 1 ms of I/O while
  one computes 50 ms on the event loop, sampled; right: the computing
  stage cpu-bound, and the waiting requests' finding naming it as what
  held the loop (not I/O);
- demo busy: `aquaprof demo` beside two busy processes, one on each
  CPU: the plane sweep's native worker threads starved, its caller
  waiting to join them; right: build_cost_volume not sent after I/O
  (the fix does not say to overlap the wait);
- queue wait: a stage taking 40 items from a queue.Queue that a producer
  thread fills every 5 ms, sampled; right: told it waits on a lock or
  for other threads;
- torch.profiler: torch.profiler around aquaprof (torch ops and
  modules) on one training loop; right: both record the ops (aten::linear
  counted alike) and aquaprof's stage totals within 5 % of perf_counter
  timings taken in the program;
- pool spawn, pool fork: a multiprocessing Pool of 2 workers running a
  stage of 5 ms 40 times; right: 40 calls counted once, both workers
  reported, neither said slower a call than the other (a straggler line
  read: within 1.2x a call);
- leak: a stage keeping 1 MiB a call over 2,000 calls of 9 us beside a
  flat stage of 0.6 ms; right: the text report does not give the kept
  memory to the flat stage unsaid (its mem delta under 64 MiB, or a note
  that it may be another's);
- xdist gate: a suite under pytest-xdist -n 2, gated with
  --aquaprof-compare and --aquaprof-fail=10% against a base run, one
  test's stage made 1.5x slower after a 10 ms first call; right: that
  test flagged, no other;
- gil starved: two threads under the GIL, one computing, the other
  giving the GIL up 200 times; right: the starved stage gil-bound, the
  computing one cpu-bound;
- torch threads, torch threads sampled: an MLP's training loop (forward,
  backward, optimizer step) pinned to two CPUs with torch running four
  times as many threads (what a container's process gets where torch
  counts the machine's cores), unsampled and sampled; right: no top
  stage sent after I/O, those whose thread mostly waited told to run
  fewer threads, and some told that their own process's threads used
  the CPUs;
- child run, child run sampled: a stage running a child Python that
  computes 0.15 s (subprocess.run), five times; right: not sent after
  I/O (the wait is for another process's CPU work);
- pool map, pool map sampled: a stage waiting on multiprocessing
  Pool(2).map of 8 tasks computing 50 ms; right: sent neither after I/O
  nor after more threads (the work is in processes);
- late thread: unsampled, a thread hashing without the GIL started
  after 1 s of setup, beside a stage that sleeps 20 ms 50 times; right:
  the stage waiting, not threads-bound;
- ranks, ranks sampled: torch.distributed (gloo) on 2 ranks, rank 1
  sleeping 30 ms a step before the all-reduce, the reports gathered on
  rank 0; right: the all-reduce straggler-bound, its evidence naming
  rank 1 and its slow stage, compute (what the other rank waits for);
- semaphore sampled: 8 threads each in a stage 10 times, holding a
  threading.Semaphore(2) while they sleep 10 ms; right: told it waits
  on a lock;
- futures, futures sampled: a stage waiting on 8 ThreadPoolExecutor(4)
  futures of pure-Python work (GIL contention); right: not told to give
  the pool more threads (they share one GIL).
- process futures result, process futures as_completed: a stage waiting
  on a ProcessPoolExecutor(2)'s futures of 4 tasks computing 50 ms, by
  each one's result() and by as_completed(), sampled; right: told it
  waits for other processes (tests/support/planted_futures.py, as are
  the three below);
- thread futures sleeps, thread futures hashing: the same stage on a
  ThreadPoolExecutor(2)'s futures of tasks sleeping 50 ms, and hashing
  16 MiB without the GIL, by as_completed(), sampled; right: not told
  it waits for other processes;
- thread futures beside processes: the sleeps' stage in a process that
  also holds an idle ProcessPoolExecutor; right: the same;
- multiprocessing threads: the sleeps' stage on multiprocessing's
  ThreadPool(2) by map() (it waits in multiprocessing/pool.py, as a
  process Pool's parent does), sampled; right: the same.

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

# the starved cases' end: how their computing stage read
_COMPUTE_READ = r"""
rep = prof.report()
s = rep["compute"]
kind = {f.path: f.kind for f in rep.diagnose(top=3)}["compute"]
print(f"{kind}, {s.cpu / s.wall.total * 100:.0f} % on the CPU",
      kind not in ("waiting", "mixed"))
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
""" + _COMPUTE_READ

_SHARED_CORE = r"""
import os, subprocess, sys, time
import aquaprof as ap

cpus = os.sched_getaffinity(0)
hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
try:
    with ap.Profiler() as prof:
        os.sched_setaffinity(hog.pid, {min(cpus)})
        os.sched_setaffinity(0, {min(cpus)})
        time.sleep(0.2)
        with ap.stage("compute"):
            end = time.thread_time() + 0.3
            while time.thread_time() < end:
                sum(range(2000))
        os.sched_setaffinity(0, cpus)
finally:
    hog.kill()
    hog.wait()
""" + _COMPUTE_READ

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

_LOOP_HELD = r"""
import asyncio, time
import aquaprof as ap

def crunch(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(2000))

async def handle(i):
    with ap.stage("request"):
        await asyncio.sleep(0.001)
        if i == 0:
            with ap.stage("render"):
                crunch(0.05)

async def main():
    for _ in range(5):
        await asyncio.gather(*(handle(i) for i in range(21)))

with ap.Profiler(sample=0.001) as prof:
    asyncio.run(main())
found = {f.path: f for f in prof.report().diagnose(top=3)}
req, ren = found["request"], found["request/render"]
print(f"request {req.kind}, render {ren.kind}; request's evidence "
      f"{'names' if 'render' in req.evidence else 'does not name'} render",
      ren.kind == "cpu-bound" and "render" in req.evidence)
"""

_DEMO_BUSY = r"""
import os, subprocess, sys, tempfile
from pathlib import Path
import aquaprof as ap

# the demo beside two busy processes, one on each CPU: the plane sweep's
# native worker threads are starved, and its caller waits to join them
hogs = [subprocess.Popen([sys.executable, "-c",
                          f"import os; os.sched_setaffinity(0, {{{c}}})\n"
                          "while True: pass"])
        for c in sorted(os.sched_getaffinity(0))[:2]]
try:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "aquaprof", "demo", "--out",
                        out], check=True, capture_output=True)
        rep = ap.Report.load(Path(out) / "report.json")
finally:
    for h in hogs:
        h.kill()
        h.wait()
f = {f.path: f for f in rep.diagnose(top=3)}["build_cost_volume"]
io = f.fix.startswith("overlap the wait")
print(f"build_cost_volume {f.kind}, {'I/O' if io else 'no I/O'} fix: "
      f"{f.fix[:40]}...", not io)
"""

_QUEUE_WAIT = r"""
import queue, threading, time
import aquaprof as ap

def produce(items):
    for i in range(40):
        time.sleep(0.005)
        items.put(i)

with ap.Profiler(sample=0.001) as prof:
    sum(range(300000))
    items = queue.Queue()
    producer = threading.Thread(target=produce, args=(items,))
    producer.start()
    with ap.stage("consume"):
        for _ in range(40):
            items.get()
    producer.join()
f = prof.report().diagnose(top=1).findings[0]
threads = f.fix.startswith("it waits on a lock or for other threads")
print(f"consume {f.kind}, {'threads' if threads else 'other'} fix", threads)
"""

_TORCH_PROFILER = r"""
import time, torch
import aquaprof as ap

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randn(64, 1)
took = {"forward": 0.0, "backward": 0.0}
with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU]) as tp:
    with ap.Profiler(torch_ops=True, torch_modules=True) as prof:
        for _ in range(30):
            t0 = time.perf_counter()
            with ap.stage("forward"):
                loss = (model(x) - y).pow(2).mean()
            t1 = time.perf_counter()
            with ap.stage("backward"):
                opt.zero_grad()
                loss.backward()
                opt.step()
            took["forward"] += t1 - t0
            took["backward"] += time.perf_counter() - t1
rep = prof.report()
off = max(abs(rep[k].wall.total / v - 1) for k, v in took.items())
theirs = sum(e.count for e in tp.key_averages() if e.key == "aten::linear")
ours = sum(s.count for s in rep.stages if s.name == "aten::linear")
print(f"stage totals off perf_counter by {off * 100:.1f} % at most, "
      f"aten::linear {ours} vs {theirs} calls",
      off < 0.05 and ours == theirs > 0)
"""

_POOL_SCRIPT = r"""
import multiprocessing as mp, time
import aquaprof as ap

def crunch(i):
    with ap.stage("crunch"):
        end = time.perf_counter() + 0.005
        while time.perf_counter() < end:
            pass

if __name__ == "__main__":
    with ap.Profiler() as prof:
        with mp.get_context(METHOD).Pool(2) as pool:
            pool.map(crunch, range(40), chunksize=1)
    rep = prof.report()
    counts = [r.count for r in rep.by_process("crunch")]
    children = rep.meta["children"]
    line = next((l for l in str(rep).splitlines()
                 if l.strip().startswith("1. crunch  slowest")), "")
    # the ratio of a call: said after the counts where they differ, the
    # total's otherwise
    said_ratio = (line.rpartition("(")[2].partition("x a call")[0]
                  if "a call)" in line else
                  line.partition(": ")[2].partition("x,")[0])
    even = not line or float(said_ratio) < 1.2
    said = line.strip().partition("slowest ")[2] or "none"
    print(f"{rep['crunch'].count} calls, by worker {counts}, "
          f"{children['reported']} of {children['started']} workers "
          f"reported; straggler: {said}",
          rep["crunch"].count == 40 and children["reported"] == 2 and even)
"""

# spawned workers import the main module again: it must be a file
_IN_FILE = r"""
import os, subprocess, sys, tempfile
path = os.path.join(tempfile.mkdtemp(), "pool.py")
with open(path, "w") as f:
    f.write(SCRIPT)
out = subprocess.run([sys.executable, path], capture_output=True, text=True)
print(out.stdout.strip() or out.stderr.strip().splitlines()[-1:])
"""
_POOL = _IN_FILE.replace("SCRIPT", repr(_POOL_SCRIPT))

_LEAK = r"""
import aquaprof as ap

kept = []
with ap.Profiler() as prof:
    for i in range(2000):
        with ap.stage("cache_put"):
            kept.append(bytearray(1 << 20))
        with ap.stage("decode"):
            sum(range(20000))
rep = prof.report()
warned = "! mem delta comes from RSS sampled" in str(rep)
flat = rep["decode"].mem_delta
print(f"leak {rep['cache_put'].mem_delta / 2**20:+.0f} MiB, flat "
      f"{flat / 2**20:+.0f} MiB, {'a note' if warned else 'no note'}",
      flat < 64 << 20 or warned)
"""

_SUITE = '''import os, time
import aquaprof as ap
SLOW = float(os.environ.get("SLOW", "1"))
def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
def test_parse():
    for i in range(30):
        with ap.stage("parse"):
            spin(0.010 if i == 0 else 0.002 * SLOW)
def test_encode():
    for i in range(30):
        with ap.stage("encode"):
            spin(0.002)
def test_index():
    for i in range(30):
        with ap.stage("index"):
            spin(0.002)
def test_plain():
    spin(0.02)
'''

_XDIST_GATE = r"""
import os, subprocess, sys, tempfile
folder = tempfile.mkdtemp()
with open(os.path.join(folder, "test_suite.py"), "w") as f:
    f.write(SUITE)
cmd = [sys.executable, "-m", "pytest", "-q", "-p", "aquaprof.pytest_plugin",
       "-p", "xdist", "-n", "2", "-p", "no:cacheprovider", "test_suite.py"]
subprocess.run(cmd + ["--aquaprof=base"], cwd=folder, capture_output=True)
out = subprocess.run(cmd + ["--aquaprof=new", "--aquaprof-compare=base",
                            "--aquaprof-fail=10%"], cwd=folder, text=True,
                     capture_output=True, env=dict(os.environ, SLOW="1.5"))
flagged = sorted(l.split("::")[1].split(":")[0] for l in
                 out.stdout.splitlines()
                 if l.startswith("test_suite.py::") and "REGRESSION" in l)
print(f"flagged: {','.join(flagged) or 'none'}, exit {out.returncode}",
      flagged == ["test_parse"] and out.returncode != 0)
""".replace("SUITE", repr(_SUITE))

_GIL_STARVED = r"""
import threading, time
import aquaprof as ap

def hog():
    with ap.stage("hog"):
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            sum(range(2000))

def victim():
    with ap.stage("victim"):
        for _ in range(200):
            sum(range(200))
            time.sleep(0)        # gives the GIL up, waits to get it back

with ap.Profiler(sample=0.001) as prof:
    threads = [threading.Thread(target=hog), threading.Thread(target=victim)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
kinds = {f.path: f.kind for f in prof.report().diagnose(top=3)}
print(f"victim {kinds.get('victim')}, hog {kinds.get('hog')}",
      kinds.get("victim") == "gil-bound" and kinds.get("hog") == "cpu-bound")
"""

_TORCH_THREADS = r"""
import os
import torch
import aquaprof as ap

# torch's native threads, four times the CPUs the process may run on
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
cpus = len(os.sched_getaffinity(0))
torch.set_num_threads(4 * cpus)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 512))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 512), torch.randn(256, 512)
with ap.Profiler(sample=SAMPLE) as prof:
    for _ in range(40):
        with ap.stage("forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with ap.stage("backward"):
            opt.zero_grad()
            loss.backward()
        with ap.stage("optimizer"):
            opt.step()
found = prof.report().diagnose(top=3).findings
io = [f.path for f in found if "prefetch" in f.fix]
# told to run fewer threads, and that its own process's threads (native,
# never sampled) used the CPUs
told = [f.path for f in found if "torch.set_num_threads" in f.fix and
        ("its process kept" in f.evidence or
         "with all its threads" in f.evidence)]
# every stage that mostly waited is told to run fewer threads (a hedged
# one after sampling first), and some that their own threads took the CPUs
waited = [f.path for f in found if f.host not in ("cpu-bound", "mixed")]
fewer = [f.path for f in found if "torch.set_num_threads" in f.fix]
print(f"{[(f.path, f.kind) for f in found]}; sent after I/O: {io}; told "
      f"its threads took the CPUs, to run fewer: {told}",
      not io and bool(told) and set(waited) <= set(fewer))
"""

_CHILD_RUN = r"""
import subprocess, sys, time
import aquaprof as ap

BUSY = ("import time\nend = time.process_time() + 0.15\n"
        "while time.process_time() < end: pass")
with ap.Profiler(sample=SAMPLE) as prof:
    time.sleep(0.1)
    for _ in range(5):
        with ap.stage("convert"):
            subprocess.run([sys.executable, "-c", BUSY], check=True)
        with ap.stage("tidy"):
            sum(range(100000))
f = {f.path: f for f in prof.report().diagnose(top=3)}["convert"]
io = f.fix.startswith("overlap the wait")
print(f"convert {f.kind}, {'I/O' if io else 'no I/O'} fix: {f.fix[:40]}...",
      not io)
"""

_POOL_MAP_SCRIPT = r"""
import multiprocessing as mp, time
import aquaprof as ap

def work(i):
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    return i

if __name__ == "__main__":
    with ap.Profiler(sample=SAMPLE) as prof:
        with mp.get_context("fork").Pool(2) as pool:
            pool.map(int, range(2))
            for _ in range(5):
                with ap.stage("map"):
                    pool.map(work, range(8), chunksize=1)
                with ap.stage("tidy"):
                    sum(range(100000))
    f = {f.path: f for f in prof.report().diagnose(top=3)}["map"]
    # sampled, the wait is seen; unsampled, the fix may hedge, the child
    # processes first
    wrong = [w for w in ("prefetch", "more threads") if w in f.fix and
             not f.fix.startswith("it may wait for its child processes")]
    print(f"map {f.kind}, fix says: {wrong or 'neither I/O nor threads first'}",
          not wrong)
"""

_LATE_THREAD = r"""
import hashlib, threading, time
import aquaprof as ap

stop = threading.Event()

def hasher():
    data = bytes(8 << 20)
    while not stop.is_set():
        hashlib.sha256(data).digest()      # releases the GIL

with ap.Profiler() as prof:
    end = time.process_time() + 1.0        # a slow setup (an import)
    while time.process_time() < end:
        pass
    worker = threading.Thread(target=hasher)
    worker.start()
    for _ in range(50):
        with ap.stage("nap"):
            time.sleep(0.02)
    stop.set()
    worker.join()
f = prof.report().diagnose(top=1).findings[0]
print(f"nap {f.kind}", f.kind == "waiting")
"""

_RANKS_SCRIPT = r"""
import os, socket, tempfile, time
import torch, torch.distributed as dist, torch.multiprocessing as tmp
import aquaprof as ap

def rank_main(rank, port, out):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=2)
    grad = torch.ones(1 << 16)
    with ap.Profiler(sample=SAMPLE) as prof:
        dist.barrier()
        for _ in range(20):
            with ap.stage("step"):
                with ap.stage("compute"):
                    sum(range(20000))
                    if rank == 1:
                        time.sleep(0.03)
                with ap.stage("all_reduce"):
                    dist.all_reduce(grad)
    merged = ap.distributed.gather(prof.report())
    if merged is not None:
        merged.save(os.path.join(out, "merged.json"))
    dist.destroy_process_group()

if __name__ == "__main__":
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tempfile.mkdtemp()
    tmp.spawn(rank_main, args=(port, out), nprocs=2)
    rep = ap.Report.load(os.path.join(out, "merged.json"))
    f = {f.path: f for f in rep.diagnose(top=3)}["step/all_reduce"]
    io = f.fix.startswith("overlap the wait")
    cause = "for rank 1 (" in f.evidence and \
        "slowest in step/compute by" in f.evidence
    print(f"all_reduce {f.kind}, {'I/O' if io else 'no I/O'} fix, "
          f"{'names' if cause else 'does not name'} rank 1's compute",
          f.kind == "straggler-bound" and cause)
"""

_SEMAPHORE = r"""
import threading, time
import aquaprof as ap

gate = threading.Semaphore(2)

def client():
    for _ in range(10):
        with ap.stage("request"):
            with gate:
                time.sleep(0.01)

with ap.Profiler(sample=0.001) as prof:
    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
f = prof.report().diagnose(top=1).findings[0]
lock = "a lock" in f.fix
print(f"request {f.kind}, {'lock' if lock else 'other'} fix", lock)
"""

_FUTURES = r"""
import concurrent.futures, time
import aquaprof as ap

def crunch(n):
    return sum(i * i for i in range(n))

with ap.Profiler(sample=SAMPLE) as prof:
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        pool.submit(int).result()
        time.sleep(0.1)
        for _ in range(5):
            with ap.stage("gather"):
                futures = [pool.submit(crunch, 100_000) for _ in range(8)]
                [f.result() for f in futures]
            time.sleep(0.02)
f = prof.report().diagnose(top=1).findings[0]
more = "more threads" in f.fix
print(f"gather {f.kind}, {'told more threads' if more else 'no more threads'}",
      not more)
"""

# the planted program is the tests' own; the tree under test's aquaprof
# (PYTHONPATH) runs it
_FUTURES_PLANTED = r"""
import json, subprocess, sys
out = subprocess.run([sys.executable, SCRIPT, CASE], capture_output=True,
                     text=True)
if out.returncode:
    raise SystemExit(out.stderr)
f = json.loads(out.stdout)
told = f["fix"].startswith("it waits for other processes")
print(f"gather {f['kind']}, {'told' if told else 'not told'} processes: "
      f"{f['fix'][:40]}...", told == WANTED)
""".replace("SCRIPT", repr(str(ROOT / "tests" / "support" /
                              "planted_futures.py")))


def _futures(case: str, processes: bool) -> str:
    return _FUTURES_PLANTED.replace("CASE", repr(case)).replace(
        "WANTED", repr(processes))


_POOL_MAP = _IN_FILE.replace("SCRIPT", repr(_POOL_MAP_SCRIPT))
_RANKS = _IN_FILE.replace("SCRIPT", repr(_RANKS_SCRIPT))

CASES: Dict[str, Tuple[str, str]] = {
    "parked": (_PARKED, "awaiting, no CPU"),
    "wrapped loader": (_WRAPPED_LOADER, "not data-loading-bound"),
    "stall": (_STALL, "not slower"),
    "starved unsampled": (_STARVED, "not waiting"),
    "shared core unsampled": (_SHARED_CORE, "not waiting"),
    "late sampler": (_LATE, "waiting, sampled <= wall"),
    "periodic": (_PERIODIC, "no anomaly"),
    "names": (_NAMES, "memory flat"),
    "monitor": (_MONITOR, "the spike and the hang alerted once each"),
    "task lanes": (_TASK_LANES, "no task's code in another's lane"),
    "pool run": (_POOL_RUN, "aquaprof run names the pool's work"),
    "loop held": (_LOOP_HELD, "render cpu-bound, named as what the requests "
                              "waited for"),
    "demo busy": (_DEMO_BUSY, "build_cost_volume not sent after I/O"),
    "queue wait": (_QUEUE_WAIT, "consume told it waits on another thread"),
    "torch.profiler": (_TORCH_PROFILER, "both work, stage totals within 5 % "
                                        "of perf_counter"),
    "pool spawn": (_POOL.replace("METHOD", '"spawn"'),
                   "40 calls once, 2 workers, neither slower a call"),
    "pool fork": (_POOL.replace("METHOD", '"fork"'),
                  "40 calls once, 2 workers, neither slower a call"),
    "leak": (_LEAK, "the kept memory not given to the flat stage unsaid"),
    "xdist gate": (_XDIST_GATE, "the slower test flagged, no other"),
    "gil starved": (_GIL_STARVED, "victim gil-bound, hog cpu-bound"),
    "torch threads": (_TORCH_THREADS.replace("SAMPLE", "None"),
                      "none sent after I/O, the waiting told to run "
                      "fewer threads"),
    "torch threads sampled": (_TORCH_THREADS.replace("SAMPLE", "0.001"),
                              "none sent after I/O, the waiting told to "
                              "run fewer threads"),
    "child run": (_CHILD_RUN.replace("SAMPLE", "None"), "not sent after I/O"),
    "child run sampled": (_CHILD_RUN.replace("SAMPLE", "0.001"),
                          "not sent after I/O"),
    "pool map": (_POOL_MAP.replace("SAMPLE", "None"),
                 "sent neither after I/O nor after more threads"),
    "pool map sampled": (_POOL_MAP.replace("SAMPLE", "0.001"),
                         "sent neither after I/O nor after more threads"),
    "late thread": (_LATE_THREAD, "waiting, not threads-bound"),
    "ranks": (_RANKS.replace("SAMPLE", "None"),
              "the all-reduce straggler-bound, naming rank 1's compute"),
    "ranks sampled": (_RANKS.replace("SAMPLE", "0.001"),
                      "the all-reduce straggler-bound, naming rank 1's "
                      "compute"),
    "semaphore sampled": (_SEMAPHORE, "told it waits on a lock"),
    "futures": (_FUTURES.replace("SAMPLE", "None"), "not told more threads"),
    "futures sampled": (_FUTURES.replace("SAMPLE", "0.001"),
                        "not told more threads"),
    "process futures result": (_futures("process result", True),
                               "told it waits for other processes"),
    "process futures as_completed": (_futures("process as_completed", True),
                                     "told it waits for other processes"),
    "thread futures sleeps": (_futures("thread sleeps", False),
                              "not told other processes"),
    "thread futures hashing": (_futures("thread hashing", False),
                               "not told other processes"),
    "thread futures beside processes": (
        _futures("thread beside a process pool", False),
        "not told other processes"),
    "multiprocessing threads": (_futures("multiprocessing thread pool",
                                         False), "not told other processes"),
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
