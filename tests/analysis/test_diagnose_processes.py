"""A stage whose wait is for other processes' CPU work: a child it runs
(subprocess.run) or a process pool's workers (multiprocessing.Pool.map).
Sampled, its thread is off the CPU in the standard library's waits for
them; unsampled, only the run's reaped children's CPU time says they
computed, so the fix leads with them and hedges. The fix said to overlap
I/O (the child) or to give the "threads" more threads (the pool).
Planted in real programs, each run in a fresh process as users run
them."""
import os
import subprocess
import sys

from repo_paths import ROOT

_CHILD = r"""
import subprocess, sys
import aquaprof as ap

BUSY = ("import time\nend = time.process_time() + 0.1\n"
        "while time.process_time() < end: pass")
with ap.Profiler(sample=SAMPLE) as prof:
    for _ in range(3):
        with ap.stage("convert"):
            subprocess.run([sys.executable, "-c", BUSY], check=True)
f = {f.path: f for f in prof.report().diagnose(top=3)}["convert"]
print(f.kind)
print(f.fix)
"""

_POOL = r"""
import multiprocessing as mp, time
import aquaprof as ap

def work(i):
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    return i

if __name__ == "__main__":
    with ap.Profiler(sample=SAMPLE) as prof:
        with mp.get_context("spawn").Pool(2) as pool:
            pool.map(int, range(2))
            for _ in range(3):
                with ap.stage("map"):
                    pool.map(work, range(4), chunksize=1)
    f = {f.path: f for f in prof.report().diagnose(top=3)}["map"]
    print(f.kind)
    print(f.fix)
"""

_IN_WORKERS = r"""
import multiprocessing as mp, time
import aquaprof as ap

def load(i):
    for _ in range(3):
        with ap.stage("load"):
            time.sleep(0.05)
    return i

if __name__ == "__main__":
    with ap.Profiler(sample=SAMPLE) as prof:
        with mp.get_context("fork").Pool(2) as pool:
            pool.map(load, range(4), chunksize=1)
    f = {f.path: f for f in prof.report().diagnose(top=3)}["load"]
    print(f.kind)
    print(f.fix)
"""


def run(code, tmp_path, sample="0.001"):
    path = tmp_path / "planted.py"     # spawned workers import it again
    path.write_text(code.replace("SAMPLE", sample))
    out = subprocess.run([sys.executable, str(path)], capture_output=True,
                         text=True, timeout=120, cwd=str(tmp_path),
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_a_stage_running_a_computing_child_is_told_it_waits_for_it(
        tmp_path):
    kind, fix = run(_CHILD, tmp_path)
    assert kind == "waiting"
    assert fix.startswith("it waits for other processes"), fix
    assert "prefetch" not in fix


def test_a_stage_waiting_on_a_process_pool_is_told_it_waits_for_it(
        tmp_path):
    kind, fix = run(_POOL, tmp_path)
    assert kind == "waiting"
    assert fix.startswith("it waits for other processes"), fix
    assert "more threads" not in fix


def test_a_stage_that_sleeps_in_a_pool_worker_is_not_told_it_waits_for_one(
        tmp_path):
    """A forked pool worker's stacks begin in popen_fork.py and pool.py
    (how it was started), and run the program's code past them: its
    stage's sleep is no wait for other processes."""
    kind, fix = run(_IN_WORKERS, tmp_path)
    assert kind == "waiting"
    assert not fix.startswith("it waits for other processes"), fix


def test_unsampled_a_stage_running_a_computing_child_is_told_it_may_wait(
        tmp_path):
    kind, fix = run(_CHILD, tmp_path, sample="None")
    assert kind == "waiting"
    assert fix.startswith("it may wait for its child processes"), fix
    assert "sample the run" in fix


def test_unsampled_a_stage_waiting_on_a_process_pool_is_told_it_may_wait(
        tmp_path):
    kind, fix = run(_POOL, tmp_path, sample="None")
    assert kind == "waiting"
    assert fix.startswith("it may wait for its child processes"), fix
    assert "more threads" not in fix


def test_unsampled_a_stage_in_the_pool_workers_is_not_told_of_children(
        tmp_path):
    """The run's reaped children are the parent's: a stage that ran in
    them has no children of its own to wait for."""
    kind, fix = run(_IN_WORKERS, tmp_path, sample="None")
    assert kind == "waiting"
    assert fix.startswith("overlap the wait"), fix
