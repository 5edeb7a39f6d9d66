"""Programs that once crashed a sampler, run in a subprocess by
tests/record/test_sampler.py so that a crash is a failed test, not a dead
pytest: `python sampler_hostile.py native-threads|finalizers SECONDS`."""
import ctypes
import sys
import threading
import time

import aquaprof


def native_threads(seconds: float) -> None:
    """Threads a C library starts call into Python (ctypes callbacks, as
    cffi's and pybind11's do): each joins the interpreter's thread list
    while rounds walk it."""
    libc = ctypes.CDLL(None)
    callback_type = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    callback = callback_type(lambda arg: None)
    libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong),
                                    ctypes.c_void_p, callback_type,
                                    ctypes.c_void_p]
    libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
    stop = []

    def spawn() -> None:
        tid = ctypes.c_ulong()
        while not stop:
            libc.pthread_create(ctypes.byref(tid), None, callback, None)
            libc.pthread_join(tid.value, None)

    spawners = [threading.Thread(target=spawn) for _ in range(4)]
    for t in spawners:
        t.start()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    stop.append(True)
    for t in spawners:
        t.join()


class Cycle:
    """Cyclic garbage whose finalizer releases the GIL, as closing a file
    does: were the collector to run inside a round, the frames walked
    could go meanwhile."""

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        time.sleep(0)


def finalizers(seconds: float) -> None:
    """Threads with deep stacks, whose frames a round must make objects
    of (allocations that may start a collection), making such garbage."""
    def deep(n: int) -> None:
        if n:
            return deep(n - 1)
        for _ in range(5):
            Cycle()
        time.sleep(0.0005)

    def work() -> None:
        for _ in range(3):
            deep(40)

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        workers = [threading.Thread(target=work) for _ in range(8)]
        for t in workers:
            t.start()
        for t in workers:
            t.join()


if __name__ == "__main__":
    program = {"native-threads": native_threads,
               "finalizers": finalizers}[sys.argv[1]]
    with aquaprof.Profiler(sample=0.001) as prof:
        program(float(sys.argv[2]))
    print("rounds", prof.report().samples["rounds"])
