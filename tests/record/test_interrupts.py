"""Ctrl-C (KeyboardInterrupt) anywhere in start(), stop() or the first
start()'s calibration leaves no session running out of the user's reach,
and the next Profiler starts and works.

The interpreter handles a pending signal where a Python function begins
and where a C call returns. sys.setprofile sees exactly those moments
(its 'call' and 'c_return' events) and a profile function
that raises there raises into the profiled code, so interrupt_at(n)
plays a Ctrl-C at the n-th of them; each test walks n through every
moment of the operation, until one runs through. The exception is kept
alive while the test looks, as a REPL keeps sys.last_traceback: a session
held only by a traceback's frames would stay active.

Two moments are left out: the entry of stop() and of __exit__, before any
of their code runs. An interrupt there leaves the Profiler running, as
stop() was never begun; with `with ... as prof` or `prof.stop()` the user
holds it and can stop it again. A real signal test (setitimer) covers the
rest at random moments, C code included."""
import gc
import os
import signal
import sys
import threading
import weakref
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof.record import calibration
from aquaprof.record.processes import child
from aquaprof.record.profiler import Profiler
from threads import left_behind, thread_ids

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
BEGUN = {Profiler.stop.__code__, Profiler.__exit__.__code__}
# the code under test: aquaprof's and this file's (not, say, a collector
# callback another library installed, which cannot raise into it)
WHERE = (str(Path(ap.__file__).parent), __file__)


def ctrl_c(message):
    raise KeyboardInterrupt(message)


class Interrupter:
    """A profile function playing a signal handler, fire(message) (by
    default a Ctrl-C), at the n-th moment a signal could be handled
    (CPython unsets it once it has raised)."""

    def __init__(self, n, fire=ctrl_c):
        self.n, self.seen, self.fired, self.fire = n, 0, False, fire

    def __call__(self, frame, event, arg):
        if event not in ("call", "c_return") or \
                not frame.f_code.co_filename.startswith(WHERE):
            return
        if event == "call" and frame.f_code in BEGUN:
            return
        if under_a_finalizer(frame):
            return
        if self.seen == self.n:
            self.fired = True
            code = frame.f_code
            self.seen += 1
            self.fire(f"interrupted at moment {self.n}: {event} of "
                      f"{getattr(arg, '__qualname__', '')} in "
                      f"{code.co_name} ({code.co_filename}:"
                      f"{frame.f_lineno})")
            return
        self.seen += 1


def under_a_finalizer(frame):
    """Inside a weakref.finalize callback the collector runs (a Profiler
    of an earlier attempt, freed meanwhile, ending its watches): Python
    prints and ignores what such a callback raises, a real Ctrl-C
    included, so it is no moment of the code under test."""
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__call__" and \
                code.co_filename == weakref.__file__:
            return True
        frame = frame.f_back
    return False


def interrupted(n, action, fire=ctrl_c, catch=KeyboardInterrupt):
    """Runs action() with fire (a Ctrl-C) at moment n: (fired, the
    exception), which must be the one fire raised."""
    hook = Interrupter(n, fire)
    caught = None
    sys.setprofile(hook)
    try:
        action()
    except catch as e:
        caught = e
    finally:
        sys.setprofile(None)
    assert hook.fired == (caught is not None)
    return hook.fired, caught


def raised_in(exc, function):
    """Whether function's frame is on exc's traceback."""
    tb = exc.__traceback__ if exc is not None else None
    while tb is not None:
        if tb.tb_frame.f_code is function.__code__:
            return True
        tb = tb.tb_next
    return False


def work():
    for _ in range(3):
        with ap.stage("step"):
            pass


def fresh_profiler_works():
    with ap.Profiler(compensate=False) as prof:
        work()
    assert not prof.nested and prof.report()["step"].count == 3


@pytest.fixture
def first_start(monkeypatch):
    """Every start() calibrates, as the first one in a process does (in
    fewer pairs, so that each moment can be tried)."""
    monkeypatch.setattr(calibration, "PAIRS", 20)

    def fresh():
        monkeypatch.setattr(calibration, "_CACHE", {})
    return fresh


def every_moment(action, check, limit=3000):
    for n in range(limit):
        fired, kept = interrupted(n, action)
        check(kept)
        del kept
        if not fired:
            return n
    raise AssertionError(f"still interrupted after {limit} moments")


def test_ctrl_c_in_a_with_block_start_or_stop_leaves_no_session(first_start):
    def action():
        first_start()
        with ap.Profiler():
            work()

    def check(kept):
        assert not ap.active(), kept
        fresh_profiler_works()

    moments = every_moment(action, check)
    assert moments > 50       # calibration's moments among them


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                    reason="counts threads through /proc")
def test_ctrl_c_anywhere_in_a_sampling_run_leaves_no_sampling_thread(
        first_start):
    before = thread_ids()

    def action():
        first_start()
        with ap.Profiler(sample=0.001):
            work()

    def check(kept):
        assert not ap.active(), kept
        gc.collect()     # a Profiler a Ctrl-C kept from stopping its sampler
        assert not left_behind(before), kept
        fresh_profiler_works()

    assert every_moment(action, check) > 50


def test_ctrl_c_in_start_and_stop_calls_leaves_no_hidden_session(
        first_start):
    held = []

    def action():
        first_start()
        prof = ap.Profiler()
        held.append(prof)
        prof.start()
        work()
        prof.stop()

    def check(kept):
        prof = held.pop() if held else None
        # an interrupt out of start() or stop() leaves nothing running;
        # between them, the Profiler the user holds runs on, and says so
        assert not (ap.active() and raised_in(kept, Profiler.start)), kept
        assert not (ap.active() and raised_in(kept, Profiler.stop)), kept
        assert not ap.active() or (prof and prof.running), kept
        if prof and prof.running:
            prof.stop()
        assert not ap.active()
        if kept is None:
            assert prof.report()["step"].count == 3
        fresh_profiler_works()

    every_moment(action, check)


def test_ctrl_c_in_a_nested_start_or_stop_leaves_the_outer_recording():
    with ap.Profiler(compensate=False) as outer:
        def action():
            with ap.Profiler():
                work()

        def check(kept):
            assert ap.active() and outer.running, kept

        runs = every_moment(action, check)
    assert not ap.active() and runs > 10
    whole = outer.report()
    # the run that went through, and what the interrupted ones got to
    assert 3 <= whole["step"].count <= 3 * (runs + 1)
    assert whole.unclosed == 0


def test_an_on_stop_callback_that_raises_still_stops_the_recording():
    prof = ap.Profiler(compensate=False)

    def callback():
        raise KeyboardInterrupt("in a callback")

    prof.on_stop(callback)
    prof.start()
    work()
    with pytest.raises(KeyboardInterrupt, match="in a callback"):
        prof.stop()
    assert not ap.active() and not prof.running
    assert prof.report()["step"].count == 3
    # and through `with`
    with pytest.raises(KeyboardInterrupt, match="in a callback"):
        with ap.Profiler(compensate=False) as again:
            again.on_stop(callback)
    assert not ap.active() and not again.running


def test_ctrl_c_during_calibration_leaves_no_private_session(first_start):
    def action():
        first_start()
        calibration.calibrate(rounds=1)

    def check(kept):
        assert not ap.active(), kept

    every_moment(action, check)
    assert calibration.calibrate(rounds=1)["span_ns"] >= 0


def blocked_signals(tid):
    """The signals thread tid of this process blocks, from its status."""
    with open(f"/proc/self/task/{tid}/status") as f:
        mask = next(int(line.split()[1], 16) for line in f
                    if line.startswith("SigBlk:"))
    return {s for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
            if mask >> (int(s) - 1) & 1}


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                    reason="reads thread masks in /proc/self/task")
def test_the_profilers_threads_take_no_signal_meant_for_the_program():
    """A SIGTERM or Ctrl-C taken by a helper thread would leave a main
    thread that waits on a lock waiting for ever (a pool worker ended by
    terminate()): the sampler's and the memory sampler's threads block
    every signal, and the thread that starts them gets its mask back."""
    from aquaprof.record import processes
    before = set(os.listdir("/proc/self/task"))
    mine = blocked_signals(threading.get_native_id())
    prof = Profiler(compensate=False, sample=0.001, memory=True)
    prof.start()
    try:
        helpers = set(os.listdir("/proc/self/task")) - before
        assert len(helpers) >= 3       # taker, ticker, memory sampler
        for tid in helpers:
            assert blocked_signals(tid) == {signal.SIGTERM, signal.SIGINT,
                                            signal.SIGHUP}, tid
        assert blocked_signals(threading.get_native_id()) == mine
        # and the Python helper of a profiled child
        seen = []
        thread = threading.Thread(target=lambda: seen.append(
            blocked_signals(threading.get_native_id())))
        child._start_quiet(thread)
        thread.join()
        assert seen == [{signal.SIGTERM, signal.SIGINT, signal.SIGHUP}]
        assert blocked_signals(threading.get_native_id()) == mine
    finally:
        prof.stop()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                    reason="counts threads in /proc/self/task")
def test_a_ctrl_c_inside_the_samplers_finalizer_leaves_no_thread():
    """A Ctrl-C inside weakref.finalize's own call, after it unhooked
    itself and before it called sampler.stop, leaves a finalizer that
    ends nothing: stop() must end the sampling thread all the same."""
    before = thread_ids()
    prof = Profiler(compensate=False, sample=0.001)
    prof.start()
    assert left_behind(before)    # sampling

    class Unhooked:
        def __call__(self):
            return None

        def detach(self):
            return None
    prof._stop_sampler.detach()
    prof._stop_sampler = Unhooked()
    work()
    prof.stop()
    assert not left_behind(before)
    assert prof.report()["step"].count == 3


@pytest.mark.skipif(not hasattr(signal, "setitimer"),
                    reason="needs signal.setitimer")
def test_real_signals_at_random_moments_leave_no_hidden_session(first_start):
    import random
    rng = random.Random(7)

    def handler(signum, frame):
        raise KeyboardInterrupt("SIGALRM")

    previous = signal.signal(signal.SIGALRM, handler)
    interrupts = 0
    threads = thread_ids() if os.path.isdir("/proc/self/task") else set()
    try:
        for i in range(150):
            first_start()
            prof = None
            delay = rng.uniform(1e-5, 0.02)
            try:
                # armed inside the try: a timer of 10 us can fire before
                # the next statement, under a sanitizer above all
                signal.setitimer(signal.ITIMER_REAL, delay)
                # every other run samples call stacks: its thread and the
                # signal it borrows must come back too
                with ap.Profiler(sample=0.001 if i % 2 else None) as prof:
                    work()
                signal.setitimer(signal.ITIMER_REAL, 0)
            except KeyboardInterrupt:
                interrupts += 1
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            assert not ap.active() or (prof is not None and prof.running)
            if prof is not None and prof.running:
                prof.stop()
    finally:
        signal.signal(signal.SIGALRM, previous)
    assert interrupts > 0
    fresh_profiler_works()
    del prof
    gc.collect()
    if os.path.isdir("/proc/self/task"):
        assert not left_behind(threads)


@pytest.mark.parametrize("raised", [KeyboardInterrupt, ValueError])
def test_a_with_block_cut_short_says_so_in_its_report(raised, tmp_path):
    """Ctrl-C or an error out of `with Profiler()`: the report the
    program saves in its handler says the run was cut short, saved and
    read back; a block that ends normally says nothing of the kind."""
    with pytest.raises(raised):
        with ap.Profiler() as prof:
            with ap.stage("work"):
                pass
            raise raised()
    rep = prof.report()
    assert rep.meta["ended_by"] == raised.__name__
    said = f"! the run was cut short: {raised.__name__} ended the profiled"
    assert said in str(rep)
    loaded = ap.Report.load(rep.save(tmp_path / "r.json"))
    assert said in str(loaded)
    with ap.Profiler() as whole:
        with ap.stage("work"):
            pass
    assert "ended_by" not in whole.report().meta
    assert "cut short" not in str(whole.report())


@pytest.mark.parametrize("code, cut", [(None, False), (0, False),
                                       (3, True), ("bye", True)])
def test_a_with_block_ended_by_sys_exit_is_cut_short_only_on_failure(
        code, cut):
    """sys.exit() inside `with Profiler()` (a script's main ending) is a
    normal end: its report must not say the run was cut short."""
    with pytest.raises(SystemExit):
        with ap.Profiler() as prof:
            with ap.stage("work"):
                pass
            sys.exit(code)
    rep = prof.report()
    assert (rep.meta.get("ended_by") == "SystemExit") is cut
    assert ("cut short" in str(rep)) is cut
