"""Child processes started while a Profiler runs (multiprocessing with
each start method, Pool, ProcessPoolExecutor, torch DataLoader workers)
record their own stages and deliver them to the parent's report; those
that never report are counted, never waited on without end."""
import concurrent.futures
import copy
import multiprocessing
import os
import platform
import signal
import time

import pytest

import aquaprof as ap
import child_work
from aquaprof.record.processes import folder as files
from aquaprof.record.processes import parent
from child_work import calls, exitcode_within

METHODS = [m for m in ("fork", "spawn", "forkserver")
           if m in multiprocessing.get_all_start_methods()]


def profiled(fn, **options):
    options.setdefault("memory", False)
    with ap.Profiler(**options) as prof:
        fn()
    return prof.report()


def run_processes(method, target, args, n=2):
    ctx = multiprocessing.get_context(method)
    procs = [ctx.Process(target=target, args=args) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    return procs


def own_stages(rep, i):
    """Process i's own {path: count}."""
    return {rep.stage_names[row[0]]: row[1]
            for row in rep.processes[i]["stages"]}


@pytest.mark.parametrize("method", METHODS)
def test_each_start_method_delivers_every_call(method):
    rep = profiled(lambda: run_processes(method, calls, (5,)))
    assert rep["work"].count == 10
    assert rep.meta["children"] == {"started": 2, "reported": 2, "lost": []}
    labels = [p["label"] for p in rep.processes]
    assert len(labels) == 3
    assert all(f"(pid {p['pid']})" in p["label"]
               for p in rep.processes[1:])
    assert [own_stages(rep, i) for i in (1, 2)] == [{"work": 5}] * 2
    # one trace track per process: each child's thread is its own
    assert sorted(t.get("process", 0) for t in rep.threads) == [1, 2]


def test_a_multiprocessing_util_imported_anew_still_captures():
    """pytest's in-process runs (pytester) drop the modules a run
    imported: a multiprocessing.util imported again has an empty
    after-fork registry, and the hook must be put in the new one. In a
    process of its own: a second multiprocessing.util is no state to
    leave in this one."""
    code = """
import importlib, multiprocessing, sys
import aquaprof as ap
from child_work import calls

def children():
    ctx = multiprocessing.get_context("fork")
    with ap.Profiler(memory=False) as prof:
        p = ctx.Process(target=calls, args=(3,))
        p.start()
        p.join(30)
    return prof.report().meta["children"]["reported"]

first = children()                       # the hook goes into util now
del sys.modules["multiprocessing.util"]
multiprocessing.util = importlib.import_module("multiprocessing.util")
print(first, children())
"""
    assert run_apart(code).split() == ["1", "1"]


def test_a_child_never_reports_the_parents_stages():
    def parent():
        with ap.stage("outer"):
            run_processes("fork", calls, (3,), n=1)

    rep = profiled(parent)
    assert own_stages(rep, 0) == {"outer": 1}
    # the child's calls sit at the root, not under the parent's open stage
    assert own_stages(rep, 1) == {"work": 3}
    assert "outer/work" not in rep


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_pool_ended_by_terminate_still_delivers(method):
    def parent():
        # `with Pool` ends in terminate(): workers die by SIGTERM
        with multiprocessing.get_context(method).Pool(2) as pool:
            pool.map(child_work.work, range(20))

    rep = profiled(parent)
    assert rep["work"].count == 20
    children = rep.meta["children"]
    assert children["lost"] == []
    assert children["reported"] == children["started"] >= 1


# the child's helper waits for its main thread's system call (futex) in
# /proc before it sends the signal
READS_SYSCALL = pytest.mark.skipif(
    platform.machine() != "x86_64" or not os.path.exists("/proc/self/task"),
    reason="reads the main thread's system call in /proc")


@READS_SYSCALL
def test_a_sigterm_that_did_not_wake_the_waiting_main_thread_is_sent_again():
    """A SIGTERM taken by Python's C handler just before the main thread
    starts to wait on a lock leaves it waiting: the child's watcher sends
    it again to the main thread, which delivers and dies by it, instead
    of leaving Pool.terminate() to wait for ever."""
    ctx = multiprocessing.get_context("fork")
    lock, ready = ctx.Lock(), ctx.Event()

    def parent():
        lock.acquire()
        p = ctx.Process(target=child_work.calls_then_wait_on,
                        args=(3, lock, ready), daemon=True)
        p.start()
        assert ready.wait(20)
        assert exitcode_within(p, 20) == -signal.SIGTERM

    rep = profiled(parent)
    assert rep["work"].count == 3
    assert rep.meta["children"]["reported"] == 1


@READS_SYSCALL
def test_a_child_past_its_capture_dies_by_a_sigterm_that_did_not_wake_it():
    """Once the parent's Profiler stopped, a child's capture ends and its
    watcher with it: SIGTERM has its default action back, which ends the
    process whichever thread takes it."""
    ctx = multiprocessing.get_context("fork")
    lock, ready = ctx.Lock(), ctx.Event()
    lock.acquire()
    with ap.Profiler(memory=False):
        p = ctx.Process(target=child_work.waits_on_past_its_capture,
                        args=(lock, ready), daemon=True)
        p.start()
        assert ready.wait(20)
    assert exitcode_within(p, 20) == -signal.SIGTERM


def test_a_process_pool_executor_delivers():
    def parent():
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
            list(ex.map(child_work.work, range(12)))

    rep = profiled(parent)
    assert rep["work"].count == 12
    assert rep.meta["children"]["lost"] == []


def test_terminate_delivers_then_the_child_dies_by_sigterm():
    ctx = multiprocessing.get_context("fork")

    ready = ctx.Event()

    def parent():
        p = ctx.Process(target=child_work.calls_then_wait,
                        args=(4, 60, ready))
        p.start()
        assert ready.wait(20)
        p.terminate()
        p.join(20)
        assert p.exitcode == -signal.SIGTERM

    rep = profiled(parent)
    assert rep["work"].count == 4
    assert rep.meta["children"]["reported"] == 1


def test_a_users_own_sigterm_handler_is_left_alone():
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()

    def parent():
        p = ctx.Process(target=child_work.calls_with_own_sigterm_handler,
                        args=(2, ready))
        p.start()
        assert ready.wait(20)
        p.terminate()
        p.join(20)
        assert p.exitcode == 7     # the child's handler ran, not ours

    rep = profiled(parent)
    lost = rep.meta["children"]["lost"]
    assert len(lost) == 1 and "without reporting" in lost[0]["reason"]


def test_a_killed_child_is_counted_lost_and_the_rest_kept():
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()

    def parent():
        calls(2)
        p = ctx.Process(target=child_work.calls_then_wait,
                        args=(3, 60, ready))
        p.start()
        assert ready.wait(20)
        os.kill(p.pid, signal.SIGKILL)
        p.join(20)

    start = time.monotonic()
    rep = profiled(parent)
    assert time.monotonic() - start < 10
    assert rep["work"].count == 2        # the parent's own, nothing more
    children = rep.meta["children"]
    assert children["started"] == 1 and children["reported"] == 0
    assert children["lost"][0]["reason"].startswith(
        "ended without reporting")
    assert "lost" in str(rep) and "killed" in str(rep)


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_child_dying_as_its_target_starts_is_lost_by_its_own_name(method):
    """A spawned child's name arrives with its process object, after its
    capture started: it is named as it bootstraps, not a second later, so
    a crash in its first moments reads 'crasher (pid N)', not 'child'."""
    ctx = multiprocessing.get_context(method)

    def parent():
        p = ctx.Process(target=child_work.killed_at_once, name="crasher")
        p.start()
        p.join(60)
        assert p.exitcode == -signal.SIGKILL

    (lost,) = profiled(parent).meta["children"]["lost"]
    assert lost["label"].startswith("crasher (pid "), lost


def start_running(method, target, *args):
    """A child of target(*args, ready, ...) started and past `ready`: the
    process, and the Events passed after ready."""
    ctx = multiprocessing.get_context(method)
    events = [ctx.Event() for _ in range(target.__code__.co_argcount
                                         - len(args))]
    p = ctx.Process(target=target, args=(*args, *events))
    p.start()
    assert events[0].wait(60)
    return p, events[1:]


def timed_stop(prof):
    start = time.monotonic()
    prof.stop()
    return time.monotonic() - start


@pytest.mark.parametrize("method", METHODS)
def test_a_child_still_running_at_stop_delivers_what_it_recorded(method):
    """A pool or persistent worker outlives the run: the parent asks for
    its report at stop() and gets it within the child's look at the
    folder; the child goes on with its work, its 2 calls after the stop
    recorded nowhere."""
    prof = ap.Profiler(memory=False).start()
    p, (go, done) = start_running(method, child_work.calls_around_a_wait,
                                  3, 2)
    stopping = timed_stop(prof)
    go.set()
    assert done.wait(20)       # the child's work goes on
    p.kill()
    p.join()
    rep = prof.report()
    assert rep.meta["children"] == {"started": 1, "reported": 1, "lost": []}
    assert rep["work"].count == 3
    assert stopping < 1.0, stopping


def test_the_run_ends_at_the_parents_stop_though_a_child_records_on(
        monkeypatch):
    """A child records until it notices the request, which comes after
    the parent's recording stopped: the merged run is no longer for it,
    and shares of the run stay the parent's."""
    asked_ns = []
    collect = parent.collect

    def asking(*args, **kwargs):
        asked_ns.append(time.monotonic_ns())
        return collect(*args, **kwargs)

    monkeypatch.setattr(parent, "collect", asking)
    prof = ap.Profiler(memory=False).start()
    p, _ = start_running("fork", child_work.records_until_killed)
    timed_stop(prof)
    p.kill()
    p.join()
    rep = prof.report()
    assert rep.meta["children"]["reported"] == 1
    assert rep.spans()["end_ns"].max() > asked_ns[0]    # it recorded on
    assert rep.meta["stop_ns"] <= asked_ns[0]


def test_a_child_holding_python_in_c_at_stop_is_counted_lost_in_bounds():
    prof = ap.Profiler(memory=False).start()
    p, _ = start_running("fork", child_work.calls_then_holds_python, 1, 30)
    time.sleep(0.3)      # in its C call by now
    stopping = timed_stop(prof)
    p.kill()
    p.join()
    assert stopping < parent.EXIT_WAIT_S + 1, stopping
    lost = prof.report().meta["children"]["lost"]
    assert len(lost) == 1
    assert lost[0]["reason"].startswith(
        "still running when the profiler stopped, and its report did not "
        "come within 2 s")


def test_a_child_whose_report_cannot_be_made_says_so_without_the_wait():
    prof = ap.Profiler(memory=False).start()
    p, _ = start_running("fork", child_work.cannot_make_its_report)
    stopping = timed_stop(prof)
    p.kill()
    p.join()
    assert [c["reason"] for c in prof.report().meta["children"]["lost"]] \
        == ["its report could not be made"]
    assert stopping < 1.0, stopping


def test_a_child_ending_while_its_thread_delivers_waits_for_it():
    """The child's own thread is building the report its parent asked for
    when the child's target returns: the exit waits for that delivery
    instead of ending the process halfway through it."""
    prof = ap.Profiler(memory=False).start()
    p, _ = start_running("fork",
                         child_work.returns_while_its_report_is_delivered)
    timed_stop(prof)
    assert exitcode_within(p, 20) == 0
    rep = prof.report()
    assert rep.meta["children"] == {"started": 1, "reported": 1, "lost": []}
    assert rep["work"].count == 2


def test_a_sigterm_while_the_childs_thread_delivers_ends_it_after():
    prof = ap.Profiler(memory=False).start()
    p, _ = start_running("fork",
                         child_work.takes_sigterm_while_its_report_is_delivered)
    timed_stop(prof)
    assert exitcode_within(p, 20) == -signal.SIGTERM
    rep = prof.report()
    assert rep.meta["children"] == {"started": 1, "reported": 1, "lost": []}
    assert rep["work"].count == 2


def test_a_child_in_c_while_its_thread_delivers_still_dies_by_sigterm():
    """The child's thread, delivering, cannot finish while the main thread
    holds the GIL in C: a SIGTERM then still ends the child within its
    deadline, as it would unprofiled (the delivery holds no deadline off),
    and the parent's stop() waited a bounded time."""
    prof = ap.Profiler(memory=False).start()
    p, _ = start_running(
        "fork", child_work.holds_python_while_its_report_is_delivered)
    stopping = timed_stop(prof)
    start = time.monotonic()
    p.terminate()
    code = exitcode_within(p, 8)
    took = time.monotonic() - start
    assert code == -signal.SIGTERM
    assert took < parent.SIGTERM_DEADLINE_S + 1.5, took
    assert stopping < parent.EXIT_WAIT_S + 1, stopping


LATER = ("still running, recording for an enclosing Profiler: its calls "
         "are in that one's report")


@pytest.mark.parametrize("first", ["inner", "outer"])
def test_a_live_child_of_nested_profilers_goes_where_the_outer_says(first):
    """The inner Profiler stopped first is told at once that the child
    records on for the outer one, whose report gets every call, those
    made after the inner's stop too. The outer one stopped first ends the
    inner's run too: the child delivers then, to both."""
    profs = {"outer": ap.Profiler(memory=False).start(),
             "inner": ap.Profiler(memory=False).start()}
    p, (go, done) = start_running("fork", child_work.calls_around_a_wait,
                                  2, 3)
    second = "outer" if first == "inner" else "inner"
    stopping = [timed_stop(profs[first])]
    go.set()
    assert done.wait(20)
    stopping.append(timed_stop(profs[second]))
    p.kill()
    p.join()
    inner, outer = profs["inner"].report(), profs["outer"].report()
    if first == "inner":
        assert [c["reason"] for c in inner.meta["children"]["lost"]] == \
            [LATER]
        assert "work" not in inner
        assert outer["work"].count == 5
    else:
        assert inner["work"].count == outer["work"].count == 2
        assert inner.meta["children"]["reported"] == 1
    assert outer.meta["children"] == {"started": 1, "reported": 1,
                                      "lost": []}
    assert max(stopping) < 1.0, stopping


def run_apart(code):
    """stdout of `code` run by a Python of its own (the first Profiler of
    its process, or state not to leave in this one)."""
    import subprocess
    import sys
    from repo_paths import ROOT, SUPPORT
    done = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=120,
                          env=dict(os.environ,
                                   PYTHONPATH=f"{ROOT}{os.pathsep}{SUPPORT}"))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_children_forked_by_a_thread_during_the_first_start_do_not_hang_it():
    """The process's first start computes what a child's report needs
    (platform's uname, under a lock, through a subprocess): a child forked
    by another thread meanwhile would inherit the lock held, wait on it as
    it delivers, and hold the subprocess's pipe open, start() waiting on
    it for ever. Five processes, each its first start."""
    code = """
import multiprocessing, threading, time
import aquaprof as ap

ctx = multiprocessing.get_context("fork")
done = threading.Event()

def churn():
    while not done.is_set():
        p = ctx.Process(target=time.sleep, args=(0,))
        p.start()
        p.join()

threading.Thread(target=churn, daemon=True).start()
time.sleep(0.05)
prof = ap.Profiler(memory=False).start()
prof.stop()
done.set()
print("ok")
"""
    for _ in range(5):
        assert run_apart(code).split() == ["ok"]


def test_the_start_imports_nothing_once_the_folder_is_named():
    """The same hazard, for any import: a child forked while start()
    imports a module would inherit its import lock held, and hang as it
    imports the same. Every module start() needs is loaded before the
    children's folder is named to them."""
    code = """
import sys
import aquaprof as ap
from aquaprof.record.processes import parent

named = []
publish = parent.publish

def spy(*args, **kwargs):
    publish(*args, **kwargs)
    named.append(set(sys.modules))

parent.publish = spy
for options in ({}, {"sample": 0.001}):
    named.clear()
    prof = ap.Profiler(memory=False, **options).start()
    print(sorted(set(sys.modules) - named[0]))
    prof.stop()
"""
    assert run_apart(code).split("\n") == ["[]", "[]", ""]


def test_a_workers_own_profiler_is_not_cut_short_by_the_parents_stop(
        tmp_path):
    """A pool task running a Profiler of its own when the parent stops:
    stopping the worker's capture would end it, so the worker records on
    and the parent says why its report did not come; the capture ends
    after the worker's own Profiler."""
    ctx = multiprocessing.get_context("fork")
    inside = tmp_path / "inside"
    with ap.Profiler(memory=False) as prof:
        pool = ctx.Pool(1)
        result = pool.apply_async(child_work.own_profiler_for,
                                  (1.5, str(inside)))
        deadline = time.monotonic() + 60
        while not inside.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        start = time.monotonic()
    stopping = time.monotonic() - start
    made, counted, recording_after = result.get(60)
    pool.close()
    pool.join()
    assert counted == made
    assert [c["reason"] for c in prof.report().meta["children"]["lost"]] \
        == ["still running a Profiler of its own, which stopping its "
            "capture would have cut short: its calls are not in this "
            "report"]
    assert recording_after is False
    assert stopping < 1.0, stopping


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_a_spawned_child_lost_later_keeps_its_name(method):
    """Its start marker, written as its process object arrives, names it
    `child` until then: named again once it is known."""
    ctx = multiprocessing.get_context(method)
    ready = ctx.Event()
    prof = ap.Profiler(memory=False).start()
    p = ctx.Process(target=child_work.waits_for, args=(ready, 60),
                    name="Loader-7")
    p.start()
    assert ready.wait(60)
    label = f"Loader-7 (pid {p.pid})"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not any(
            m["label"] == label
            for m in parent._markers(prof._capture.folder).values()):
        time.sleep(0.05)
    p.kill()
    p.join()
    prof.stop()
    lost = prof.report().meta["children"]["lost"]
    assert [c["label"] for c in lost] == [label]


def test_an_interrupted_read_of_the_childrens_reports_says_so(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(parent, "collect", interrupted)
    prof = ap.Profiler(memory=False).start()
    folder = prof._capture.folder
    run_processes("fork", calls, (2,), n=1)
    with pytest.raises(KeyboardInterrupt):
        prof.stop()
    rep = prof.report()
    assert rep.meta["children"]["error"] == (
        "stopped before the children's reports were read: they are missing")
    assert "stopped before the children's reports were read" in str(rep)
    assert not os.path.exists(folder)
    assert folder not in str(files.config().get(files.CONFIG_KEY, ()))


def test_a_child_ending_by_its_own_os_exit_is_counted_lost():
    rep = profiled(lambda: run_processes(
        "fork", child_work.calls_then_exit_at_once, (2,), n=1))
    assert rep.meta["children"]["reported"] == 0
    assert len(rep.meta["children"]["lost"]) == 1


def test_grandchildren_report_to_the_profiling_process():
    rep = profiled(lambda: run_processes(
        "fork", child_work.calls_and_a_grandchild, (3,), n=1))
    assert rep["work"].count == 6
    assert rep.meta["children"] == {"started": 2, "reported": 2, "lost": []}


def test_a_nested_profiler_gets_the_children_it_saw_start():
    with ap.Profiler(memory=False) as outer:
        with ap.Profiler(memory=False) as inner:
            run_processes("fork", calls, (2,), n=1)
        run_processes("fork", calls, (3,), n=1)
    assert inner.report()["work"].count == 2
    assert outer.report()["work"].count == 5


def test_children_false_records_no_child():
    rep = profiled(lambda: run_processes("fork", calls, (3,), n=1),
                   children=False)
    assert "work" not in rep and "children" not in rep.meta
    assert len(rep.processes) == 1


def test_max_children_counts_the_rest_as_lost():
    rep = profiled(lambda: run_processes("fork", calls, (1,), n=3),
                   max_children=1)
    assert rep["work"].count == 1
    children = rep.meta["children"]
    assert children["reported"] == 1
    assert [c["reason"] for c in children["lost"]] == \
        ["over max_children (1)"] * 2


def test_processes_started_after_stop_record_nothing(tmp_path):
    ctx = multiprocessing.get_context("fork")
    with ap.Profiler(memory=False) as prof:
        made = ctx.Process(target=calls, args=(2,))
    made.start()            # created while running, started after stop
    made.join(20)
    assert made.exitcode == 0
    assert prof.report().meta["children"]["started"] == 0


def test_a_report_with_children_survives_a_file(tmp_path):
    rep = profiled(lambda: run_processes("fork", calls, (2,), n=1))
    back = ap.Report.load(rep.save(tmp_path / "r.json"))
    assert back == rep
    assert back.meta["children"] == rep.meta["children"]
    data = copy.deepcopy(rep.to_dict())
    data["children"]["reported"] = -1
    with pytest.raises(ap.ReportError, match="children"):
        ap.Report.from_dict(data)
    data = copy.deepcopy(rep.to_dict())
    data["children"]["lost"] = [{"pid": 1}]
    with pytest.raises(ap.ReportError, match="lacks 'label'"):
        ap.Report.from_dict(data)


@pytest.mark.parametrize("bad, error", [
    (dict(children="yes"), TypeError), (dict(children=None), TypeError),
    (dict(max_children=-1), ValueError), (dict(max_children=1.5), TypeError),
    (dict(max_children=True), TypeError),
    (dict(dataloaders=1), TypeError)])
def test_bad_settings_are_refused(bad, error):
    with pytest.raises(error, match=next(iter(bad))):
        ap.Profiler(**bad)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_dataloader_workers_deliver_every_item(method):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    def parent():
        loader = DataLoader(child_work.Squares(), batch_size=4,
                            num_workers=2, multiprocessing_context=method)
        for batch in loader:
            torch.as_tensor(batch).sum()

    rep = profiled(parent)
    assert rep["getitem"].count == 32
    assert rep.meta["children"] == {"started": 2, "reported": 2, "lost": []}
    labels = sorted(p["label"].split(" (")[0] for p in rep.processes[1:])
    assert labels == ["worker 0", "worker 1"]
    # the loop's waits, in the parent only: 8 batches and the epoch's end
    assert rep["next(DataLoader)"].count == 9
    assert "next(DataLoader)" not in own_stages(rep, 1)


def test_loops_are_told_whether_they_wait_on_workers_or_load_themselves():
    """Training on 2 workers of an unstaged dataset (the workers record
    nothing; the torch ops recorded in its next(DataLoader) are not the
    loading), validating with num_workers=0 on one whose loading is
    staged: the training loop is told it waits on its two workers, not to
    add some; the validation loop that it loads its batches itself, its
    decode named."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    def parent():
        with ap.stage("train"):
            for batch in DataLoader(child_work.Unstaged(), batch_size=8,
                                    num_workers=2):
                torch.as_tensor(batch).sum()
        with ap.stage("val"):
            for batch in DataLoader(child_work.Decoded(), batch_size=8):
                torch.as_tensor(batch).sum()

    rep = profiled(parent, torch_ops=True)
    found = {f.path: f for f in rep.diagnose()
             if f.kind == "data-loading-bound"}
    assert rep.meta["children"]["reported"] == 2
    train = found["train/next(DataLoader)"]
    assert "its 2 worker processes recorded none" in train.evidence
    assert "num_workers=0" not in train.evidence
    assert "2 in this report" in train.fix
    val = found["val/next(DataLoader)"].evidence
    assert "loading its batches itself" in val and "decode" in val
    assert "num_workers=0" in val


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_persistent_dataloader_workers_deliver_at_stop(method):
    """persistent_workers=True keeps the workers past the epoch and past
    the Profiler's stop: they deliver what they recorded when asked."""
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    loader = DataLoader(child_work.Squares(), batch_size=4, num_workers=2,
                        persistent_workers=True,
                        multiprocessing_context=method)
    with ap.Profiler(memory=False) as prof:
        for batch in loader:
            torch.as_tensor(batch).sum()
    del loader
    rep = prof.report()
    assert rep.meta["children"] == {"started": 2, "reported": 2, "lost": []}
    assert rep["getitem"].count == 32


def test_dataloaders_false_leaves_the_loader_alone():
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader
    from torch.utils.data.dataloader import _BaseDataLoaderIter
    original = _BaseDataLoaderIter.__next__
    with ap.Profiler(memory=False, dataloaders=False) as prof:
        assert _BaseDataLoaderIter.__next__ is original
        list(DataLoader(child_work.Squares(), batch_size=4))
    rep = prof.report()
    assert rep["getitem"].count == 32 and "next(DataLoader)" not in rep


def test_merging_reports_with_children_keeps_every_process_apart():
    """A rank's workers stay processes of their own when ranks merge, and
    the children's accounts add up."""
    with_children = profiled(lambda: (calls(1), run_processes(
        "fork", calls, (2,), n=2)))
    alone = profiled(lambda: calls(4))
    merged = ap.merge([with_children, alone], ["rank 0", "rank 1"])
    # multiprocessing numbers its processes over the whole session
    assert [p["label"].split("-")[0] for p in merged.processes] == [
        "rank 0", "rank 0 / ForkProcess", "rank 0 / ForkProcess", "rank 1"]
    assert [own_stages(merged, i)["work"] for i in range(4)] == [1, 2, 2, 4]
    assert sorted(t["process"] for t in merged.threads) == [0, 1, 2, 3]
    assert merged.meta["children"]["reported"] == 2
    assert merged["work"].count == 9


def test_a_profiler_dropped_while_running_leaves_no_folder_or_watch():
    import gc
    import glob
    import tempfile
    # this process's folders: other test runs on the machine make theirs
    pattern = f"{tempfile.gettempdir()}/aquaprof-children-{os.getpid()}-*"
    before = set(glob.glob(pattern))
    prof = ap.Profiler(memory=False, compensate=False).start()
    assert set(glob.glob(pattern)) - before
    from aquaprof.record.torch import dataloader
    watching = dataloader._watchers
    del prof
    gc.collect()
    assert set(glob.glob(pattern)) == before
    assert dataloader._watchers == max(watching - 1, 0)


def test_aquaprof_run_gathers_a_scripts_workers_and_its_waits(tmp_path):
    """A script with no Profiler of its own, run by the CLI, which starts
    profiling before the script imports torch: the workers' stages and
    the loop's waits are in the report."""
    pytest.importorskip("torch")
    import subprocess
    import sys
    from pathlib import Path
    script = tmp_path / "train.py"
    script.write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader\n"
        "import child_work\n"
        "if __name__ == '__main__':\n"
        "    for batch in DataLoader(child_work.Squares(), batch_size=4,\n"
        "                            num_workers=2):\n"
        "        pass\n")
    from repo_paths import ROOT, SUPPORT
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{SUPPORT}")
    done = subprocess.run([sys.executable, "-m", "aquaprof", "run", script],
                          capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    rep = ap.Report.load(tmp_path / "train.aquaprof.json")
    assert rep["getitem"].count == 32        # the workers', at their root
    assert "run train.py/getitem" not in rep
    assert rep["run train.py/next(DataLoader)"].count == 9
    assert rep.meta["children"]["reported"] == 2


def test_a_forked_copy_stopping_the_profiler_leaves_the_parents_folder():
    import warnings
    with ap.Profiler(memory=False) as prof:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            try:
                prof.stop()     # the child's copy of the parent's Profiler
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        run_processes("fork", calls, (2,), n=1)
    rep = prof.report()
    assert rep["work"].count == 2
    assert rep.meta["children"]["reported"] == 1


def test_no_temporary_folder_profiles_the_process_alone(monkeypatch, tmp_path):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    rep = profiled(lambda: (calls(2), run_processes("fork", calls, (3,),
                                                     n=1)))
    assert rep["work"].count == 2          # the parent's; the child's not
    assert "no folder for child processes" in rep.meta["children"]["error"]
    assert "child processes were not profiled" in str(rep)


def test_a_child_outliving_the_profiler_stops_recording():
    """A worker still running at stop() cannot deliver any more: it stops
    its capture instead of holding memory for nobody."""
    ctx = multiprocessing.get_context("fork")
    answer = ctx.Queue()
    with ap.Profiler(memory=False) as prof:
        p = ctx.Process(target=child_work.says_whether_recording_after,
                        args=(3.0, answer))
        p.start()
        assert answer.get(timeout=20) == "started"
    assert answer.get(timeout=20) is False
    assert prof.report()["work"].count == 1
    p.join(20)
    assert p.exitcode == 0


def test_diagnose_counts_only_dataloader_workers_as_workers():
    """A process pool beside the DataLoader is no worker of it: the
    data-loading evidence names the workers' stage and their number."""
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    def parent():
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(2) as pool:
            pool.map(child_work.work, range(200))
        with ap.stage("train"):
            for _ in DataLoader(child_work.Slow(), batch_size=2,
                                num_workers=2):
                pass

    rep = profiled(parent)
    workers = [p for p in rep.processes if "worker" in p]
    assert sorted(p["worker"] for p in workers) == [0, 1]
    finding = next(f for f in rep.diagnose().findings
                   if f.kind == "data-loading-bound")
    assert "whose getitem took" in finding.evidence
    assert "2 worker processes" in finding.evidence
    assert "num_workers, 2 in this report" in finding.fix


def test_a_nested_profiler_ended_by_its_outer_captures_no_more_children():
    outer = ap.Profiler(memory=False).start()
    inner = ap.Profiler(memory=False).start()
    outer.stop()                     # ends the inner's recording too
    run_processes("fork", calls, (2,), n=1)
    inner.stop()
    assert "work" not in inner.report()
    assert inner.report().meta["children"]["started"] == 0


def test_runs_with_children_build_no_pathlib_paths(monkeypatch):
    """Each run's children folder has a unique name, and pathlib interns
    every part of a path: on Python 3.12 an interned string is never
    freed, so a Path in that folder would leak a string every run."""
    import pathlib
    made = []
    original = pathlib.Path.__new__

    def counting(cls, *args, **kwargs):
        made.append(str(args[0]) if args else "")
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "__new__", counting)
    for _ in range(2):
        with ap.Profiler() as prof:
            with multiprocessing.get_context("fork").Pool(1) as pool:
                pool.map(calls, [2])
        assert len(prof.report().processes) == 2
    assert [p for p in made if "aquaprof-children-" in p] == []


def test_the_account_is_there_when_no_child_started():
    with ap.Profiler(memory=False, compensate=False) as prof:
        with ap.stage("alone"):
            pass
    children = prof.report().meta["children"]
    assert children == {"started": 0, "reported": 0, "lost": []}
    assert "child processes" not in str(prof.report())
    with ap.Profiler(memory=False, compensate=False, children=False) as off:
        pass
    assert "children" not in off.report().meta
