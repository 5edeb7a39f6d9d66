"""SIGTERM in a child under children=True ends it as it would end
unprofiled. A child whose main thread is in Python delivers its report,
then dies by the signal; one whose main thread is busy in one long C
call, where its Python handler cannot run, dies by it within
aquaprof.children.SIGTERM_DEADLINE_S, and the parent counts it lost and
says why.
The C call here is a wait on a mutex the thread holds already: signals
do not cut it short (libc's sleep() would not do: a signal ends it, and
Python's handler runs at once)."""
import ctypes
import glob
import json
import multiprocessing
import os
import signal
import tempfile
import threading
import time
import weakref

import pytest

import aquaprof as ap
from aquaprof.record.processes import parent
from child_work import calls, exitcode_within

METHODS = [m for m in ("fork", "spawn", "forkserver")
           if m in multiprocessing.get_all_start_methods()]
KILLED = "killed by SIGTERM while in C code"


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_ready = None      # a pool worker's Event, from its initializer


def keep_ready(ready):
    global _ready
    _ready = ready


def in_c(seconds, ready=None):
    """Records a call, then holds the main thread in one C call for
    `seconds` (None: for ever)."""
    calls(1)
    libc = ctypes.CDLL(None)
    mutex = ctypes.create_string_buffer(64)   # zeros: an unlocked mutex
    libc.pthread_mutex_lock(mutex)
    ready = ready or _ready
    if ready is not None:
        ready.set()
    if seconds is None:
        libc.pthread_mutex_lock(mutex)
    else:
        until = _Timespec(int(time.time() + seconds) + 1, 0)
        libc.pthread_mutex_timedlock(mutex, ctypes.byref(until))


def in_c_with_own_handler(seconds, ready):
    signal.signal(signal.SIGTERM, lambda *_: os._exit(7))
    in_c(seconds, ready)


def calls_then_spin(n, ready):
    """Records n calls, then stays in Python code."""
    calls(n)
    ready.set()
    end = time.monotonic() + 60
    while time.monotonic() < end:
        pass


def terminate_in_c(method, target, args, ready):
    """Starts target in a child, waits until it is in its C call, sends
    SIGTERM; (exit code or None, seconds to its end)."""
    p = multiprocessing.get_context(method).Process(target=target,
                                                    args=args)
    p.start()
    assert ready.wait(60)
    time.sleep(0.2)           # inside the C call by now
    start = time.monotonic()
    p.terminate()
    code = exitcode_within(p, 8)
    return code, time.monotonic() - start


@pytest.mark.parametrize("method", METHODS)
def test_a_child_in_c_dies_by_sigterm_within_the_deadline(method):
    ready = multiprocessing.get_context(method).Event()
    with ap.Profiler(memory=False) as prof:
        code, took = terminate_in_c(method, in_c, (30, ready), ready)
    assert code == -signal.SIGTERM
    assert took < parent.SIGTERM_DEADLINE_S + 1.5
    account = prof.report().meta["children"]
    assert account["started"] == 1 and account["reported"] == 0
    assert account["lost"][0]["reason"].startswith(KILLED)
    assert "report was not delivered" in account["lost"][0]["reason"]
    assert KILLED in str(prof.report())


@pytest.mark.parametrize("method", METHODS)
def test_a_child_in_python_still_delivers_then_dies_by_sigterm(method):
    ready = multiprocessing.get_context(method).Event()
    with ap.Profiler(memory=False) as prof:
        code, took = terminate_in_c(method, calls_then_spin, (4, ready),
                                    ready)
    assert code == -signal.SIGTERM
    rep = prof.report()
    assert rep["work"].count == 4
    assert rep.meta["children"] == {"started": 1, "reported": 1,
                                    "lost": []}


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_leaving_a_pool_after_a_timed_out_c_call_returns_at_once(method):
    ctx = multiprocessing.get_context(method)
    ready = ctx.Event()
    with ap.Profiler(memory=False) as prof:
        with ctx.Pool(1, initializer=keep_ready, initargs=(ready,)) as pool:
            result = pool.apply_async(in_c, (30,))
            assert ready.wait(60)
            with pytest.raises(multiprocessing.TimeoutError):
                result.get(0.2)
            start = time.monotonic()
        took = time.monotonic() - start    # `with Pool` ends in terminate()
    assert took < parent.SIGTERM_DEADLINE_S + 2
    lost = prof.report().meta["children"]["lost"]
    assert [c["reason"][:len(KILLED)] for c in lost] == [KILLED]


def test_terminate_returns_with_a_worker_in_a_c_call_that_never_does():
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    with ap.Profiler(memory=False):
        pool = ctx.Pool(1, initializer=keep_ready, initargs=(ready,))
        workers = list(pool._pool)
        pool.apply_async(in_c, (None,))
        assert ready.wait(60)
        time.sleep(0.2)
        ending = threading.Thread(target=pool.terminate, daemon=True)
        ending.start()
        ending.join(10)
        hung = ending.is_alive()
        if hung:       # let the test end: what the profiler should do
            for w in workers:
                w.kill()
            ending.join(10)
    assert not hung, "Pool.terminate() waited on the worker in C"
    assert [w.exitcode for w in workers] == [-signal.SIGTERM]


def test_the_deadline_is_a_setting_the_children_take(monkeypatch):
    # through the path docs/processes.md gives users
    import aquaprof.children
    monkeypatch.setattr(aquaprof.children, "SIGTERM_DEADLINE_S", 0.3)
    ready = multiprocessing.get_context("spawn").Event()
    with ap.Profiler(memory=False) as prof:
        code, took = terminate_in_c("spawn", in_c, (30, ready), ready)
    assert code == -signal.SIGTERM and took < 1.5
    reason = prof.report().meta["children"]["lost"][0]["reason"]
    assert reason.startswith(KILLED) and "within 0.3 s" in reason


def test_a_programs_own_sigterm_handler_is_not_cut_short():
    """The program's handler waits for the C call, as it would
    unprofiled: the child is not killed at the deadline."""
    ready = multiprocessing.get_context("fork").Event()
    with ap.Profiler(memory=False):
        code, took = terminate_in_c("fork", in_c_with_own_handler,
                                    (2, ready), ready)
    assert code == 7
    assert took > parent.SIGTERM_DEADLINE_S


def test_a_programs_exception_while_the_folder_is_made_goes_on(
        monkeypatch):
    """An exception that the program's signal handler raises while the
    children folder is made (a TimeoutError, an OSError, from an alarm)
    is the program's: it is not taken for a failed mkdir."""
    original = weakref.finalize

    def finalize(obj, *args, **kwargs):
        if isinstance(obj, parent.Capture):
            raise TimeoutError("the program's alarm")
        return original(obj, *args, **kwargs)

    pattern = f"{tempfile.gettempdir()}/aquaprof-children-{os.getpid()}-*"
    before = set(glob.glob(pattern))
    monkeypatch.setattr(weakref, "finalize", finalize)
    with pytest.raises(TimeoutError, match="the program's alarm"):
        ap.Profiler(memory=False, compensate=False).start()
    assert not ap.active()
    assert set(glob.glob(pattern)) == before


def test_a_programs_exception_while_markers_are_read_goes_on(
        monkeypatch, tmp_path):
    (tmp_path / "1-ab.started").write_text('{"pid": 1, "label": "x"}')

    def loads(text):
        raise TimeoutError("the program's alarm")

    monkeypatch.setattr(json, "loads", loads)
    with pytest.raises(TimeoutError, match="the program's alarm"):
        parent.collect(str(tmp_path), 10)
