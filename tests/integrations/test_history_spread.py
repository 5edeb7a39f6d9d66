"""A history keeps what each run's calls said of the spread of a stage's
total and tail, so that steps() judges a run as compare does on the same
runs: a few runs agreeing by chance on a figure their calls cannot pin
down are no certainty, and a real step is judged against all the runs
before it; and a step on a busier machine says so, as compare does."""
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

import aquaprof as ap
import crafted
from aquaprof import _core
from aquaprof.analysis.compare import Comparison, run_figures
from aquaprof.analysis.verdict import own_spread
from profiled import busy

from repo_paths import ROOT  # noqa: E402

MS = 1_000_000


def timed(calls_ns, name="load"):
    """A report of one stage whose calls took exactly calls_ns, one after
    another: its stage figures and its spans agree."""
    calls = np.asarray(calls_ns, np.int64)
    buckets = np.searchsorted(_core.HIST_LOWER_NS, calls, "right") - 1
    kept, counts = np.unique(buckets, return_counts=True)
    mean, total = float(calls.mean()), int(calls.sum())
    stage = dict(crafted.stage(name, count=len(calls)), total_ns=total,
                 self_ns=total, cpu_ns=total, min_ns=int(calls.min()),
                 max_ns=int(calls.max()), mean_ns=mean,
                 m2=float(((calls - mean) ** 2).sum()),
                 hist=[[int(b), int(c)] for b, c in zip(kept, counts)])
    spans = np.zeros(len(calls), _core.SPAN_DTYPE)
    spans["parent"] = -1
    spans["start_ns"] = crafted.START + np.concatenate(
        [[0], np.cumsum(calls)[:-1]])
    spans["end_ns"] = spans["start_ns"] + calls
    spans["cpu_ns"] = calls
    return ap.Report.from_dict(crafted.report([stage], spans))


def loader(call_ms, waits):
    """30 calls of call_ms, but those at the indices `waits` wait 10 ms:
    the 95th percentile of 30 calls is the second-longest, a short call
    with one wait, a wait with two."""
    calls = [call_ms * MS] * 30
    for i in waits:
        calls[i] = 10 * MS
    return timed(calls)


# three runs with one wait each agree exactly on their p95; a fourth of
# the same code has two waits; then every call grows from 2 ms to 5 ms
RUNS = [loader(2, [7]), loader(2, [18]), loader(2, [25]), loader(2, [7, 22]),
        loader(5, [12])]


def test_runs_agreeing_by_chance_are_no_step_and_a_real_one_is(tmp_path):
    with ap.History(tmp_path / "h.db") as history:
        ids = [history.add(r) for r in RUNS]
        steps = history.steps("load", threshold=0.5)
    # compare on the same runs: the fourth is no step, the fifth is
    assert Comparison(RUNS[:3], RUNS[3], 0.5).regressions == []
    [real] = Comparison(RUNS[:4], RUNS[4], 0.5).regressions
    assert [run.id for run, _ in steps] == [ids[4]]
    verdict = steps[0][1]
    assert verdict.word == "slower" and verdict.evidence == "4 vs 1 runs"
    assert verdict.p_value == pytest.approx(real.p_value, rel=0.05)


def test_the_history_command_flags_only_the_real_step(tmp_path):
    path = tmp_path / "h.db"
    with ap.History(path) as history:
        for r in RUNS:
            history.add(r)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "aquaprof", "history",
                          str(path)], capture_output=True, text=True,
                         env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    flagged = [line for line in out.stdout.splitlines()
               if line.startswith("! ")]
    assert len(flagged) == 1, out.stdout
    assert flagged[0].startswith("! run 5 ") and "4 vs 1 runs" in flagged[0]


def test_each_stage_keeps_the_spread_its_calls_give(tmp_path):
    with ap.Profiler() as prof:
        for _ in range(25):
            with ap.stage("many"):
                busy(0.0002)
        for _ in range(6):
            with ap.stage("some"):
                busy(0.0002)
        with ap.stage("once"):
            busy(0.0002)
    report = prof.report()
    calls = {path: f.calls for path, f in run_figures(report).items()}
    with ap.History(tmp_path / "h.db") as history:
        history.add(report)
        kept = {path: history.figures(path)[0][1].spread
                for path in ("many", "some", "once")}
    assert kept["many"] == (own_spread("total", calls["many"]),
                            own_spread("tail", calls["many"]))
    assert None not in kept["many"]
    # too few calls for the tail to be judged: none kept for it
    assert kept["some"] == (own_spread("total", calls["some"]), None)
    assert kept["some"][0] is not None
    assert kept["once"] == (None, None)


@pytest.mark.parametrize("value", ["'wide'", "-1.0", "x'00'"])
def test_a_malformed_spread_is_an_error_not_a_crash(tmp_path, value):
    path = tmp_path / "h.db"
    with ap.History(path) as history:
        history.add(RUNS[0])
    db = sqlite3.connect(path)
    db.execute(f"UPDATE stages SET tail_spread = {value}")
    db.commit()
    db.close()
    with ap.History(path) as history:
        with pytest.raises(ap.HistoryError, match="malformed figures"):
            history.figures("load")
        with pytest.raises(ap.HistoryError, match="malformed figures"):
            history.steps("load")


def busier(rep, other_cpus):
    return crafted.on_machine(rep, other_cpus=other_cpus, steal=0.0)


def test_a_step_on_a_busier_machine_says_so(tmp_path):
    """A run flagged on a machine whose other processes kept more CPUs
    busy than in every run before it: its verdict and `aquaprof history`
    say so, as compare does; a step under the same load says nothing."""
    path = tmp_path / "h.db"
    with ap.History(path) as history:
        for waits, load in (([7], 0.1), ([18], 0.2), ([25], 0.05),
                            ([3], 0.1)):
            history.add(busier(loader(2, waits), load))
        busy_step = history.add(busier(loader(5, [12]), 1.6))
        history.add(busier(loader(5, [20]), 1.5))
        quiet_step = history.add(busier(loader(12, [9]), 1.5))
        steps = {run.id: verdict for run, verdict in
                 history.steps("load", threshold=0.3)}
    assert set(steps) == {busy_step, quiet_step}
    assert steps[busy_step].machine.startswith(
        "the machine was busier during the new run: other processes kept "
        "1.6 CPUs busy on average (0.1-0.2 CPUs in the base runs)")
    assert steps[quiet_step].machine == ""
    out = subprocess.run([sys.executable, "-m", "aquaprof", "history",
                          str(path)], capture_output=True, text=True,
                         cwd=ROOT, env=dict(os.environ,
                                            PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    flagged = [i for i, line in enumerate(lines) if line.startswith("! run")]
    assert [lines[i].split()[2] for i in flagged] == [str(busy_step),
                                                       str(quiet_step)]
    assert lines[flagged[0] + 1] == "  " + steps[busy_step].machine
    assert lines[flagged[1] + 1:] == []


def test_a_step_after_a_python_upgrade_says_so(tmp_path):
    """The runs before the step on one Python, the flagged one on
    another: its verdict names the change, as compare's note does."""
    def on(rep, python):
        return crafted.on_machine(rep, python=python, other_cpus=0.1,
                                  steal=0.0)
    with ap.History(tmp_path / "h.db") as history:
        for waits in ([7], [18], [25], [3]):
            history.add(on(loader(2, waits), "3.11.7"))
        step = history.add(on(loader(5, [12]), "3.12.1"))
        steps = {run.id: verdict for run, verdict in
                 history.steps("load", threshold=0.3)}
    assert steps[step].machine.startswith(
        "the new run ran on another kind of machine or Python: Python "
        "3.11.7 -> 3.12.1"), steps[step].machine
