"""The pytest plugin (entry point ``pytest11``; without installing the
package, ``-p aquaprof.pytest_plugin``).

- The ``aquaprof`` fixture yields a running Profiler for the test; at
  teardown its report is attached to the test item (``item.aquaprof_report``)
  and, where the test also uses pytest-benchmark's ``benchmark`` fixture,
  the per-stage breakdown goes into ``benchmark.extra_info["aquaprof"]``,
  so ``--benchmark-autosave`` saves it and ``pytest-benchmark compare``
  shows it.
- ``--aquaprof=DIR`` profiles every test and writes one report per test to
  DIR; ``--aquaprof-show`` prints the top stages in the terminal summary.
- ``--aquaprof-compare=BASE_DIR`` compares each test's report with the one
  of the same name in BASE_DIR (Report.compare); ``--aquaprof-fail=5%``
  fails the run when a stage is slower by more than that. A gate never
  switches itself off: a BASE_DIR that is no folder is a usage error, and
  a profiled test with no base report (a typo, a renamed test, a first
  run) fails a gated run, named, unless ``--aquaprof-allow-missing-base``
  says that is expected; a gated run that profiled no test fails too.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from .. import Profiler
from ..report import Report, ReportError
from ..views.text import plural

__all__ = ["AquaprofWarning", "aquaprof", "pytest_addoption",
           "pytest_configure", "pytest_runtest_call", "pytest_sessionfinish",
           "pytest_terminal_summary", "report_name"]

_REPORTS = pytest.StashKey[List[Tuple[str, Report]]]()
#: what aquaprof could not do in the session, printed at the end
_PROBLEMS = pytest.StashKey[List[str]]()
#: profiled tests whose report has no base to compare with
_UNCOMPARED = pytest.StashKey[List[str]]()


def _fraction(text: str) -> float:
    from ..analysis.compare import parse_threshold
    try:
        return parse_threshold(text)
    except ValueError as e:
        raise pytest.UsageError(f"--aquaprof-fail: {e}") from None


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("aquaprof", "aquaprof profiling")
    group.addoption("--aquaprof", metavar="DIR", default=None,
                    help="profile every test; write one report per test "
                         "to DIR")
    group.addoption("--aquaprof-show", action="store_true",
                    help="print each profiled test's top stages at the end")
    group.addoption("--aquaprof-compare", metavar="BASE_DIR", default=None,
                    help="compare each test's report with BASE_DIR's")
    group.addoption("--aquaprof-fail", metavar="THRESHOLD", default=None,
                    help="fail the run when a stage is slower than in "
                         "BASE_DIR by more than THRESHOLD (5%% or 0.05)")
    group.addoption("--aquaprof-allow-missing-base", action="store_true",
                    help="tests with no report in BASE_DIR (or no "
                         "BASE_DIR yet: a first run) are listed, not "
                         "failed")


def pytest_configure(config: Any) -> None:
    config.stash[_REPORTS] = []
    config.stash[_PROBLEMS] = []
    config.stash[_UNCOMPARED] = []
    config.addinivalue_line("markers", "aquaprof: profiled by aquaprof")
    if config.getoption("aquaprof_fail") is not None:
        _fraction(config.getoption("aquaprof_fail"))
        if config.getoption("aquaprof_compare") is None:
            raise pytest.UsageError("--aquaprof-fail needs "
                                    "--aquaprof-compare=BASE_DIR")
    base_dir = config.getoption("aquaprof_compare")
    if base_dir is not None and not Path(base_dir).is_dir() and \
            not config.getoption("aquaprof_allow_missing_base"):
        raise pytest.UsageError(
            f"--aquaprof-compare: no folder {base_dir!r} (a first run "
            f"with no base yet: add --aquaprof-allow-missing-base)")


#: most characters of a test id kept readable in its report's file name
NAME_CHARS = 100


def report_name(nodeid: str) -> str:
    """A file name for a test id, unique and at most 122 characters
    whatever the id: the id made safe (other characters than letters,
    digits, '_', '.' and '-' as '_', cut to NAME_CHARS) and a hash of the
    whole id, so that ids that read alike ("a/b", "a b", "a_b") or share
    a long prefix get files of their own: tests/test_x.py::test_y[1] ->
    tests_test_x.py__test_y_1_-4ba58ada332a8219.json"""
    readable = re.sub(r"[^A-Za-z0-9_.-]", "_", nodeid.replace("::", "__"))
    digest = hashlib.sha256(nodeid.encode("utf-8", "surrogatepass"))
    return f"{readable[:NAME_CHARS]}-{digest.hexdigest()[:16]}.json"


class AquaprofWarning(pytest.PytestWarning):
    """aquaprof could not profile a test or keep its report: the test's
    own outcome stands."""


def _breakdown(report: Report) -> Dict[str, Dict[str, float]]:
    return {s.path: {"count": s.count, "total_s": s.wall.total,
                     "self_s": s.self_time, "mean_s": s.wall.mean,
                     "p50_s": s.wall.p50, "p95_s": s.wall.p95}
            for s in report.stages}


def _finish(item: Any, report: Report) -> None:
    item.aquaprof_report = report
    config = item.config
    config.stash[_REPORTS].append((item.nodeid, report))
    folder = config.getoption("aquaprof")
    if folder:
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            report.save(Path(folder) / report_name(item.nodeid))
        except OSError as e:
            # the profiler's trouble, not the test's: a warning
            _warn(item, f"cannot save in {folder} the report of", e)


@pytest.fixture
def aquaprof(request: Any) -> Iterator[Profiler]:
    """A running aquaprof Profiler for this test; its report ends up on
    the test (and in pytest-benchmark's extra_info)."""
    prof = Profiler()
    prof.start()
    try:
        yield prof
    finally:
        prof.stop()
    report = prof.report()
    if "benchmark" in request.fixturenames:
        bench = request.getfixturevalue("benchmark")
        bench.extra_info["aquaprof"] = _breakdown(report)
    _finish(request.node, report)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Iterator[None]:
    profile = (item.config.getoption("aquaprof")
               and "aquaprof" not in getattr(item, "fixturenames", ()))
    prof = None
    if profile:
        try:
            prof = Profiler().start()
        except Exception as e:       # noqa: BLE001 -- never the test's
            _warn(item, "cannot profile", e)
    try:
        yield
    finally:
        if prof:
            try:
                prof.stop()
                report = prof.report()
            except Exception as e:   # noqa: BLE001 -- never the test's
                _warn(item, "no report for", e)
            else:
                _finish(item, report)


def _warn(item: Any, what: str, error: BaseException) -> None:
    item.warn(AquaprofWarning(f"aquaprof: {what} {item.nodeid}: "
                              f"{type(error).__name__}: {error}"))


def _comparisons(config: Any) -> List[Tuple[str, Any]]:
    base_dir = config.getoption("aquaprof_compare")
    if not base_dir:
        return []
    threshold = _fraction(config.getoption("aquaprof_fail") or "5%")
    out = []
    for nodeid, report in config.stash[_REPORTS]:
        path = Path(base_dir) / report_name(nodeid)
        if not path.exists():
            config.stash[_UNCOMPARED].append(nodeid)
            continue
        try:
            base = Report.load(path)
        except ReportError as e:
            # one unreadable base report loses one comparison, said so
            config.stash[_PROBLEMS].append(
                f"--aquaprof-compare: {nodeid}: {e}")
            continue
        out.append((nodeid, report.compare(base, threshold)))
    return out


def _some(nodeids: List[str]) -> str:
    """The first few test ids, for a one-line message."""
    return ", ".join(nodeids[:5]) + (", ..." if len(nodeids) > 5 else "")


def _gate_holes(config: Any) -> List[str]:
    """Why a gated run (--aquaprof-fail) compared less than it should:
    each reason fails the run, in one line."""
    if config.getoption("aquaprof_fail") is None:
        return []
    base_dir = config.getoption("aquaprof_compare")
    if not config.stash[_REPORTS]:
        return [f"--aquaprof-fail: no test was profiled, nothing was "
                f"compared with {base_dir} (profile them: --aquaprof=DIR "
                f"or the aquaprof fixture)"]
    missing = config.stash[_UNCOMPARED]
    if missing and not config.getoption("aquaprof_allow_missing_base"):
        return [f"--aquaprof-fail: {plural(len(missing), 'profiled test')} "
                f"{'has' if len(missing) == 1 else 'have'} no report in "
                f"{base_dir} to compare with (a renamed test, a wrong "
                f"folder; --aquaprof-allow-missing-base if expected): "
                f"{_some(missing)}"]
    return []


def _gate_failure(config: Any) -> Optional[str]:
    """Why the gate (--aquaprof-fail) fails the run, in a few words; None
    when it passes or there is no gate."""
    if config.getoption("aquaprof_fail") is None:
        return None
    if config.aquaprof_gate_holes:
        return "the regression gate compared less than it should"
    slower = [nodeid for nodeid, c in config.aquaprof_comparisons
              if c.regressions]
    if not slower:
        return None
    return (f"{plural(len(slower), 'test')} slower than the base reports "
            f"by more than {config.getoption('aquaprof_fail')}")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    config = session.config
    config.aquaprof_comparisons = _comparisons(config)
    config.aquaprof_gate_holes = _gate_holes(config)
    config.aquaprof_gate_failure = _gate_failure(config)
    if config.aquaprof_gate_failure:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _count_as_error(terminalreporter: Any, why: str) -> None:
    """The failed gate as one error in pytest's own tally, so that its
    last line reads '2 passed, 1 error' in red, not a green '2 passed'.
    Added after pytest printed its ERRORS section, which would call it
    a collection error: aquaprof's section says what failed."""
    report = pytest.CollectReport(f"aquaprof: {why}", "failed", why, [])
    terminalreporter.stats.setdefault("error", []).append(report)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: Any) -> None:
    write = terminalreporter.write_line
    if config.stash[_PROBLEMS]:
        terminalreporter.section("aquaprof: warnings")
        for problem in config.stash[_PROBLEMS]:
            write(problem)
    if config.getoption("aquaprof_show") and config.stash[_REPORTS]:
        terminalreporter.section("aquaprof: top stages by self time")
        for nodeid, report in config.stash[_REPORTS]:
            top = ", ".join(f"{s.path} {s.self_time * 1e3:.2f} ms"
                            for s in report.top(3) if s.self_time > 0)
            write(f"{nodeid}: {top or 'no stages'}")
    holes: List[str] = getattr(config, "aquaprof_gate_holes", [])
    missing = config.stash[_UNCOMPARED]
    if holes or missing:
        terminalreporter.section("aquaprof: the regression gate",
                                 red=bool(holes), yellow=not holes)
        for line in holes:
            write(line, red=True, bold=True)
        if missing and not holes:
            write(f"no base report for "
                  f"{plural(len(missing), 'profiled test')}, not "
                  f"compared: {_some(missing)}", yellow=True)
    comparisons: Optional[List[Tuple[str, Any]]] = getattr(
        config, "aquaprof_comparisons", None)
    if comparisons:
        failed = any(c.regressions for _, c in comparisons)
        terminalreporter.section("aquaprof: against the base reports",
                                 red=failed, green=not failed)
        for nodeid, comparison in comparisons:
            slower = comparison.regressions
            if not slower:
                write(f"{nodeid}: no regression", green=True)
                continue
            write(f"{nodeid}: REGRESSION: "
                  f"{', '.join(c.path for c in slower)}", red=True, bold=True)
            for line in str(comparison).splitlines()[1:]:
                write(f"    {line}")
    why = getattr(config, "aquaprof_gate_failure", None)
    if why:
        write(f"aquaprof: FAILED: {why}", red=True, bold=True)
        _count_as_error(terminalreporter, why)
