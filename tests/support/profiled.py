"""What many tests need: a function run under a fresh Profiler, and a
stage whose time is known and spent computing."""
import time

import aquaprof as ap


def run_profiled(fn, **options):
    """Runs fn() under a fresh Profiler and returns its report."""
    with ap.Profiler(**options) as prof:
        fn()
    return prof.report()


def busy(seconds):
    """Keeps the CPU busy for `seconds` of wall time: a stage whose time
    is known and spent computing."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
