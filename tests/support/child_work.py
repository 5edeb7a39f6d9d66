"""Targets for the child-process tests: importable by name, so that
spawn and forkserver children, which pickle their target, can run them;
and how those tests wait for a child."""
import os
import signal
import time

import aquaprof as ap


@ap.stage("work")
def work(x):
    return x * 2


def calls(n):
    for i in range(n):
        work(i)


def calls_then_wait(n, seconds, ready=None):
    """Records n calls, says so on `ready` (an Event), then waits."""
    calls(n)
    if ready is not None:
        ready.set()
    time.sleep(seconds)


def _sigterm_to_a_thread_once_waiting(until=lambda: True):
    """A thread of this process takes a SIGTERM once the main thread,
    armed by the function returned, sleeps in a lock's wait (x86-64
    futex) and until() holds: the state a SIGTERM leaves when it lands
    as the wait begins (Python's C handler ran, the wait was not
    interrupted). Armed only just before that wait: the main thread
    sleeps in other futexes before it (starting this thread; setting a
    multiprocessing Event, which waits for the waiters it wakes), and a
    SIGTERM there would kill it holding the Event's lock, which the
    parent then waits for for ever."""
    import threading
    path = f"/proc/self/task/{threading.get_native_id()}/syscall"
    armed = threading.Event()

    def take_sigterm():
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with open(path) as f:
                if armed.is_set() and f.read().split()[0] == "202" \
                        and until():
                    break
            time.sleep(0.01)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    threading.Thread(target=take_sigterm, daemon=True).start()
    return armed.set


def calls_then_wait_on(n, lock, ready):
    """Records n calls, then waits on `lock` (held by the parent) as a
    pool worker waits for work, and a SIGTERM comes as that wait begins."""
    calls(n)
    arm = _sigterm_to_a_thread_once_waiting()
    ready.set()
    arm()
    lock.acquire()


def waits_on_past_its_capture(lock, ready):
    """The same, the SIGTERM coming once the parent's Profiler stopped
    and this child's capture ended."""
    from aquaprof.record.processes import child
    arm = _sigterm_to_a_thread_once_waiting(lambda: child._child is None)
    ready.set()
    arm()
    lock.acquire()


def calls_then_exit_at_once(n):
    """Ends the way multiprocessing never does: no exit finalizers."""
    calls(n)
    os._exit(0)


def calls_with_own_sigterm_handler(n, ready):
    """Sets a SIGTERM handler of its own once its capture started, then
    waits in short sleeps: a SIGTERM that lands after the last bytecode
    and before a sleep's system call begins is handled only once that
    sleep ends (CPython's own behaviour, with or without a profiler)."""
    signal.signal(signal.SIGTERM, lambda *_: os._exit(7))
    calls(n)
    ready.set()
    for _ in range(600):
        time.sleep(0.1)


def calls_and_a_grandchild(n):
    import multiprocessing
    calls(n)
    grandchild = multiprocessing.get_context("fork").Process(
        target=calls, args=(n,))
    grandchild.start()
    grandchild.join()


class Squares:
    """A map-style dataset whose items are a stage."""

    def __len__(self):
        return 32

    @ap.stage("getitem")
    def __getitem__(self, i):
        return float(i * i)


def says_whether_recording_after(seconds, answer):
    """Waits past its parent's stop, then answers whether this process
    still records."""
    calls(1)
    answer.put("started")
    time.sleep(seconds)
    answer.put(ap.active())


class Slow(Squares):
    """Items that take 20 ms each: loading is what the loop waits on."""

    @ap.stage("getitem")
    def __getitem__(self, i):
        time.sleep(0.02)
        return float(i)


class Unstaged(Squares):
    """Items that take 10 ms each in no stage, as a torchvision dataset's
    do: the workers record nothing of their own."""

    def __getitem__(self, i):
        time.sleep(0.01)
        return float(i)


class Decoded(Squares):
    """Items whose 5 ms of loading is the stage `decode`."""

    def __getitem__(self, i):
        with ap.stage("decode"):
            time.sleep(0.005)
        return float(i)


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def spins_in_a_stage(seconds):
    """A child's own sampled work: `spin` inside the stage "child"."""
    with ap.stage("child"):
        spin(seconds)


def exitcode_within(p, seconds):
    """p's exit code once it ended, or None after killing it when it did
    not end within `seconds`."""
    p.join(seconds)
    if p.exitcode is None:
        p.kill()
        p.join()
        return None
    return p.exitcode


def calls_around_a_wait(n, more, ready, go, done):
    """Records n calls, says so on `ready`, waits for `go`, records `more`
    calls, says so on `done`, then waits to be ended."""
    calls(n)
    ready.set()
    go.wait(60)
    calls(more)
    done.set()
    time.sleep(60)


def _hold_python(seconds):
    """Holds the interpreter (the GIL) in one C call for `seconds`: a wait
    on a mutex this thread holds already, through ctypes.PyDLL, which
    keeps the GIL where CDLL lets it go."""
    import ctypes

    class Timespec(ctypes.Structure):
        _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]

    libc = ctypes.PyDLL(None)
    mutex = ctypes.create_string_buffer(64)   # zeros: an unlocked mutex
    libc.pthread_mutex_lock(mutex)
    until = Timespec(int(time.time() + seconds) + 1, 0)
    libc.pthread_mutex_timedlock(mutex, ctypes.byref(until))


def calls_then_holds_python(n, seconds, ready):
    """Records n calls, says so on `ready`, then holds the interpreter in
    one C call for `seconds`."""
    calls(n)
    ready.set()
    _hold_python(seconds)


def _slow_report_once_asked(ready):
    """Records 2 calls and makes this child's report slow to build (half
    a second), says so on `ready`, and waits until the child's own thread
    delivers it: the parent asked."""
    from aquaprof.record.processes import child
    original = child._report_text

    def slow(prof):
        time.sleep(0.5)
        return original(prof)

    child._report_text = slow
    calls(2)
    ready.set()
    end = time.monotonic() + 20
    while not child._delivering and time.monotonic() < end:
        time.sleep(0.001)


def returns_while_its_report_is_delivered(ready):
    """Ends (its exit's own delivery comes next) while its thread is
    delivering the report its parent asked for."""
    _slow_report_once_asked(ready)


def holds_python_while_its_report_is_delivered(ready):
    """Holds the interpreter in one C call for 30 s while its thread is
    delivering the report its parent asked for."""
    _slow_report_once_asked(ready)
    _hold_python(30)


def takes_sigterm_while_its_report_is_delivered(ready):
    """Takes a SIGTERM while its thread is delivering the report its
    parent asked for."""
    _slow_report_once_asked(ready)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(20)


def records_until_killed(ready):
    """Records a call every 10 ms, saying so on `ready` after the first."""
    while True:
        with ap.stage("work"):
            time.sleep(0.01)
        ready.set()


def cannot_make_its_report(ready):
    """Records a call, its report made impossible, then waits."""
    from aquaprof.record.processes import child
    child._report_text = lambda prof: None
    calls(1)
    ready.set()
    time.sleep(60)


def own_profiler_for(seconds, inside):
    """A task with a Profiler of its own, recording a stage call after
    another for `seconds`, the file `inside` made once it runs: (calls
    made, calls its report counts, whether this process still records
    a while after)."""
    made = 0
    with ap.Profiler(memory=False) as mine:
        open(inside, "w").close()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with ap.stage("own"):
                pass
            made += 1
    time.sleep(1.5)      # the capture's next look, once a second
    return made, mine.report()["own"].count, ap.active()


def waits_for(ready, seconds):
    """Says so on `ready`, then waits."""
    ready.set()
    time.sleep(seconds)


def killed_at_once():
    """Records a call and dies of SIGKILL: nothing of its own runs after
    its target starts, as a crash in C."""
    calls(1)
    os.kill(os.getpid(), signal.SIGKILL)
