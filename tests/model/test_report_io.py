"""Reports saved as JSON load back equal; bad files fail clearly."""
import json
import os

import numpy as np
import pytest

import aquaprof as ap
from aquaprof.model import schema
from profiled import run_profiled


def sample_report():
    def work():
        for i in range(20):
            with ap.stage("outer", items=i):
                with ap.stage("inner"):
                    np.ones(1000).sum()
    return run_profiled(work)


def test_save_and_load_give_an_equal_report(tmp_path):
    rep = sample_report()
    path = rep.save(tmp_path / "run.json")
    loaded = ap.Report.load(path)
    assert loaded == rep
    assert str(loaded) == str(rep)
    assert np.array_equal(loaded.spans(), rep.spans())
    assert loaded["outer/inner"].wall.p95 == rep["outer/inner"].wall.p95
    assert loaded.meta["host"]["python"] == rep.meta["host"]["python"]
    assert ap.Report.load(str(path)) == rep  # str paths too


def test_saved_file_is_versioned_json(tmp_path):
    path = sample_report().save(tmp_path / "run.json")
    obj = json.loads(path.read_text())
    assert obj["format"] == "aquaprof.report" and obj["version"] == 1
    assert obj["spans"]["count"] == 40
    assert {s["name"] for s in obj["stages"]} == {"outer", "inner"}


def test_reports_of_different_runs_differ():
    assert sample_report() != sample_report()
    assert sample_report() != "a report"


def write(tmp_path, obj, raw=False):
    path = tmp_path / "bad.json"
    path.write_text(obj if raw else json.dumps(obj))
    return path


def good_dict():
    return sample_report().to_dict()


@pytest.mark.parametrize("mutate, message", [
    (lambda d: [], "not an aquaprof report"),
    (lambda d: dict(d, format="speedscope"), "not an aquaprof report"),
    (lambda d: dict(d, version=99), "version 99 is newer"),
    (lambda d: dict(d, version="1"), "no integer 'version'"),
    (lambda d: dict(d, version=0), "version 0 is invalid"),
    (lambda d: {k: v for k, v in d.items() if k != "spans"},
     "lacks 'spans'"),
    (lambda d: {k: v for k, v in d.items() if k != "stop_ns"},
     "lacks 'stop_ns'"),
    (lambda d: dict(d, stages="x"), r"'stages'\] must be list, got str"),
    (lambda d: dict(d, stages=[{k: v for k, v in d["stages"][0].items()
                                if k != "count"}] + d["stages"][1:]),
     r"stages\[0\] lacks 'count'"),
    (lambda d: dict(d, stages=[dict(d["stages"][0], count="3")]
                    + d["stages"][1:]),
     r"stages\[0\]\['count'\] must be int"),
    (lambda d: dict(d, stages=[dict(d["stages"][0], parent=5)]
                    + d["stages"][1:]),
     "does not name an earlier stage"),
    (lambda d: dict(d, stages=[dict(d["stages"][0], hist=[[99999, 1]])]
                    + d["stages"][1:]),
     "bad bucket"),
    (lambda d: dict(d, spans=dict(d["spans"], data="!!!")), "corrupt"),
    (lambda d: dict(d, spans=dict(d["spans"], count=3)),
     "not the 3 spans it declares"),
    (lambda d: dict(d, spans=dict(d["spans"], encoding="gzip")),
     "encoding 'gzip' is unknown"),
    (lambda d: dict(d, spans=dict(d["spans"], dtype=[["x", "<i8"]])),
     "has dtype"),
    (lambda d: dict(d, stages=[]), "names a stage id the report lacks"),
    (lambda d: dict(d, threads=[dict(d["threads"][0], folded=0)]
                    + d["threads"][1:]),
     r"threads\[0\]\['folded'\] is 0"),
])
def test_bad_report_files_raise_a_clear_error(tmp_path, mutate, message):
    path = write(tmp_path, mutate(good_dict()))
    with pytest.raises(ap.ReportError, match=message) as info:
        ap.Report.load(path)
    assert "bad.json" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_not_json_and_missing_files(tmp_path):
    with pytest.raises(ap.ReportError, match="not valid JSON"):
        ap.Report.load(write(tmp_path, "{not json", raw=True))
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ap.ReportError, match="not valid JSON"):
        ap.Report.load(binary)
    with pytest.raises(ap.ReportError, match="cannot read report"):
        ap.Report.load(tmp_path / "missing.json")


def test_save_is_atomic_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "run.json"
    first = sample_report()
    first.save(path)
    before = path.read_bytes()

    def crash(*args):
        raise OSError("disk went away")
    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk went away"):
        sample_report().save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_save_into_a_missing_folder_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        sample_report().save(tmp_path / "nope" / "run.json")


def test_report_checks_data_it_is_built_from():
    with pytest.raises(ap.ReportError, match="lacks 'start_ns'"):
        ap.Report({"stages": [], "threads": [], "spans": None})
    assert schema.VERSION == 1


def test_a_merged_report_keeps_each_process_figures(tmp_path):
    """Per-process counts and times survive the merge and a round trip
    through a file, and a row naming a stage the report lacks is
    refused."""
    from aquaprof.report import ReportError
    reps = []
    for calls in (2, 5):
        with ap.Profiler(memory=False, compensate=False) as prof:
            for _ in range(calls):
                with ap.stage("step"):
                    pass
        reps.append(prof.report())
    merged = ap.Report.load(ap.merge(reps).save(tmp_path / "m.json"))
    step = merged.stage_names.index("step")
    rows = [{r[0]: r[1:] for r in p["stages"]} for p in merged.processes]
    assert [r[step][0] for r in rows] == [2, 5]
    assert [r[step][1] for r in rows] == [
        r.to_dict()["stages"][r.stage_names.index("step")]["total_ns"]
        for r in reps]
    data = merged.to_dict()
    data["processes"][1]["stages"][0][0] = 99
    with pytest.raises(ReportError, match="lacks"):
        ap.Report.from_dict(data)
