"""The call-stack sampler (Profiler(sample=...)): what it files where.

Each test plants work whose share of a stage it knows and checks what
the samples say, through the report's raw "samples" data (the views and
hot() have their own tests on data built by hand)."""
from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
from collections import defaultdict
from typing import Dict, Tuple

import numpy as np
import pytest

import aquaprof
from aquaprof import _core
from aquaprof.analysis.samples import stage_waits
from threads import left_behind, thread_ids


def busy(seconds: float) -> int:
    """Pure Python work, on the CPU and holding the GIL."""
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def wait(seconds: float) -> None:
    time.sleep(seconds)    # C code, GIL released: filed under its caller


def by_leaf(rep: aquaprof.Report) -> Dict[Tuple[str, str], Tuple[int, int]]:
    """(stage path or None, innermost function) -> (wall_ns, cpu_ns)."""
    samples = rep._data["samples"]
    names = rep.stage_names
    out: Dict[Tuple[str, str], list] = defaultdict(lambda: [0, 0])
    for _process, _tid, stage, frames, _count, wall, cpu, *_ in \
            samples["stacks"]:
        leaf = samples["frames"][frames[-1]][0]
        key = (names[stage] if stage >= 0 else None, leaf)
        out[key][0] += wall
        out[key][1] += cpu
    return {k: (v[0], v[1]) for k, v in out.items()}


def share(rep: aquaprof.Report, stage: str, function: str) -> float:
    leaves = by_leaf(rep)
    total = sum(w for (s, _f), (w, _c) in leaves.items() if s == stage)
    return leaves.get((stage, function), (0, 0))[0] / total


def test_planted_shares_are_found_within_ten_points():
    with aquaprof.Profiler(sample=0.001) as prof:
        with aquaprof.stage("decode"):
            busy(0.3)
            wait(0.1)
    hot = {h.function: h for h in prof.report()["decode"].hot(5)}
    assert abs(hot["busy"].own - 0.75) < 0.10
    assert abs(hot["wait"].own - 0.25) < 0.10
    assert hot["wait"].cpu_s < 0.2 * hot["wait"].own_s   # it slept


def test_a_waiting_thread_is_sampled_with_the_frame_it_waits_in():
    with aquaprof.Profiler(sample=0.001) as prof:
        with aquaprof.stage("io"):
            wait(0.1)
        with aquaprof.stage("compute"):
            busy(0.1)
    leaves = by_leaf(prof.report())
    wall, cpu = leaves[("io", "wait")]
    assert wall > 0.05e9 and cpu < 0.2 * wall     # asleep, not on the CPU
    wall, cpu = leaves[("compute", "busy")]
    assert cpu > 0.3 * wall       # on it, as much as a busy machine lets it


def test_each_thread_files_its_samples_under_its_own_stage():
    def worker(name: str, seconds: float) -> None:
        with aquaprof.stage(name):
            busy(seconds)

    with aquaprof.Profiler(sample=0.001) as prof:
        threads = [threading.Thread(target=worker, args=(n, 0.15))
                   for n in ("left", "right")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rep = prof.report()
    samples = rep._data["samples"]
    tids = {t["native_id"] for t in rep.threads}
    seen = defaultdict(set)
    for _p, tid, stage, frames, *_ in samples["stacks"]:
        if stage >= 0:
            seen[rep.stage_names[stage]].add(tid)
            assert tid in tids
    assert len(seen["left"]) == 1 and len(seen["right"]) == 1
    assert seen["left"] != seen["right"]


async def step_one() -> None:
    busy(0.004)


async def step_two() -> None:
    busy(0.004)


async def task(name: str, step) -> None:
    with aquaprof.stage(name):
        for _ in range(25):
            await step()
            await asyncio.sleep(0)


def test_interleaved_asyncio_tasks_keep_their_own_stages():
    async def main() -> None:
        await asyncio.gather(task("one", step_one), task("two", step_two))

    with aquaprof.Profiler(sample=0.001) as prof:
        asyncio.run(main())
    leaves = by_leaf(prof.report())
    assert leaves.get(("one", "busy")) and leaves.get(("two", "busy"))
    stacks = prof.report()._data["samples"]
    frames = stacks["frames"]
    names = prof.report().stage_names
    for _p, _t, stage, ids, *_ in stacks["stacks"]:
        functions = {frames[i][0] for i in ids}
        if "step_one" in functions:
            assert stage >= 0 and names[stage] == "one"
        if "step_two" in functions:
            assert stage >= 0 and names[stage] == "two"


def test_code_outside_any_stage_is_filed_under_none():
    with aquaprof.Profiler(sample=0.001) as prof:
        busy(0.05)
    assert by_leaf(prof.report())[(None, "busy")][0] > 0


def test_frames_name_function_file_and_first_line():
    with aquaprof.Profiler(sample=0.001) as prof:
        with aquaprof.stage("s"):
            busy(0.05)
    frames = prof.report()._data["samples"]["frames"]
    assert ["busy", __file__, busy.__code__.co_firstlineno] in frames
    qualname = "test_frames_name_function_file_and_first_line"
    assert any(f[0] == qualname for f in frames)


def test_sampling_is_off_by_default():
    with aquaprof.Profiler() as prof:
        busy(0.01)
    assert "samples" not in prof.report()._data


def test_stacks_deeper_than_the_bound_keep_their_innermost_frames():
    def down(n: int) -> None:
        if n:
            down(n - 1)
        else:
            busy(0.05)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 2000))
    try:
        with aquaprof.Profiler(sample=0.001) as prof:
            down(400)
    finally:
        sys.setrecursionlimit(limit)
    samples = prof.report()._data["samples"]
    deep = [s for s in samples["stacks"]
            if samples["frames"][s[3][-1]][0] == "busy"]
    assert deep and all(len(s[3]) == 256 for s in deep)


def test_the_timeline_keeps_max_samples_and_counts_the_rest():
    with aquaprof.Profiler(sample=0.001, max_samples=5) as prof:
        wait(0.1)
    samples = prof.report()._data["samples"]
    assert len(samples["timeline"]) == 5
    counted = sum(s[4] for s in samples["stacks"])
    assert samples["timeline_dropped"] == counted - 5 > 0
    times = samples["timeline"]["t_ns"]
    assert list(times) == sorted(times)
    assert all(s < len(samples["stacks"]) for s in samples["timeline"]["stack"])


def test_samples_lost_for_want_of_memory_are_counted():
    prof = aquaprof.Profiler(sample=0.001, memory=False).start()
    _core._fail_allocations(0, -1)   # the store's first tables too
    try:
        wait(0.05)
    finally:
        _core._fail_allocations(0, 0)
    wait(0.02)
    prof.stop()
    samples = prof.report()._data["samples"]
    assert samples["lost"] > 0
    assert any(s[4] for s in samples["stacks"])   # recorded again after


def test_a_nested_profiler_leaves_sampling_to_the_outer_one():
    with aquaprof.Profiler(sample=0.001) as outer:
        with aquaprof.Profiler(sample=0.001) as inner:
            with aquaprof.stage("s"):
                busy(0.03)
    assert "samples" not in inner.report()._data
    assert by_leaf(outer.report())[("s", "busy")][0] > 0


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                    reason="counts threads through /proc")
def test_the_sampling_thread_ends_at_stop_and_with_a_dropped_profiler():
    before = thread_ids()
    prof = aquaprof.Profiler(sample=0.001).start()
    assert left_behind(before)
    prof.stop()
    assert not left_behind(before)
    aquaprof.Profiler(sample=0.001, memory=False).start()   # dropped
    gc.collect()
    assert not left_behind(before)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_sampling_can_sample_on_its_own():
    with aquaprof.Profiler(sample=0.001, children=False) as prof:
        pid = os.fork()
        if pid == 0:
            ok = False
            try:
                prof.stop()      # the parent's copy: nothing to join here
                with aquaprof.Profiler(sample=0.001) as mine:
                    with aquaprof.stage("child"):
                        busy(0.03)
                ok = by_leaf(mine.report())[("child", "busy")][0] > 0
            finally:
                os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert prof.report()._data["samples"]["rounds"] > 0


@pytest.mark.parametrize("value, error", [
    (True, TypeError), ("0.001", TypeError), (-0.001, ValueError),
    (1e-5, ValueError), (61, ValueError), (float("nan"), ValueError),
])
def test_a_bad_interval_is_refused(value, error):
    with pytest.raises(error, match="sample"):
        aquaprof.Profiler(sample=value)


@pytest.mark.parametrize("value, error", [
    (-1, ValueError), (1.5, TypeError), (True, TypeError),
])
def test_a_bad_max_samples_is_refused(value, error):
    with pytest.raises(error, match="max_samples"):
        aquaprof.Profiler(sample=0.001, max_samples=value)


def test_the_sampler_type_refuses_bad_arguments_and_misuse():
    with pytest.raises(ValueError, match="interval_ns"):
        _core.Sampler(10_000, 100)
    with pytest.raises(ValueError, match="max_samples"):
        _core.Sampler(1_000_000, -1)
    sampler = _core.Sampler(1_000_000, 100)
    with pytest.raises(RuntimeError, match="stopped"):
        sampler.data()
    sampler.start()
    with pytest.raises(RuntimeError, match="once"):
        sampler.start()
    sampler.stop()
    sampler.stop()                       # idempotent
    assert sampler.data()["rounds"] >= 0


def test_short_bursts_of_python_between_waits_are_seen():
    # a thread that holds the GIL for 2 ms and then waits 2 ms would be
    # seen only at its waits by a sampler that waits for the GIL. A
    # sampler starved of CPU by other processes wakes when this thread
    # sleeps, with the same effect, which it measures (unseen_ns): such
    # runs are tried again, and say so when none could judge
    fair = False
    for _attempt in range(5):
        spent = 0.0
        with aquaprof.Profiler(sample=0.001) as prof:
            with aquaprof.stage("loop"):
                for _ in range(40):
                    t = time.perf_counter()
                    busy(0.002)
                    spent += time.perf_counter() - t
                    wait(0.002)
        rep = prof.report()
        samples = rep._data["samples"]
        fair = samples["unseen_ns"] < 0.1 * rep["loop"].wall.total * 1e9
        if fair:
            break
    assert fair, "the machine is too busy: the sampler kept waiting for CPU"
    truth = spent / rep["loop"].wall.total
    assert abs(share(rep, "loop", "busy") - truth) < 0.15


def test_the_main_thread_is_sampled_at_the_interval_while_it_computes():
    # one round per interval, not one per 5 ms switch of the GIL; a busy
    # machine may keep the sampler itself off the CPU now and then
    rounds = []
    for _attempt in range(3):
        with aquaprof.Profiler(sample=0.001) as prof:
            busy(0.1)
        rounds.append(prof.report()._data["samples"]["rounds"])
        if rounds[-1] > 60:
            break
    assert max(rounds) > 60, rounds


def test_a_profiler_started_off_the_main_thread_still_samples():
    result = {}

    def run() -> None:
        with aquaprof.Profiler(sample=0.001) as prof:
            with aquaprof.stage("off-main"):
                busy(0.05)
        result["rep"] = prof.report()

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert by_leaf(result["rep"])[("off-main", "busy")][0] > 0


def test_ctrl_c_in_the_program_stops_sampling_and_keeps_the_profile():
    with pytest.raises(KeyboardInterrupt):
        with aquaprof.Profiler(sample=0.001) as prof:
            with aquaprof.stage("work"):
                busy(0.03)
                raise KeyboardInterrupt
    assert not prof.running
    assert by_leaf(prof.report())[("work", "busy")][0] > 0


def test_a_sampler_that_cannot_start_leaves_the_run_going(monkeypatch):
    real = _core.Sampler

    class NoThread:
        def __init__(self, *args):
            self.real = real(*args)

        def start(self):
            raise OSError(11, "Resource temporarily unavailable")

        def __getattr__(self, name):
            return getattr(self.real, name)

    monkeypatch.setattr(_core, "Sampler", NoThread)
    with pytest.warns(RuntimeWarning, match="not sampled.*unavailable"):
        prof = aquaprof.Profiler(sample=0.001).start()
    with aquaprof.stage("s"):
        busy(0.01)
    prof.stop()
    rep = prof.report()
    assert rep["s"].count == 1 and "samples" not in rep._data


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_child_process_samples_its_own_stages_into_the_report(method):
    import multiprocessing

    import child_work
    context = multiprocessing.get_context(method)
    with aquaprof.Profiler(sample=0.001) as prof:
        child = context.Process(target=child_work.spins_in_a_stage,
                                args=(0.1,))
        child.start()
        child.join()
    rep = prof.report()
    assert rep.meta["children"]["reported"] == 1
    hot = {h.function: h for h in rep["child"].hot(3)}
    assert hot["spin"].own > 0.8
    samples = rep._data["samples"]
    child = rep.stage_names.index("child")
    assert {s[0] for s in samples["stacks"] if s[2] == child} == {1}


def test_idle_threads_are_sampled_where_they_wait_at_little_cost():
    gate = threading.Event()
    idle = [threading.Thread(target=gate.wait) for _ in range(50)]
    for t in idle:
        t.start()
    try:
        with aquaprof.Profiler(sample=0.001) as prof:
            busy(0.1)
    finally:
        gate.set()
        for t in idle:
            t.join()
    samples = prof.report()._data["samples"]
    ids = {t.native_id for t in idle}
    frames = samples["frames"]
    waiting = [s for s in samples["stacks"] if s[1] in ids]
    # one stack each: a thread that has not run is counted again unwalked
    assert len(waiting) == 50
    assert all(frames[s[3][-1]][0] == "Condition.wait" for s in waiting)
    assert all(s[4] >= samples["rounds"] - 2 for s in waiting)


def test_a_run_too_short_for_any_sample_has_an_empty_section():
    with aquaprof.Profiler(sample=60) as prof:
        pass
    samples = prof.report().samples
    assert samples["stacks"] == [] and len(samples["timeline"]) == 0


@pytest.mark.parametrize("program", ["native-threads", "finalizers"])
def test_programs_that_once_crashed_the_sampler_run_through(program):
    import subprocess
    from repo_paths import ROOT, SUPPORT
    proc = subprocess.run(
        [sys.executable, str(SUPPORT / "sampler_hostile.py"), program, "3"],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.split()[-1]) > 100


def test_short_stages_between_rounds_keep_their_sampled_time():
    """A thread running 2 ms stages back to back, sampled when the GIL
    lets the round in (about every 5 ms): each sample of a stage entered
    since the round before is cut to the time the thread spent in the
    stage's path, which its calls' own clock gives, so the stage keeps
    its sampled time, and the timeline keeps the thread's CPU time."""
    used = {}

    def spin_cpu(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            sum(range(500))

    def worker():
        start = time.thread_time()
        for _ in range(150):
            with aquaprof.stage("job"):
                spin_cpu(0.002)
        used["cpu"] = time.thread_time() - start
        used["tid"] = threading.get_native_id()

    with aquaprof.Profiler(sample=0.001) as prof:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    rep = prof.report()
    sampled = stage_waits(rep, "job").wall_s
    assert sampled == pytest.approx(rep["job"].wall.total, rel=0.15)
    stacks, timeline = rep.samples["stacks"], rep.samples["timeline"]
    mine = np.array([stacks[k][1] == used["tid"]
                     for k in timeline["stack"]], bool)
    assert timeline["cpu_us"][mine].sum() * 1e-6 == pytest.approx(
        used["cpu"], rel=0.15)
