"""A stage waiting on concurrent.futures (or multiprocessing's
ThreadPool, whose waits are a process Pool's): its own stacks block in
concurrent/futures/_base.py and threading.py whichever pool completes the
futures, so a process pool's read as a thread pool's and got the
threads' fix. The pools' threads in its process tell them apart (aquaprof.
analysis.pool_threads): a process pool's manager thread, a thread
pool's workers at work. Planted in real programs, each run in a fresh
process as users run them (tests/support/planted_futures.py), and on
samples written by hand whose rounds are known."""
import concurrent.futures._base
import concurrent.futures.process
import concurrent.futures.thread
import multiprocessing.connection
import multiprocessing.pool
import threading

import pytest

from planted_runs import planted_json
from sampled_reports import MS, main_tid, profile_stages, span_of, \
    with_samples

PROCESSES = "it waits for other processes"
THREADS = "it waits on a lock or for other threads"

_BASE = concurrent.futures._base.__file__
_THREADING = threading.__file__
_PROCESS = concurrent.futures.process.__file__
_THREAD = concurrent.futures.thread.__file__

FRAMES = [
    ("<module>", "/app/main.py", 1),                              # 0
    ("Future.result", _BASE, 400),                                # 1
    ("Condition.wait", _THREADING, 280),                          # 2
    ("Thread._bootstrap", _THREADING, 990),                       # 3
    ("Thread._bootstrap_inner", _THREADING, 1010),                # 4
    ("_ExecutorManagerThread.run", _PROCESS, 330),                # 5
    ("wait", multiprocessing.connection.__file__, 1100),          # 6
    ("_worker", _THREAD, 70),                                     # 7
    ("_WorkItem.run", _THREAD, 50),                               # 8
    ("crunch", "/app/main.py", 20),                               # 9
    ("as_completed", _BASE, 200),                                 # 10
    ("Pool.map", multiprocessing.pool.__file__, 360),             # 11
    ("ApplyResult.wait", multiprocessing.pool.__file__, 760),     # 12
    ("worker", multiprocessing.pool.__file__, 100),               # 13
    ("Thread.run", _THREADING, 970),                              # 14
]
MANAGER, WORKER = 4001, 4002
WAITING = [0, 10, 2]                 # as_completed(), in threading
MANAGING = [3, 4, 5, 6]
AT_WORK = [3, 4, 7, 8, 9]
IDLE = [3, 4, 7]


def planted_samples(others, rounds=8, waiting=WAITING, manager_at=None,
                    timeline=True):
    """A real run whose stage decode, sampled `rounds` times, waits on
    futures asleep on a lock; `others`: (tid, frames) of the process's
    other threads, sampled in the same rounds (manager_at: the rounds
    the manager thread was sampled in, all by default)."""
    rep = profile_stages()
    start, _end = span_of(rep, "decode")
    stacks = [(0, main_tid(rep), "decode", waiting, rounds, rounds * MS, 0,
               0, 0, rounds * MS)]
    stacks += [(0, tid, None, chain, rounds, rounds * MS, 0, 0, 0,
                rounds * MS) for tid, chain in others]
    at = [start + (i + 1) * MS // 4 for i in range(rounds)]
    line = [(t, 0) for t in at]
    for k, (tid, chain) in enumerate(others, 1):
        line += [(t, k) for i, t in enumerate(at)
                 if tid != MANAGER or manager_at is None or i in manager_at]
    return with_samples(rep, stacks, FRAMES,
                        sorted(line) if timeline else None, delay_ns=0,
                        gil_ns=0, lock_ns=0)


def fix_of(report):
    return {f.path: f for f in report.diagnose(top=3)}["decode"].fix


def test_futures_waited_for_beside_a_process_pools_manager_wait_on_processes():
    assert fix_of(planted_samples([(MANAGER, MANAGING)])).startswith(
        PROCESSES)


def test_futures_waited_for_beside_idle_thread_pool_workers_too():
    """A thread pool whose workers wait for tasks completes none of the
    futures the stage waits on."""
    rep = planted_samples([(MANAGER, MANAGING), (WORKER, IDLE)])
    assert fix_of(rep).startswith(PROCESSES)


def test_result_waited_for_beside_a_process_pools_manager_too():
    rep = planted_samples([(MANAGER, MANAGING)], waiting=[0, 1, 2])
    assert fix_of(rep).startswith(PROCESSES)


def test_futures_waited_for_beside_a_thread_pool_at_work_keep_their_fix():
    assert fix_of(planted_samples([(WORKER, AT_WORK)])).startswith(THREADS)


def test_futures_waited_for_while_both_pools_run_cannot_tell_processes():
    """A thread pool's worker at work in the same rounds: the futures may
    be its own, beside a process pool that idles."""
    rep = planted_samples([(MANAGER, MANAGING), (WORKER, AT_WORK)])
    assert fix_of(rep).startswith(THREADS)


def test_a_manager_seen_in_a_few_of_the_rounds_alone_is_not_enough():
    """Most of the waits were in rounds without the manager: a process
    pool started late, or shut down early, is not what the stage waited
    on then."""
    rep = planted_samples([(MANAGER, MANAGING)], manager_at={0, 1, 2})
    assert fix_of(rep).startswith(THREADS)


def test_a_thread_pool_task_waiting_on_a_process_pool_is_not_at_work():
    """A task of a thread pool that itself waits on futures completes
    none: beside a process pool's manager, the wait is on processes."""
    rep = planted_samples([(MANAGER, MANAGING),
                           (WORKER, [3, 4, 7, 8, 9, 1, 2])])
    assert fix_of(rep).startswith(PROCESSES)


def test_without_the_timeline_rounds_cannot_be_told_and_threads_stay():
    rep = planted_samples([(MANAGER, MANAGING)], timeline=False)
    assert fix_of(rep).startswith(THREADS)


def test_a_multiprocessing_pools_wait_is_for_processes_without_its_threads():
    rep = planted_samples([], waiting=[0, 11, 12, 2])
    assert fix_of(rep).startswith(PROCESSES)


def test_a_thread_pool_of_multiprocessing_is_not_read_as_processes():
    """A ThreadPool waits in multiprocessing/pool.py as a process Pool's
    parent does; its workers are threads of the process."""
    rep = planted_samples([(WORKER, [3, 4, 14, 13, 9])],
                          waiting=[0, 11, 12, 2])
    assert fix_of(rep).startswith(THREADS)


def planted(case, sample="0.001"):
    return planted_json("planted_futures.py", case, sample)


@pytest.mark.parametrize("case", ["process result", "process as_completed",
                                  "process wait"])
def test_a_stage_waiting_on_a_process_pools_futures_waits_on_processes(case):
    found = planted(case)
    assert found["kind"] == "waiting", found
    assert found["fix"].startswith(PROCESSES), found
    assert "more threads" not in found["fix"]


@pytest.mark.parametrize("case", ["thread sleeps", "thread hashing",
                                  "thread beside a process pool",
                                  "multiprocessing thread pool"])
def test_a_stage_waiting_on_a_thread_pools_futures_is_not_told_processes(
        case):
    found = planted(case)
    assert not found["fix"].startswith(PROCESSES), found
