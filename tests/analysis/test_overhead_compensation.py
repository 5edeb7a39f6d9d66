"""Overhead compensation: calibration, the arithmetic on the stage tree,
and what the report shows. (Its accuracy against an unprofiled run is a
benchmark: benchmarks/bench_compensation.py.)"""
import pytest

import aquaprof as ap
from aquaprof.record.calibration import calibrate


def nested_run(compensate=True):
    with ap.Profiler(compensate=compensate) as prof:
        for _ in range(3):
            with ap.stage("outer"):
                for _ in range(4):
                    with ap.stage("mid"):
                        for _ in range(5):
                            with ap.stage("leaf"):
                                pass
    return prof.report()


def test_calibration_is_measured_once_and_plausible():
    cost = calibrate()
    assert 0 < cost["inside_ns"] < cost["span_ns"] < 20_000
    assert calibrate() == cost                      # cached


def test_compensation_follows_the_tree():
    raw = nested_run(compensate=False)
    assert raw["outer"].compensated_total is None
    data = {k: v for k, v in raw.to_dict().items()}
    data["overhead"] = {"span_ns": 100.0, "inside_ns": 40.0}
    rep = ap.Report.from_dict(data)
    outer, mid, leaf = rep["outer"], rep["outer/mid"], rep["outer/mid/leaf"]
    ns = 1e-9
    # outer: 3 calls, 12 mid and 60 leaf calls below it
    assert outer.compensated_total == pytest.approx(
        outer.wall.total - 3 * 40 * ns - 72 * 100 * ns)
    assert mid.compensated_total == pytest.approx(
        mid.wall.total - 12 * 40 * ns - 60 * 100 * ns)
    assert leaf.compensated_total == pytest.approx(
        max(leaf.wall.total - 60 * 40 * ns, 0.0))
    assert outer.compensated_self == pytest.approx(
        outer.compensated_total - mid.compensated_total)
    # the raw figures stay as measured
    assert outer.wall.total == raw["outer"].wall.total


def test_the_header_shows_the_cost_and_it_survives_a_round_trip(tmp_path):
    rep = nested_run()
    cost = calibrate()
    assert rep.meta["overhead"] == cost
    line = next(t for t in str(rep).splitlines()
                if t.startswith("profiler cost: about "))
    assert f": stages " in line and \
        f"(75 calls at {cost['span_ns']:.0f} ns" in line
    again = ap.Report.load(rep.save(tmp_path / "r.json"))
    assert again == rep
    assert again["outer"].compensated_total == rep["outer"].compensated_total
    assert rep["outer"].compensated_total < rep["outer"].wall.total


def test_bad_overhead_fields_are_refused():
    data = nested_run(compensate=False).to_dict()
    for bad in ({"span_ns": -1, "inside_ns": 1}, {"span_ns": 1},
                {"span_ns": True, "inside_ns": 1}, "cheap"):
        with pytest.raises(ap.ReportError, match="overhead"):
            ap.Report.from_dict(dict(data, overhead=bad))


def test_the_cost_line_adds_stage_pairs_and_clock_readings():
    data = nested_run(compensate=False).to_dict()
    data["overhead"] = {"span_ns": 1_000.0, "inside_ns": 400.0,
                        "read_ns": 2_000.0}
    data["threads"][0]["cpu_reads"] = 50
    rep = ap.Report.from_dict(data)
    from aquaprof.analysis.run_cost import run_cost
    cost = run_cost(rep)
    # 75 stage pairs at 1 us and 50 readings at 2 us: 175 us of the run
    assert cost.stages == pytest.approx(175e-6)
    assert cost.total == cost.stages and cost.hooks == []
    share = 175e-6 / rep.wall * 100
    assert "(75 calls at 1000 ns, 50 CPU-clock readings at 2000 ns)" in \
        str(rep)
    said = f"{share:.2f}%" if share < 1 else f"{share:.1f}%"
    assert f"profiler cost: about {said} of the run: stages {said} (" in \
        str(rep)


# ------------------------------------------------------------ merges

def calibrated(rep, **cost):
    return ap.Report.from_dict(dict(rep.to_dict(), overhead=cost))


def flat_run(calls):
    with ap.Profiler(compensate=False) as prof:
        for _ in range(calls):
            with ap.stage("outer"):
                pass
    return prof.report()


def test_a_merge_keeps_the_calibration_its_inputs_share(tmp_path):
    cost = {"span_ns": 100.0, "inside_ns": 40.0}
    a = calibrated(nested_run(compensate=False), **cost)
    b = calibrated(nested_run(compensate=False), **cost)
    merged = ap.merge([a, b])
    assert merged.meta["overhead"] == cost
    # the compensation is linear in the calls: each process's adds up
    for path in ("outer", "outer/mid"):
        assert merged[path].compensated_total == pytest.approx(
            a[path].compensated_total + b[path].compensated_total)
    assert "compensated times: StageStats" in str(merged)
    again = ap.Report.load(merged.save(tmp_path / "m.json"))
    assert again["outer"].compensated_total == \
        merged["outer"].compensated_total


def test_a_merge_of_calibrations_made_apart_weights_them_by_stage_calls():
    # 75 stage calls at 100 ns and 25 at 200 ns: 12.5 us in all
    a = calibrated(nested_run(compensate=False), span_ns=100.0,
                   inside_ns=40.0, torch_quiet_calls=3)
    b = calibrated(flat_run(25), span_ns=200.0, inside_ns=40.0,
                   torch_quiet_calls=2)
    merged = ap.merge([a, b])
    assert merged.meta["overhead"] == {"span_ns": 125.0, "inside_ns": 40.0,
                                       "torch_quiet_calls": 5}
    from aquaprof.analysis.run_cost import run_cost
    assert run_cost(merged).stages == pytest.approx(12.5e-6)


def test_a_merge_compensates_an_uncalibrated_input_with_the_others():
    raw = nested_run(compensate=False)
    cost = {"span_ns": 100.0, "inside_ns": 40.0}
    assert ap.merge([raw, calibrated(raw, **cost)]).meta["overhead"] == cost
    assert ap.merge([raw, raw]).meta.get("overhead") is None
    assert ap.merge([raw, raw])["outer"].compensated_total is None
