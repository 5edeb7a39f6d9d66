"""A stage whose work runs on other threads of its process, native ones
that the sampler never sees among them: the process's CPU time while it
was open (StageStats.process_cpu) tells its wait for them from a wait on
I/O, sampled or not, and a process whose own threads take every CPU it
may run on from one that waits. Planted in real processes pinned to at
most two CPUs (tests/support/planted_native.py), and on files written
before the figure existed."""
import importlib.util
import os
import re
import time

import pytest

import aquaprof as ap
from aquaprof import Report
from planted_runs import planted_json

pinned = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or
    not os.path.exists("/proc/self/task"),
    reason="the planted processes pin themselves to two CPUs (Linux)")


torch_runs = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="the planted program runs torch's threads: torch is not "
           "installed for this Python")


def planted(case):
    return planted_json("planted_native.py", case)


def outside(found):
    """The CPUs the stage's evidence says the other threads used while it
    was not open."""
    return float(re.search(r", ([0-9.]+) while it was not",
                           found["evidence"]).group(1))


def assert_measured(found):
    """The stage's process CPU time agrees with time.process_time() read
    around its calls in the same run: within 10 % for calls of a few of
    the memory sampler's intervals (1 ms) or more; shorter ones get the
    process's rate over the interval around them, which its other stages
    share: within a factor of two (a training loop's optimizer step, 0.5
    ms beside 8 ms of backward pass, read 1.5 times its own)."""
    value, around = found["process_cpu"], found["around"]
    if found["wall"] < 3e-3 * found["count"]:
        assert around / 2 - 0.01 <= value <= 2 * around + 0.01, found
    else:
        assert value == pytest.approx(around, rel=0.1, abs=0.01), found


@pinned
@torch_runs
def test_torch_with_more_threads_than_cpus_is_told_to_run_fewer():
    """torch's own threads, four times the CPUs: the stage's thread is on
    the CPU a quarter of the time, the rest it waits for them at their
    barriers or for a CPU they hold. Its thread's figures alone read
    "waiting", and the fix sent the reader after I/O."""
    found = planted("oversubscribed")["matmul"]
    assert_measured(found)
    assert found["kind"] == "threads-bound", found
    assert "other threads of its process used" in found["evidence"]
    # its own threads, or they and the machine's other processes (a
    # parallel test run): the CPUs were taken
    assert "took them" in found["evidence"], found
    assert found["fix"].startswith("its process keeps the CPUs it may use "
                                   "busy"), found
    assert f"run {found['cpus']} at most" in found["fix"]
    assert "prefetch" not in found["fix"]


@pinned
@torch_runs
def test_sampled_a_stage_starved_by_its_own_threads_says_whose_they_are():
    """Sampled, the same stage's thread is seen runnable, not running: the
    CPUs went to others, and they are its own process's threads (native:
    never sampled), not the machine's other processes."""
    found = planted("oversubscribed sampled")["matmul"]
    assert_measured(found)
    assert found["kind"] in ("cpu-starved", "threads-bound"), found
    assert "took them" in found["evidence"] or \
        "with all its threads (native ones are not sampled)" in \
        found["evidence"] or \
        "the other threads of its process used" in found["evidence"], found
    # where they took the CPUs (not on a machine slowed down, as under a
    # sanitizer, where its threads kept under 75 % of them busy), the fix
    # says to run fewer
    if "took them" in found["evidence"]:
        assert "torch.set_num_threads" in found["fix"], found
    else:
        assert found["kind"] == "threads-bound" or \
            "torch.set_num_threads" in found["fix"], found
    assert "prefetch" not in found["fix"], found


@pinned
@torch_runs
def test_a_training_loop_whose_every_stage_runs_torch_threads_is_not_io():
    """Each stage's thread waits for torch's threads, which are as busy
    outside it (in the loop's other stages) as inside: unsampled, the
    stages that compute at all beside them are hedged starved for a CPU
    their process's threads took, never sent after I/O. The optimizer's
    step, calls of under a millisecond, is measured at the rate of the
    memory sampler's interval around it, which its neighbours share: on
    a machine busy with other work it may read waiting, and is left
    out."""
    found = planted("loop")
    for f in found.values():
        assert_measured(f)
    found = {p: f for p, f in found.items() if f["wall"] >= 3e-3 * f["count"]}
    assert set(found) >= {"forward", "backward"}, found
    for f in found.values():
        assert "prefetch" not in f["fix"], f
    waited = [f for f in found.values() if f["cpu"] < 0.5 * f["wall"]]
    assert waited, found
    for f in waited:
        # its thread's share on the CPU tells neither: starved for a CPU
        # (hedged), or waiting for the threads that took them
        assert f["kind"] in ("cpu-starved?", "threads-bound"), f
        assert "other threads of its process used" in f["evidence"], f
        # where they took the CPUs (not on a machine slowed down, as
        # under a sanitizer), the fix says to run fewer
        assert ("took them" in f["evidence"]) == \
            f["fix"].startswith("its process keeps the CPUs"), f


@pinned
def test_unsampled_a_stage_waiting_for_the_pool_it_handed_its_work_to():
    """Two threads hash without the GIL while the stage waits for their
    results: its thread uses no CPU, its process two CPUs, and none
    outside its call."""
    found = planted("pool")["handed over"]
    assert_measured(found)
    assert found["process_cpu"] > 0.3 and found["cpu"] < 0.02, found
    assert found["kind"] == "threads-bound", found
    assert outside(found) <= 0.2, found
    # two threads on two CPUs, or fewer where the machine kept them
    assert "one at a time" not in found["evidence"], found


def free_cpus(found):
    """The CPUs the stage's process left free of its two, beside the
    machine's other processes' average over the run."""
    return found["cpus"] - found["process_cpu"] / found["wall"] - \
        found["other_cpus"]


@pinned
def test_unsampled_a_stage_waiting_for_python_threads_is_not_told_more():
    """Four threads computing Python for the stage share one GIL: its
    process used one CPU of two free, and "give it more threads" would
    not help. Unsampled, the GIL is not seen; the process held to one CPU
    with CPUs free says they ran one at a time, and the fix names the
    GIL. On a machine whose other processes took the free CPU, nothing
    is said of it (nor under 0.75 CPUs, where they waited too)."""
    found = planted("python pool")["gather"]
    assert found["kind"] == "threads-bound", found
    used = found["process_cpu"] / found["wall"]
    assert used < 1.25, found       # one GIL: one CPU at most
    said = "its threads ran about one at a time" in found["evidence"]
    assert said == (free_cpus(found) >= 0.5 and used >= 0.75), found
    if said:
        assert "more threads" not in found["fix"], found
        assert "GIL" in found["fix"] and "sample the run" in found["fix"]
    else:       # the machine's other processes took the room
        assert "more threads" in found["fix"], found


@pinned
def test_a_run_with_a_child_process_still_tells_the_pool_it_waited_for():
    """The run's figures are its own process's where the stage ran in it
    alone: a child (a DataLoader's worker) that reported into the run
    made it a report of several processes, and the stage read waiting,
    its fix sent after I/O."""
    found = planted("pool beside a child")["handed over"]
    assert found["processes"] == 2, found
    assert_measured(found)
    assert found["kind"] == "threads-bound", found
    assert outside(found) <= 0.2, found


@pinned
def test_an_awaiting_stage_is_not_told_its_process_runs_too_many_threads():
    """Calls suspended at an await while another task computes on the
    loop: the process's CPU while they were open is that task's, on the
    same thread. Their own thread CPU is unknown, so it is no measure of
    other threads, and the fix said to run fewer compute threads than
    CPUs to a process of one thread."""
    found = planted("awaiting beside a task")["fetch"]
    assert found["threads"] == 1 and found["suspended"] == 10, found
    assert found["kind"] == "awaiting", found
    assert "other threads" not in found["evidence"], found
    assert "compute threads" not in found["fix"], found
    assert found["fix"].startswith("find what the task awaits"), found


@pinned
def test_a_stage_with_some_calls_suspended_is_not_threads_bound():
    """A few calls suspended while another task held the loop, the rest
    blocking: the process's CPU over all the calls against the thread
    CPU of those that ran through read as other threads busy, in a
    process of one thread."""
    found = planted("some calls awaiting")["fetch"]
    assert found["threads"] == 1 and found["suspended"] == 3, found
    assert found["kind"] != "threads-bound", found
    assert "other threads" not in found["evidence"], found
    assert "compute threads" not in found["fix"], found


#: the CPU share of the busy thread outside the stage, over the run's
#: time outside it, that the evidence rounds to "1.0" (the process's
#: figure holds it, and its other threads' CPU besides)
BUSY_ALL_ALONG = 0.95


@pinned
def test_unsampled_a_stage_asleep_beside_a_thread_busy_all_along_waits():
    """The other thread is as busy outside the stage as inside it: not
    the stage's work, whose sleep stays a wait. Busy all along is the
    machine's to grant (its thread's own clock says): run up to 3 times
    for it."""
    for _ in range(3):
        found = planted("background")["nap"]
        if found["busy_outside"] >= BUSY_ALL_ALONG:
            break
    else:
        pytest.fail("the machine was too busy: in 3 runs the busy thread "
                    f"never had {BUSY_ALL_ALONG:.0%} of a CPU outside the "
                    "stage")
    assert_measured(found)
    assert found["kind"] == "waiting", found
    assert "1.0 while it was not" in found["evidence"], found
    assert found["fix"].startswith("overlap the wait"), found


@pinned
def test_a_stage_open_in_eight_threads_at_once_is_not_their_wait():
    """Eight threads of a pool each in the stage at once: every call's
    process CPU holds the others' calls, its own work, not threads it
    waits for."""
    found = planted("fetchers")["fetch"]
    assert found["kind"] in ("waiting", "mixed"), found
    assert "other threads of its process" not in found["evidence"], found
    assert "took them" not in found["evidence"], found
    assert "at most" not in found["fix"], found


@pinned
@torch_runs
def test_sampled_a_poll_beside_a_thread_running_torch_all_along_waits():
    """The samples see the Python thread but not torch's native ones: the
    rate outside the stage is the process's, as inside it, or a sampled
    run would call the poll's sleep a wait for threads."""
    found = planted("poll beside torch")["poll"]
    assert_measured(found)
    assert found["kind"] == "waiting", found
    assert "while it was not" in found["evidence"], found


def without_process_figures(rep):
    """rep as a file written before the process's CPU time was kept."""
    data = dict(rep._data, stages=[
        {k: v for k, v in s.items() if k != "proc_cpu_ns"}
        for s in rep._data["stages"]])
    data["host"] = {k: v for k, v in rep.meta["host"].items()
                    if k not in ("process_cpus", "thread_id", "thread_cpu")}
    return Report(data)


def test_a_file_without_the_process_figures_is_diagnosed_as_before():
    with ap.Profiler(compensate=False) as prof:
        with ap.stage("nap"):
            time.sleep(0.05)
    rep = prof.report()
    assert rep["nap"].process_cpu is not None
    old = without_process_figures(rep)
    assert old["nap"].process_cpu is None
    finding = old.diagnose(top=1).findings[0]
    assert finding.kind == "waiting"
    assert "other threads" not in finding.evidence
    assert finding.evidence.endswith("to tell CPU starvation and the GIL "
                                     "from blocking")
