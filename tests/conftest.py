import gc
import os

import pytest

import aquaprof as ap
from fake_gpu import build_fakes

# pytest-xdist's workers set COLUMNS=80, and the commands the tests run
# fit their printed report to COLUMNS: the tests that want a width set it
os.environ.pop("COLUMNS", None)


@pytest.fixture(autouse=True)
def no_profiler_left_running():
    """Every test starts and ends with no active profiler: a test that
    leaves one running fails here instead of corrupting the next."""
    assert not ap.active(), "a profiler was already running"
    yield
    if ap.active():
        gc.collect()  # a dropped Profiler object deactivates when freed
    assert not ap.active(), "the test left a profiler running"


@pytest.fixture(scope="session")
def fakes(tmp_path_factory):
    """The folder of the fake GPU libraries (fake_gpu.py)."""
    return build_fakes(tmp_path_factory.mktemp("fakes"))
