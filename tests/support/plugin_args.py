"""The arguments that load aquaprof's pytest plugin in a pytester run,
for any room's tests: none when pytest loads it by itself (an installed
aquaprof, or a build's egg-info on the path: -p would load it twice)."""
from importlib import metadata


def installed_plugin():
    """Whether pytest loads the plugin by itself."""
    try:
        points = metadata.entry_points(group="pytest11")
    except TypeError:                     # Python < 3.10
        points = metadata.entry_points().get("pytest11", [])
    return any(p.value == "aquaprof.pytest_plugin" for p in points)


PLUGIN = () if installed_plugin() else ("-p", "aquaprof.pytest_plugin")


#: the head of a profiled test suite for pytester: imports, and a spin
#: for its thread's CPU time (a busy machine adds wall time, not CPU)
SUITE_HEAD = """
import time
import aquaprof as ap

def busy(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
"""
