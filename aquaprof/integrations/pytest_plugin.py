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
- ``--aquaprof-compare=BASE_DIR`` compares each test's runs with its runs
  in BASE_DIR (its report, the rounds saved beside it, and the same in
  BASE_DIR's sub-folders: one per earlier run of the suite), with the
  verdicts of analysis.verdict; ``--aquaprof-fail=5%`` fails the run when
  a stage is slower by more than that. ``--aquaprof-rounds=N`` runs a suspect
  test (slower, or a stage grown past the threshold without the evidence)
  N - 1 more times before judging it on all its runs;
  ``--aquaprof-measure=cpu`` judges thread CPU time instead of wall time.
  A gate never switches itself off: a BASE_DIR that is no folder is a
  usage error, and a profiled test with no base report (a typo, a renamed
  test, a first run), or whose runs had no stage in common with its base
  runs (a renamed stage), fails a gated run, named, unless
  ``--aquaprof-allow-missing-base`` says that is expected; a gated run
  that profiled no test fails too. A test that opens no stage is judged
  on its profiled run's wall time.
- Under pytest-xdist each worker profiles its tests and hands the reports
  to the controller (xdist's workeroutput), which shows, compares and
  gates exactly as a serial run does. A worker that goes down (a test
  that kills its process) hands nothing over: the tests it profiled are
  read back from the --aquaprof folder, or named and, with
  --aquaprof-fail, fail the gate as tests it could not compare.
- pytest-benchmark's calibration and warm-up calls are kept in the report
  but left out of the figures (its ``measured`` windows: the timed rounds).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import (
    Any, Callable, Dict, Generator, Iterator, List, NamedTuple, Optional,
    Tuple)

import numpy as np
import pytest

from ..record.profiler import Profiler
from ..analysis.compare import (
    BUSY_SLOWER, Comparison, StageChange, cpu_bound, parse_threshold,
    run_figures)
from .pytest_load import (
    read_session, running, session_busy, write_session)
from ..record.host import cpu_ticks
from ..analysis.verdict import MEASURES, NOISY, SLOWER, RunFigures, judge
from ..report import Report, ReportError
from ..common.units import fmt_time, printable
from ..common.words import plural

__all__ = ["AquaprofWarning", "aquaprof", "base_folders", "base_runs",
           "pytest_addoption",
           "pytest_configure", "pytest_configure_node",
           "pytest_runtest_call", "pytest_runtest_logreport",
           "pytest_runtest_makereport",
           "pytest_runtest_protocol", "pytest_sessionfinish",
           "pytest_terminal_summary", "pytest_testnodedown", "report_name"]

_REPORTS = pytest.StashKey[List[Tuple[str, Report]]]()
#: what aquaprof could not do in the session, printed at the end
_PROBLEMS = pytest.StashKey[List[str]]()
#: profiled tests whose report has no base to compare with
_UNCOMPARED = pytest.StashKey[List[str]]()
#: profiled tests whose base runs exist but none could be read
_UNREADABLE = pytest.StashKey[List[str]]()
#: compared tests of which nothing could be judged (no stage in common)
_UNJUDGED = pytest.StashKey[List[str]]()
#: runs of each test id made in this process (rounds)
_RUNS = pytest.StashKey[Dict[str, int]]()
#: each test id's base runs, read once: whether it has any files, and
#: the reports that could be read
_BASES = pytest.StashKey[Dict[str, Tuple[bool, List[Report]]]]()
#: BASE_DIR and its sub-folders, listed once
_FOLDERS = pytest.StashKey[List[Path]]()
#: the controller under pytest-xdist: the tests each worker ran through
#: their call, in order, so that a worker that goes down before handing
#: its reports over loses them by name, not silently
_WORKER_TESTS = pytest.StashKey[Dict[str, List[str]]]()
#: profiled tests whose runs went down with their worker and could not
#: be read back from the --aquaprof folder
_LOST = pytest.StashKey[List[str]]()
#: when the session began (time.time()): a report file older than that
#: is an earlier session's
_STARTED = pytest.StashKey[float]()
#: the machine's CPU ticks and the CPU of the exited child processes
#: as the session began (record.host.cpu_ticks), in its leader
_TICKS = pytest.StashKey[Any]()
#: the controller under pytest-xdist: the process id each worker handed
#: over (None for one that went down without)
_WORKER_PIDS = pytest.StashKey[List[Optional[int]]]()
#: how busy other processes kept the machine over this session
#: (pytest_load.session_busy; {} where not known)
_BUSY = pytest.StashKey[Dict[str, float]]()
#: each base folder's session reading (None where it has none), read once
_FOLDER_BUSY = pytest.StashKey[Dict[Path, Optional[Dict[str, float]]]]()
#: each test id's base runs' session readings, one per run read
_BASE_BUSY = pytest.StashKey[Dict[str, List[Optional[Dict[str, float]]]]]()


def _fraction(text: str) -> float:
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
                         "BASE_DIR yet: a first run), or no stage in "
                         "common with it, are listed, not failed")
    group.addoption("--aquaprof-measure", metavar="MEASURE", default="wall",
                    choices=MEASURES,
                    help="judge each stage's wall time (default) or its "
                         "thread CPU time (cpu: steadier on a shared "
                         "runner)")
    group.addoption("--aquaprof-rounds", metavar="N", type=int, default=1,
                    help="run a suspect test (slower, or a stage grown past "
                         "the threshold without the evidence) N-1 more "
                         "times and judge it on all its runs (default 1)")


def pytest_configure(config: Any) -> None:
    config.stash[_REPORTS] = []
    config.stash[_PROBLEMS] = []
    config.stash[_UNCOMPARED] = []
    config.stash[_UNREADABLE] = []
    config.stash[_UNJUDGED] = []
    config.stash[_RUNS] = {}
    config.stash[_BASES] = {}
    config.stash[_WORKER_TESTS] = {}
    config.stash[_LOST] = []
    config.stash[_STARTED] = time.time()
    config.stash[_WORKER_PIDS] = []
    config.stash[_BUSY] = {}
    config.stash[_FOLDER_BUSY] = {}
    config.stash[_BASE_BUSY] = {}
    config.stash[_TICKS] = None if _is_worker(config) else cpu_ticks()
    config.addinivalue_line("markers", "aquaprof: profiled by aquaprof")
    if config.getoption("aquaprof_fail") is not None:
        _fraction(config.getoption("aquaprof_fail"))
        if config.getoption("aquaprof_compare") is None:
            raise pytest.UsageError("--aquaprof-fail needs "
                                    "--aquaprof-compare=BASE_DIR")
    if config.getoption("aquaprof_rounds") < 1:
        raise pytest.UsageError(f"--aquaprof-rounds must be 1 or more, got "
                                f"{config.getoption('aquaprof_rounds')}")
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


def _run_name(nodeid: str, config: Any) -> Tuple[str, int]:
    """The file of this process's next run of a test and which run it is:
    report_name for the first, then "<stem>.r2.json", ...; under
    pytest-xdist's --dist each, where every worker runs every test,
    "<stem>.gw1.json", ... so that workers never write one file."""
    runs = config.stash[_RUNS].get(nodeid, 0) + 1
    config.stash[_RUNS][nodeid] = runs
    stem = report_name(nodeid)[:-len(".json")]
    worker = getattr(config, "workerinput", {})
    if worker.get("aquaprof_dist_each"):
        stem += f".{worker['workerid']}"
    return stem + (f".r{runs}" if runs > 1 else "") + ".json", runs


def base_folders(base_dir: Path) -> List[Path]:
    """A base folder and its sub-folders (one per earlier run of the
    suite, say), oldest first; none when it is no folder."""
    if not base_dir.is_dir():
        return []
    return [base_dir] + sorted(p for p in base_dir.iterdir() if p.is_dir())


def base_runs(base_dir: Path, nodeid: str,
              folders: Optional[List[Path]] = None) -> List[Path]:
    """A test's runs in a base folder: its report, the rounds and worker
    runs saved beside it, and the same in each sub-folder; folders:
    base_folders(base_dir), when known already."""
    stem = report_name(nodeid)[:-len(".json")]
    if folders is None:
        folders = base_folders(base_dir)
    out: List[Path] = []
    for folder in folders:
        out += sorted(p for p in [folder / f"{stem}.json",
                                  *folder.glob(f"{stem}.*.json")]
                      if p.is_file())
    return out


class AquaprofWarning(pytest.PytestWarning):
    """aquaprof could not profile a test or keep its report: the test's
    own outcome stands."""


def _breakdown(report: Report) -> Dict[str, Dict[str, float]]:
    """Each stage's figures over the measured calls (a benchmark's timed
    rounds, without calibration and warm-up)."""
    whole, own = run_figures(report), run_figures(report, own=True)
    # run_figures gives a round's figures: these are of all the rounds
    return {path: {"count": f.calls_known, "total_s": f.total * f.rounds,
                   "self_s": own[path].total * f.rounds,
                   "mean_s": f.total / f.count if f.count else 0.0,
                   "p50_s": f.p50, "p95_s": f.p95}
            for path, f in whole.items()}


def _watch_benchmark(bench: Any) -> List[Tuple[int, int]]:
    """Records the [start, end] of every call of pytest-benchmark's runner
    (calibration, warm-up and timed rounds alike): the timed rounds are
    the last of them, as many as its stats hold. A benchmark fixture of
    another shape is left alone (no windows: every call counts)."""
    windows: List[Tuple[int, int]] = []
    make = getattr(bench, "_make_runner", None)
    if make is None:
        return windows

    def make_runner(*args: Any, **kwargs: Any) -> Any:
        runner = make(*args, **kwargs)

        def timed(*a: Any, **k: Any) -> Any:
            start = time.monotonic_ns()
            try:
                return runner(*a, **k)
            finally:
                windows.append((start, time.monotonic_ns()))
        return timed
    bench._make_runner = make_runner
    return windows


def _measured(report: Report, bench: Any,
              windows: List[Tuple[int, int]]) -> Report:
    """report with its measured windows: the benchmark's timed rounds."""
    stats = getattr(getattr(bench, "stats", None), "stats", None)
    rounds = len(getattr(stats, "data", ()) or ())
    if not rounds or rounds > len(windows):
        return report
    data = report.to_dict()
    data["measured"] = [list(w) for w in windows[-rounds:]]
    return Report.from_dict(data)


def _finish(item: Any, report: Report) -> None:
    item.aquaprof_report = report
    config = item.config
    config.stash[_REPORTS].append((item.nodeid, report))
    folder = config.getoption("aquaprof")
    if folder:
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            name, run = _run_name(item.nodeid, config)
            if run == 1:
                # rounds an earlier session left are not this one's runs
                for stale in Path(folder).glob(f"{name[:-5]}.r*.json"):
                    stale.unlink()
            report.save(Path(folder) / name)
        except OSError as e:
            # the profiler's trouble, not the test's: a warning
            _warn(item, f"cannot save in {folder} the report of", e)


@pytest.fixture
def aquaprof(request: Any) -> Iterator[Profiler]:
    """A running aquaprof Profiler for this test; its report ends up on
    the test (and in pytest-benchmark's extra_info)."""
    bench = (request.getfixturevalue("benchmark")
             if "benchmark" in request.fixturenames else None)
    windows = _watch_benchmark(bench) if bench is not None else []
    prof = Profiler()
    prof.start()
    try:
        yield prof
    finally:
        prof.stop()
    report = prof.report()
    if bench is not None:
        report = _measured(report, bench, windows)
        bench.extra_info["aquaprof"] = _breakdown(report)
    _finish(request.node, report)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Iterator[None]:
    profile = (item.config.getoption("aquaprof")
               and "aquaprof" not in getattr(item, "fixturenames", ()))
    prof = None
    bench = getattr(item, "funcargs", {}).get("benchmark") if profile \
        else None
    windows = _watch_benchmark(bench) if bench is not None else []
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
                if bench is not None:
                    report = _measured(report, bench, windows)
            except Exception as e:   # noqa: BLE001 -- never the test's
                _warn(item, "no report for", e)
            else:
                _finish(item, report)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Iterator[None]:
    """With --aquaprof-rounds N, a suspect test (a stage found slower than
    its base, or grown past the threshold without the evidence for it)
    runs again, N - 1 times, unreported, so that it is judged on all its
    runs: one run on a busy moment does not fail it, and a real change
    too small for one run's evidence is caught."""
    yield
    config = item.config
    rounds = config.getoption("aquaprof_rounds")
    if rounds < 2 or not config.getoption("aquaprof_compare"):
        return
    comparison = _compare_test(config, item.nodeid)
    if comparison is None or not comparison.suspects:
        return
    from _pytest.runner import runtestprotocol
    for _ in range(rounds - 1):
        runtestprotocol(item, nextitem=nextitem, log=False)


def _warn(item: Any, what: str, error: BaseException) -> None:
    item.warn(AquaprofWarning(f"aquaprof: {what} {item.nodeid}: "
                              f"{type(error).__name__}: {error}"))


def _threshold(config: Any) -> float:
    return _fraction(config.getoption("aquaprof_fail") or "5%")


def _bases(config: Any, nodeid: str) -> Tuple[bool, List[Report]]:
    """Whether the test has base runs in BASE_DIR, and those that could be
    read (each one that could not is said), read once."""
    cache = config.stash[_BASES]
    if nodeid not in cache:
        base_dir = Path(config.getoption("aquaprof_compare"))
        if _FOLDERS not in config.stash:
            config.stash[_FOLDERS] = base_folders(base_dir)
        paths = base_runs(base_dir, nodeid, config.stash[_FOLDERS])
        runs: List[Report] = []
        busy = config.stash[_BASE_BUSY].setdefault(nodeid, [])
        for path in paths:
            try:
                run = Report.load(path)
            except ReportError as e:
                # one unreadable base report loses one run, said so
                config.stash[_PROBLEMS].append(
                    f"--aquaprof-compare: {nodeid}: {e}")
                continue
            if run in runs:
                # a copy (a linked or copied folder) is no second run:
                # counted twice, it would pass for two that agree exactly
                config.stash[_PROBLEMS].append(
                    f"--aquaprof-compare: {nodeid}: {path} is a copy of "
                    f"a base run already read; counted once")
                continue
            runs.append(run)
            busy.append(_folder_busy(config, path.parent))
        cache[nodeid] = (bool(paths), runs)
    return cache[nodeid]


def _folder_busy(config: Any, folder: Path) -> Optional[Dict[str, float]]:
    """How busy the machine was over the session that wrote a base
    folder, read once; None where not known."""
    known = config.stash[_FOLDER_BUSY]
    if folder not in known:
        known[folder] = read_session(folder)
    return known[folder]


#: the level the gate judges at
ALPHA = 0.01
#: what a test that opens no stage is judged by, named as a stage
WHOLE_TEST = "the whole test"
#: most stages named in one line
NAMED = 5


def _whole_test(base: List[Report], new: List[Report], threshold: float
                ) -> StageChange:
    """The verdict on the runs' wall time (the profiled window: the test's
    call, or the aquaprof fixture's life; a benchmark's timed rounds, each
    a call): all that is known of a test that opens no stage. One call a
    run outside a benchmark, so with one run a side it is hedged (the
    change alone decides)."""
    def figures(run: Report) -> RunFigures:
        # a benchmark's timed rounds are its calls, judged a round each:
        # its whole time stays near max_time whatever a round costs
        rounds = [(end - start) * 1e-9
                  for start, end in run.meta.get("measured") or ()]
        return (RunFigures.of(np.array(rounds), len(rounds)) if rounds
                else RunFigures.of(np.array([run.wall])))
    verdict = judge([figures(r) for r in base], [figures(r) for r in new],
                    threshold, ALPHA)
    return StageChange(WHOLE_TEST, verdict.word, verdict, verdict.base_calls,
                       verdict.new_calls)


class _TestComparison:
    """A test's runs against its base runs: its stages' verdicts and, where
    no run on either side opened a stage, the verdict on the runs' wall
    time instead (whole)."""

    def __init__(self, base: List[Report], new: List[Report],
                 threshold: float, measure: str,
                 sessions: Optional[Tuple[List[Any], List[Any]]] = None):
        self.comparison = Comparison(base, new, threshold, ALPHA, measure,
                                     sessions)
        self._reports = (base, new)
        self._measure = measure
        no_stages = not any(r.stage_names for r in (*base, *new))
        # a run's CPU time is not recorded: only its wall time can stand in
        self.whole = (_whole_test(base, new, threshold)
                      if no_stages and measure == "wall" else None)

    @property
    def changes(self) -> List[StageChange]:
        return self.comparison.changes + ([self.whole] if self.whole else [])

    @property
    def regressions(self) -> List[StageChange]:
        return [c for c in self.changes if c.verdict in SLOWER]

    @property
    def noisy(self) -> List[StageChange]:
        return [c for c in self.changes if c.verdict == NOISY]

    @property
    def busy_suspects(self) -> List[StageChange]:
        return self.comparison.busy_suspects

    @property
    def suspects(self) -> List[StageChange]:
        return [c for c in self.changes
                if c.judgement is not None and c.judgement.suspect]

    def cpu_would_tell(self, changes: List[StageChange]) -> bool:
        """Whether judging thread CPU time could settle these changes: a
        wall-time comparison of stages on the CPU for at least
        CPU_BOUND of their wall time in every run. A waiting stage (a
        sleep, I/O, a lock) is blind to it: its wait made longer reads
        "no regression" on CPU time; and the whole test's run time has no
        CPU time at all."""
        if self._measure != "wall":
            return False
        for change in changes:
            if change.path == WHOLE_TEST and self.whole is not None:
                return False
            if not cpu_bound((*self._reports[0], *self._reports[1]),
                             change.path):
                return False
        return True

    def one_side_only(self) -> str:
        """The stages only one side ran, with what a run paid for each:
        "gone: load (63 ms a run), new: load_v2 (190 ms a run)"; "" when
        every stage ran on both sides."""
        parts = []
        for word, runs in (("gone", self._reports[0]),
                           ("new", self._reports[1])):
            paths = [c.path for c in self.comparison.changes
                     if c.verdict == word]
            if not paths:
                continue
            figures = [run_figures(r, measure=self._measure) for r in runs]
            per = ("a round" if any(r.meta.get("measured") for r in runs)
                   else "a run")
            named = [f"{printable(path)} ({fmt_time(_a_run(figures, path))}"
                     f"{' of CPU' if self._measure == 'cpu' else ''} {per})"
                     for path in paths[:NAMED]]
            more = (f" and {len(paths) - NAMED} more"
                    if len(paths) > NAMED else "")
            parts.append(f"{word}: {', '.join(named)}{more}")
        return ", ".join(parts)

    def nothing_compared(self) -> str:
        """Why not one stage of the test could be judged, in words; ""
        when one was."""
        if any(c.judgement is not None for c in self.changes):
            return ""
        unmatched = self.one_side_only()
        if unmatched:
            both = ("both runs" if self.comparison.runs == (1, 1) else
                    "both the base runs and the new ones")
            return f"nothing compared: no stage ran in {both}; {unmatched}"
        return ("nothing compared: the test opened no stage, and a run's "
                "CPU time is not recorded (--aquaprof-measure=cpu judges "
                "stages only)")


def _a_run(figures: List[Dict[str, RunFigures]], path: str) -> float:
    """What a run (a benchmark's round) paid for the stage, on average
    over the runs."""
    return float(np.mean([f[path].total if path in f else 0.0
                          for f in figures]))


def _compare_test(config: Any, nodeid: str) -> Optional[_TestComparison]:
    """A test's runs in this session against its base runs."""
    runs = [r for i, r in config.stash[_REPORTS] if i == nodeid]
    base = _bases(config, nodeid)[1]
    if not runs or not base:
        return None
    # this session's reading is known once it ends (not for the rounds a
    # worker judges meanwhile)
    busy = config.stash[_BUSY] or None
    sessions = (config.stash[_BASE_BUSY].get(nodeid, [None] * len(base)),
                [busy] * len(runs))
    return _TestComparison(base, runs, _threshold(config),
                           config.getoption("aquaprof_measure"), sessions)


def _comparisons(config: Any) -> List[Tuple[str, _TestComparison]]:
    base_dir = config.getoption("aquaprof_compare")
    if not base_dir:
        return []
    out = []
    for nodeid in dict.fromkeys(i for i, _ in config.stash[_REPORTS]):
        has_files, runs = _bases(config, nodeid)
        if not has_files:
            config.stash[_UNCOMPARED].append(nodeid)
            continue
        if not runs:
            config.stash[_UNREADABLE].append(nodeid)
            continue
        comparison = _compare_test(config, nodeid)
        if comparison is None:
            continue
        if comparison.nothing_compared():
            config.stash[_UNJUDGED].append(nodeid)
        out.append((nodeid, comparison))
    return out


def _some(nodeids: List[str]) -> str:
    """The first few test ids, for a one-line message."""
    return ", ".join(nodeids[:5]) + (", ..." if len(nodeids) > 5 else "")


class _Hole(NamedTuple):
    """Why a gated run compared less than it should: in a few words (the
    last line's), and in a line that names the tests."""
    reason: str
    line: str


def _gate_holes(config: Any) -> List[_Hole]:
    """Why a gated run (--aquaprof-fail) compared less than it should:
    each reason fails the run."""
    if config.getoption("aquaprof_fail") is None:
        return []
    base_dir = config.getoption("aquaprof_compare")
    if not config.stash[_REPORTS] and not config.stash[_LOST]:
        return [_Hole("no test was profiled",
                      f"--aquaprof-fail: no test was profiled, nothing was "
                      f"compared with {base_dir} (profile them: "
                      f"--aquaprof=DIR or the aquaprof fixture)")]
    holes = []
    lost = config.stash[_LOST]
    if lost:
        # a test that ran but whose runs went down with their worker was
        # never compared: the gate would pass it unseen
        tests = plural(len(lost), "test")
        holes.append(_Hole(
            f"{_owners(len(lost))} runs lost with a worker that went down",
            f"--aquaprof-fail: {tests} ran on a worker that went down "
            f"before handing its reports over, and were not compared with "
            f"{base_dir} (--aquaprof=DIR keeps them to be read back): "
            f"{_some(lost)}"))
    unreadable = config.stash[_UNREADABLE]
    if unreadable:
        # a base that exists but cannot be read is no missing base: the
        # gate would pass having compared nothing
        tests = (f"{plural(len(unreadable), 'test')}"
                 f"'{'s' if len(unreadable) == 1 else ''} base reports")
        holes.append(_Hole(
            f"{tests} could not be read",
            f"--aquaprof-fail: {tests} in {base_dir} could not be read (see "
            f"the warnings): {_some(unreadable)}"))
    allowed = config.getoption("aquaprof_allow_missing_base")
    missing = config.stash[_UNCOMPARED]
    if missing and not allowed:
        tests = plural(len(missing), "profiled test")
        have = 'has' if len(missing) == 1 else 'have'
        holes.append(_Hole(
            f"{tests} {have} no base report",
            f"--aquaprof-fail: {tests} {have} no report in {base_dir} to "
            f"compare with (a renamed test, a wrong folder; "
            f"--aquaprof-allow-missing-base if expected): {_some(missing)}"))
    unjudged = config.stash[_UNJUDGED]
    if unjudged and not allowed:
        # a stage renamed is a stage with no base: the gate would pass
        # having judged nothing of the test
        tests = plural(len(unjudged), "profiled test")
        holes.append(_Hole(
            f"{tests} compared nothing",
            f"--aquaprof-fail: {tests} compared nothing with {base_dir}, not "
            f"one stage judged (a renamed stage, or none at all under "
            f"--aquaprof-measure=cpu; --aquaprof-allow-missing-base if "
            f"expected): {_some(unjudged)}"))
    return holes


def _gate_failure(config: Any, holes: List[_Hole]) -> Optional[str]:
    """Why the gate (--aquaprof-fail) fails the run, in a few words: the
    slower tests and the holes, both; None when it passes or there is no
    gate."""
    if config.getoption("aquaprof_fail") is None:
        return None
    reasons = []
    slower = [nodeid for nodeid, c in config.aquaprof_comparisons
              if c.regressions]
    if slower:
        reasons.append(f"{plural(len(slower), 'test')} slower than the base "
                       f"reports by more than "
                       f"{config.getoption('aquaprof_fail')} "
                       f"({_some(slower)})")
    if holes:
        reasons.append("the regression gate compared less than it should: "
                       + ", ".join(h.reason for h in holes))
    return "; ".join(reasons) or None


def _is_worker(config: Any) -> bool:
    return hasattr(config, "workerinput")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist's controller, for each worker: whether every worker
    runs every test (--dist each; workers are told "no")."""
    node.workerinput["aquaprof_dist_each"] = \
        node.config.getoption("dist", None) == "each"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any
                              ) -> Generator[None, Any, None]:
    """A worker's teardown report says whether the test was profiled (its
    report made), for the controller: pytest-xdist hands the attribute
    over with the report."""
    outcome = yield
    if call.when == "teardown" and _is_worker(item.config) and \
            hasattr(item, "aquaprof_report"):
        outcome.get_result().aquaprof_profiled = True


def pytest_runtest_logreport(report: Any) -> None:
    """pytest-xdist's controller: which worker profiled which test (a
    crashed test's report, made by the controller, says none)."""
    node: Any = getattr(report, "node", None)
    gateway = getattr(node, "gateway", None)
    if gateway is None or report.when != "teardown" or \
            not getattr(report, "aquaprof_profiled", False):
        return
    node.config.stash[_WORKER_TESTS].setdefault(gateway.id, []).append(
        report.nodeid)


def _owners(n: int) -> str:
    """ "1 test's", "2 tests'"."""
    return f"{plural(n, 'test')}'{'s' if n == 1 else ''}"


def _read_back(config: Any, worker: str, nodeid: str) -> List[Report]:
    """The runs of a test that a worker saved in the --aquaprof folder in
    this session (its report and rounds), for a worker that went down
    before handing them over; none without the folder."""
    folder = config.getoption("aquaprof")
    if not folder:
        return []
    stem = report_name(nodeid)[:-len(".json")]
    if config.getoption("dist", None) == "each":
        stem += f".{worker}"
    paths = [Path(folder) / f"{stem}.json"]
    paths += sorted(Path(folder).glob(f"{stem}.r*.json"),
                    key=lambda p: (len(p.name), p.name))
    runs = []
    for path in paths:
        try:
            if path.stat().st_mtime < config.stash[_STARTED] - 1:
                continue          # an earlier session's, not this run
            runs.append(Report.load(path))
        except (OSError, ReportError):
            continue
    return runs


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist's controller: a worker's reports and problems, handed
    over in its workeroutput, join the controller's as if run here. A
    worker that went down without handing them over (a test that killed
    its process) loses them: the tests it ran are read back from the
    --aquaprof folder where they were saved, and the others named, and
    counted by the gate as tests it could not compare."""
    out = getattr(node, "workeroutput", {}).get("aquaprof")
    config = node.config
    worker = node.gateway.id
    pid = out.get("pid") if out else None
    config.stash[_WORKER_PIDS].append(pid if isinstance(pid, int) else None)
    ran = list(dict.fromkeys(config.stash[_WORKER_TESTS].pop(worker, [])))
    if not out:
        if error:
            found: List[str] = []
            lost: List[str] = []
            for nodeid in ran:
                runs = _read_back(config, worker, nodeid)
                (found if runs else lost).append(nodeid)
                config.stash[_REPORTS].extend((nodeid, r) for r in runs)
            config.stash[_LOST].extend(lost)
            said = []
            if found:
                said.append(f"{_owners(len(found))} runs read back "
                            f"from {config.getoption('aquaprof')}: "
                            f"{_some(found)}")
            if lost:
                said.append(f"{_owners(len(lost))} runs lost: "
                            f"{_some(lost)}")
            config.stash[_PROBLEMS].append(
                f"worker {worker} went down ({error}): the reports of its "
                f"tests were not handed over"
                + (f"; {'; '.join(said)}" if said else ""))
        return
    config.stash[_PROBLEMS].extend(out["problems"])
    for nodeid, text in out["reports"]:
        try:
            config.stash[_REPORTS].append(
                (nodeid, Report.from_dict(json.loads(text))))
        except (ReportError, ValueError) as e:
            config.stash[_PROBLEMS].append(
                f"{nodeid}: the report from {worker} is lost: {e}")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    config = session.config
    if _is_worker(config):
        # the controller shows, compares and gates: hand everything over
        config.workeroutput["aquaprof"] = {
            "pid": os.getpid(),
            "problems": config.stash[_PROBLEMS],
            "reports": [(nodeid, json.dumps(report.to_dict()))
                        for nodeid, report in config.stash[_REPORTS]]}
        return
    config.stash[_BUSY] = _session_busy(config)
    folder = config.getoption("aquaprof")
    if folder:
        try:
            write_session(Path(folder), config.stash[_BUSY])
        except OSError as e:
            config.stash[_PROBLEMS].append(
                f"--aquaprof: cannot save in {folder} how busy the machine "
                f"was over the session: {e}")
    config.aquaprof_comparisons = _comparisons(config)
    holes = _gate_holes(config)
    config.aquaprof_gate_holes = [h.line for h in holes]
    config.aquaprof_gate_failure = _gate_failure(config, holes)
    if config.aquaprof_gate_failure:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _session_busy(config: Any) -> Dict[str, float]:
    """How busy other processes kept the machine over this session, less
    the CPU that pytest and its pytest-xdist workers used (each hands its
    reading over); {} where not known, a worker's among what is not."""
    stop = cpu_ticks()
    pids = config.stash[_WORKER_PIDS]
    if None in pids:
        # a worker that went down unheard: whether it has exited is
        # unknown, and with it where its CPU went
        return {}
    return session_busy(config.stash[_TICKS], stop, running(pids))


def _said_busy(config: Any) -> str:
    """How busy the machine was over this session and over the base
    sessions, in a line; "" where neither is known."""
    now = config.stash[_BUSY]
    bases = [b for runs in config.stash[_BASE_BUSY].values() for b in runs]
    known = [b["other_cpus"] for b in bases if b]
    if not now and not known:
        return ""
    this = (f"other processes kept {now['other_cpus']:.1f} CPUs busy on "
            f"average over this session ({now['seconds']:.1f} s)" if now
            else "not known over this session (too short, or a worker "
            "went down)")
    if known:
        low, high = f"{min(known):.1f}", f"{max(known):.1f}"
        base = f"{low if low == high else low + '-' + high} CPUs"
        if None in bases:
            base += " (not known for some base runs)"
    else:
        base = "not known"
    return f"how busy the machine was: {this}; over the base sessions {base}"


def _count_as_error(terminalreporter: Any, why: str) -> None:
    """The failed gate as one error in pytest's own tally, so that its
    last line reads '2 passed, 1 error' in red, not a green '2 passed'.
    Added after pytest printed its ERRORS section, which would call it
    a collection error: aquaprof's section says what failed."""
    report = pytest.CollectReport(f"aquaprof: {why}", "failed", why, [])
    terminalreporter.stats.setdefault("error", []).append(report)


def _first_runs(config: Any) -> List[Tuple[str, Report]]:
    """Each profiled test once, with its first run."""
    first: Dict[str, Report] = {}
    for nodeid, report in config.stash[_REPORTS]:
        first.setdefault(nodeid, report)
    return list(first.items())


def _names(changes: List[StageChange]) -> str:
    return ", ".join(WHOLE_TEST + " (it opened no stage)"
                     if c.path == WHOLE_TEST else printable(c.path)
                     for c in changes)


def _in_measure(comparison: Any) -> str:
    """' in cpu time' where the gate judged other than wall time: "no
    regression" then says of what."""
    measure = getattr(comparison, "measure", "wall")
    return "" if measure == "wall" else f" in {measure} time"


def _write_notes(write: Callable[..., None], comparison: Any) -> None:
    """What the comparison notes beside its verdicts (a busier machine,
    which a quieter one may hide; spans dropped; GPU kernels whose time
    moved; host memory or items/s that moved in the same time), which a
    passing test must say as well as a failing one."""
    for note in (comparison.machine, comparison.dropped, comparison.gpu,
                 comparison.memory, comparison.items):
        if note:
            write(f"    note: {note}")


def _write_test(write: Callable[..., None], nodeid: str,
                judged: _TestComparison, hole: bool) -> None:
    """A test's verdict in aquaprof's section: what was compared and what
    was not, never "no regression" for a test of which nothing was."""
    nothing = judged.nothing_compared()
    if nothing:
        write(f"{nodeid}: {nothing}", red=hole, bold=hole, yellow=not hole)
        return
    comparison, slower = judged.comparison, judged.regressions
    if slower:
        write(f"{nodeid}: REGRESSION: {_names(slower)}", red=True, bold=True)
        for line in str(comparison).splitlines()[1:]:
            write(f"    {line}")
        if judged.whole is not None:
            write(f"    ! {WHOLE_TEST}: {judged.whole.summary()}")
        return
    if judged.busy_suspects:
        # neither failed nor passed off as "no regression": what a busy
        # machine would do to unchanged code, which its CPU time clears
        write(f"{nodeid}: {BUSY_SLOWER}: {_names(judged.busy_suspects)} "
              f"(wall time grew, its CPU time did not: not failed; a run "
              f"on a machine as quiet as the base's, more runs or "
              f"--aquaprof-measure=cpu would tell)", yellow=True)
        _write_notes(write, comparison)
        for c in judged.busy_suspects:
            write(f"    ? {printable(c.path)}: {c.summary()}")
        return
    if judged.noisy:
        # a change the runs cannot tell from noise is said, never passed
        # off as "no regression"
        ways = ["more base runs", "--aquaprof-rounds"]
        if judged.cpu_would_tell(judged.noisy):
            ways.append("--aquaprof-measure=cpu")
        write(f"{nodeid}: no regression shown{_in_measure(comparison)}, "
              f"but within the noise: "
              f"{_names(judged.noisy)} ({', '.join(ways[:-1])} or "
              f"{ways[-1]} would tell)", yellow=True)
        _write_notes(write, comparison)
        for c in judged.noisy:
            write(f"    {printable(c.path)}: {c.summary()}")
    else:
        write(f"{nodeid}: no regression"
              + (" in its run time (it opened no stage)"
                 if judged.whole is not None else _in_measure(comparison)),
              green=True)
        _write_notes(write, comparison)
        if judged.whole is not None:
            write(f"    {WHOLE_TEST}: {judged.whole.summary()}")
    unmatched = judged.one_side_only()
    if unmatched:
        write(f"    not compared, run on one side only: {unmatched}")


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int,
                            config: Any) -> None:
    if _is_worker(config):
        return
    write = terminalreporter.write_line
    if config.stash[_PROBLEMS]:
        terminalreporter.section("aquaprof: warnings")
        # a base read by a worker (rounds) and again here is said once
        for problem in dict.fromkeys(config.stash[_PROBLEMS]):
            write(problem)
    if config.getoption("aquaprof_show") and config.stash[_REPORTS]:
        terminalreporter.section("aquaprof: top stages by self time")
        for nodeid, report in _first_runs(config):
            top = ", ".join(f"{s.path} {ranked * 1e3:.2f} ms"
                            for s, ranked in report.bottlenecks(3))
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
    comparisons: Optional[List[Tuple[str, _TestComparison]]] = getattr(
        config, "aquaprof_comparisons", None)
    if comparisons:
        # nothing compared fails a gate as a missing base does
        unjudged_holes = (
            set(config.stash[_UNJUDGED])
            if config.getoption("aquaprof_fail") is not None and
            not config.getoption("aquaprof_allow_missing_base") else set())
        failed = bool(unjudged_holes) or any(c.regressions
                                             for _, c in comparisons)
        unsure = bool(config.stash[_UNJUDGED])
        terminalreporter.section("aquaprof: against the base reports",
                                 red=failed, yellow=unsure and not failed,
                                 green=not failed and not unsure)
        busy = _said_busy(config)
        if busy:
            write(busy)
        for nodeid, comparison in comparisons:
            _write_test(write, nodeid, comparison,
                        nodeid in unjudged_holes)
    why = getattr(config, "aquaprof_gate_failure", None)
    if why:
        write(f"aquaprof: FAILED: {why}", red=True, bold=True)
        _count_as_error(terminalreporter, why)
