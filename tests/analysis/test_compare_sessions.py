"""A comparison whose runs were too short to say how busy the machine was
weighs the readings of the sessions that held them (a pytest session):
none, one side only, both; the runs' own readings first; and where the
new session met a busier machine, a slower wall time that CPU time does
not confirm is said as the machine's, not a regression."""
import time

import numpy as np
import pytest

import aquaprof as ap
from aquaprof.analysis.compare import BUSY_SLOWER, Comparison
from aquaprof.integrations.pytest_load import write_session
from cli_runs import cli


def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def recorded(work):
    with ap.Profiler() as prof:
        for _ in range(20):
            with ap.stage("step"):
                work()
    rep = prof.report()
    data = rep.to_dict()
    # a run too short to say how busy the machine was
    data["host"] = {k: v for k, v in data["host"].items()
                    if k not in ("other_cpus", "steal")}
    return ap.Report.from_dict(data)


def scaled(rep, wall, cpu, seed):
    """The run with each call's wall time 0.5 ms x wall (2 % spread) and
    its CPU time 0.5 ms x cpu: the data judged, not the machine's."""
    rng = np.random.default_rng(seed)
    spans = rep.spans().copy()
    seconds = 5e-4 * wall * rng.normal(1.0, 0.02, len(spans))
    spans["end_ns"] = spans["start_ns"] + (seconds * 1e9).astype(np.int64)
    cpu_s = 5e-4 * cpu * rng.normal(1.0, 0.02, len(spans))
    spans["cpu_ns"] = (cpu_s * 1e9).astype(spans["cpu_ns"].dtype)
    # the stage's totals as its calls', whatever the machine did to them
    wall_ns = int((spans["end_ns"] - spans["start_ns"]).sum())
    stages = [dict(st, total_ns=wall_ns, self_ns=wall_ns,
                   cpu_ns=int(spans["cpu_ns"].sum()))
              for st in rep._data["stages"]]
    return ap.Report(dict(rep._data, spans=spans, stages=stages))


@pytest.fixture(scope="module")
def busy_runs():
    return [recorded(lambda: spin(0.0005)) for _ in range(3)]


QUIET = {"other_cpus": 0.0, "steal": 0.0, "cpus": 2}
HOG = {"other_cpus": 0.8, "steal": 0.0, "cpus": 2}


def test_no_session_reading_keeps_the_rule_and_says_it_is_not_known(
        busy_runs):
    base, new = scaled(busy_runs[0], 1, 1, 1), scaled(busy_runs[1], 2, 1, 2)
    for sessions in (None, ([None], [None])):
        c = Comparison(base, new, sessions=sessions)
        assert [r.path for r in c.regressions] == ["step"]
        assert "how busy the machine was is not known for the runs" in str(c)


def test_a_reading_of_one_side_only_is_no_busier_machine(busy_runs):
    base, new = scaled(busy_runs[0], 1, 1, 1), scaled(busy_runs[1], 2, 1, 2)
    for sessions in (([QUIET], [None]), ([None], [HOG])):
        c = Comparison(base, new, sessions=sessions)
        assert c.load == "" and c.machine == ""
        assert [r.path for r in c.regressions] == ["step"]
        assert "not known for 1 of the 2 runs" in str(c)


def test_a_busier_session_unconfirmed_by_cpu_time_is_said_not_failed(
        busy_runs):
    base, new = scaled(busy_runs[0], 1, 1, 1), scaled(busy_runs[1], 2, 1, 2)
    c = Comparison(base, new, sessions=([QUIET], [HOG]))
    assert c.load == "busier" and c.regressions == []
    assert [s.path for s in c.busy_suspects] == ["step"]
    assert c.changes[0].verdict == BUSY_SLOWER
    assert c.machine.startswith(
        "the machine was busier over the session of the new run (a run "
        "itself too short to tell): other processes kept 0.8 CPUs busy on "
        "average (0.0 CPUs in the base run's session)")
    assert "not known" not in str(c)
    # its CPU time grown as much: slower code, caught on a busy machine
    slower = scaled(busy_runs[1], 2, 1.5, 2)
    c = Comparison(base, slower, sessions=([QUIET], [HOG]))
    assert [r.path for r in c.regressions] == ["step"]
    # judged on CPU time itself: that time is the verdict, nothing to clear
    c = Comparison(base, new, sessions=([QUIET], [HOG]), measure="cpu")
    assert c.busy_suspects == [] and c.regressions == []


def test_a_machine_as_busy_on_both_sides_keeps_the_rule(busy_runs):
    base, new = scaled(busy_runs[0], 1, 1, 1), scaled(busy_runs[1], 2, 1, 2)
    c = Comparison(base, new, sessions=([HOG], [HOG]))
    assert c.load == "" and [r.path for r in c.regressions] == ["step"]
    # on a busy machine, less busier counts: 1.4 of 2 CPUs kept busy
    # leave 0.6, and 0.2 more takes a third of them
    c = Comparison(base, new, sessions=(
        [dict(HOG, other_cpus=1.4)], [dict(HOG, other_cpus=1.6)]))
    assert c.load == "busier" and c.regressions == []
    c = Comparison(base, new, sessions=(
        [dict(HOG, other_cpus=1.4)], [dict(HOG, other_cpus=1.45)]))
    assert c.load == "" and [r.path for r in c.regressions] == ["step"]


def test_the_runs_own_readings_come_before_the_sessions(busy_runs):
    def on(rep, other):
        data = rep.to_dict()
        data["host"] = dict(data["host"], other_cpus=other, steal=0.0)
        return ap.Report.from_dict(data)
    base = on(scaled(busy_runs[0], 1, 1, 1), 0.1)
    new = on(scaled(busy_runs[1], 2, 1, 2), 0.1)
    c = Comparison(base, new, sessions=([QUIET], [HOG]))
    assert c.load == "" and [r.path for r in c.regressions] == ["step"]


def test_a_stage_that_waits_keeps_its_verdict_on_a_busier_machine():
    # its CPU time cannot say whether the wait grew: never cleared by it
    waits = [recorded(lambda: time.sleep(0.0005)) for _ in range(2)]
    base, new = scaled(waits[0], 1, 0.1, 1), scaled(waits[1], 2, 0.1, 2)
    c = Comparison(base, new, sessions=([QUIET], [HOG]))
    assert c.load == "busier"
    assert [r.path for r in c.regressions] == ["step"]


def test_sessions_must_match_the_runs(busy_runs):
    with pytest.raises(ValueError, match="one reading .* for each"):
        Comparison(busy_runs[0], busy_runs[1], sessions=([QUIET], []))


def test_cpu_time_grown_past_the_threshold_unproven_keeps_the_verdict(
        busy_runs):
    # CPU time +40 % but too spread to prove it: as likely slower code
    # as the machine, so the wall verdict stands
    base = scaled(busy_runs[0], 1, 1, 1)
    new = scaled(busy_runs[1], 2, 1, 2)
    spans = new.spans().copy()
    rng = np.random.default_rng(3)
    spans["cpu_ns"] = (5e5 * 1.4 * rng.lognormal(0.0, 1.2, len(spans))
                       ).astype(spans["cpu_ns"].dtype)
    new = ap.Report(dict(new._data, spans=spans))
    cpu = Comparison(base, new, measure="cpu").changes[0]
    assert cpu.verdict == "noisy" and cpu.change > 0.05, cpu.summary()
    c = Comparison(base, new, sessions=([QUIET], [HOG]))
    assert [r.path for r in c.regressions] == ["step"]


def test_the_cli_reads_each_reports_session_from_its_folder(busy_runs,
                                                             tmp_path):
    """`aquaprof compare` on the reports of two gate folders weighs the
    sessions that wrote them, as the gate does; reports beside no
    session reading keep their own."""
    for side in ("base", "new"):
        (tmp_path / side).mkdir()
    base = scaled(busy_runs[0], 1, 1, 1).save(tmp_path / "base" / "t.json")
    new = scaled(busy_runs[1], 2, 1, 2).save(tmp_path / "new" / "t.json")
    out = cli("compare", base, new)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "how busy the machine was is not known" in out.stdout
    write_session(tmp_path / "base", QUIET)
    write_session(tmp_path / "new", HOG)
    out = cli("compare", base, new)
    assert out.returncode == 0, out.stdout + out.stderr
    assert BUSY_SLOWER in out.stdout
    assert "the machine was busier over the session of the new run" in \
        out.stdout
