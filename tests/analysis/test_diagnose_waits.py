"""What a stage waited for, measured per sample (the run delay Linux
counts per thread, and sleeps on the GIL) and the classes diagnose()
gives from it: planted in real processes (tests/support/planted_waits.py) and on
files written before the waits were measured."""
import json
import os
import re
import threading
import time

import pytest

import aquaprof as ap
from aquaprof import Report
from aquaprof.analysis.samples import stage_waits
from aquaprof.model.schema import ReportError
import crafted
from planted_waits import spin_cpu
from planted_runs import planted_json
from sampled_reports import MS, main_tid, profile_stages, with_samples


def sampled_report():
    """A report as files written before the waits were measured hold it:
    seven figures a stack, no delay_ns or gil_ns in the section."""
    rep = profile_stages()
    return with_samples(rep, [(0, main_tid(rep), "decode", [0, 1, 2], 4,
                               4 * MS, 3 * MS)])

linux_only = pytest.mark.skipif(
    not os.path.exists("/proc/self/task"),
    reason="thread waits are read from Linux's /proc")


def planted(case):
    return planted_json("planted_waits.py", case, timeout=120)


@linux_only
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                    reason="pinning needs sched_setaffinity")
def test_a_stage_sharing_its_core_with_busy_processes_is_cpu_starved():
    found = planted("starved")["compute"]
    assert found["measured"] == [True, True]
    # four runnable on one core: the stage runs about a quarter of the time
    assert found["delay"] > 0.35, found
    assert found["kind"] == "cpu-starved", found
    assert "runnable but not running" in found["evidence"]
    assert "CPUs on average" in found["evidence"]
    assert "load average" in found["evidence"]


@linux_only
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                    reason="pinning needs sched_setaffinity")
def test_a_parent_starved_in_its_own_time_is_cpu_starved_not_waiting():
    """It is classified by its own time, not its sleeping sub-stage's:
    the samples' waits it is weighed by are those of its own time too.
    Weighed by its whole time, the sleep read as its own: "waiting"."""
    found = planted("starved parent")
    cell = found["cell"]
    own = cell["wall_s"] - found["cell/fetch"]["wall_s"]
    assert cell["true_delay_s"] > 0.35 * own, cell   # the plant held
    assert cell["kind"] == "cpu-starved", cell
    assert "runnable but not running" in cell["evidence"], cell
    assert found["cell/fetch"]["kind"] == "waiting", found["cell/fetch"]


@linux_only
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                    reason="pinning needs sched_setaffinity")
def test_a_stage_starved_beside_the_sampler_keeps_its_run_delay():
    """The sampler's threads share the starved stage's one CPU, so its
    rounds come late just while the stage waits for that CPU. The rounds
    still stand for their whole interval, and a wait Linux counts only
    once it ends, after a round read the thread, is told a round later:
    the samples hold most of the stage's time and of its run delay
    (before, a third of its time and a quarter of its delay were
    sampled, and a stage computing beside busy processes could read
    waiting)."""
    found = planted("starved sampler")["compute"]
    assert found["sampled_s"] >= 0.8 * found["wall_s"], found
    assert found["sampled_delay_s"] >= 0.8 * found["true_delay_s"], found
    assert found["sampled_delay_s"] <= 1.05 * found["true_delay_s"] + \
        0.005, found
    assert found["kind"] == "cpu-starved", found


@linux_only
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                    reason="pinning needs sched_setaffinity")
def test_a_wait_told_after_its_stage_ended_stays_off_the_next_stage():
    """Stages that compute and sleep in turn beside the starved sampler:
    the wait to run again after each sleep ends in the sleeping stage,
    but a round reads it once the computing stage began. Shared out as
    the CPU time was, all of it went to the computing stage, whose run
    delay then passed its time off the CPU (by 4 to 13 samples a run),
    and the sleeping stage kept about half of its own."""
    found = planted("alternating sampler")
    crunch, rest = found["crunch"], found["rest"]
    interval = 0.002
    assert crunch["sampled_delay_s"] <= (crunch["sampled_s"] -
                                         crunch["sampled_cpu_s"] +
                                         interval), crunch
    assert rest["sampled_delay_s"] >= 0.7 * rest["true_delay_s"], rest
    assert crunch["kind"] == "cpu-starved", crunch
    assert rest["kind"] == "waiting", rest


@linux_only
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                    reason="pinning needs sched_setaffinity")
@pytest.mark.skipif(os.environ.get("AQUAPROF_SANITIZED") == "1",
                    reason="turns of four samples need the sampler's "
                           "rounds on time, which AddressSanitizer's cost "
                           "on a starved CPU does not keep (a round late "
                           "moves a whole sample's delay); the normal runs "
                           "of the suite check this")
def test_turns_of_a_few_samples_keep_each_stage_its_own_run_delay():
    """Turns of 4 ms beside the starved sampler, four samples each: a
    wait told a round late may be read in a whole sample of the next
    stage, where the thread ran; it goes back to the stack last seen.
    Each stage keeps the run delay Linux counted in it, and none claims
    more than it was off the CPU."""
    found = planted("short turns sampler")
    for path in ("crunch", "rest"):
        stage = found[path]
        assert stage["sampled_cpu_s"] + stage["sampled_delay_s"] <= \
            stage["sampled_s"] + 0.002, stage
        assert stage["sampled_delay_s"] == pytest.approx(
            stage["true_delay_s"], rel=0.1, abs=0.01), stage
    assert found["crunch"]["kind"] == "cpu-starved", found["crunch"]


@linux_only
def test_a_late_sample_files_under_a_stage_only_the_time_it_was_open():
    """A round taken late (the GIL held by a thread computing outside any
    stage, or a CPU given to other processes) after the thread entered a
    sleep stands for the whole interval, of which the stage had a few
    ms: only those are filed under the stage, with its own CPU time and
    the run delay shared as the CPU time was. Filed whole, the sleep's
    sampled time was ten times its wall time and 90 % on the CPU (on a
    busy machine, half the runs read the sleep cpu-starved)."""
    found = planted("late sampler")["sleep"]
    assert found["sampled_s"] <= found["wall_s"] * 1.05 + 0.002, found
    assert found["sampled_cpu_s"] <= 0.1 * found["sampled_s"], found
    assert found["kind"] == "waiting", found


@linux_only
def test_stages_blocked_on_a_sleep_and_a_pipe_are_waiting():
    found = planted("blocked")
    for path in ("sleep", "pipe read"):
        assert found[path]["kind"] == "waiting", found[path]
        assert found[path]["delay"] < 0.1 and found[path]["gil"] < 0.1
        assert "of its sampled time: blocked" in found[path]["evidence"]


@linux_only
def test_eight_threads_running_python_are_gil_bound():
    found = planted("gil")["py_work"]
    assert found["gil"] > 0.4, found
    assert found["kind"] == "gil-bound", found
    assert "asleep on the GIL" in found["evidence"]
    assert "py_work" in found["evidence"].split("hold the GIL")[1]


@linux_only
def test_the_main_thread_waiting_for_the_gil_is_gil_bound_not_blocked():
    # the main thread answers the sampler's round as it gets the GIL back:
    # only the sampler's ticker saw it sleep on the GIL until then
    found = planted("gil_main")["main_py"]
    assert found["kind"] == "gil-bound", found
    assert found["gil"] > 0.4, found
    assert found["blocked"] < found["gil"], found


@linux_only
def test_a_stage_waiting_on_another_thread_is_told_to_look_there_not_at_io():
    """A consumer waits on a queue for a producer thread that sleeps
    between items, and a stage joins a thread: both asleep in a futex not
    the GIL's, neither I/O. Waits shorter than the sampling interval end
    before the round is taken, by the main thread once it has the lock
    and the GIL: where it slept is the ticker's word. A stage that sleeps
    is blocked, as before."""
    found = planted("threads waited")
    for path in ("queue get", "queue get, short waits", "join"):
        assert found[path]["kind"] == "waiting", found[path]
        assert found[path]["lock"] > 0.8, found[path]
        assert "on a lock or another thread" in found[path]["evidence"]
        assert found[path]["fix"].startswith("it waits on a lock or for "
                                             "other threads"), found[path]
    slept = found["sleep"]
    assert slept["lock"] < 0.1 and slept["blocked"] > 0.8, slept
    assert slept["fix"].startswith("overlap the wait"), slept


def test_a_stage_waiting_for_the_pool_it_handed_its_work_to_is_threads_bound():
    found = planted("pool")["handed over"]
    assert found["kind"] == "threads-bound", found
    assert "the other threads of its process used" in found["evidence"]
    assert "hottest there: hash_cpu" in found["evidence"]


def test_a_stage_asleep_beside_a_thread_busy_all_the_run_stays_waiting():
    found = planted("background")["nap"]
    assert found["kind"] == "waiting", found
    assert "CPUs on average" in found["evidence"]
    assert "while it was not" in found["evidence"]


@linux_only
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                    reason="pinning needs sched_setaffinity")
def test_unsampled_a_stage_starved_on_a_busy_machine_is_not_called_waiting():
    """Without samples its thread CPU time (a third of its wall time,
    beside two hogs on its one CPU) cannot tell a wait for the CPU from a
    blocking call; the machine's figures say the CPUs were taken."""
    found = planted("starved unsampled")["compute"]
    assert found["kind"] == "cpu-starved?", found
    assert "other processes kept" in found["evidence"]
    # pinned to one CPU: the CPUs it may run on, not the machine's
    assert "of the 1 CPU this process may run on busy" in found["evidence"]
    assert "sample the run" in found["evidence"]


#: the idle share of the CPUs beside the pinned one that makes "the
#: machine left CPUs free" true with a margin over diagnose's threshold
OTHER_CPUS_LEFT_IDLE = 0.75


@linux_only
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or
                    len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs to pin, and sched_setaffinity")
def test_unsampled_a_stage_sharing_its_core_is_told_by_its_threads_delay():
    """Its thread and one busy process share a CPU, the others idle: the
    machine's figures leave CPUs free, and its thread CPU time (half its
    wall time) alone reads as a wait. Its thread's run delay over the run
    says it waited for the CPU; the sleeping stage beside it, on the same
    thread and rate, stays waiting. The plant holds only where the
    machine left the other CPUs idle (a busy one truly kept them, and the
    diagnosis then rightly says so): run up to 3 times for it."""
    for _ in range(3):
        found = planted("pinned unsampled")
        if found["compute"]["other_cpus_idle"] >= OTHER_CPUS_LEFT_IDLE:
            break
    else:
        pytest.fail("the machine was too busy: in 3 runs it never left "
                    "the CPUs other than the pinned one idle "
                    f"{OTHER_CPUS_LEFT_IDLE:.0%} of the time")
    compute = found["compute"]
    assert compute["kind"] == "cpu-starved?", compute
    assert "its thread waited for a CPU" in compute["evidence"], compute
    # the thread's delay told it, not the machine's figures
    assert "other processes kept" not in compute["evidence"], compute
    assert "sample the run" in compute["fix"], compute
    assert found["sleep"]["kind"] == "waiting", found["sleep"]


def half_and_nap():
    """A run of a stage half on the CPU and a sleeping one, on the
    thread that started and stopped it."""
    with ap.Profiler() as prof:
        for _ in range(5):
            with ap.stage("half"):
                spin_cpu(0.025)
                time.sleep(0.015)
        with ap.stage("nap"):
            time.sleep(0.05)
    rep = prof.report()
    on_cpu = rep["half"].cpu / rep["half"].wall.total
    assert 0.2 <= on_cpu < 0.8, on_cpu    # about 60 % on a quiet one
    return rep, ("mixed" if on_cpu >= 0.5 else "waiting")


def test_the_run_delay_hedge_weighs_the_stages_share_of_its_threads_wait():
    """The rule on one run's figures, its thread's run delay said
    otherwise: shared out by CPU time, a delay that comes to a quarter or
    more of the half-computing stage's time hedges it; one under 5 % of
    the run is a quiet machine's wake-ups; the sleeping stage stays
    waiting whatever its thread waited; where the run's figures are
    malformed, or not of the stage's thread, nothing is said."""
    rep, quiet = half_and_nap()
    host = rep.meta["host"]
    mine = host["thread_cpu"]

    def kinds(run=rep, **figures):
        found = {f.path: f for f in
                 crafted.on_machine(run, other_cpus=0.0, **figures
                                    ).diagnose(top=2)}
        assert found["nap"].kind == "waiting", figures
        return found["half"]

    starved = kinds(thread_delay=2 * mine)
    assert starved.kind == "cpu-starved?"
    assert "its thread waited for a CPU" in starved.evidence
    # its share no more than its time off the CPU, however long the run's
    # delay
    said = re.search(r"of this stage's .*? \((\d+) %\)", starved.evidence)
    half = rep["half"]
    assert int(said.group(1)) <= round(
        100 * (1 - half.cpu / half.wall.total)), starved.evidence
    # the run gone on idle ten times as long, all its thread's CPU in the
    # stage: a delay of 40 % of the stage's time is under 5 % of the run,
    # the wake-ups of a quiet machine; 5 % of it hedges the stage
    start, stop = rep._data["start_ns"], rep._data["stop_ns"]
    longer = Report(dict(rep._data, stop_ns=start + 10 * (stop - start)))
    alone = dict(thread_cpu=half.cpu)
    assert 0.4 * half.wall.total < 0.05 * longer.wall
    assert kinds(longer, thread_delay=0.4 * half.wall.total,
                 **alone).kind == quiet
    assert kinds(longer, thread_delay=0.05 * longer.wall,
                 **alone).kind == "cpu-starved?"
    # 5 % of the run or more, but shared out by CPU time the stage's part
    # is under a quarter of its time
    small = 0.2 * rep["half"].wall.total * mine / rep["half"].cpu
    assert small >= 0.05 * rep.wall
    assert kinds(thread_delay=small).kind == quiet
    for bad in ("2", -1.0, float("nan"), True):
        with pytest.raises(ReportError, match="thread_delay"):
            crafted.on_machine(rep, thread_delay=bad)
    assert kinds(thread_delay=2 * mine, thread_cpu=0.0).kind == quiet
    # another thread started and stopped the run
    assert kinds(thread_delay=2 * mine,
                 thread_id=host["thread_id"] + 1).kind == quiet


def test_a_stage_barely_on_the_cpu_is_hedged_by_its_threads_delay_alone():
    """Under a fifth of its time on the CPU the machine's figures hedge
    no stage (it would have had more beside four busy threads a CPU); its
    thread's run delay can, shared out by the little CPU it had: starved
    beside more busy threads than that (a loop whose every stage runs
    torch's threads on a busy machine), it is hedged; its figures from a
    quiet run are not."""
    with ap.Profiler() as prof:
        for _ in range(5):
            with ap.stage("light"):
                spin_cpu(0.003)
                time.sleep(0.027)
    rep = prof.report()
    light = rep["light"]
    assert light.cpu < 0.2 * light.wall.total     # the plant held
    mine = rep.meta["host"]["thread_cpu"]

    def kind(**figures):
        return crafted.on_machine(rep, **{"other_cpus": 0.0, **figures}
                                  ).diagnose(top=1).findings[0]

    assert kind(thread_delay=0.0).kind == "waiting"
    hedged = kind(thread_delay=max(10 * mine, 0.05 * rep.wall))
    assert hedged.kind == "cpu-starved?", hedged.evidence
    assert "its thread waited for a CPU" in hedged.evidence
    # the machine's figures alone leave it waiting
    assert kind(thread_delay=0.0,
                other_cpus=rep.meta["host"]["cpus"] - 0.1).kind == "waiting"


def test_the_busy_machine_hedge_takes_a_stage_partly_on_the_cpu_only():
    """The rule on one run's figures, its machine's said otherwise: a
    stage half on the CPU is hedged where the other processes left under
    half a CPU; a sleeping one stays waiting; a quiet machine changes
    nothing."""
    rep, quiet = half_and_nap()
    cpus = rep.meta["host"]["cpus"]
    for others, half in ((cpus - 0.2, "cpu-starved?"), (cpus - 0.6, quiet),
                         (0.0, quiet)):
        kinds = {f.path: f.kind for f in
                 crafted.on_machine(rep, other_cpus=others,
                                    thread_delay=0.0).diagnose(top=2)}
        assert kinds == {"half": half, "nap": "waiting"}, (others, kinds)


def test_an_unsampled_waiting_stage_says_sampling_would_tell_more():
    with ap.Profiler() as prof:
        with ap.stage("nap"):
            time.sleep(0.05)
    finding = list(prof.report().diagnose())[0]
    assert finding.kind == "waiting"
    assert "sample the run" in finding.evidence


@linux_only
def test_each_sample_carries_its_waits_and_the_section_says_they_were_measured():
    with ap.Profiler(sample=0.001) as prof:
        with ap.stage("nap"):
            for _ in range(10):
                end = time.thread_time() + 0.002
                while time.thread_time() < end:
                    pass
                time.sleep(0.005)
    samples = prof.report().samples
    assert "delay_ns" in samples and "gil_ns" in samples
    assert "lock_ns" in samples
    assert samples["unanswered"] >= 0
    assert all(len(s) == 10 for s in samples["stacks"])


def test_a_file_from_before_the_waits_reads_with_them_unknown(tmp_path):
    rep = sampled_report()
    assert all(len(s) == 7 for s in rep.samples["stacks"])
    path = tmp_path / "old.json"
    rep.save(path)
    loaded = ap.Report.load(path)
    waits = stage_waits(loaded, "decode")
    assert waits is not None
    assert (waits.delay_known, waits.gil_known) == (False, False)
    assert waits.delay_s == waits.gil_s == 0


def test_merging_old_and_new_files_keeps_what_was_measured(tmp_path):
    old = sampled_report()
    with ap.Profiler(sample=0.001) as prof:
        with ap.stage("nap"):
            time.sleep(0.02)
    new = prof.report()
    merged = ap.merge([old, new])
    samples = merged.samples
    assert all(len(s) == 10 for s in samples["stacks"])
    assert ("delay_ns" in samples) == ("delay_ns" in new.samples)
    assert ("lock_ns" in samples) == ("lock_ns" in new.samples)


@pytest.mark.parametrize("length", [6, 8, 11])
def test_a_stack_of_another_length_is_refused(tmp_path, length):
    path = sampled_report().save(tmp_path / "report.json")
    data = json.loads(path.read_text())
    stack = data["samples"]["stacks"][0]
    data["samples"]["stacks"][0] = (stack + [0, 0, 0, 0])[:length]
    path.write_text(json.dumps(data))
    with pytest.raises(ReportError, match="delay_ns, gil_ns"):
        ap.Report.load(path)


def open_files():
    return len(os.listdir("/proc/self/fd"))


@linux_only
def test_threads_files_are_closed_when_they_end_and_bounded_while_alive():
    before = open_files()
    go = threading.Event()

    def now_and_then():
        # runs a little now and then: a thread that never runs gets no
        # files (it neither waits for a CPU nor moves from its sleep)
        while not go.wait(0.005):
            sum(range(1000))

    threads = [threading.Thread(target=now_and_then) for _ in range(300)]
    with ap.Profiler(sample=0.001) as prof:
        for t in threads:
            t.start()
        time.sleep(0.3)
        during = open_files()
        go.set()
        for t in threads:
            t.join()
        time.sleep(0.05)     # rounds that see the threads gone
    after = open_files()
    assert prof.report().samples["rounds"] > 0
    # two files a thread, for at most 256 threads at once
    assert during - before <= 2 * 256 + 8, (before, during)
    assert during - before >= 2 * 100, "the waits were not read"
    assert after <= before + 2, (before, after)


def task_files():
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            if "/task/" in os.readlink(f"/proc/self/fd/{fd}"):
                found.append(fd)
        except OSError:
            pass
    return found


@linux_only
def test_a_forked_child_stopping_the_sampling_it_inherited_keeps_no_files():
    # the main thread answers rounds itself: the sampler's ticker opened
    # its file too
    prof = ap.Profiler(sample=0.001, compensate=False).start()
    try:
        end = time.perf_counter() + 0.1
        while time.perf_counter() < end:
            pass
        assert task_files()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            prof.stop()
            os.write(write, str(len(task_files())).encode())
            os._exit(0)
        os.close(write)
        left = os.read(read, 16)
        os.waitpid(pid, 0)
        os.close(read)
    finally:
        prof.stop()
    assert left == b"0"
    assert not task_files()


def test_rounds_the_gil_cost_the_sampler_are_counted_and_said():
    """Threads running Python keep the GIL a switch interval each: the
    sampler, which needs it, misses rounds, and the report says how many
    and why rather than pass the gaps off as a slow rate."""
    def spin():
        end = time.thread_time() + 0.2
        while time.thread_time() < end:
            pass

    with ap.Profiler(sample=0.0005) as prof:
        threads = [threading.Thread(target=spin) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rep = prof.report()
    assert rep.sampling.missed > rep.sampling.rounds, rep.sampling
    assert rep.samples["unanswered"] == rep.sampling.missed
    text = str(rep)
    assert f"missed rounds: {rep.sampling.missed:,} of " in text
    assert "switch interval" in text


@linux_only
def test_threads_that_never_run_cost_no_files():
    """A server's idle threads neither wait for a CPU nor move from their
    sleep: the sampler opens nothing for them."""
    go = threading.Event()
    threads = [threading.Thread(target=go.wait) for _ in range(100)]
    for t in threads:
        t.start()
    try:
        before = open_files()
        with ap.Profiler(sample=0.001) as prof:
            time.sleep(0.2)
            during = open_files()
    finally:
        go.set()
        for t in threads:
            t.join()
    assert prof.report().samples["rounds"] > 10
    assert during - before < 20, (before, during)
