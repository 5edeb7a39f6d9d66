"""A program's own signal handler running while aquaprof starts: what it
raises reaches the program whatever its class, and the common "stop and
save the profile on SIGTERM" handler works at every moment of start(),
calibration included. The moments are played as test_interrupts plays a
Ctrl-C; a real SIGTERM in a subprocess checks the whole path."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import aquaprof as ap
from test_interrupts import Interrupter, first_start, interrupted  # noqa: F401


ROOT = str(Path(ap.__file__).parent.parent)


class HandlerError(RuntimeError):
    """What a program's handler raises: a RuntimeError, the class the
    profiler itself raises when a session is busy."""


def handler_raises(message):
    raise HandlerError(message)


def test_a_handlers_runtime_error_in_start_always_reaches_the_program(
        first_start):
    def action():
        first_start()
        ap.Profiler().start()

    for n in range(3000):
        # interrupted() checks that what fired was caught: never swallowed
        fired, caught = interrupted(n, action, handler_raises, HandlerError)
        if caught is not None:
            assert isinstance(caught, HandlerError)
        if ap.active():
            ap.Profiler().start().stop()   # the session a late one left
        assert not ap.active()
        if not fired:
            break
    assert n > 50        # calibration's moments among them


def test_a_stop_from_a_handler_at_any_moment_of_start_ends_the_run(
        first_start):
    held, stopped = [], []

    def stop_it(message):
        if not held or held[-1]._started_at is None:
            return            # start() not called yet: nothing to stop
        prof = held[-1]
        prof.stop()
        assert not prof.running, message
        assert prof.report().wall >= 0, message
        stopped.append(message)

    def action():
        first_start()
        held.append(ap.Profiler(sample=0.01))
        held[-1].start()

    for n in range(3000):
        hook = Interrupter(n, stop_it)
        sys.setprofile(hook)
        try:
            action()
        finally:
            sys.setprofile(None)
        prof = held.pop()
        if not stopped:
            prof.stop()
            if not hook.fired:
                break
            continue
        # start() returned: the run stopped, its report kept, no session
        message = stopped.pop()
        assert not prof.running and not ap.active(), message
        assert prof.report() is prof.report()
    assert n > 50


SAVE_ON_SIGTERM = """
import signal, sys, threading, time, os
import aquaprof as ap

def save_and_exit(signum, frame):
    prof.stop()
    prof.report().save(sys.argv[1])
    sys.exit(0)

def in_start(thread):
    frame = sys._current_frames().get(thread)
    while frame is not None and not (
            frame.f_code.co_name == "start"
            and "aquaprof" in frame.f_code.co_filename):
        frame = frame.f_back
    return frame is not None

def sigterm_once_started(main):
    # while the first start() calibrates (about 30 ms), as soon as the
    # main thread is inside it: a SIGTERM before start() is called would
    # find a Profiler never started, which stop() rightly refuses
    while not (in_start(main) or prof.running):
        time.sleep(0.0001)
    os.kill(os.getpid(), signal.SIGTERM)

signal.signal(signal.SIGTERM, save_and_exit)
prof = ap.Profiler()
threading.Thread(target=sigterm_once_started,
                 args=(threading.get_ident(),), daemon=True).start()
prof.start()
while True:
    with ap.stage("work"):
        pass
"""


def test_save_on_sigterm_during_the_first_start_exits_with_its_report(
        tmp_path):
    script = tmp_path / "serve.py"
    script.write_text(textwrap.dedent(SAVE_ON_SIGTERM))
    for run in range(5):
        out = tmp_path / f"run{run}.json"
        done = subprocess.run([sys.executable, str(script), str(out)],
                              capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONPATH=ROOT))
        assert done.returncode == 0, done.stderr
        assert ap.Report.load(out).wall >= 0
