"""Threads are named after their Python thread (threading.Thread.name) in
the report and every view: the name as it is at stop (or at a running
profiler's report) while the Thread lives, and, for one the program
dropped before, the name it had at its first stage, without holding its
Thread; threads that threading did not start, and reports written
before names, keep the tid label.
Names are the program's text, escaped in every output."""
import _thread
import concurrent.futures
import gc
import json
import threading
import time
import weakref
from types import SimpleNamespace
import xml.etree.ElementTree as ET

import pytest

import aquaprof as ap
import crafted
from aquaprof.views.html import report_html
from aquaprof.views.speedscope import speedscope
from aquaprof.views.threads import thread_count, thread_label, \
    threads_summary
from aquaprof.views.trace import chrome_trace
from flamegraph_frames import frames_by_path

HOSTILE = 'loader <script>alert("x")</script>\n\'q\' & \x1b[31m'
PRINTED = 'loader <script>alert("x")</script>\\n\'q\' & \\x1b[31m'


def staged(name="work"):
    with ap.stage(name):
        pass


def run_on_thread(name=None, target=staged):
    t = threading.Thread(target=target, name=name)
    t.start()
    t.join()
    return t


def names_of(report):
    return [t.get("name") for t in report.threads]


def test_main_thread_and_named_threads_are_named():
    with ap.Profiler(sample=None) as prof:
        staged()
        run_on_thread("loader-0")
    assert names_of(prof.report()) == ["MainThread", "loader-0"]


@pytest.mark.parametrize("dropped, named", [(False, "after"),
                                            (True, "before")])
def test_a_thread_renamed_after_its_first_stage(dropped, named):
    """Named as it is at stop while the program holds its Thread; once the
    program dropped it, which held the new name, the name noted at its
    first stage stands."""
    entered, renamed = threading.Event(), threading.Event()

    def work():
        staged()
        entered.set()
        renamed.wait(10)
        staged()

    with ap.Profiler(sample=None) as prof:
        t = threading.Thread(target=work, name="before")
        t.start()
        entered.wait(10)
        t.name = "after"
        renamed.set()
        t.join()
        if dropped:
            del t
            gc.collect()
    assert names_of(prof.report()) == [named]


def test_a_thread_ended_and_dropped_before_the_report_keeps_its_name():
    with ap.Profiler(sample=None) as prof:
        run_on_thread("gone")      # its Thread object dropped at once
        staged()
    assert names_of(prof.report()) == ["gone", "MainThread"]


def test_a_thread_still_running_at_the_report_is_named():
    entered, release = threading.Event(), threading.Event()

    def wait():
        with ap.stage("waiting"):
            entered.set()
            release.wait(10)

    t = threading.Thread(target=wait, name="still here")
    with ap.Profiler(sample=None) as prof:
        t.start()
        assert entered.wait(10)
    try:
        assert names_of(prof.report()) == ["still here"]
    finally:
        release.set()
        t.join()


def test_threads_threading_did_not_start_keep_the_tid_label():
    done = threading.Event()

    def raw():
        staged("raw")
        done.set()

    def dummy():
        threading.current_thread()     # a _DummyThread, "Dummy-N"
        staged("dummy")
        done.set()

    with ap.Profiler(sample=None) as prof:
        for target in (raw, dummy):
            done.clear()
            _thread.start_new_thread(target, ())
            assert done.wait(10)
    threads = prof.report().threads
    assert [t.get("name") for t in threads] == [None, None]
    assert [thread_label(t) for t in threads] == [
        f"thread {t['index']} (tid {t['native_id']})" for t in threads]


def test_a_name_property_of_a_subclass_is_never_run():
    class Worker(threading.Thread):
        @property
        def name(self):
            raise AssertionError("the report ran the program's code")

        @name.setter
        def name(self, value):
            self._name = value

    with ap.Profiler(sample=None) as prof:
        w = Worker(target=staged, name="worker")
        w.start()
        w.join()
    assert names_of(prof.report()) == ["worker"]


def test_names_survive_a_run_started_before_the_report():
    with ap.Profiler(sample=None) as first:
        run_on_thread("first run")
    with ap.Profiler(sample=None) as second:
        run_on_thread("second run")
    assert names_of(first.report()) == ["first run"]
    assert names_of(second.report()) == ["second run"]


def test_a_nested_profiler_names_its_threads():
    with ap.Profiler(sample=None):
        with ap.Profiler(sample=None) as inner:
            run_on_thread("inner worker")
    assert names_of(inner.report()) == ["inner worker"]


def test_snapshots_name_the_threads():
    with ap.Profiler(sample=None, window=4) as prof:
        staged()
        threads = prof._core.snapshot_data()["threads"]
    assert [t.get("name") for t in threads] == ["MainThread"]


def test_an_ended_thread_is_the_programs_to_free_while_the_run_goes_on():
    """A service that starts a thread per request: each ended Thread,
    with what it holds, is freed as the program drops it, not kept until
    the report; the report names it as it was named at its first stage."""
    class Request(threading.Thread):
        def __init__(self):
            super().__init__(name="request")
            self.payload = bytearray(1 << 20)

        def run(self):
            staged()

    with ap.Profiler(sample=None) as prof:
        refs = []
        for _ in range(20):
            t = Request()
            refs.append(weakref.ref(t))
            t.start()
            t.join()
            del t
        gc.collect()
        assert sum(ref() is not None for ref in refs) == 0
    assert names_of(prof.report()) == ["request"] * 20


def test_a_thread_alive_at_stop_is_named_as_then_and_let_go():
    go = threading.Event()

    def work():
        staged()
        go.wait(10)

    prof = ap.Profiler(sample=None).start()
    t = threading.Thread(target=work, name="at stop")
    t.start()
    prof.stop()
    t.name = "renamed after the stop"
    ref = weakref.ref(t)
    go.set()
    t.join()
    del t
    gc.collect()
    assert ref() is None          # the stopped profiler holds names only
    assert names_of(prof.report()) == ["at stop"]


def test_a_profiler_dropped_while_running_lets_go_of_its_threads():
    prof = ap.Profiler(sample=None)
    prof.start()
    ref = weakref.ref(run_on_thread("dropped"))
    del prof
    gc.collect()
    assert not ap.active()
    assert ref() is None


# ------------------------------------------------------------- the file

def test_names_are_saved_and_loaded(tmp_path):
    with ap.Profiler(sample=None) as prof:
        run_on_thread(HOSTILE)
    report = prof.report()
    loaded = ap.Report.load(report.save(tmp_path / "r.json"))
    assert loaded == report
    assert names_of(loaded) == [HOSTILE]


def test_a_report_without_names_shows_the_old_labels():
    report = ap.Report.from_dict(crafted.report([crafted.stage("only")]))
    assert "name" not in report.threads[0]
    label = f"thread 0 (tid {report.threads[0]['native_id']})"
    assert thread_label(report.threads[0]) == label
    trace = json.loads(chrome_trace(report))
    assert [e["args"]["name"] for e in trace["traceEvents"]
            if e["name"] == "thread_name"] == [label]
    assert [p["name"] for p in speedscope(report)["profiles"]] == [label]
    assert "1 thread," in str(report)


def test_a_folded_row_counts_its_threads_and_draws_no_track():
    # past the first 16,384 threads, one row sums the ended threads that
    # kept no span
    data = crafted.report([crafted.stage("only")])
    data["threads"][0]["name"] = "MainThread"
    data["threads"].append({"index": 1, "native_id": 0, "spans": 0,
                            "dropped": 7, "folded": 20_000})
    report = ap.Report.from_dict(data)
    fold = report.threads[1]
    assert thread_label(fold) == "20,000 ended threads, folded"
    assert threads_summary(report.threads) == \
        "MainThread; 20,000 ended threads, folded"
    assert "20,001 threads (MainThread; 20,000 ended" in str(report)
    trace = json.loads(chrome_trace(report))
    assert [e["args"]["name"] for e in trace["traceEvents"]
            if e["name"] == "thread_name"] == ["MainThread (tid 42)"]
    assert [p["name"] for p in speedscope(report)["profiles"]] == \
        ["MainThread (tid 42)"]
    # the sampler saw two folded threads in a stage (they have no row, and
    # count once) and one thread that staged nothing
    stacks = [[0, 42, 0], [0, 7001, 0], [0, 7002, 0], [0, 7003, -1]]
    seen = SimpleNamespace(threads=report.threads,
                           samples={"stacks": stacks})
    assert thread_count(seen) == (20_002, 1)


def test_a_name_that_is_not_text_is_refused():
    data = crafted.report([crafted.stage("only")])
    data["threads"][0]["name"] = 42
    with pytest.raises(ap.ReportError, match=r"threads\[0\]\['name'\] "
                                             r"must be str"):
        ap.Report.from_dict(data)


# ------------------------------------------------------------ the views

@pytest.fixture(scope="module")
def hostile():
    with ap.Profiler(sample=None) as prof:
        staged()
        run_on_thread(HOSTILE)
    return prof.report()


def test_the_trace_names_each_track(hostile):
    trace = json.loads(chrome_trace(hostile))
    tids = [t["native_id"] for t in hostile.threads]
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["name"] == "thread_name"}
    assert names == {tids[0]: f"MainThread (tid {tids[0]})",
                     tids[1]: f"{PRINTED} (tid {tids[1]})"}


def test_speedscope_profiles_carry_the_names(hostile):
    profiles = json.loads(json.dumps(speedscope(hostile)))["profiles"]
    assert [p["name"] for p in profiles] == [
        thread_label(t) for t in hostile.threads]
    assert profiles[1]["name"].startswith(PRINTED)


def test_the_text_header_names_the_threads_on_one_line(hostile):
    first = str(hostile).splitlines()[0]
    short = PRINTED[:37] + "..."
    assert f"2 threads (MainThread, {short})," in first


def test_the_flamegraph_root_names_the_threads_and_parses(hostile,
                                                          tmp_path):
    path = hostile.to_flamegraph(tmp_path / "f.svg")
    root = ET.parse(path).getroot()      # still well-formed XML
    top = frames_by_path(root)[""]
    assert "(MainThread, loader <script>" in top.get("data-details")
    assert "<script>alert" not in path.read_text()


def test_html_escapes_the_names(hostile):
    page = report_html(hostile)
    assert "loader &lt;script&gt;alert(&quot;x&quot;)" in page
    assert "<script>" not in page


def test_merged_processes_keep_their_threads_names(hostile):
    merged = ap.merge([hostile, hostile], ["a", "b"])
    assert names_of(merged) == ["MainThread", HOSTILE] * 2
    assert [t["process"] for t in merged.threads] == [0, 0, 1, 1]
    assert threads_summary(merged.threads).startswith("MainThread x2, ")
    trace = json.loads(chrome_trace(merged))
    pids = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e["name"] == "process_name"}
    by_process = sorted((pids[e["pid"]], e["args"]["name"].split(" (")[0])
                        for e in trace["traceEvents"]
                        if e["name"] == "thread_name")
    assert by_process == [("a", "MainThread"), ("a", PRINTED),
                          ("b", "MainThread"), ("b", PRINTED)]


def test_a_summary_lists_a_few_names_then_counts_the_rest():
    threads = [{"index": i, "native_id": 100 + i, "name": f"w{i}"}
               for i in range(6)] + [{"index": 6, "native_id": 106}]
    assert threads_summary(threads) == "w0, w1, w2, w3 and 3 more"
    assert threads_summary(threads[-1:]) == ""
    assert threads_summary([threads[0], threads[-1]]) == "w0, tid 106"


# ------------------------------------- threads the sampler alone saw

def _spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _sampled_pool_run():
    """A sampled run whose work runs in a pool that records no stage and
    is shut down before stop (its threads ended), beside a thread that
    threading did not start; the tids of the pool's threads and the
    other's."""
    tids, bare_tid, done = set(), [], threading.Event()

    def job(_):
        tids.add(threading.get_native_id())
        _spin(0.02)

    def bare():
        bare_tid.append(threading.get_native_id())
        _spin(0.05)
        done.set()

    with ap.Profiler(sample=0.001, compensate=False) as prof:
        with ap.stage("hand out"):
            _thread.start_new_thread(bare, ())
            with concurrent.futures.ThreadPoolExecutor(
                    2, thread_name_prefix="crunch") as pool:
                list(pool.map(job, range(6)))
            assert done.wait(5)
    return prof.report(), tids, bare_tid[0]


def test_threads_that_record_no_stage_are_named_by_the_sampler(tmp_path):
    """A pool's workers record no stage, so no stage names them: the
    sampler names each as threading does when it first samples it, and
    the trace and speedscope title their tracks by it, the tid beside.
    A thread threading did not start keeps the tid label."""
    rep, workers, bare = _sampled_pool_run()
    names = {(p, tid): name for p, tid, name in rep.samples["threads"]}
    assert {names.get((0, tid)) for tid in workers} == \
        {"crunch_0", "crunch_1"}, names
    assert (0, bare) not in names
    trace = json.loads(chrome_trace(rep))
    titles = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
              if e["name"] == "thread_name"}
    for tid in workers:
        assert titles[tid] == f"{names[(0, tid)]} (tid {tid}), sampled code"
    # its label; whether it is also titled idle is the samples' reading
    # of a thread seen mostly waiting for the GIL (tests/views)
    assert titles.get(bare, f"tid {bare}, sampled code").startswith(
        f"tid {bare}, sampled code"), titles
    profiles = {p["name"] for p in speedscope(rep)["profiles"]}
    for tid in workers:
        assert f"{names[(0, tid)]} (tid {tid}), sampled code" in profiles
    # saved and loaded, and merged: each name stays with its process
    loaded = ap.Report.load(rep.save(tmp_path / "r.json"))
    assert loaded.samples["threads"] == rep.samples["threads"]
    merged = ap.merge([rep, loaded], ["a", "b"])
    assert sorted(p for p, _, _ in merged.samples["threads"]) == \
        [0] * len(names) + [1] * len(names)


def test_sampled_names_are_escaped_in_the_trace():
    rep, workers, _ = _sampled_pool_run()
    data = rep.to_dict()
    data["samples"]["threads"] = [[p, tid, HOSTILE]
                                  for p, tid, _ in rep.samples["threads"]]
    hostile = ap.Report.from_dict(data)
    titles = [e["args"]["name"] for e in
              json.loads(chrome_trace(hostile))["traceEvents"]
              if e["name"] == "thread_name" and e["tid"] in workers]
    assert titles and all(t.startswith(PRINTED) for t in titles)


def test_a_sampled_thread_is_named_as_it_is_at_the_end():
    """A thread renamed after the sampler first saw it (a server naming
    its worker once it knows its job) is named by its last name, as the
    threads that record stages are."""
    def work():
        _spin(0.03)
        threading.current_thread().name = "after"
        _spin(0.01)

    with ap.Profiler(sample=0.001, compensate=False) as prof:
        t = threading.Thread(target=work, name="before")
        t.start()
        t.join()
    names = {tid: name for _, tid, name in prof.report().samples["threads"]}
    assert names[t.native_id] == "after"


def test_speedscope_reads_the_sampled_names_once_not_a_thread_at_a_time(
        monkeypatch):
    """Each track of a thread that recorded no stage is titled from the
    section's names: read once, not once a thread, which made the file
    of a server running a thread a request quadratic in its threads
    (800 threads: 0.7 s of 0.85 s)."""
    from aquaprof.views import speedscope as module
    rep, workers, bare = _sampled_pool_run()
    reads = []

    def counted(report):
        reads.append(1)
        return module_names(report)

    module_names = module.sampled_names
    monkeypatch.setattr(module, "sampled_names", counted)
    profiles = {p["name"] for p in speedscope(rep)["profiles"]}
    names = {tid: name for _, tid, name in rep.samples["threads"]}
    for tid in workers:
        assert f"{names[tid]} (tid {tid}), sampled code" in profiles
    assert len(reads) <= 1, len(reads)
