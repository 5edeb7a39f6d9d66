import gc

import pytest

import aquaprof as ap
from fake_gpu import build_fakes


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
