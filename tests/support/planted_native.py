"""Stages whose work runs on other threads of their process, each case in
a process of its own pinned to at most two CPUs: torch's native threads,
four times as many as the CPUs (the pool a container's process gets when
torch counts the machine's cores), with the run sampled and not, in one
stage and in each stage of an MLP's training loop; a
thread pool hashing without the GIL that a stage hands its work to, and
a stage asleep beside a thread busy all the run, unsampled; the pool
again in a run whose child process (a DataLoader's worker, a Pool's)
reports into it, one report of several processes; and one thread's
event loop, pinned to one CPU, where a task computes while a stage's
calls are suspended at an await: all of them, or a few beside calls
that block. Prints, as
JSON, each diagnosed stage's class, evidence and fix, its thread and
process CPU time and the process's CPU time measured around its calls.

    python planted_native.py oversubscribed|"oversubscribed sampled"|loop
    python planted_native.py pool|"python pool"|background
    python planted_native.py "pool beside a child"
    python planted_native.py "awaiting beside a task"|"some calls awaiting"
    python planted_native.py fetchers|"poll beside torch"
    python planted_native.py quota CGROUP_PROCS_FILE

quota: the oversubscribed case in a cgroup whose CPU quota (1 CPU) is
tighter than the two CPUs of its affinity, as a container's CPU limit;
the process moves itself into the cgroup whose cgroup.procs is given.
"""
import asyncio
import json
import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import aquaprof as ap
from planted_waits import BUSY_OUTSIDE, background, hash_cpu, spin_cpu

AROUND = {}


def timed(name):
    """A stage that also adds the process's CPU time around its calls to
    AROUND, the independent clock its process_cpu is checked against."""
    class Timed:
        def __enter__(self):
            self.stage = ap.stage(name)
            self.cpu0 = time.process_time()
            self.stage.__enter__()

        def __exit__(self, *exc):
            self.stage.__exit__(*exc)
            AROUND[name] = AROUND.get(name, 0.0) + \
                time.process_time() - self.cpu0
    return Timed()


def oversubscribed():
    import torch
    torch.set_num_threads(4 * len(os.sched_getaffinity(0)))
    a = torch.randn(500, 500)
    for _ in range(30):
        with timed("matmul"):
            for _ in range(4):
                a @ a


def loop():
    """forward, backward and the optimizer's step, each running torch's
    threads: as busy outside each stage as inside it."""
    import torch
    torch.set_num_threads(4 * len(os.sched_getaffinity(0)))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 512))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 512), torch.randn(256, 512)
    for _ in range(40):
        with timed("forward"):
            loss = torch.nn.functional.mse_loss(model(x), y)
        with timed("backward"):
            opt.zero_grad()
            loss.backward()
        with timed("optimizer"):
            opt.step()


def pool():
    with ThreadPoolExecutor(2) as workers:
        workers.submit(int).result()    # its threads started
        time.sleep(0.15)
        with timed("handed over"):
            list(workers.map(hash_cpu, [0.2, 0.2]))
        time.sleep(0.15)


def crunch(n):
    return sum(i * i for i in range(n))


def python_pool():
    """Four threads computing in Python, on one GIL: whatever the CPUs,
    they run one at a time."""
    with ThreadPoolExecutor(4) as workers:
        workers.submit(int).result()
        time.sleep(0.1)
        for _ in range(4):
            with timed("gather"):
                list(workers.map(crunch, [100_000] * 8))
            time.sleep(0.02)


def child_loads():
    with ap.stage("load"):
        time.sleep(0.05)


def pool_beside_a_child():
    """The pool's stage runs in the parent only; its child's stage ran
    apart, in its own process, before."""
    child = multiprocessing.get_context("spawn").Process(target=child_loads)
    child.start()
    child.join()
    pool()


def on_one_cpu(coroutine):
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
    asyncio.run(coroutine)


async def awaiting_beside_a_task():
    """Ten tasks each hold a stage open across an await while another
    task computes on the loop: the process's one CPU busy, no thread but
    the loop's."""
    async def fetch():
        with timed("fetch"):
            await asyncio.sleep(0.05)

    async def crunch():
        for _ in range(20):
            spin_cpu(0.01)
            await asyncio.sleep(0)
    await asyncio.gather(crunch(), *[fetch() for _ in range(10)])


async def some_calls_awaiting():
    """A quarter of the stage's calls suspended while another task holds
    the loop computing, the rest blocking in time.sleep: their thread
    CPU is known, the suspended ones' is not. The run has time outside
    them, quiet."""
    async def crunch():
        spin_cpu(0.1)
    time.sleep(0.15)
    for _ in range(3):
        with timed("fetch"):
            await asyncio.ensure_future(crunch())
        for _ in range(3):
            with timed("fetch"):
                time.sleep(0.02)
    time.sleep(0.15)


def fetchers():
    """Eight threads each in `fetch` at once, a fifth of it computing and
    the rest a wait (a network read's place): every call's process CPU
    holds the other seven's, which are the stage's own work."""
    def fetch(_):
        with timed("fetch"):
            spin_cpu(0.004)
            time.sleep(0.016)
    with ThreadPoolExecutor(8) as workers:
        list(workers.map(fetch, range(80)))
    time.sleep(0.1)


def poll_beside_torch():
    """A Python thread runs torch matmuls (its native threads beside it)
    all the run while the main thread's `poll` sleeps, sampled: as busy
    outside the stage as inside it."""
    import torch
    torch.set_num_threads(2)
    done = threading.Event()

    def busy():
        a = torch.randn(300, 300)
        while not done.is_set():
            a @ a
    worker = threading.Thread(target=busy)
    worker.start()
    try:
        for _ in range(5):
            time.sleep(0.05)
            with timed("poll"):
                time.sleep(0.1)
        time.sleep(0.05)
    finally:
        done.set()
        worker.join()


def main(case, procs=None):
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
    if procs:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    with ap.Profiler(sample=0.001 if case.endswith("sampled") or
                     case == "poll beside torch" else None,
                     compensate=False) as prof:
        {"oversubscribed": oversubscribed,
         "oversubscribed sampled": oversubscribed, "loop": loop,
         "pool": pool, "python pool": python_pool,
         # the run's own start and stop (tens of ms under a sanitizer)
         # a small share of the time outside the stage
         "background": lambda: background(timed, around=0.6),
         "quota": oversubscribed, "fetchers": fetchers,
         "poll beside torch": poll_beside_torch,
         "pool beside a child": pool_beside_a_child,
         "awaiting beside a task":
             lambda: on_one_cpu(awaiting_beside_a_task()),
         "some calls awaiting": lambda: on_one_cpu(some_calls_awaiting()),
         }[case]()
    rep = prof.report()
    found = {}
    for f in rep.diagnose(top=3):
        s = rep[f.path]
        found[f.path] = {"kind": f.kind, "evidence": f.evidence,
                         "fix": f.fix, "host": f.host, "wall": s.wall.total,
                         "count": s.count, "cpu": s.cpu,
                         "process_cpu": s.process_cpu,
                         "around": AROUND.get(f.path),
                         "cpus": rep.meta["host"].get("cpus"),
                         "cpu_quota": rep.meta["host"].get("cpu_quota"),
                         "throttled": rep.meta["host"].get(
                             "throttled_periods"),
                         "processes": len(rep.processes),
                         "suspended": s.suspended,
                         "threads": len(rep.threads),
                         "other_cpus": rep.meta["host"].get("other_cpus"),
                         # the busy thread's CPUs while the stage was not
                         # open, over the time diagnose() divides by: the
                         # run's, the profiler's own start and stop in it
                         "busy_outside": BUSY_OUTSIDE[0] /
                         (rep.wall - s.wall.total) if BUSY_OUTSIDE
                         else None}
    print(json.dumps(found))


if __name__ == "__main__":
    main(*sys.argv[1:])
