"""How busy the machine was during a run, apart from the run itself:
measured from the kernel's CPU ticks, recorded in meta["host"], and
read back by compare (a busier machine slows unchanged code)."""
import subprocess
import sys
import time

import pytest

import aquaprof as ap
from aquaprof.record import host
from aquaprof.record.host import BUSY_TICKS, busy_between, cpu_ticks

linux_only = pytest.mark.skipif(cpu_ticks() is None,
                                reason="no /proc/stat on this system")


def spin(seconds):
    with ap.Profiler() as prof:
        with ap.stage("spin"):
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
    return prof.report()


@linux_only
def test_a_process_spinning_beside_the_run_is_counted_and_the_run_not(
        tmp_path):
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)         # the hog running before the run
        busy = spin(0.5).meta["host"]
    finally:
        hog.kill()
        hog.wait()
    # the run's own spinning (a CPU) is not in it; the hog's is
    assert 0.5 <= busy["other_cpus"] <= 2.0, busy
    assert 0 <= busy["steal"] <= 1
    saved = ap.Report.load(spin(0.3).save(tmp_path / "run.json"))
    assert "other_cpus" in saved.meta["host"]


def test_busy_between_ticks(monkeypatch):
    monkeypatch.setattr(host.os, "sysconf", lambda name: 100)
    # 2 s of a 2-CPU machine at 100 ticks a second: 400 ticks, 300 busy
    # of which this process used 1.2 s, 20 stolen
    start = (10.0, 5.0, 1000, 0, 5000)
    stop = (12.0, 6.2, 1300, 20, 5400)
    assert busy_between(start, stop) == {"other_cpus": 0.9, "steal": 0.05}
    # this process's own CPU past what the ticks saw (rounding): never
    # below 0
    assert busy_between(start, (12.0, 9.0, 1300, 20, 5400))[
        "other_cpus"] == 0.0
    # too few ticks to tell, or nothing read
    assert busy_between(start, (10.1, 5.1, 1010, 0, 5000 + BUSY_TICKS - 1)
                        ) == {}
    assert busy_between(None, stop) == busy_between(start, None) == {}


@linux_only
def test_a_second_stop_does_not_stretch_the_run():
    prof = ap.Profiler().start()
    prof.stop()
    first = prof._stop_ticks
    time.sleep(0.05)
    prof.stop()
    assert prof._stop_ticks is first
