"""What a stage's other threads did while it was open, from each sample's
CPU time on the timeline: the rates inside and outside its calls hold
whatever the sampling's pace, a capped timeline, several processes; and
where they cannot be told, nothing is said."""
import threading
import time

import numpy as np

import aquaprof as ap
from aquaprof.analysis.other_threads import other_threads
from aquaprof.model import schema


def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(500))


def beside_a_busy_thread(before=0.2, after=0.2, **options):
    """`nap` asleep 0.2 s in a run in which another thread computes all
    along."""
    done = threading.Event()

    def busy():
        while not done.is_set():
            spin(0.005)
    with ap.Profiler(sample=0.001, compensate=False, **options) as prof:
        worker = threading.Thread(target=busy)
        worker.start()
        time.sleep(before)
        with ap.stage("nap"):
            time.sleep(0.2)
        time.sleep(after)
        done.set()
        worker.join()
    return prof.report()


def test_a_thread_busy_all_along_is_as_busy_inside_as_outside():
    rep = beside_a_busy_thread()
    found = other_threads(rep, rep["nap"])
    assert 0.6 < found.inside < 1.1 and 0.6 < found.outside < 1.1
    assert abs(found.inside - found.outside) < 0.25
    assert found.hottest.startswith("spin")


def test_a_capped_timeline_measures_only_the_time_it_covers():
    # the timeline keeps the first samples: the rest of the run is not
    # counted as time the other thread was idle
    rep = beside_a_busy_thread(before=0.05, after=0.6, max_samples=150)
    assert rep.samples["timeline_dropped"] > 0
    found = other_threads(rep, rep["nap"])
    assert found is not None and abs(found.inside - found.outside) < 0.25
    assert rep.diagnose(top=1).findings[0].kind == "waiting"


def test_a_file_without_each_samples_cpu_time_says_nothing(tmp_path):
    rep = beside_a_busy_thread()
    data = rep.to_dict()
    old = np.zeros(len(rep.samples["timeline"]), schema.TIMELINE_DTYPE_TIMES)
    old["t_ns"] = rep.samples["timeline"]["t_ns"]
    old["stack"] = rep.samples["timeline"]["stack"]
    data["samples"]["timeline"] = schema.encode_array(
        old, schema.TIMELINE_DTYPE_TIMES)
    back = ap.Report.from_dict(data)
    timeline = back.samples["timeline"]
    assert timeline.dtype == schema.TIMELINE_DTYPE
    assert (timeline["cpu_us"] == schema.CPU_UNKNOWN).all()
    assert timeline["t_ns"].tolist() == old["t_ns"].tolist()
    assert other_threads(back, back["nap"]) is None
    assert back.diagnose(top=1).findings[0].kind == "waiting"


def test_calls_a_few_samples_long_are_not_split():
    with ap.Profiler(sample=0.001, compensate=False) as prof:
        for _ in range(50):
            with ap.stage("blink"):
                time.sleep(0.001)
    rep = prof.report()
    assert other_threads(rep, rep["blink"]) is None
