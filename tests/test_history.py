"""History in SQLite: runs with metadata, trends, step detection, reports
loaded back, and two processes writing at once."""
import multiprocessing

import pytest

import aquaprof as ap
from conftest import busy


def report(step=0.0003, calls=5):
    with ap.Profiler() as prof:
        for _ in range(calls):
            with ap.stage("step"):
                busy(step)
    return prof.report()


def test_runs_trend_and_reports_come_back(tmp_path):
    with ap.History(tmp_path / "h.db") as history:
        first = history.add(report(), label="a", git_commit="abc")
        rep = report()
        second = history.add(rep, label="b")
        runs = history.runs()
        assert [r.id for r in runs] == [first, second]
        assert runs[0].git_commit == "abc" and runs[0].label == "a"
        assert runs[1].git_commit          # this repository's HEAD
        assert runs[1].host == rep.meta["host"]["hostname"]
        assert runs[1].python == rep.meta["host"]["python"]
        assert history.report(second) == rep
        trend = history.trend("step")
        assert [r.id for r, _ in trend] == [first, second]
        assert trend[1][1] == pytest.approx(rep["step"].wall.p50)
        assert history.stages() == ["step"]
        assert history.trend("none") == []
        with pytest.raises(KeyError, match="no run 99"):
            history.report(99)
        with pytest.raises(ValueError, match="metric"):
            history.trend("step", "fastest")
        with pytest.raises(TypeError, match="Report"):
            history.add("report.json")
        with pytest.raises(TypeError, match="unknown run metadata"):
            history.add(rep, gpu="h100")
    # the file outlives the object
    assert len(ap.History(tmp_path / "h.db").runs()) == 2


def test_steps_flag_the_run_where_a_stage_got_slower(tmp_path):
    history = ap.History(tmp_path / "h.db")
    for _ in range(4):
        history.add(report(0.0003))
    slow = history.add(report(0.0006))
    history.add(report(0.0006))      # the new level: not a second step
    steps = history.steps("step", threshold=0.3)
    assert [run.id for run, _ in steps] == [slow]
    assert steps[0][1] > 0.5


def writer(path, n):
    with ap.History(path) as history:
        for _ in range(n):
            history.add(report(0.00005, calls=2))


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "h.db"
    ap.History(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=writer, args=(path, 15)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    history = ap.History(path)
    runs = history.runs()
    assert len(runs) == 30
    assert len(history.trend("step")) == 30
    assert all(history.report(r.id)["step"].count == 2 for r in runs)
