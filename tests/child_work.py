"""Targets for the child-process tests: importable by name, so that
spawn and forkserver children, which pickle their target, can run them."""
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


def calls_then_exit_at_once(n):
    """Ends the way multiprocessing never does: no exit finalizers."""
    calls(n)
    os._exit(0)


def calls_with_own_sigterm_handler(n, ready):
    signal.signal(signal.SIGTERM, lambda *_: os._exit(7))
    calls(n)
    ready.set()
    time.sleep(60)


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


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def spins_in_a_stage(seconds):
    """A child's own sampled work: `spin` inside the stage "child"."""
    with ap.stage("child"):
        spin(seconds)
