"""Merged reports keep every process's samples: frames deduplicated,
each stack's process and stage moved like its threads' and spans', the
timelines on the merged clock; a Profiler's child processes are merged
the same way (merged_data)."""
import json

import numpy as np
import pytest

import aquaprof as ap
from aquaprof.analysis.merging import merged_data
from aquaprof.model.report import CodeFrame
from sampled_reports import FRAMES, MS, main_tid, profile_stages, \
    span_of, with_samples


@pytest.fixture(scope="module")
def first():
    rep = profile_stages()
    start, _ = span_of(rep, "decode")
    return with_samples(
        rep, [(0, main_tid(rep), "decode", [0, 1, 2, 3], 3, 3 * MS, 2 * MS),
              (0, main_tid(rep), None, [0, 1], 1, MS, 0)],
        timeline=[(start + MS, 0), (start + 2 * MS, 0), (start + 3 * MS, 0),
                  (start + 15 * MS, 1)],
        rounds=4, late=1, lost=2, timeline_dropped=5)


def second_report():
    """Another run whose stages come in another order (so that its stage
    ids differ) and whose frames list holds the first's nms and a frame
    of its own, in another order."""
    with ap.Profiler(compensate=False) as prof:
        with ap.stage("decode"):
            with ap.stage("nms"):
                pass
        with ap.stage("extra"):
            pass
    rep = prof.report()
    frames = [("extra_fn", "/app/other.py", 5), FRAMES[3], FRAMES[2]]
    start, _ = span_of(rep, "decode/nms")
    return with_samples(
        rep, [(0, main_tid(rep), "decode/nms", [2, 1], 2, 4 * MS, 4 * MS),
              (0, main_tid(rep), "extra", [0], 1, MS, MS)],
        frames=frames, timeline=[(start, 0), (start, 0), (start + 1, 1)],
        interval_ns=2 * MS, rounds=3, late=0, lost=1)


@pytest.fixture(scope="module")
def second():
    return second_report()


def described(rep):
    """Each stack as (process, stage path or "", frames as CodeFrames, count,
    wall, cpu): what a merge must keep whatever the indices."""
    s = rep.samples
    return sorted((p, rep.stage_names[stage] if stage >= 0 else "",
                   tuple(CodeFrame(*s["frames"][f]) for f in chain),
                   count, wall, cpu)
                  for p, _tid, stage, chain, count, wall, cpu, *_waits
                  in s["stacks"])


def test_a_merge_keeps_both_reports_samples(first, second):
    merged = ap.merge([first, second], ["a", "b"])
    s = merged.samples
    # the first's 7 frames, and the second's one of its own
    assert len(s["frames"]) == len({tuple(f) for f in s["frames"]}) == 8
    assert described(merged) == sorted(
        described(first) + [(1, *row[1:]) for row in described(second)])
    assert (s["interval_ns"], s["rounds"], s["late"], s["lost"]) == (
        MS, 7, 1, 3)
    assert s["timeline_dropped"] == 5
    # one process's stack keeps its thread's id
    assert {row[1] for row in s["stacks"]} == {main_tid(first)}


def elsewhere(rep):
    """The report as if made on another host, started 100 s later."""
    data = rep.to_dict()
    data["host"] = dict(data["host"], hostname="elsewhere",
                        boot_id="another boot",
                        started_at=data["host"]["started_at"] + 100)
    return ap.Report.from_dict(data)


@pytest.mark.parametrize("host", ["same host", "another host"])
def test_a_merge_moves_timelines_onto_the_merged_clock(first, second,
                                                       host):
    if host == "another host":
        second = elsewhere(second)
    merged = ap.merge([first, second])
    assert (merged.spans()["start_ns"][len(first.spans()):].min() -
            first.spans()["start_ns"].min() > 99e9) == (host != "same host")
    timeline = merged.samples["timeline"]
    assert len(timeline) == 7
    assert (np.diff(timeline["t_ns"]) >= 0).all()
    # each sample still lies where it was planted, against its own spans
    spans = merged.spans()
    stacks = merged.samples["stacks"]
    nms = merged.stage_names.index("decode/nms")
    mine = spans[(spans["stage"] == nms)
                 & (spans["thread"] == len(first.threads))]
    at = [(int(t) - int(mine["start_ns"][0]), stacks[k][0])
          for t, k in zip(timeline["t_ns"], timeline["stack"])
          if stacks[k][0] == 1]
    assert at == [(0, 1), (0, 1), (1, 1)]
    assert [h.label for h in merged["decode/nms"].hot()] == [
        "nms (postproc.py:40)", "run_decode (pipeline.py:20)"]


def test_hot_functions_of_a_merged_stage_add_the_processes(first, second):
    merged = ap.merge([first, second])
    hot = {h.function: h for h in merged["decode"].hot()}
    # decode: 3 ms in nms under <module> (the first, CPU 2 ms);
    # decode/nms: 4 ms in nms under run_decode (the second, CPU 4 ms)
    assert (hot["nms"].own, hot["nms"].own_s, hot["nms"].cpu_s) == \
        pytest.approx((1.0, 0.007, 0.006))
    assert hot["<module>"].total == pytest.approx(3 / 7)
    assert (hot["run_decode"].own, hot["run_decode"].total) == \
        pytest.approx((0.0, 1.0))


def test_a_merged_report_with_samples_saves_and_loads_back(first, second,
                                                           tmp_path):
    merged = ap.merge([first, second])
    back = ap.Report.load(merged.save(tmp_path / "m.json"))
    assert back == merged
    assert json.loads((tmp_path / "m.json").read_text())["samples"][
        "timeline"]["count"] == 7


def test_merging_a_merged_report_moves_its_processes(first, second):
    pair = ap.merge([first, second])
    again = ap.merge([second, pair])
    processes = sorted({row[0] for row in again.samples["stacks"]})
    assert processes == [0, 1, 2]
    assert described(again) == sorted(
        [(0, *row[1:]) for row in described(second)]
        + [(1 + row[0], *row[1:]) for row in described(pair)])


def test_a_merge_with_an_unsampled_report_keeps_the_samples(first):
    bare = profile_stages()
    merged = ap.merge([bare, first])
    assert {row[0] for row in merged.samples["stacks"]} == {1}
    assert ap.merge([bare, bare]).samples is None


def test_samples_with_no_timeline_count_as_left_out_of_it(first, second):
    data = second.to_dict()
    del data["samples"]["timeline"]
    untimed = ap.Report.from_dict(data)
    merged = ap.merge([first, untimed])
    assert len(merged.samples["timeline"]) == 4
    assert merged.samples["timeline_dropped"] == 5 + 3
    assert "timeline" not in ap.merge([untimed, untimed]).samples


def test_child_processes_samples_survive_merged_data(first, second):
    """Profiler.report() merges its child processes' reports with
    merged_data, labelled by their own processes."""
    data = merged_data([first, second], [r.processes[0]["label"]
                                         for r in (first, second)])
    rep = ap.Report(data)
    assert described(rep) == sorted(
        described(first) + [(1, *row[1:]) for row in described(second)])
