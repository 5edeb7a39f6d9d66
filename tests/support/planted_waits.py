"""Planted waits, each in a process of its own: a stage starved of CPU
by busy processes pinned to its core (sampled, and not; and with the
sampler's own threads pinned there too, alone and taking turns with a
sleeping stage), a sleep after
work outside any stage that held the GIL from the sampler, stages blocked on a sleep and a
pipe, eight threads fighting for the GIL, and the main thread fighting
three for it, a stage waiting for the thread pool it handed its work to,
and one asleep beside a thread busy all the run; two event loops, each
on a thread of its own, whose stage blocks its loop 3 ms of every 8 at
the same time. Prints, as JSON, each diagnosed stage's class and the
shares of its sampled time.

    python planted_waits.py starved|blocked|gil|gil_main|pool|background|loops
    python planted_waits.py "starved unsampled"|"pinned unsampled"
    python planted_waits.py "late sampler"
    python planted_waits.py "starved sampler"|"alternating sampler"
    python planted_waits.py "starved parent"
"""
import asyncio
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time

import aquaprof as ap
from aquaprof.analysis.samples import stage_waits
from proc_ticks import cpu_ticks_of

HOG = "while True: pass"


def spin_cpu(seconds):
    """Computes until this thread has used `seconds` of CPU."""
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(2000):
            x += i * i


def starved(hogs_on_its_core=3):
    # the sampler's threads start unpinned; only this thread and the hogs
    # share one CPU
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    hogs = [subprocess.Popen([sys.executable, "-c", HOG])
            for _ in range(hogs_on_its_core)]
    try:
        for hog in hogs:
            os.sched_setaffinity(hog.pid, {cpu})
        time.sleep(0.2)         # the hogs running
        with ap.stage("compute"):
            spin_cpu(0.3)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


#: the run delay each stage's calls waited, as Linux counted it (its
#: own /proc figure read at the edges of the calls), in seconds
TRUE_DELAY = {}


def run_delay_s():
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat"
              ) as f:
        return int(f.read().split()[1]) / 1e9


#: the share of their time the CPUs other than the pinned one stayed
#: idle over the pinned run, as /proc/stat counted it
OTHER_CPUS_IDLE = []


@contextlib.contextmanager
def other_cpus_idle_told(cpus):
    """Appends to OTHER_CPUS_IDLE the idle share of `cpus` in the block."""
    before = cpu_ticks_of(cpus)
    yield
    after = cpu_ticks_of(cpus)
    OTHER_CPUS_IDLE.append((after.idle - before.idle) /
                           max(after.total - before.total, 1))


def pinned_beside_a_hog():
    """This thread and one busy process share one CPU, the process's
    other CPUs left idle: the machine's figures leave CPUs free, and only
    the thread's run delay says it waited. The thread is unpinned before
    the run stops, so that the run's figures count all the CPUs; a
    sleeping stage beside the computing one. Whether the other CPUs were
    left idle is the machine's doing: OTHER_CPUS_IDLE says."""
    cpus = os.sched_getaffinity(0)
    cpu = min(cpus)
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        os.sched_setaffinity(hog.pid, {cpu})
        os.sched_setaffinity(0, {cpu})
        time.sleep(0.2)         # the hog running
        with other_cpus_idle_told(cpus - {cpu}):
            with ap.stage("compute"):
                spin_cpu(0.2)
            with ap.stage("sleep"):
                time.sleep(0.2)
    finally:
        os.sched_setaffinity(0, cpus)
        hog.kill()
        hog.wait()


@contextlib.contextmanager
def hogs_beside_the_sampler(hogs_on_its_core=3):
    """The process pinned whole, the sampler's threads with it, to the
    one CPU its hogs run on: the sampler wakes late as often as the
    stages wait, and what it charges must still hold the waits."""
    cpu = min(os.sched_getaffinity(0))
    hogs = [subprocess.Popen([sys.executable, "-c", HOG])
            for _ in range(hogs_on_its_core)]
    try:
        for hog in hogs:
            os.sched_setaffinity(hog.pid, {cpu})
        time.sleep(0.2)
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@contextlib.contextmanager
def delay_told(path):
    """Adds the run delay Linux counted for this thread in the block to
    TRUE_DELAY[path]."""
    before = run_delay_s()
    yield
    TRUE_DELAY[path] = TRUE_DELAY.get(path, 0) + run_delay_s() - before


def starved_beside_the_sampler():
    with hogs_beside_the_sampler():
        for _ in range(3):
            with ap.stage("compute"), delay_told("compute"):
                spin_cpu(0.1)


def starved_parent():
    """`cell` computes beside hogs on its one CPU, then waits sixteen times
    as long in its sleeping sub-stage `fetch`: its own time is starved,
    under a quarter of its whole time."""
    with hogs_beside_the_sampler():
        with ap.stage("cell"):
            with delay_told("cell"):
                spin_cpu(0.05)
            with ap.stage("fetch"):
                time.sleep(0.8)


def alternating_beside_the_sampler(turns=12, seconds=0.02):
    """A computing stage and a sleeping one in turn: the wait to run
    again after each sleep ends in the sleeping stage, and Linux counts
    it there, but a round reads it once the computing one began."""
    with hogs_beside_the_sampler():
        for _ in range(turns):
            with ap.stage("crunch"), delay_told("crunch"):
                spin_cpu(seconds)
            with ap.stage("rest"), delay_told("rest"):
                time.sleep(seconds)


def sleep_after_work():
    # a thread other than the main one computes outside any stage,
    # holding the GIL for its whole 30 ms (the switch interval raised),
    # then sleeps in a stage: the round that the main thread, blocked in
    # join(), leaves to the sampler's own thread waits for the GIL until
    # that sleep, and its interval holds the computing
    def worker():
        for _ in range(10):
            spin_cpu(0.03)
            with ap.stage("sleep"):
                time.sleep(0.003)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.1)
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    finally:
        sys.setswitchinterval(interval)


def blocked():
    with ap.stage("sleep"):
        time.sleep(0.4)
    read, write = os.pipe()
    writer = threading.Timer(0.4, os.write, (write, b"x"))
    writer.start()
    with ap.stage("pipe read"):
        os.read(read, 1)
    writer.join()
    os.close(read)
    os.close(write)


def gil():
    def work():
        for _ in range(3):
            with ap.stage("py_work"):
                spin_cpu(0.05)
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def gil_main():
    """The main thread's stage runs Python beside three threads running
    Python outside any stage: the main thread answers the sampler's
    rounds itself once it has the GIL back."""
    done = threading.Event()

    def hog():
        x = 0
        while not done.is_set():
            for i in range(1000):
                x += i
    hogs = [threading.Thread(target=hog) for _ in range(3)]
    for t in hogs:
        t.start()
    try:
        time.sleep(0.05)
        with ap.stage("main_py"):
            spin_cpu(0.2)
    finally:
        done.set()
        for t in hogs:
            t.join()


def hash_cpu(seconds):
    """Computes without the GIL (hashlib releases it for large data)
    until this thread has used `seconds` of CPU."""
    import hashlib
    block = bytes(1 << 20)
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        hashlib.sha256(block).digest()


def pool():
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as workers:
        workers.submit(int).result()    # its threads started
        time.sleep(0.1)
        with ap.stage("handed over"):
            list(workers.map(hash_cpu, [0.2, 0.2]))
        time.sleep(0.1)


def threads_waited():
    """A consumer waits on a queue for a producer that sleeps between
    items, 10 ms and then 1 ms (under the sampling interval: the main
    thread answers the rounds itself as each wait ends); a stage joins a
    thread that sleeps; a stage sleeps itself. The main thread computes
    first: a thread the sampler never saw run is not told where it
    sleeps."""
    spin_cpu(0.02)
    for path, pace, n in (("queue get", 0.01, 20),
                          ("queue get, short waits", 0.001, 200)):
        consume(path, pace, n)
    spin_cpu(0.005)
    with ap.stage("join"):
        sleeper = threading.Thread(target=time.sleep, args=(0.2,))
        sleeper.start()
        sleeper.join()
    spin_cpu(0.005)
    with ap.stage("sleep"):
        time.sleep(0.2)


def consume(path, pace, n):
    """A stage that gets n items from a queue, a producer thread putting
    one every `pace` seconds."""
    items: "queue.Queue[int]" = queue.Queue()

    def produce():
        for i in range(n):
            time.sleep(pace)
            items.put(i)
    producer = threading.Thread(target=produce)
    producer.start()
    with ap.stage(path):
        for _ in range(n):
            items.get()
    producer.join()


#: the CPU seconds background()'s busy thread used while `nap` was not
#: open, by its own thread clock (a busy machine can take the CPU from it)
BUSY_OUTSIDE = []


def background(stage=ap.stage, around=0.3):
    """`nap` asleep 0.3 s beside a thread busy all the run, `around`
    seconds before and after it; stage: what opens it (a stage that also
    times its calls another way)."""
    done = threading.Event()
    started = threading.Event()
    used = []

    def busy():
        started.set()
        while not done.is_set():
            spin_cpu(0.01)
        used.append(time.thread_time())
    worker = threading.Thread(target=busy)
    worker.start()
    started.wait()
    clock = time.pthread_getcpuclockid(worker.ident)
    try:
        time.sleep(around)
        before = time.clock_gettime(clock)
        with stage("nap"):
            time.sleep(0.3)
        during = time.clock_gettime(clock) - before
        time.sleep(around)
    finally:
        done.set()
        worker.join()
    BUSY_OUTSIDE.append(used[0] - during)


def loops():
    async def serve():
        with ap.stage("serve"):
            for _ in range(12):
                time.sleep(0.003)
                await asyncio.sleep(0.005)
    threads = [threading.Thread(target=asyncio.run, args=(serve(),))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def profiled(case):
    if case in ("starved sampler", "alternating sampler",
                "short turns sampler", "starved parent"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    # unsampled: the process stays on the one CPU it shares with two hogs
    # until the run's machine figures are taken at its stop
    with ap.Profiler(sample=None if case in ("starved unsampled",
                                             "pinned unsampled")
                     else 0.001 if case in ("late sampler",
                                            "short turns sampler")
                     else 0.002) as prof:
        {"starved": starved, "blocked": blocked, "gil": gil,
         "gil_main": gil_main, "pool": pool,
         "threads waited": threads_waited,
         "background": background, "loops": loops,
         "starved unsampled": lambda: starved(2),
         "pinned unsampled": pinned_beside_a_hog,
         "late sampler": sleep_after_work,
         "starved sampler": starved_beside_the_sampler,
         "starved parent": starved_parent,
         "alternating sampler": alternating_beside_the_sampler,
         # turns of a few samples each: a wait told late finds the
         # thread in the next stage for whole samples, not split ones
         "short turns sampler":
             lambda: alternating_beside_the_sampler(100, 0.004)}[case]()
    return prof.report()


def main(case):
    rep = profiled(case)
    found = {}
    for f in rep.diagnose(top=5):
        waits = stage_waits(rep, f.path)
        found[f.path] = {
            "kind": f.kind, "host": f.host, "evidence": f.evidence,
            "cpu": waits.cpu_s / waits.wall_s if waits else None,
            "delay": waits.delay_s / waits.wall_s if waits else None,
            "gil": waits.gil_s / waits.wall_s if waits else None,
            "blocked": waits.blocked_s / waits.wall_s if waits else None,
            "lock": waits.lock_s / waits.wall_s if waits else None,
            "fix": f.fix,
            "measured": [waits.delay_known, waits.gil_known] if waits
            else None,
            "sampled_s": waits.wall_s if waits else None,
            "sampled_cpu_s": waits.cpu_s if waits else None,
            "sampled_delay_s": waits.delay_s if waits else None,
            "true_delay_s": TRUE_DELAY.get(f.path),
            "wall_s": rep[f.path].wall.total,
            "other_cpus_idle": OTHER_CPUS_IDLE[0] if OTHER_CPUS_IDLE
            else None}
    print(json.dumps(found))


if __name__ == "__main__":
    main(sys.argv[1])
