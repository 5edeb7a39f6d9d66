"""The pytest plugin in real pytest runs (pytester): the fixture, the
flags, pytest-benchmark's extra_info, and failing on a planted regression
but not on two runs of the same code."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof.integrations.pytest_plugin import report_name
from aquaprof.integrations.pytest_load import SESSION_FILE

from plugin_args import PLUGIN

pytest_plugins = ["pytester"]


# the gates judge thread CPU time: on a busy machine preemption moves a
# spinning step's wall time past any threshold, a real change of wall
# time that one run a side cannot tell from the code's
CPU = ("--aquaprof-measure=cpu",)

SUITE = """
import time
import aquaprof as ap

def busy(seconds):
    # spins for its thread's CPU time: a busy machine adds wall time
    end = time.thread_time() + seconds
    while time.thread_time() < end:
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
    plain = report_name("test_suite.py::test_plain")
    fixture = report_name("test_suite.py::test_with_fixture")
    assert plain.startswith("test_suite.py__test_plain-")
    # and how busy the machine was over the session, for a later gate
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [plain, fixture, SESSION_FILE])
    assert ap.Report.load(out / plain)["plain"].count == 1
    assert ap.Report.load(out / fixture)["step"].count == 20
    result.stdout.fnmatch_lines(["*aquaprof: top stages by self time*",
                                 "*test_with_fixture: step *ms*"])


def test_the_summary_names_each_rule_of_a_recursive_parser_once(pytester):
    # expr/term/expr/...: each rule's levels rank as one stage, as the
    # printed report ranks them
    pytester.makepyfile(test_parser="""
from planted_parser import Evaluator

def test_parse():
    evaluator = Evaluator(("expr", "term"))
    for _ in range(3):
        evaluator.evaluate()
""")
    result = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path}/p",
                                "--aquaprof-show")
    result.assert_outcomes(passed=1)
    line = next(x for x in result.outlines
                if x.startswith("test_parser.py::test_parse: "))
    ranked = line.split(": ", 1)[1].split(", ")
    assert sorted(r.rsplit(" ", 2)[0] for r in ranked) == ["expr",
                                                          "expr/term"]


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
    # the command docs/regressions.md gives for reading it
    shown = subprocess.run([sys.executable, "-m", "aquaprof", "benchmarks",
                            str(saved)], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"{saved}: test_bench.py::test_bench"
    assert lines[1].split() == ["stage", "count", "total", "self", "mean",
                                "p50", "p95"]
    assert lines[2].split()[:2] == ["inner", "5"]


def test_planted_regression_fails_the_run_and_noise_does_not(pytester):
    write_suite(pytester, step=0.0005)
    base = pytester.path / "base"
    pytester.runpytest(*PLUGIN, f"--aquaprof={base}").assert_outcomes(
        passed=2)
    # the same code again: no failure
    same = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'b'}",
                              f"--aquaprof-compare={base}",
                              "--aquaprof-fail=20%", *CPU)
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(["*test_with_fixture: no regression*"])
    # a step twice as slow: the run fails and names it
    write_suite(pytester, step=0.001)
    slow = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'c'}",
                              f"--aquaprof-compare={base}",
                              "--aquaprof-fail=20%", *CPU)
    assert slow.ret == 1
    slow.stdout.fnmatch_lines(["*test_with_fixture: REGRESSION: step*"])


def test_a_failed_gate_fails_the_session_in_red_and_a_pass_is_green(
        pytester):
    write_suite(pytester, step=0.0005)
    base = pytester.path / "base"
    # the 20-call stage only: a single call is at a busy machine's mercy
    only = ("-k", "test_with_fixture")
    pytester.runpytest(*PLUGIN, f"--aquaprof={base}", *only
                       ).assert_outcomes(passed=1)
    gate = (f"--aquaprof-compare={base}", "--aquaprof-fail=20%", *CPU,
            *only)
    same = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'b'}",
                              *gate, "--color=yes")
    assert same.ret == 0, same.stdout.str()
    same.stdout.fnmatch_lines(["*\x1b[32m*test_with_fixture: no regression*"])
    write_suite(pytester, step=0.001)
    slow = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'c'}",
                              *gate, "--color=yes")
    assert slow.ret == pytest.ExitCode.TESTS_FAILED
    slow.stdout.fnmatch_lines([
        "*\x1b[31m*test_with_fixture: REGRESSION: step*",
        "*\x1b[31m*aquaprof: FAILED: 1 test slower than the base reports "
        "by more than 20%*"])
    # pytest's own last line counts the failed gate, in red
    last = slow.stdout.lines[-1]
    assert "1 passed" in last and "1 error" in last, last
    assert last.startswith("\x1b[31m"), last
    slow.stdout.fnmatch_lines(["*ERROR*aquaprof: 1 test slower*"])
    # --color=no: the same verdict, no colour
    plain = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'd'}",
                               *gate, "--color=no")
    assert plain.ret == pytest.ExitCode.TESTS_FAILED
    assert "\x1b[" not in plain.stdout.str()
    assert "1 passed, 1 deselected, 1 error" in plain.stdout.lines[-1]


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


ALIKE = """
import pytest
import aquaprof as ap

@pytest.mark.parametrize("n", [1, 2, 3, 4],
                         ids=["a/b", "a b", "a_b", "x" * 300])
def test_alike(n):
    for _ in range(n):
        with ap.stage("call"):
            pass
"""


def test_ids_that_read_alike_or_run_long_get_files_of_their_own(pytester):
    """"a/b", "a b" and "a_b" made one file name (each report overwrote
    the last), and an id of 300 characters made a passing test fail with
    "File name too long"."""
    pytester.makepyfile(test_alike=ALIKE)
    out = pytester.path / "profiles"
    result = pytester.runpytest(*PLUGIN, f"--aquaprof={out}")
    result.assert_outcomes(passed=4)
    ids = ["a/b", "a b", "a_b", "x" * 300]
    names = [report_name(f"test_alike.py::test_alike[{i}]") for i in ids]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        names + [SESSION_FILE])
    for n, name in enumerate(names, 1):
        assert len(name) <= 122
        assert ap.Report.load(out / name)["call"].count == n


def test_report_names_are_unique_and_bounded_for_any_id():
    """Seeded random ids, from an alphabet of the characters that the
    readable part turns to '_' and of long runs: distinct ids give
    distinct names of at most 122 safe characters."""
    import random
    import re
    rng = random.Random(1234)
    alphabet = "ab_/ :[]-.\x00\u00e9\u202e"
    ids = {"".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
           for _ in range(3000)}
    names = {report_name(i) for i in ids}
    assert len(names) == len(ids)
    assert all(len(n) <= 122 and re.fullmatch(r"[A-Za-z0-9_.-]+", n)
               for n in names)


def test_aquaprof_failing_to_save_is_a_warning_not_a_failed_test(pytester):
    """--aquaprof=DIR where DIR cannot be made (a file is in the way): the
    tests pass, and a warning says what aquaprof could not do."""
    write_suite(pytester)
    blocker = pytester.path / "taken"
    blocker.write_text("a file, not a folder")
    result = pytester.runpytest(*PLUGIN, f"--aquaprof={blocker}")
    result.assert_outcomes(passed=2, warnings=2)
    result.stdout.fnmatch_lines(["*AquaprofWarning: aquaprof: cannot save "
                                 "in*the report of test_suite.py::*"])
    assert result.ret == 0


def test_an_unreadable_base_report_fails_the_gate_and_says_why(pytester):
    write_suite(pytester)
    base = pytester.path / "base"
    pytester.runpytest(*PLUGIN, f"--aquaprof={base}").assert_outcomes(
        passed=2)
    plain = base / report_name("test_suite.py::test_plain")
    newer = json.loads(plain.read_text())
    newer["version"] += 1
    (base / report_name("test_suite.py::test_with_fixture")).write_text(
        json.dumps(newer))
    plain.write_text("{")                           # a cut file
    gate = (f"--aquaprof={pytester.path / 'n'}", f"--aquaprof-compare={base}")
    result = pytester.runpytest(*PLUGIN, *gate, "--aquaprof-fail=500%",
                                "--aquaprof-allow-missing-base")
    # compared nothing: never a pass
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines([
        "*aquaprof: warnings*",
        "*--aquaprof-compare: test_suite.py::test_*:*newer than this "
        "aquaprof reads*",
        "*--aquaprof-compare: test_suite.py::test_plain:*not valid JSON*",
        "*--aquaprof-fail: 2 tests' base reports in * could not be read*"])
    # without a gate, each is a warning and the run passes
    result = pytester.runpytest(*PLUGIN, *gate)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*test_plain:*not valid JSON*"])


def test_a_gate_with_no_base_folder_is_a_usage_error(pytester):
    write_suite(pytester)
    result = pytester.runpytest(*PLUGIN, "--aquaprof-compare=nonexistent",
                                "--aquaprof-fail=5%")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--aquaprof-compare: no folder "
                                 "'nonexistent'*allow-missing-base*"])


def test_a_gate_that_compares_nothing_fails_and_says_why(pytester):
    write_suite(pytester)
    empty = pytester.path / "empty"
    empty.mkdir()
    result = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'p'}",
                                f"--aquaprof-compare={empty}",
                                "--aquaprof-fail=5%")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*2 profiled tests have no report in*"])
    # profiling forgotten: nothing compared is no pass either
    result = pytester.runpytest(*PLUGIN, f"--aquaprof-compare={empty}",
                                "--aquaprof-fail=5%", "-k", "plain")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*no test was profiled, nothing was "
                                 "compared*"])


def test_a_first_run_says_it_has_no_base_and_passes(pytester):
    write_suite(pytester)
    result = pytester.runpytest(*PLUGIN, f"--aquaprof={pytester.path / 'p'}",
                                "--aquaprof-compare=not-yet",
                                "--aquaprof-fail=5%",
                                "--aquaprof-allow-missing-base")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*no base report for 2 profiled tests, "
                                 "not compared*"])


def test_a_passing_test_still_says_what_its_comparison_notes():
    """A test that did not regress still says the comparison's notes
    (spans dropped, GPU kernels whose time moved, a busier machine), and
    of which time "no regression" is: before, only a failing test did."""
    from types import SimpleNamespace
    from aquaprof.integrations.pytest_plugin import _write_test
    lines = []

    def write(text, **_):
        lines.append(text)

    comparison = SimpleNamespace(
        machine="", measure="cpu", dropped="3 spans dropped (max_spans)",
        gpu="kernels of 'step' took 2.0x their base time", memory="",
        items="")
    judged = SimpleNamespace(
        comparison=comparison, regressions=[], noisy=[], whole=None,
        busy_suspects=[],
        nothing_compared=lambda: "", one_side_only=lambda: "")
    _write_test(write, "t.py::test_x", judged, hole=False)
    assert lines == ["t.py::test_x: no regression in cpu time",
                     "    note: 3 spans dropped (max_spans)",
                     "    note: kernels of 'step' took 2.0x their base "
                     "time"]
