"""A stage's process CPU time (StageStats.process_cpu): what all the
process's threads computed while its calls were open, native ones too,
from the memory sampler's readings at each edge. Checked against
time.process_time() read around the same calls, in the same run: a call
that computes itself, one that hands its work to threads, one held open
so long and quietly that the sampler slows down, and calls shorter than
the sampler's interval."""
import json
import threading
import time

import pytest

import aquaprof as ap
from aquaprof import Report
from planted_waits import hash_cpu, spin_cpu


class Around:
    """A stage that also sums time.process_time() around its calls."""

    def __init__(self, name):
        self.name, self.cpu = name, 0.0

    def __enter__(self):
        self.stage = ap.stage(self.name)
        self.cpu0 = time.process_time()
        self.stage.__enter__()

    def __exit__(self, *exc):
        self.stage.__exit__(*exc)
        self.cpu += time.process_time() - self.cpu0


def hashed_by_threads(seconds, threads=2):
    workers = [threading.Thread(target=hash_cpu, args=(seconds,))
               for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def test_a_stage_computing_itself_gets_its_own_cpu_time():
    around = Around("spin")
    with ap.Profiler(compensate=False) as prof:
        for _ in range(20):
            with around:
                spin_cpu(0.01)
    s = prof.report()["spin"]
    assert s.process_cpu == pytest.approx(around.cpu, rel=0.05, abs=0.005)
    assert s.process_cpu >= 0.9 * s.cpu


def test_a_stage_that_hands_its_work_to_threads_counts_theirs():
    around = Around("handed")
    with ap.Profiler(compensate=False) as prof:
        for _ in range(4):
            with around:
                hashed_by_threads(0.05)
    s = prof.report()["handed"]
    assert s.cpu < 0.1 * s.process_cpu
    assert s.process_cpu == pytest.approx(around.cpu, rel=0.1, abs=0.01)


def test_a_call_held_open_while_the_sampler_idles_is_measured_whole():
    """No stage entered and RSS still for 100 ms: the sampler reads every
    250 ms, and the exit reads the clock itself."""
    around = Around("quiet")
    with ap.Profiler(compensate=False) as prof:
        with around:
            hashed_by_threads(0.3)
    s = prof.report()["quiet"]
    assert s.process_cpu == pytest.approx(around.cpu, rel=0.1, abs=0.01)


def test_calls_shorter_than_the_interval_add_up_to_the_right_time():
    """Each call gets the process's rate over the sampler's interval
    around it times its length: never nothing, as the difference of two
    readings gave calls the sampler ran between (9 ms of 114). The rate
    is the interval's, gaps between calls included, where the process
    computes less: within half of the clock around the calls."""
    done = threading.Event()

    def busy():
        while not done.is_set():
            hash_cpu(0.01)
    worker = threading.Thread(target=busy)
    around = Around("short")
    with ap.Profiler(compensate=False) as prof:
        worker.start()
        try:
            for _ in range(400):
                with around:
                    spin_cpu(0.0002)
                time.sleep(0.0002)
        finally:
            done.set()
            worker.join()
    s = prof.report()["short"]
    assert 0.5 * around.cpu <= s.process_cpu <= 1.5 * around.cpu, \
        (s.process_cpu, around.cpu)


def test_without_the_memory_sampler_the_figure_is_unknown():
    with ap.Profiler(memory=False, compensate=False) as prof:
        with ap.stage("s"):
            spin_cpu(0.01)
    rep = prof.report()
    assert rep["s"].process_cpu is None
    assert "proc_cpu_ns" in rep._data["stages"][rep["s"].id]


def test_the_figure_is_kept_in_the_saved_file_and_by_a_nested_profiler(
        tmp_path):
    with ap.Profiler(compensate=False) as outer:
        with ap.stage("before"):
            spin_cpu(0.02)
        with ap.Profiler(compensate=False) as inner:
            with ap.stage("s"):
                hashed_by_threads(0.05)
    rep = outer.report()
    rep.save(tmp_path / "run.json")
    loaded = Report.load(tmp_path / "run.json")
    assert loaded["s"].process_cpu == rep["s"].process_cpu > 0.08
    nested = inner.report()
    assert nested["s"].process_cpu == pytest.approx(rep["s"].process_cpu)
    assert "before" not in nested
    assert rep.meta["host"]["process_cpus"] > 0
    assert rep.meta["host"]["thread_id"] == threading.get_native_id()
    assert 0 < rep.meta["host"]["thread_cpu"] <= \
        rep.meta["host"]["process_cpus"] * rep.wall * 1.01


def test_a_merge_with_a_run_that_did_not_measure_it_reads_unknown(
        tmp_path):
    """aquaprof merge of a run with the figure and one without it
    (memory=False, or a file from before it): the merged stage's calls
    are both runs', a sum of one run's would read as half its rate."""
    def run(memory):
        with ap.Profiler(memory=memory, compensate=False) as prof:
            for _ in range(5):
                with ap.stage("s"):
                    spin_cpu(0.01)
        return prof.report()
    measured, unmeasured = run(True), run(False)
    measured.save(tmp_path / "new.json")
    data = json.loads((tmp_path / "new.json").read_text())
    for s in data["stages"]:
        del s["proc_cpu_ns"]
    (tmp_path / "old.json").write_text(json.dumps(data))
    old = Report.load(tmp_path / "old.json")
    assert measured["s"].process_cpu > 0.04
    for other in (unmeasured, old):
        for pair in ((measured, other), (other, measured)):
            merged = ap.merge(list(pair))
            assert merged["s"].count == 10
            assert merged["s"].process_cpu is None, other
    both = ap.merge([measured, run(True)])
    assert both["s"].process_cpu > measured["s"].process_cpu


def test_the_run_counts_the_cpu_of_the_children_it_waited_for():
    """A child process's CPU time reaches the parent's when it is reaped:
    meta["host"]["children_cpus"] gives it over the run, for a stage
    waiting on children that the process's own figures do not see."""
    import subprocess
    import sys
    busy = ("import time\nend = time.process_time() + 0.2\n"
            "while time.process_time() < end: pass")
    start = time.perf_counter()
    with ap.Profiler() as prof:
        subprocess.run([sys.executable, "-c", busy], check=True)
    wall = time.perf_counter() - start
    host = prof.report().meta["host"]
    assert host["children_cpus"] * wall >= 0.2, host
    assert host["process_cpus"] * wall < 0.1, host
    with ap.Profiler() as prof:
        time.sleep(0.01)
    assert prof.report().meta["host"]["children_cpus"] == 0
