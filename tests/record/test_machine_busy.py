"""How busy the machine was during a run, apart from the run itself:
measured from the kernel's CPU ticks, recorded in meta["host"], and
read back by compare (a busier machine slows unchanged code)."""
import contextlib
import io
import os
import subprocess
import sys
import time

import pytest

import aquaprof as ap
from aquaprof.record import host, profiler
from aquaprof.record.host import BUSY_SECONDS, busy_between, cpu_ticks
from proc_ticks import cpu_ticks_of

linux_only = pytest.mark.skipif(cpu_ticks() is None,
                                reason="no /proc/stat on this system")


def spin(seconds):
    with ap.Profiler() as prof:
        with ap.stage("spin"):
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
    return prof.report()


@contextlib.contextmanager
def a_process_spinning():
    """Another process spinning on a CPU meanwhile, already running; its
    pid."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        yield hog.pid
    finally:
        hog.kill()
        hog.wait()


def busy_seconds(pid=None):
    """The CPU seconds the CPUs this process may run on (pid None: those
    other_cpus counts) or one process have been busy so far, read here
    from the kernel's counts, apart from the code under test."""
    hz = os.sysconf("SC_CLK_TCK")
    if pid is not None:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / hz   # utime, stime
    return cpu_ticks_of(os.sched_getaffinity(0)).busy / hz


def beside(seconds, hog=None):
    """spin(seconds), and the CPUs that processes other than this one
    and the hog kept busy meanwhile: what else the machine ran."""
    machine, mine = busy_seconds(), time.process_time()
    planted = busy_seconds(hog) if hog else 0.0
    start = time.monotonic()
    report = spin(seconds)
    wall = time.monotonic() - start
    rest = (busy_seconds() - machine) - (time.process_time() - mine) - \
        ((busy_seconds(hog) - planted) if hog else 0.0)
    return report, rest / wall


#: CPUs the machine's own work may keep busy while a planted run still
#: holds: the ticks (10 ms) round each CPU's count by a few hundredths
ELSEWHERE = 0.3


@linux_only
def test_a_process_spinning_beside_the_run_is_counted_and_the_run_not(
        tmp_path):
    for _ in range(3):
        with a_process_spinning() as hog:
            report, elsewhere = beside(0.5, hog)
        if elsewhere < ELSEWHERE:
            break
    else:
        pytest.fail(f"the machine was too busy to plant one process "
                    f"spinning: others kept {elsewhere:.2f} CPUs busy")
    busy = report.meta["host"]
    # the hog's CPU is in it, and the run's own spinning (a CPU more) is
    # not
    assert 0.5 <= busy["other_cpus"] <= 1.5, busy
    assert 0 <= busy["steal"] <= 1
    saved = ap.Report.load(spin(0.3).save(tmp_path / "run.json"))
    assert "other_cpus" in saved.meta["host"]


def ticks(at, process, cpus, affinity=frozenset({0, 1})):
    """Ticks of CPUs {cpu: (busy, stolen, all)}."""
    return host.Ticks(at, process, cpus, frozenset(affinity))


def test_busy_between_ticks(monkeypatch):
    monkeypatch.setattr(host.os, "sysconf", lambda name: 100)
    # 2 s of a 2-CPU machine at 100 ticks a second: 400 ticks, 300 busy
    # of which this process used 1.2 s, 20 stolen
    start = ticks(10.0, 5.0, {0: (500, 0, 2500), 1: (500, 0, 2500)})
    stop = ticks(12.0, 6.2, {0: (650, 10, 2700), 1: (650, 10, 2700)})
    assert busy_between(start, stop) == {"other_cpus": 0.9, "steal": 0.05}
    # this process's own CPU past what the ticks saw (rounding): never
    # below 0
    assert busy_between(start, stop._replace(process=9.0))[
        "other_cpus"] == 0.0
    # too short to tell (on 2 CPUs; 4 times as long on 32), or nothing
    # read, or a clock that says nothing
    short = stop._replace(at=10.0 + BUSY_SECONDS * 0.99)
    assert busy_between(start, short) == {}
    long = stop._replace(at=10.0 + BUSY_SECONDS * 2)
    assert busy_between(start, long) != {}
    many = {c: (500, 0, 2500) for c in range(32)}
    assert busy_between(ticks(10.0, 5.0, many, range(32)),
                        ticks(10.0 + BUSY_SECONDS * 2, 5.1,
                              {c: (510, 0, 2550) for c in range(32)},
                              range(32))) == {}
    assert busy_between(None, stop) == busy_between(start, None) == {}
    monkeypatch.setattr(host.os, "sysconf", lambda name: -1)
    assert busy_between(start, stop) == {}


def test_only_the_cpus_the_process_may_run_on_count(monkeypatch):
    """Pinned to CPU 0 of 2, a run is not slowed by CPU 1 being busy:
    only CPU 0's ticks count (the affinity at the run's stop)."""
    monkeypatch.setattr(host.os, "sysconf", lambda name: 100)
    start = ticks(10.0, 5.0, {0: (500, 0, 2500), 1: (500, 0, 2500)})
    stop = ticks(12.0, 5.0, {0: (520, 0, 2700), 1: (700, 0, 2700)},
                 affinity={0})
    assert busy_between(start, stop)["other_cpus"] == 0.1
    assert busy_between(start, stop._replace(
        affinity=frozenset({0, 1})))["other_cpus"] == 1.1


def test_a_run_where_the_ticks_cannot_be_read_says_nothing_of_them(
        monkeypatch):
    # no /proc/stat (not Linux), or one that cannot be read
    def refused(*args, **kwargs):
        raise PermissionError("/proc/stat")
    monkeypatch.setattr(host, "open", refused, raising=False)
    assert cpu_ticks() is None
    report = spin(0.3)
    assert "other_cpus" not in report.meta["host"]
    assert report["spin"].count == 1


@linux_only
def test_a_second_stop_does_not_stretch_the_run():
    prof = ap.Profiler().start()
    prof.stop()
    first = prof._stop_ticks
    time.sleep(0.05)
    prof.stop()
    assert prof._stop_ticks is first


@linux_only
def test_compare_on_the_command_line_says_the_machine_was_busier(tmp_path):
    for _ in range(3):
        quiet, elsewhere = beside(0.4)
        if elsewhere < ELSEWHERE:
            break
    else:
        pytest.fail(f"the machine was never quiet for the base run: other "
                    f"processes kept {elsewhere:.2f} CPUs busy")
    quiet = quiet.save(tmp_path / "quiet.json")
    with a_process_spinning():
        busy = spin(0.4).save(tmp_path / "busy.json")
    out = subprocess.run([sys.executable, "-m", "aquaprof", "compare",
                          str(quiet), str(busy)], capture_output=True,
                         text=True).stdout
    assert "note: the machine was busier during the new run: other " \
           "processes kept" in out, out


@pytest.mark.parametrize("schedstat, delay", [
    (b"5000000 2000000000 3\n", 2.0),
    (b"0 67752 1\n", 67752e-9),     # a thread not yet ticked: 0 on the CPU
    # a kernel that does not count (no schedstats, delay accounting off)
    # writes zeros, no time slice even for the thread reading it
    (b"0 0 0\n", None),
    (b"", None), (b"12 x 1\n", None)])
def test_a_threads_run_delay_is_read_where_the_kernel_counts_it(
        monkeypatch, schedstat, delay):
    monkeypatch.setattr(host, "open", lambda *args: io.BytesIO(schedstat),
                        raising=False)
    assert host.thread_run_delay() == delay


def test_a_run_delay_that_cannot_be_read_is_unknown(monkeypatch):
    def refused(*args, **kwargs):
        raise FileNotFoundError(args[0])
    monkeypatch.setattr(host, "open", refused, raising=False)
    assert host.thread_run_delay() is None
    assert "thread_delay" not in host.process_cpus(
        host.Ticks(0.0, 0.0, {}, frozenset(), (7, 0.0)),
        host.Ticks(1.0, 0.5, {}, frozenset(), (7, 0.5)))


@linux_only
def test_a_run_records_the_run_delay_of_the_thread_that_ran_it():
    found = spin(0.1).meta["host"]
    # where the kernel counts it
    counted = host.thread_run_delay() is not None
    assert ("thread_delay" in found) == counted, found
    assert found.get("thread_delay", 0.0) >= 0, found


@linux_only
def test_the_run_figures_leave_out_the_profilers_calibration(monkeypatch):
    """The first run of a process calibrates the profiler's cost before
    it starts recording: CPU the program never spent. Planted here as a
    calibration 0.3 s of CPU long, beside a run that sleeps."""
    def calibration(*args, **kwargs):
        end = time.thread_time() + 0.3
        while time.thread_time() < end:
            pass
    monkeypatch.setattr(profiler, "_calibration", calibration)
    with ap.Profiler() as prof:
        with ap.stage("nap"):
            time.sleep(0.05)
    found = prof.report().meta["host"]
    assert found["thread_cpu"] < 0.3, found
    assert found["process_cpus"] * prof.report().wall < 0.3, found
