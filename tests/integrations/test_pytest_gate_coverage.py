"""What the pytest gate compared, and what it could not: a test that
opens no stage is judged on its run time, a test whose stages were all
renamed compared nothing and fails a gated run as a missing base does,
stages on one side only are named, and the failing last line names the
slower tests and the holes both. Real pytest runs (pytester)."""
import json
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof.integrations.pytest_plugin import report_name
from plugin_args import PLUGIN, SUITE_HEAD

pytest_plugins = ["pytester"]

SUITE = SUITE_HEAD + """
def test_no_stages():
    # sleeps: a busy machine moves a sleep far less than a spin
    time.sleep({sleep})

def test_renamed():
    for _ in range(20):
        with ap.stage("{name}"):
            busy(0.0005)

def test_steady():
    for _ in range(20):
        with ap.stage("steady"):
            busy({step})
    {extra}
"""


def write_suite(pytester, sleep=0.05, name="load", step=0.0005, extra=""):
    pytester.makepyfile(test_suite=SUITE.format(
        sleep=sleep, name=name, step=step,
        extra=f'with ap.stage("{extra}"): busy(0.0005)' if extra else ""))


@pytest.fixture
def base(pytester):
    write_suite(pytester)
    folder = pytester.path / "base"
    pytester.runpytest(*PLUGIN, f"--aquaprof={folder}").assert_outcomes(
        passed=3)
    return folder


def gate(pytester, base, *args, threshold="300%"):
    out = pytester.path / f"run{len(list(pytester.path.iterdir()))}"
    return pytester.runpytest(*PLUGIN, f"--aquaprof={out}",
                              f"--aquaprof-compare={base}",
                              f"--aquaprof-fail={threshold}", *args)


def test_a_test_with_no_stages_is_judged_on_its_run_time(pytester, base):
    # the renamed test apart: only the test of no stages is looked at
    only = ("-k", "no_stages")
    same = gate(pytester, base, *only)
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines([
        "*test_no_stages: no regression in its run time (it opened no "
        "stage)",
        "*the whole test: total * a run*1 run a side*"])
    # ten times as long a sleep: a regression, hedged (one call a run)
    write_suite(pytester, sleep=0.5)
    slow = gate(pytester, base, *only)
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, slow.stdout.str()
    slow.stdout.fnmatch_lines([
        "*test_no_stages: REGRESSION: the whole test (it opened no stage)",
        "*! the whole test: total * a run (+*1 run a side: slower? (total*",
        "*aquaprof: FAILED: 1 test slower than the base reports by more "
        "than 300% (test_suite.py::test_no_stages)"])
    assert "test_no_stages: no regression" not in slow.stdout.str()


def test_no_stages_under_cpu_time_compares_nothing(pytester, base):
    """A run's CPU time is not recorded, only its stages': nothing of the
    test is judged, and a gate says so rather than pass it."""
    result = gate(pytester, base, "-k", "no_stages", "--aquaprof-measure=cpu")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*--aquaprof-fail: 1 profiled test compared nothing with *: "
        "test_suite.py::test_no_stages",
        "*test_no_stages: nothing compared: the test opened no stage, and "
        "a run's CPU time is not recorded*"])
    assert "no regression" not in result.stdout.str()


def test_a_renamed_stage_compares_nothing_and_fails_the_gate(pytester,
                                                               base):
    write_suite(pytester, name="load_v2")
    only = ("-k", "renamed")
    result = gate(pytester, base, *only)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, out
    result.stdout.fnmatch_lines([
        "*aquaprof: the regression gate*",
        "*--aquaprof-fail: 1 profiled test compared nothing with *"
        "allow-missing-base if expected): test_suite.py::test_renamed",
        "*aquaprof: against the base reports*",
        "*test_renamed: nothing compared: no stage ran in both runs; gone: "
        "load (* ms a run), new: load_v2 (* ms a run)",
        "*aquaprof: FAILED: the regression gate compared less than it "
        "should: 1 profiled test compared nothing"])
    assert "test_renamed: no regression" not in out
    # expected, as a first run's missing base is: listed, not failed
    allowed = gate(pytester, base, *only, "--aquaprof-allow-missing-base")
    assert allowed.ret == 0, allowed.stdout.str()
    allowed.stdout.fnmatch_lines(["*test_renamed: nothing compared: no "
                                  "stage ran in both runs*"])
    assert "no regression" not in allowed.stdout.str()
    # compared without a gate: said, the run passes
    compared = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'c'}",
                                  f"--aquaprof-compare={base}", *only)
    assert compared.ret == 0, compared.stdout.str()
    compared.stdout.fnmatch_lines(["*test_renamed: nothing compared*"])


def test_stages_on_one_side_only_are_named_beside_the_verdict(pytester,
                                                                base):
    write_suite(pytester, extra="extra")
    result = gate(pytester, base, "-k", "steady", "--aquaprof-measure=cpu")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*test_steady: no regression*",
        "*not compared, run on one side only: new: extra (* of CPU a "
        "run)"])


def test_the_last_line_names_the_slower_tests_and_the_holes(pytester, base):
    # steady's base unreadable; renamed's stage four times as slow
    (base / report_name("test_suite.py::test_steady")).write_text("{")
    pytester.makepyfile(test_suite=SUITE.format(
        sleep=0.05, name="load", step=0.0005, extra="").replace(
        "busy(0.0005)", "busy(0.002)", 1))
    result = gate(pytester, base, "-k", "steady or renamed",
                  "--aquaprof-measure=cpu", threshold="50%")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    why = ("1 test slower than the base reports by more than 50% "
           "(test_suite.py::test_renamed); the regression gate compared "
           "less than it should: 1 test's base reports could not be read")
    result.stdout.fnmatch_lines([
        "*--aquaprof-fail: 1 test's base reports in * could not be read*",
        "*test_renamed: REGRESSION: load*",
        f"*aquaprof: FAILED: {why}",
        f"*ERROR aquaprof: {why}"])


def test_a_base_of_no_stages_against_a_run_with_some(pytester, base):
    """A test that starts opening stages has nothing in common with a
    base that opened none: named, not passed."""
    pytester.makepyfile(test_suite=SUITE.format(
        sleep=0.05, name="load", step=0.0005, extra="").replace(
        "    time.sleep(0.05)", '    with ap.stage("nap"):\n'
        '        time.sleep(0.05)'))
    result = gate(pytester, base, "-k", "no_stages")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*test_no_stages: nothing compared: no "
                                 "stage ran in both runs; new: nap (* a "
                                 "run)"])
    saved = json.loads((base / report_name(
        "test_suite.py::test_no_stages")).read_text())
    assert saved["stages"] == []


def test_a_copy_of_a_base_run_in_a_linked_folder_counts_once(pytester,
                                                             base):
    # a "latest" link into the base folder holds the same reports: read
    # twice, one run would pass for two that agree exactly
    (base / "latest").symlink_to(base, target_is_directory=True)
    result = gate(pytester, base, "-k", "steady")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "is a copy of a base run already read; counted once" in out
    result.stdout.fnmatch_lines(["*test_steady:*"])
    assert "Traceback" not in out and "INTERNALERROR" not in out


BENCH = """
import time
import aquaprof as ap

def staged(seconds):
    with ap.stage("decode"):
        time.sleep(seconds)

def test_bench(benchmark, aquaprof):
    benchmark({work}, {sleep})
"""


@pytest.mark.parametrize("work, slower", [
    ("time.sleep", ["*test_bench: REGRESSION: the whole test (it opened "
                    "no stage)",
                    "*! the whole test: total * a round (+*: slower*"]),
    ("staged", ["*test_bench: REGRESSION: decode*",
                "*! decode: total * a round (+*: slower*"])])
def test_a_benchmark_three_times_slower_is_slower_a_round(
        pytester, monkeypatch, work, slower):
    # pytest-benchmark fills about max_time with rounds: three times
    # slower, the test and a stage's calls in its rounds take as long
    # in all, each round three times as long (17 rounds of 6 ms against
    # 47 of 2 ms: too few calls for the tail to be judged)
    pytest.importorskip("pytest_benchmark")
    monkeypatch.setenv("PYTHONPATH", str(Path(ap.__file__).parent.parent))
    args = ("--benchmark-max-time=0.1", "--benchmark-warmup=off")
    pytester.makepyfile(test_bench=BENCH.format(work=work, sleep=0.002))
    base = pytester.path / "base"
    pytester.runpytest_subprocess(*PLUGIN, *args, f"--aquaprof={base}"
                                  ).assert_outcomes(passed=1)
    pytester.makepyfile(test_bench=BENCH.format(work=work, sleep=0.006))
    slow = pytester.runpytest_subprocess(
        *PLUGIN, *args, f"--aquaprof={pytester.path / 'new'}",
        f"--aquaprof-compare={base}", "--aquaprof-fail=50%")
    assert slow.ret == pytest.ExitCode.TESTS_FAILED, slow.stdout.str()
    slow.stdout.fnmatch_lines(slower)
