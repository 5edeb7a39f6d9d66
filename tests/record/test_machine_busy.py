"""How busy the machine was during a run, apart from the run itself:
measured from the kernel's CPU ticks, recorded in meta["host"], and
read back by compare (a busier machine slows unchanged code)."""
import contextlib
import subprocess
import sys
import time

import pytest

import aquaprof as ap
from aquaprof.record import host
from aquaprof.record.host import BUSY_SECONDS, busy_between, cpu_ticks

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
    """Another process spinning on a CPU meanwhile, already running."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)
        yield
    finally:
        hog.kill()
        hog.wait()


@linux_only
def test_a_process_spinning_beside_the_run_is_counted_and_the_run_not(
        tmp_path):
    with a_process_spinning():
        busy = spin(0.5).meta["host"]
    # the hog's CPU is in it, and the run's own spinning (a CPU more) is
    # not
    assert 0.5 <= busy["other_cpus"] <= 1.5, busy
    assert 0 <= busy["steal"] <= 1
    saved = ap.Report.load(spin(0.3).save(tmp_path / "run.json"))
    assert "other_cpus" in saved.meta["host"]


def test_busy_between_ticks(monkeypatch):
    monkeypatch.setattr(host.os, "sysconf", lambda name: 100)
    monkeypatch.setattr(host.os, "cpu_count", lambda: 2)
    # 2 s of a 2-CPU machine at 100 ticks a second: 400 ticks, 300 busy
    # of which this process used 1.2 s, 20 stolen
    start = (10.0, 5.0, 1000, 0, 5000)
    stop = (12.0, 6.2, 1300, 20, 5400)
    assert busy_between(start, stop) == {"other_cpus": 0.9, "steal": 0.05}
    # this process's own CPU past what the ticks saw (rounding): never
    # below 0
    assert busy_between(start, (12.0, 9.0, 1300, 20, 5400))[
        "other_cpus"] == 0.0
    # too short to tell (on 2 CPUs; 4 times as long on 32), or nothing
    # read, or a clock that says nothing
    short = (10.0 + BUSY_SECONDS * 0.99, 5.1, 1010, 0, 5050)
    assert busy_between(start, short) == {}
    long = (10.0 + BUSY_SECONDS * 2, 5.1, 1010, 0, 5100)
    assert busy_between(start, long) != {}
    monkeypatch.setattr(host.os, "cpu_count", lambda: 32)
    assert busy_between(start, long) == {}
    assert busy_between(None, stop) == busy_between(start, None) == {}
    monkeypatch.setattr(host.os, "sysconf", lambda name: -1)
    assert busy_between(start, stop) == {}


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
    quiet = spin(0.4).save(tmp_path / "quiet.json")
    with a_process_spinning():
        busy = spin(0.4).save(tmp_path / "busy.json")
    out = subprocess.run([sys.executable, "-m", "aquaprof", "compare",
                          str(quiet), str(busy)], capture_output=True,
                         text=True).stdout
    assert "note: the machine was busier during the new run: other " \
           "processes kept" in out, out
