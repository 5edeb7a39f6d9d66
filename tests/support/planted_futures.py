"""Planted waits on concurrent.futures, each in a process of its own: a
stage `gather` hands 4 tasks a call to a pool of 2 and waits for their
futures, 5 calls, after the pool has started its workers. Prints, as
JSON, the stage's finding: its class, its fix and its evidence.

- process result: a ProcessPoolExecutor's tasks computing 50 ms of CPU,
  each future's result() waited for in turn;
- process as_completed: the same, waited for with as_completed();
- process wait: the same, waited for with wait();
- thread sleeps: a ThreadPoolExecutor's tasks sleeping 50 ms, waited for
  with as_completed();
- thread hashing: a ThreadPoolExecutor's tasks hashing 16 MiB (hashlib
  lets the GIL go), waited for with as_completed();
- thread beside a process pool: the thread sleeps' stage, in a process
  that also holds a ProcessPoolExecutor, started and idle;
- multiprocessing thread pool: the thread sleeps, on multiprocessing's
  ThreadPool(2), waited for with map(): its waits are in
  multiprocessing/pool.py, as a process Pool's are.

A stage of `gather` that waits on a process pool's futures blocks in
concurrent/futures/_base.py and threading.py, as one waiting on a thread
pool's does: the pools' own threads in the process tell them apart.

    python planted_futures.py CASE [SAMPLE]

SAMPLE: the sampling interval in seconds (default 0.001), or None.
"""
import concurrent.futures as cf
import hashlib
import json
import multiprocessing as mp
import sys
import time
from multiprocessing.pool import ThreadPool

import aquaprof as ap
from planted_waits import spin_cpu

TASKS = 4
CALLS = 5
DATA = bytes(16 << 20)


def nap(seconds):
    time.sleep(seconds)


def digest(_i):
    return hashlib.sha256(DATA).digest()


def by_result(futures):
    for f in futures:
        f.result()


def by_as_completed(futures):
    for f in cf.as_completed(futures):
        f.result()


def by_wait(futures):
    cf.wait(futures)


def gather(pool, task, arg, wait):
    for _ in range(CALLS):
        with ap.stage("gather"):
            wait([pool.submit(task, arg) for _ in range(TASKS)])
        spin_cpu(0.01)


def processes(wait):
    # spawn: a fork of a process whose sampler thread runs is unsafe
    with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) \
            as pool:
        by_result([pool.submit(int) for _ in range(4)])
        gather(pool, spin_cpu, 0.05, wait)


def threads(task, arg):
    with cf.ThreadPoolExecutor(2) as pool:
        by_result([pool.submit(int) for _ in range(2)])
        gather(pool, task, arg, by_as_completed)


def threads_beside_processes():
    with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) \
            as processes_:
        by_result([processes_.submit(int) for _ in range(4)])
        threads(nap, 0.05)


def multiprocessing_threads():
    with ThreadPool(2) as pool:
        pool.map(int, range(2))
        for _ in range(CALLS):
            with ap.stage("gather"):
                pool.map(nap, [0.05] * TASKS, chunksize=1)
            spin_cpu(0.01)


CASES = {
    "process result": lambda: processes(by_result),
    "process as_completed": lambda: processes(by_as_completed),
    "process wait": lambda: processes(by_wait),
    "thread sleeps": lambda: threads(nap, 0.05),
    "thread hashing": lambda: threads(digest, 0),
    "thread beside a process pool": threads_beside_processes,
    "multiprocessing thread pool": multiprocessing_threads,
}


def main(case, sample):
    with ap.Profiler(sample=sample) as prof:
        CASES[case]()
    found = {f.path: f for f in prof.report().diagnose(top=3)}["gather"]
    print(json.dumps({"kind": found.kind, "fix": found.fix,
                      "evidence": found.evidence}))


if __name__ == "__main__":
    main(sys.argv[1], None if sys.argv[2:3] == ["None"] else
         float(sys.argv[2]) if len(sys.argv) > 2 else 0.001)
