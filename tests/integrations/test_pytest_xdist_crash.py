"""A pytest-xdist worker that goes down (a test that kills its process)
never hands its reports over: the tests it profiled before are read back
from the --aquaprof folder and compared, or, without one, named and
counted by the gate as not compared, never passed over in silence."""
from pathlib import Path

import pytest

import aquaprof as ap
from plugin_args import PLUGIN, SUITE_HEAD

pytest_plugins = ["pytester"]

# test_slowed and test_crash share a file: --dist loadfile runs them in
# order on one worker, which test_crash then takes down
SUITE = SUITE_HEAD + """
import os

def test_slowed(aquaprof):
    for _ in range(20):
        with ap.stage("step"):
            busy({step})

def test_crash():
    if os.environ.get("CRASH"):
        os._exit(3)
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    pytest.importorskip("xdist")
    monkeypatch.setenv("PYTHONPATH", str(Path(ap.__file__).parent.parent))

    def run(*args, step=0.001, crash=False):
        if crash:
            monkeypatch.setenv("CRASH", "1")
        else:
            monkeypatch.delenv("CRASH", raising=False)
        pytester.makepyfile(test_suite=SUITE.format(step=step))
        result = pytester.runpytest_subprocess(
            *PLUGIN, "-p", "no:cacheprovider", *args)
        return result, result.stdout.str()
    return run


SLOWED = "test_suite.py::test_slowed"
XDIST = ("-n", "2", "--dist", "loadfile", "--max-worker-restart=0")


def test_a_worker_gone_down_keeps_the_runs_it_saved(suite, pytester):
    base = pytester.path / "base"
    suite(f"--aquaprof={base}")[0].assert_outcomes(passed=2)
    result, out = suite(*XDIST, f"--aquaprof={pytester.path / 'new'}",
                        f"--aquaprof-compare={base}", "--aquaprof-fail=30%",
                        "--aquaprof-measure=cpu", step=0.004, crash=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    # the slowed test ran on the worker that went down: read back and
    # judged, not lost from the gate's verdict
    assert f"1 test's runs read back from" in out, out
    assert f"{SLOWED}: REGRESSION: step" in out, out
    assert (f"aquaprof: FAILED: 1 test slower than the base reports by more "
            f"than 30% ({SLOWED})") in out, out


def test_runs_lost_with_a_worker_fail_the_gate_named(suite, pytester):
    base = pytester.path / "base"
    suite(f"--aquaprof={base}")[0].assert_outcomes(passed=2)
    # the fixture alone keeps no file: the slowed test's runs are lost
    result, out = suite(*XDIST, f"--aquaprof-compare={base}",
                        "--aquaprof-fail=30%", "--aquaprof-measure=cpu",
                        step=0.004, crash=True)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert f"1 test's runs lost: {SLOWED}" in out, out
    assert "the regression gate compared less than it should: 1 test's " \
           "runs lost with a worker that went down" in out, out
    # never the gate's "no test was profiled": one was, and lost
    assert "no test was profiled" not in out, out
