"""A profiler left on costs bounded memory and next to no idle CPU, and
running out of memory never raises into the profiled program nor loses
the run: many distinct stage paths, a thread per request, the max_stages
cap, allocation failures while recording and at report(), the memory
sampler at rest. Memory is read as the core counts its own
(Profiler._footprint(); tracemalloc does not see the C core) and as RSS
with wide margins; benchmarks/bench_memory.py prints the figures."""
import _thread
import contextvars
import json
import threading
import time

import numpy as np
import pytest

import aquaprof as ap
from aquaprof import _core


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.fixture
def failing():
    """_core._fail_allocations, turned off again whatever the test does."""
    yield _core._fail_allocations
    _core._fail_allocations(0, 0)


def quiet(**options):
    return ap.Profiler(compensate=False, cuda=False, **options)


def test_many_distinct_paths_cost_little_memory():
    # a full histogram a path made this 11 KiB a path, 330 MB here
    n = 30_000
    names = [f"path-{i}" for i in range(n)]
    stage = ap.stage
    with quiet(memory=False) as prof:
        with stage("warm-up"):
            pass
        before, held = rss(), prof._core._footprint()
        for name in names:
            with stage(name):
                pass
        grown = rss() - before
        per_path = (prof._core._footprint() - held) / n
    assert grown < n * 2048, f"{grown / n:.0f} bytes a path"
    assert per_path < 1024, per_path
    rep = prof.report()
    assert len(rep.stages) == n + 1
    assert rep["path-29999"].count == 1


def test_ended_threads_cost_little_memory():
    # each thread kept its buffers until report() before: a 196 KiB span
    # chunk, a full-size histogram a path and more
    def request():
        with ap.stage("request"):
            with ap.stage("parse"):
                pass

    def run_threads(n):
        for _ in range(n):
            t = threading.Thread(target=request)
            t.start()
            t.join()

    with quiet(memory=False) as prof:
        run_threads(20)                 # thread stacks, the span pool
        before = prof._core._footprint()
        run_threads(1000)
        per_thread = (prof._core._footprint() - before) / 1000
    assert per_thread < 1024, per_thread
    rep = prof.report()
    assert rep["request"].count == rep["request/parse"].count == 1020
    assert len(rep.threads) == 1020
    assert len(rep.spans()) == 2040 and rep.spans_dropped == 0


#: ended threads kept whole (csrc/core/session_internal.h's
#: AP_KEPT_THREADS): past them, an ended thread that kept no span gives
#: its index to the next new thread
KEPT = 16_384


def request():
    with ap.stage("request"):
        with ap.stage("parse"):
            pass


def run_threads(n, target=request):
    for _ in range(n):
        t = threading.Thread(target=target, name=target.__name__)
        t.start()
        t.join()


def test_ended_threads_past_the_first_16384_share_one_row(tmp_path):
    # a record an ended thread, without end: 8 GiB a day at 100 threads a
    # second
    held_contexts = []

    def request_keeping_its_context():
        request()
        held_contexts.append(contextvars.copy_context())

    with quiet(memory=False, max_spans=1000) as prof:
        run_threads(KEPT + 100)
        before = prof._core._footprint()
        run_threads(1, request_keeping_its_context)
        with quiet(memory=False) as inner:
            run_threads(400)
        grown = prof._core._footprint() - before
    assert grown < 8192, f"{grown} bytes over 401 threads"
    rep = prof.report()
    n = KEPT + 501
    assert rep["request"].count == rep["request/parse"].count == n
    rows = rep.threads
    folds = [t for t in rows if t.get("folded")]
    past = [t for t in rows[KEPT:] if not t.get("folded")]
    # Thread.join() returns before the thread's exit hook retires its
    # record, so a thread may start before the last one's index is free:
    # a few rows past the kept ones, never one a thread
    assert len(folds) == 1 and len(past) < 20, len(past)
    assert folds[0]["folded"] + len(past) == n - KEPT
    assert "name" not in folds[0] and folds[0]["spans"] == 0
    # the program still holds that thread's context, which points at it
    assert "request_keeping_its_context" in [t["name"] for t in past]
    assert sum(t["dropped"] for t in rows) == rep.spans_dropped
    assert len(rep.spans()) + rep.spans_dropped == 2 * n
    assert rows[KEPT - 1]["name"] == "request"
    assert f"{n:,} threads" in str(rep)
    loaded = ap.Report.from_dict(rep.to_dict())
    assert loaded.threads == rows
    trace = json.loads(rep.to_chrome_trace(tmp_path / "t.json").read_text())
    names = [e["args"]["name"] for e in trace["traceEvents"]
             if e.get("name") == "thread_name"]
    assert len(names) == len(rows) - 1
    assert not any("folded" in n for n in names)

    # the inner run: its 400 threads, each in a row of its own or in the
    # fold
    inner_rep = inner.report()
    assert inner_rep["request"].count == 400
    inner_folds = [t for t in inner_rep.threads if t.get("folded")]
    inner_rows = [t for t in inner_rep.threads if not t.get("folded")]
    assert len(inner_folds) == 1
    assert inner_folds[0]["folded"] + len(inner_rows) == 400
    assert sum(t["dropped"] for t in inner_rep.threads) \
        == inner_rep.spans_dropped == 800


def test_an_index_taken_over_holds_nothing_of_the_thread_before():
    held, names = [], []
    go = threading.Event()

    def request_keeping_its_context():
        request()
        held.append(contextvars.copy_context())

    def long_lived():
        request()               # its record made before the inner run
        go.wait(30)
        request()               # dropped while the inner runs

    def request_then(barrier):
        request()
        barrier.wait(30)

    def unnamed():
        request()
        names.append(threading.get_native_id())
        go.set()

    with quiet(memory=False, max_spans=1000) as prof:
        run_threads(KEPT + 100)
        run_threads(1, request_keeping_its_context)
        time.sleep(0.05)        # its exit hook ran
        held.clear()            # the context, and so the record, let go
        run_threads(20)
        waiting = threading.Thread(target=long_lived)
        waiting.start()
        time.sleep(0.05)
        run_threads(1)          # its record free at the mark, taken over
        time.sleep(0.05)        # in the inner run: not the inner's thread
        with quiet(memory=False) as inner:
            go.set()
            waiting.join()
            time.sleep(0.05)
            for _ in range(10):     # two at once take both free records
                both = threading.Barrier(2)
                pair = [threading.Thread(target=request_then, args=(both,))
                        for _ in "ab"]
                for t in pair:
                    t.start()
                for t in pair:
                    t.join()
        go.clear()
        _thread.start_new_thread(unnamed, ())
        assert go.wait(30)
        time.sleep(0.05)
    rows = prof.report().threads
    # the record of a thread whose context outlived it is taken over once
    # the context goes
    assert "request_keeping_its_context" not in [t.get("name")
                                                 for t in rows]
    # a thread threading did not start, at an index a named one held
    mine = [t for t in rows if t["native_id"] == names[0]]
    assert len(mine) == 1 and "name" not in mine[0]
    # the inner run counts the threads that ran in it: 20, and the one
    # that ended in it
    inner_rep = inner.report()
    assert inner_rep["request"].count == 21
    staged = sum(t.get("folded", 1) for t in inner_rep.threads)
    assert staged == 21, inner_rep.threads
    assert f"{staged} threads" in str(inner_rep)


def test_a_thread_ending_with_a_stage_open_closes_it():
    def leave_open():
        ap.stage("left open").__enter__()

    with quiet() as prof:
        t = threading.Thread(target=leave_open)
        t.start()
        t.join()
    rep = prof.report()
    assert rep["left open"].count == 1 and rep["left open"].unclosed == 1
    assert rep.unclosed == 1


def test_max_stages_folds_new_paths_and_says_so():
    with quiet(max_stages=3) as prof:
        for name in ("a", "b", "c", "d", "e"):
            with ap.stage(name):
                with ap.stage("child"):
                    pass
    rep = prof.report()
    paths = {s.path: s.count for s in rep.stages}
    # a, a/child and b fit; the rest fold under their parents
    assert paths == {"a": 1, "a/child": 1, "b": 1,
                     "b/(over max_stages)": 1, "(over max_stages)": 6}
    assert rep.meta["stages_overflowed"] == 7
    assert rep.meta["max_stages"] == 3
    assert "7 entries of stage paths past max_stages=3" in str(rep)
    loaded = ap.Report.from_dict(rep.to_dict())
    assert loaded.meta["stages_overflowed"] == 7
    merged = ap.merge([rep, rep])
    assert merged.meta["stages_overflowed"] == 14


def test_max_stages_defaults_to_100000():
    with quiet() as prof:
        with ap.stage("x"):
            pass
    rep = prof.report()
    assert rep.meta["max_stages"] == 100_000
    assert rep.meta["stages_overflowed"] == 0
    assert "max_stages" not in str(rep)


def test_a_name_per_request_past_max_stages_is_not_kept():
    # every name entered was interned for the process's life: 92 MB a
    # million names like these, whatever max_stages, across sessions too
    n, cap = 200_000, 100
    suffix = "-a-suffix-as-long-as-a-request-path-makes-it" * 2

    def requests(prefix):
        for i in range(n):
            with ap.stage(f"{prefix}-{i:07d}{suffix}"):
                pass

    with quiet(memory=False, max_stages=cap, max_spans=1000) as prof:
        with ap.stage("known"):
            pass
        names0 = _core._interned_names()
        requests("warm-up")             # fills the table, the allocator's
        names1, rss1 = _core._interned_names(), rss()
        requests("request")
        with ap.stage("known"):         # a name held before still works
            pass
        names2, rss2 = _core._interned_names(), rss()
    assert names1 - names0 <= cap       # at most a path's worth each
    assert names2 == names1             # the table was full: none added
    # 200,000 names held were 36 MB here; the margin is for the machine
    assert rss2 - rss1 < 8 * 2**20, f"{(rss2 - rss1) / 2**20:.1f} MiB"
    rep = prof.report()
    assert len(rep.stages) == cap + 1   # the paths, and the fold
    overflowed = 2 * n - (cap - 1)
    assert rep.meta["stages_overflowed"] == overflowed
    assert rep["(over max_stages)"].count == overflowed
    assert rep["known"].count == 2
    assert f"{overflowed:,} entries of stage paths past max_stages=100" \
        in str(rep)
    with quiet(memory=False, max_stages=cap, max_spans=1000) as again:
        requests("next run")            # a session adds max_stages at most
    assert _core._interned_names() - names2 <= cap
    assert again.report().meta["stages_overflowed"] == n - cap


@pytest.mark.parametrize("bad, error", [
    (0, ValueError), (-1, ValueError), (2**30 + 1, ValueError),
    (True, TypeError), ("10", TypeError), (1.5, TypeError),
])
def test_bad_max_stages_is_refused(bad, error):
    with pytest.raises(error, match="max_stages"):
        ap.Profiler(max_stages=bad)


def test_a_thread_that_cannot_register_is_counted(failing):
    stage = ap.stage("in a thread")
    outcome = []

    def run():
        failing(0, -1)
        try:
            with stage:
                pass
            outcome.append("ran")
        finally:
            failing(0, 0)

    with quiet() as prof:
        t = threading.Thread(target=run)
        t.start()
        t.join()
    assert outcome == ["ran"]           # nothing raised into the thread
    rep = prof.report()
    assert rep.meta["lost"] == 1
    assert "1 stage call was not recorded in full" in str(rep)


def test_out_of_memory_while_recording_never_raises(failing):
    stages = [ap.stage(f"s{i}") for i in range(50)]

    @ap.stage("decorated")
    def work(x):
        return x + 1

    with quiet() as prof:
        with stages[0]:
            pass
        failing(0, -1)
        total = 0
        for s in stages:
            with s:
                total = work(total)
        failing(0, 0)
        with stages[49]:                # recording goes on as memory does
            pass
    assert total == 50
    rep = prof.report()
    assert rep["s0"].count == 2         # a path known before needs nothing
    assert rep.meta["lost"] >= 49       # what needed memory, counted
    assert rep["s49"].count >= 1


def test_report_needs_no_memory_but_the_spans(failing):
    with quiet() as prof:
        for _ in range(200):
            with ap.stage("kept"):
                pass
    failing(0, -1)
    try:
        rep = prof.report()
    finally:
        failing(0, 0)
    assert rep["kept"].count == 200             # aggregates whole
    assert len(rep.spans()) == 0 and rep.meta["spans_shed"] == 200
    assert "200 raw spans were left out of the report" in str(rep)
    assert ap.Report.from_dict(rep.to_dict()).meta["spans_shed"] == 200


def test_an_idle_profiler_samples_memory_rarely():
    # the sampler read RSS every millisecond all along before: about 1000
    # samples over this run; now 100 ms at that pace, then 4 a second
    with quiet(memory_interval=0.001) as prof:
        with ap.stage("start"):
            pass
        time.sleep(1.0)
    samples = prof.report().memory_samples
    assert len(samples) < 250, len(samples)


def test_a_stage_open_keeps_the_sampler_at_its_pace():
    with quiet(memory_interval=0.001) as prof:
        time.sleep(0.3)                 # at rest
        with ap.stage("open"):
            time.sleep(0.3)
    rep = prof.report()
    start = rep.spans()[0]
    inside = [t for t, _ in rep.memory_samples
              if start["start_ns"] <= t <= start["end_ns"]]
    assert len(inside) >= 30, len(inside)   # about 300 at 1 kHz


def test_a_stage_after_a_rest_reads_fresh_memory():
    # the first stage after the sampler rested takes its own sample: what
    # was allocated before it is not its memory
    with quiet(memory_interval=0.001) as prof:
        with ap.stage("first"):
            pass
        time.sleep(0.3)
        block = np.ones(64 << 20 >> 3)          # 64 MiB, outside stages
        with ap.stage("after the rest"):
            pass
        del block
    rep = prof.report()
    assert abs(rep["after the rest"].mem_delta) < 16 << 20
    assert rep["after the rest"].mem_peak > 64 << 20


def test_a_memory_error_while_the_report_is_built_keeps_the_run():
    # Python's own allocations failing from the n-th on, for growing n:
    # each report_data() that fails must leave the run whole for the next
    # (the binding's part; Python's import machinery, which Report() may
    # reach, does not survive such failures itself)
    _testcapi = pytest.importorskip("_testcapi")
    core = _core.Profiler(max_spans=1000)
    core.start()
    for i in range(300):
        with ap.stage(f"s{i % 30}"):
            pass
    core.stop()

    def attempt(start):
        # nothing here allocates while the hooks are on but the call
        _testcapi.set_nomemory(start, 0)
        try:
            return core.report_data()
        except MemoryError:
            return None
        finally:
            _testcapi.remove_mem_hooks()

    failures, data = 0, None
    for start in range(0, 20_000):
        data = attempt(start)
        if data is not None:
            break
        failures += 1
    assert failures > 100 and data is not None
    assert len(data["spans"]) == 300 and data["spans_shed"] == 0
    assert sum(s["count"] for s in data["stages"]) == 300
    assert core.report_data() is data


def test_footprint_needs_a_session_of_this_process():
    prof = _core.Profiler()
    with pytest.raises(RuntimeError, match="_footprint"):
        prof._footprint()
    prof.start()
    prof.stop()
    assert prof._footprint() > 0
    prof.report_data()
    with pytest.raises(RuntimeError, match="not yet reported"):
        prof._footprint()

