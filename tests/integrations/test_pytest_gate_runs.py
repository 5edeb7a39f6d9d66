"""The pytest gate judged by runs: under pytest-xdist as serially, with
base runs from several earlier sessions, re-run rounds of a suspect test,
thread CPU time as the measure, and pytest-benchmark's calibration calls
left out. Real pytest sessions in subprocesses (xdist starts its own)."""
import json
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof.integrations.pytest_plugin import base_runs, report_name
from plugin_args import PLUGIN, SUITE_HEAD

pytest_plugins = ["pytester"]

SUITE = SUITE_HEAD + """
def test_busy(aquaprof):
    for _ in range(20):
        with ap.stage("step"):
            busy({step})

def test_waits(aquaprof):
    for _ in range(20):
        with ap.stage("wait"):
            # some CPU work of its own: a wait of bare microseconds of CPU
            # doubles by a busy machine's scheduling alone
            busy(0.001)
            time.sleep({wait})
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    """Writes the suite with a step's busy time and a wait's sleep, and
    runs pytest on it in a subprocess: (result, its stdout)."""
    monkeypatch.setenv("PYTHONPATH", str(Path(ap.__file__).parent.parent))

    def run(*args, step=0.001, wait=0.001):
        pytester.makepyfile(test_suite=SUITE.format(step=step, wait=wait))
        result = pytester.runpytest_subprocess(*PLUGIN, "-p", "no:cacheprovider",
                                               *args)
        return result, result.stdout.str()
    return run


def files(folder, nodeid):
    stem = report_name(nodeid)[:-len(".json")]
    return sorted(p.name[len(stem):] for p in Path(folder).iterdir()
                  if p.name.startswith(stem))


BUSY = "test_suite.py::test_busy"


def test_the_gate_under_xdist_is_the_serial_gate(suite, pytester):
    pytest.importorskip("xdist")          # installed by `make test`
    base = pytester.path / "base"
    result, out = suite("-n", "2", f"--aquaprof={base}")
    result.assert_outcomes(passed=2)
    assert files(base, BUSY) == [".json"]
    # thread CPU time: on a busy machine, preemption moves a spinning
    # step's wall time by more than the threshold (a real change of wall
    # time that one run a side cannot tell from the code's)
    gate = ("-n", "2", f"--aquaprof-compare={base}", "--aquaprof-fail=30%",
            "--aquaprof-measure=cpu", "--aquaprof-show")
    same, out = suite(*gate, f"--aquaprof={pytester.path / 'same'}")
    assert same.ret == 0, out
    assert "no test was profiled" not in out
    assert f"{BUSY}: no regression" in out
    assert f"{BUSY}: step " in out           # --aquaprof-show
    slow, out = suite(*gate, f"--aquaprof={pytester.path / 'slow'}",
                      step=0.003)
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, out
    assert f"{BUSY}: REGRESSION: step" in out
    assert "test_suite.py::test_waits: no regression" in out


def test_one_test_on_every_worker_keeps_its_runs_apart(suite, pytester):
    pytest.importorskip("xdist")
    out_dir = pytester.path / "each"
    result, out = suite("-n", "2", "--dist", "each", f"--aquaprof={out_dir}")
    assert result.ret == 0, out
    assert files(out_dir, BUSY) == [".gw0.json", ".gw1.json"]
    # both workers' runs are the test's base runs
    assert len(base_runs(out_dir, BUSY)) == 2
    # thread CPU time, as above
    gate, out = suite(f"--aquaprof-compare={out_dir}", "--aquaprof-fail=30%",
                      "--aquaprof-measure=cpu",
                      f"--aquaprof={pytester.path / 'serial'}", step=0.003)
    assert gate.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "2 vs 1 runs" in out


def test_base_runs_of_several_sessions_give_the_noise(suite, pytester):
    base = pytester.path / "base"
    for n in range(3):
        suite(f"--aquaprof={base / f'run{n}'}")[0].assert_outcomes(passed=2)
    assert len(base_runs(base, BUSY)) == 3
    result, out = suite(f"--aquaprof-compare={base}", "--aquaprof-fail=30%",
                        "--aquaprof-measure=cpu",
                        f"--aquaprof={pytester.path / 'new'}", step=0.003)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "3 vs 1 runs" in out and f"{BUSY}: REGRESSION: step" in out


def test_a_change_within_the_noise_is_said_not_passed_as_none(suite,
                                                               pytester):
    """Base runs planted 1 ms and 3 ms a step: the new 6 ms step is three
    times their mean, but two runs this far apart cannot tell it from
    chance (p about 0.2). The gate passes and says so rather than "no
    regression"."""
    base = pytester.path / "base"
    for n, step in enumerate((0.001, 0.003)):
        suite(f"--aquaprof={base / f'run{n}'}", step=step)[0] \
            .assert_outcomes(passed=2)
    result, out = suite(f"--aquaprof-compare={base}", "--aquaprof-fail=30%",
                        "--aquaprof-measure=cpu",
                        f"--aquaprof={pytester.path / 'new'}", step=0.006)
    assert result.ret == 0, out
    assert (f"{BUSY}: no regression shown in cpu time, but within the "
            f"noise: step") in out
    assert "2 vs 1 runs" in out and ": noisy (total" in out
    assert "more runs would tell" in out
    assert f"{BUSY}: no regression in cpu time\n" not in out


def test_a_suspect_test_runs_again_before_it_fails(suite, pytester):
    base = pytester.path / "base"
    suite(f"--aquaprof={base}")[0].assert_outcomes(passed=2)
    rounds = ("--aquaprof-rounds=3", f"--aquaprof-compare={base}",
              "--aquaprof-fail=30%", "--aquaprof-measure=cpu")
    same_dir = pytester.path / "same"
    same, out = suite(*rounds, f"--aquaprof={same_dir}")
    assert same.ret == 0, out
    assert files(same_dir, BUSY) == [".json"]      # not suspect: run once
    slow_dir = pytester.path / "slow"
    slow, out = suite(*rounds, f"--aquaprof={slow_dir}", step=0.003)
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, out
    assert files(slow_dir, BUSY) == [".json", ".r2.json", ".r3.json"]
    assert "1 vs 3 runs" in out
    # pytest reports the test once, whatever its rounds
    slow.assert_outcomes(passed=2, errors=1)
    # a later first run clears the rounds an earlier session left
    suite(f"--aquaprof={slow_dir}")[0].assert_outcomes(passed=2)
    assert files(slow_dir, BUSY) == [".json"]


def test_cpu_time_ignores_what_wall_time_waited(suite, pytester):
    base = pytester.path / "base"
    suite(f"--aquaprof={base}")[0].assert_outcomes(passed=2)
    gate = (f"--aquaprof-compare={base}", "--aquaprof-fail=30%")
    wall, out = suite(*gate, f"--aquaprof={pytester.path / 'w'}", wait=0.004)
    assert wall.ret == pytest.ExitCode.TESTS_FAILED, out
    assert "test_suite.py::test_waits: REGRESSION: wait" in out
    cpu, out = suite(*gate, "--aquaprof-measure=cpu",
                     f"--aquaprof={pytester.path / 'c'}", wait=0.004)
    assert cpu.ret == 0, out
    assert "test_suite.py::test_waits: no regression" in out
    bad, out = suite("--aquaprof-measure=gpu")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad, out = suite("--aquaprof-rounds=0")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert "--aquaprof-rounds must be 1 or more" in bad.stderr.str()


def test_benchmark_calibration_calls_are_left_out(pytester, monkeypatch):
    pytest.importorskip("pytest_benchmark")
    monkeypatch.setenv("PYTHONPATH", str(Path(ap.__file__).parent.parent))
    pytester.makepyfile(test_bench="""
import aquaprof as ap

def work():
    with ap.stage("inner"):
        sum(range(20000))

def test_bench(benchmark, aquaprof):
    benchmark(work)
""")
    saved, folder = pytester.path / "bench.json", pytester.path / "profiles"
    result = pytester.runpytest_subprocess(
        *PLUGIN, f"--benchmark-json={saved}", "--benchmark-warmup=on",
        "--benchmark-max-time=0.05", f"--aquaprof={folder}")
    result.assert_outcomes(passed=1)
    bench = json.loads(saved.read_text())["benchmarks"][0]
    timed = bench["stats"]["rounds"] * bench["stats"]["iterations"]
    assert bench["extra_info"]["aquaprof"]["inner"]["count"] == timed
    report = ap.Report.load(folder / report_name("test_bench.py::test_bench"))
    # every call is in the report; the figures judge the timed ones
    assert report["inner"].count > timed
    assert len(report.meta["measured"]) == bench["stats"]["rounds"]
    from aquaprof.analysis.compare import run_figures
    figures = run_figures(report)["inner"]
    assert figures.calls_known == timed
    # a round's figures: rounds fill about max_time whatever one costs
    assert figures.rounds == bench["stats"]["rounds"]
    assert figures.count == pytest.approx(bench["stats"]["iterations"])


REFILLED = SUITE_HEAD + """
def test_lookup(aquaprof):
    for i in range(20):
        with ap.stage("lookup"):
            if i == 9:
                busy(0.008)           # the cache refilled, once
            busy({step})
"""


def test_every_call_slower_past_one_long_call_fails_the_gate(pytester,
                                                            monkeypatch):
    """One run a side, one call of the stage 16 times the others (a cache
    refilled, a collection): the totals' resamples that repeat it hide
    every call made 4x slower; the median call, the total's witness,
    proves it."""
    monkeypatch.setenv("PYTHONPATH", str(Path(ap.__file__).parent.parent))
    base, new = pytester.path / "base", pytester.path / "new"
    runs = []
    for step, folder, extra in ((0.0005, base, ()),
                                (0.002, new, (f"--aquaprof-compare={base}",
                                              "--aquaprof-fail=50%",
                                              "--aquaprof-measure=cpu"))):
        pytester.makepyfile(test_suite=REFILLED.format(step=step))
        runs.append(pytester.runpytest_subprocess(
            *PLUGIN, "-p", "no:cacheprovider", f"--aquaprof={folder}",
            *extra))
    runs[0].assert_outcomes(passed=1)
    out = runs[1].stdout.str()
    assert runs[1].ret == pytest.ExitCode.TESTS_FAILED, out
    runs[1].stdout.fnmatch_lines([
        "*test_lookup: REGRESSION: lookup*",
        "*lookup: total * 1 run a side, p=*: slower (median: the median "
        "call +*"])
