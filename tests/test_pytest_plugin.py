"""The pytest plugin in real pytest runs (pytester): the fixture, the
flags, pytest-benchmark's extra_info, and failing on a planted regression
but not on two runs of the same code."""
import json
from importlib import metadata
from pathlib import Path

import pytest

import aquaprof as ap

pytest_plugins = ["pytester"]


def installed_plugin():
    """Whether pytest loads the plugin by itself (an installed aquaprof,
    or a build's egg-info on the path): then -p would load it twice."""
    try:
        points = metadata.entry_points(group="pytest11")
    except TypeError:                     # Python < 3.10
        points = metadata.entry_points().get("pytest11", [])
    return any(p.value == "aquaprof.pytest_plugin" for p in points)


PLUGIN = () if installed_plugin() else ("-p", "aquaprof.pytest_plugin")

SUITE = """
import time
import aquaprof as ap

def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

def test_with_fixture(aquaprof):
    for _ in range(20):
        with ap.stage("step"):
            busy({step})
    assert ap.active()

def test_plain():
    with ap.stage("plain"):
        busy(0.0005)
"""


def write_suite(pytester, step=0.0005):
    pytester.makepyfile(test_suite=SUITE.format(step=step))


def test_fixture_attaches_the_report(pytester):
    pytester.makeconftest("""
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield
    rep = getattr(item, "aquaprof_report", None)
    if rep is not None:
        print("STEP_COUNT", rep["step"].count)
""")
    write_suite(pytester)
    result = pytester.runpytest(*PLUGIN, "-s")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*STEP_COUNT 20*"])


def test_every_test_profiled_into_a_folder(pytester):
    write_suite(pytester)
    out = pytester.path / "profiles"
    result = pytester.runpytest(*PLUGIN, f"--aquaprof={out}",
                                "--aquaprof-show")
    result.assert_outcomes(passed=2)
    files = sorted(p.name for p in out.iterdir())
    assert files == ["test_suite.py__test_plain.json",
                     "test_suite.py__test_with_fixture.json"]
    assert ap.Report.load(out / files[0])["plain"].count == 1
    assert ap.Report.load(out / files[1])["step"].count == 20
    result.stdout.fnmatch_lines(["*aquaprof: top stages by self time*",
                                 "*test_with_fixture: step *ms*"])


def test_benchmark_extra_info_carries_the_breakdown(pytester, monkeypatch):
    pytest.importorskip("pytest_benchmark")     # installed by `make test`
    # in a subprocess: pytest-benchmark leaves its --benchmark-json file
    # open until the interpreter exits
    monkeypatch.setenv("PYTHONPATH", str(Path(ap.__file__).parent.parent))
    pytester.makepyfile(test_bench="""
import aquaprof as ap

def work():
    with ap.stage("inner"):
        sum(range(2000))

def test_bench(benchmark, aquaprof):
    benchmark.pedantic(work, rounds=5, iterations=1)
""")
    saved = pytester.path / "bench.json"
    result = pytester.runpytest_subprocess(*PLUGIN,
                                           f"--benchmark-json={saved}")
    result.assert_outcomes(passed=1)
    info = json.loads(saved.read_text())["benchmarks"][0]["extra_info"]
    assert info["aquaprof"]["inner"]["count"] == 5
    assert info["aquaprof"]["inner"]["total_s"] > 0


def test_planted_regression_fails_the_run_and_noise_does_not(pytester):
    write_suite(pytester, step=0.0005)
    base = pytester.path / "base"
    pytester.runpytest(*PLUGIN, f"--aquaprof={base}").assert_outcomes(
        passed=2)
    # the same code again: no failure
    same = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'b'}",
                              f"--aquaprof-compare={base}",
                              "--aquaprof-fail=20%")
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(["*test_with_fixture: no regression*"])
    # a step twice as slow: the run fails and names it
    write_suite(pytester, step=0.001)
    slow = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'c'}",
                              f"--aquaprof-compare={base}",
                              "--aquaprof-fail=20%")
    assert slow.ret == 1
    slow.stdout.fnmatch_lines(["*test_with_fixture: REGRESSION: step*"])


def test_bad_plugin_options_are_usage_errors(pytester):
    write_suite(pytester)
    result = pytester.runpytest(*PLUGIN, "--aquaprof-fail=5%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--aquaprof-fail needs "
                                 "--aquaprof-compare*"])
    result = pytester.runpytest(*PLUGIN, "--aquaprof-compare=x",
                                "--aquaprof-fail=lots")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*must be like 5% or 0.05*"])
