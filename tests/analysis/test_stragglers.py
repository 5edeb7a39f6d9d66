"""Per-process figures (Report.by_process) and stragglers
(Report.stragglers) of merged reports, built with aquaprof.merge from
reports whose figures are known to the nanosecond; and the report's
section on them, in text and HTML. No torch."""
import math
from dataclasses import astuple

import numpy as np
import pytest

import aquaprof as ap
from aquaprof import Report, _core
from aquaprof.analysis.stragglers import rank_waits
from crafted import START, report as crafted_report, stage

MS = 1_000_000


def rank_report(pid, compute_ms, loads, step_ms=10):
    """A rank's report: 4 steps of `step_ms` each holding a `compute` of
    `compute_ms`, and `loads` calls of `load`, 1 ms each."""
    step = stage("step", count=4, ns=step_ms * MS)
    compute = stage("compute", parent=0, depth=1, count=4,
                    ns=compute_ms * MS)
    step["self_ns"] -= compute["total_ns"]
    step["cpu_ns"] = 0
    compute["cpu_ns"] = compute["total_ns"] // 2
    return Report.from_dict(crafted_report(
        [step, compute, stage("load", count=loads, ns=MS)], pid=pid))


@pytest.fixture
def ranks():
    return [rank_report(100, 2, 1), rank_report(101, 3, 2),
            rank_report(102, 8, 3)]


@pytest.fixture
def merged(ranks):
    return ap.merge(ranks, [f"rank {r}" for r in range(3)])


def test_by_process_gives_each_process_its_own_figures(merged, ranks):
    rows = merged.by_process("step/compute")
    assert [(r.process, r.label, r.pid) for r in rows] == [
        (0, "rank 0", 100), (1, "rank 1", 101), (2, "rank 2", 102)]
    for row, rep in zip(rows, ranks):
        own = rep["step/compute"]
        assert (row.count, row.total, row.self_time, row.cpu) == \
            (own.count, own.wall.total, own.self_time, own.cpu)
        assert row.mean == pytest.approx(own.wall.total / own.count)
    assert [r.count for r in merged.by_process("load")] == [1, 2, 3]
    assert [r.self_time for r in merged.by_process("step")] == \
        pytest.approx([0.032, 0.028, 0.008])


def test_by_process_lists_only_the_processes_that_ran_the_stage(ranks):
    only_first = Report.from_dict(crafted_report(
        [stage("eval", count=2, ns=MS)], pid=7))
    merged = ap.merge([ranks[0], only_first], ["a", "b"])
    assert [r.label for r in merged.by_process("load")] == ["a"]
    assert [r.label for r in merged.by_process("eval")] == ["b"]
    assert merged.stragglers() == []


def test_by_process_of_one_process_is_the_stage_itself(ranks):
    rep = ranks[1]
    (row,) = rep.by_process("step/compute")
    s = rep["step/compute"]
    assert astuple(row) == (0, rep.processes[0]["label"], 101, s.count,
                            s.wall.total, s.self_time, s.cpu, s.wall.mean)
    assert rep.stragglers() == []


def test_by_process_of_an_unknown_stage_names_the_known_ones(merged):
    with pytest.raises(KeyError, match="no stage 'nope'.*step/compute"):
        merged.by_process("nope")


def test_a_stage_nobody_ran_has_no_rows():
    rep = Report.from_dict(crafted_report([stage("idle", count=0)]))
    assert rep.by_process("idle") == []


def test_by_process_is_exact_where_raw_spans_were_dropped():
    reps = []
    for calls in (30, 50):
        with ap.Profiler(max_spans=10, memory=False, compensate=False) \
                as prof:
            for _ in range(calls):
                with ap.stage("step"):
                    pass
        reps.append(prof.report())
    merged = ap.merge(reps)
    assert merged.spans_dropped > 0
    assert [r.count for r in merged.by_process("step")] == [30, 50]
    assert [r.total for r in merged.by_process("step")] == \
        [r["step"].wall.total for r in reps]


def test_stragglers_compare_total_time_most_time_lost_first(merged):
    found = merged.stragglers()
    assert [s.path for s in found] == ["step/compute", "load", "step"]
    compute, load, step = found
    assert (compute.slowest.label, compute.fastest.label) == \
        ("rank 2", "rank 0")
    assert compute.ratio == pytest.approx(4.0)
    assert compute.lost == pytest.approx(0.032 - 0.008)
    assert compute.processes == 3 and compute.by == "total"
    # load: rank 2 ran three calls of the same length: it lost time all
    # the same, by total
    assert (load.slowest.label, load.fastest.label) == ("rank 2", "rank 0")
    assert load.ratio == pytest.approx(3.0)
    assert (step.ratio, step.lost) == (1.0, 0.0)
    assert step.slowest.process != step.fastest.process
    assert [s.path for s in merged.stragglers(top=2)] == \
        ["step/compute", "load"]
    assert merged.stragglers(top=0) == []


def test_stragglers_by_mean_tell_a_slow_process_from_a_busy_one(merged):
    found = {s.path: s for s in merged.stragglers(by="mean")}
    assert found["load"].ratio == pytest.approx(1.0)
    assert found["load"].lost == pytest.approx(0.0)
    compute = found["step/compute"]
    assert compute.by == "mean"
    assert compute.ratio == pytest.approx(4.0)
    # the slowest's calls times the difference of means
    assert compute.lost == pytest.approx(4 * (0.008 - 0.002))


def test_a_fastest_process_of_no_time_gives_an_infinite_ratio():
    reps = [Report.from_dict(crafted_report([stage("s", ns=ns)], pid=pid))
            for pid, ns in ((1, 0), (2, 5 * MS))]
    (s,) = ap.merge(reps).stragglers()
    assert s.ratio == math.inf and s.lost == pytest.approx(0.005)
    assert "inf, 5.0 ms lost" in str(ap.merge(reps))


@pytest.mark.parametrize("kwargs, match", [
    ({"top": -1}, "top must be None or an int >= 0"),
    ({"top": 1.5}, "top must be None or an int >= 0"),
    ({"top": True}, "top must be None or an int >= 0"),
    ({"by": "max"}, "by must be 'total' or 'mean', got 'max'"),
])
def test_stragglers_refuse_bad_arguments(merged, kwargs, match):
    with pytest.raises(ValueError, match=match):
        merged.stragglers(**kwargs)


def test_the_text_report_lists_the_stragglers(merged):
    lines = str(merged).splitlines()
    at = lines.index("Stragglers (per stage, the slowest and the fastest "
                     "process by total time):")
    assert lines[at + 1:at + 3] == [
        "  1. step/compute  slowest rank 2 32.0 ms, fastest rank 0 8.0 ms:"
        " 4.00x, 24.0 ms lost",
        "  2. load          slowest rank 2 3.0 ms, fastest rank 0 1.0 ms:"
        " 3.00x, 2.0 ms lost; 3 vs 1 calls of 1.0 ms vs 1.0 ms (1.00x a"
        " call)"]
    # a stage whose processes took the same time is no straggler
    assert lines[at + 3] == ""


def test_a_busier_process_is_not_called_slower_a_call():
    """Pool workers take whatever call comes next: one that ran more
    calls of the same length leads by total, and the line says its calls
    were no slower."""
    reps = [Report.from_dict(crafted_report(
        [stage("crunch", count=n, ns=5 * MS)], pid=pid))
        for pid, n in ((1, 25), (2, 15))]
    text = str(ap.merge(reps, ["worker 1", "worker 2"]))
    assert ("slowest worker 1 125.0 ms, fastest worker 2 75.0 ms: 1.67x, "
            "50.0 ms lost; 25 vs 15 calls of 5.0 ms vs 5.0 ms (1.00x a "
            "call)") in text


def test_the_text_report_of_one_process_has_no_straggler_section(ranks):
    assert "Stragglers" not in str(ranks[0])


def test_processes_without_their_own_figures_give_none(merged):
    """A merged file from before processes kept their own figures."""
    data = merged.to_dict()
    for p in data["processes"]:
        del p["stages"]
    old = Report.from_dict(data)
    assert old.by_process("step") == []
    assert old.stragglers() == []
    assert "Stragglers" not in str(old)


def test_labels_in_the_section_are_printable_and_cut(ranks):
    long = "rank 0 \x1b[31m" + "x" * 80
    text = str(ap.merge(ranks, [long, "rank 1", "rank 2"]))
    line = next(ln for ln in text.splitlines() if " lost" in ln)
    assert "\x1b" not in line and "\\x1b" in line
    assert "x" * 40 not in line and "..." in line


def test_the_html_report_lists_the_stragglers(merged, ranks):
    page = merged._repr_html_()
    assert "Stragglers" in page
    assert "1. step/compute  slowest rank 2 32.0 ms" in page
    assert "Stragglers" not in ranks[0]._repr_html_()


# ------------------------------------------- waits for a straggling rank

def ddp_rank(pid, forward_ms, backward_ms, forward_cpu=0.1,
             forward_name="forward"):
    """A DDP rank's report: 10 steps of forward, backward (whose
    all-reduce meets the other ranks) and opt, backward mostly off the
    CPU; the slow rank's opt (its forward over 10 ms) a little faster,
    off the CPU too."""
    opt_ms = 0.3 if forward_ms > 10 else 1
    step = stage("step", count=10, ns=(forward_ms + backward_ms) * MS)
    forward = stage(forward_name, parent=0, depth=1, count=10,
                    ns=forward_ms * MS)
    backward = stage("backward", parent=0, depth=1, count=10,
                     ns=backward_ms * MS)
    opt = stage("opt", parent=0, depth=1, count=10, ns=int(opt_ms * MS))
    step["self_ns"] = 0
    forward["cpu_ns"] = int(forward["total_ns"] * forward_cpu)
    backward["cpu_ns"] = 2 * MS * 10
    opt["cpu_ns"] = 0
    step["cpu_ns"] = forward["cpu_ns"] + backward["cpu_ns"]
    return Report.from_dict(crafted_report([step, forward, backward, opt],
                                           pid=pid))


def ddp(*ranks, **named):
    return ap.merge([ddp_rank(100 + i, *r, **named)
                     for i, r in enumerate(ranks)],
                    [f"rank {i}" for i in range(len(ranks))])


@pytest.mark.parametrize("cpu", [0.1, 0.95])
def test_ranks_waiting_for_a_straggler_are_told_to_look_at_it(cpu):
    """Rank 1 sleeps (or computes) 30 ms more in forward; at backward's
    all-reduce ranks 0 and 2 wait for it. backward's slowest rank is a
    waiting one: its fix is rank 1's forward, not prefetching."""
    merged = ddp((2, 34, cpu), (32, 4, cpu), (2, 33, cpu))
    found = {f.path: f for f in merged.diagnose(top=3)}
    backward = found["step/backward"]
    assert backward.kind == "straggler-bound", backward.evidence
    assert backward.evidence.startswith(
        "the other 2 processes wait here for rank 1: it is slowest in "
        "step/forward by 300.0 ms (16.0x its fastest)")
    assert "even out its data" in backward.fix
    # the cause is not a wait, whether it sleeps or computes, nor is a
    # stage a few ms apart, whose fastest is the straggler too
    assert found["step/forward"].kind != "straggler-bound"
    assert "step/opt" not in rank_waits(merged)
    summary = merged.diagnose().summary()
    assert "step/backward: straggler-bound; the other 2 processes wait " \
        "here for rank 1: it is slowest in step/forward" in summary
    # the stragglers list says its slowest only waited there
    assert "(the others wait here for rank 1, slowest in step/forward)" \
        in str(merged)


def test_the_summary_keeps_a_cause_path_with_shapes_whole():
    """An op stage's name holds its input shapes, commas and all; the
    summary's one clause of evidence ends after it, not inside it."""
    op = "aten::linear (8\u00d73, 3\u00d74)"
    merged = ddp((2, 34), (32, 4), (2, 33), forward_name=op)
    summary = merged.diagnose().summary()
    assert f"it is slowest in step/{op} by 300.0 ms (16.0x its " \
        "fastest)" in summary, summary


@pytest.mark.parametrize("ranks", [
    # ranks a few percent apart: noise, not a straggler
    ((24, 98), (18, 101), (13, 106)),
    # two ranks, both stages off the CPU: which waits for which is not
    # known from the totals
    ((2, 34), (32, 4)),
    # a rank slow in forward that the others do not wait for (no
    # collective): their backward is as long as its
    ((2, 34), (32, 33), (2, 33)),
])
def test_no_wait_for_a_rank_is_said_where_none_shows(ranks):
    merged = ddp(*ranks)
    kinds = {f.path: f.kind for f in merged.diagnose(top=3)}
    assert "straggler-bound" not in kinds.values(), kinds


def test_a_wait_for_a_straggler_stays_one_where_the_stage_blocks_on_the_gpu(
        monkeypatch):
    """On GPUs, DDP's all-reduce in backward blocks on the device while it
    waits for the slow rank: a GPU class (sync-bound, gpu-bound) took the
    stage over, its evidence saying "host waiting:" twice and its fix
    sending the reader after .item() calls, not after the slow rank."""
    from aquaprof.analysis import diagnose
    real = diagnose._gpu_class
    monkeypatch.setattr(diagnose, "_gpu_class", lambda stage: (
        ("sync-bound", "host blocked on the device 600.0 ms of 710.0 ms "
                       "wall (85 %)") if stage.path == "step/backward"
        else real(stage)))
    merged = ddp((2, 34), (32, 4), (2, 33))
    backward = {f.path: f for f in merged.diagnose(top=3)}["step/backward"]
    assert backward.kind == "straggler-bound", backward.evidence
    assert backward.evidence.count("host waiting:") == 1, backward.evidence
    assert "even out its data" in backward.fix


def test_a_straggler_wait_reads_right_with_one_other_or_none_fast():
    """Two ranks: "the other process waits" (it read "the other 1 process
    wait"); a fastest rank that spent no time in the cause: no ratio
    ("infx its fastest" before)."""
    two = {f.path: f for f in ddp((2, 34, 0.95), (32, 4, 0.95)).diagnose(
        top=3)}["step/backward"]
    assert two.kind == "straggler-bound", two.evidence
    assert two.evidence.startswith(
        "the other process waits here for rank 1: it is slowest in "
        "step/forward by 300.0 ms (16.0x its fastest)"), two.evidence
    none = {f.path: f for f in ddp((0, 34, 0.95), (32, 4, 0.95),
                                   (0, 33, 0.95)).diagnose(top=3)}
    evidence = none["step/backward"].evidence
    assert "inf" not in evidence and "its fastest spent no time there" in \
        evidence, evidence


# ------------------- two ranks both off the CPU: the calls' times tell

def timed_rank(pid, late_ms, compute_ms, reduce_ms, host="vm", steps=10,
               period_ms=32.1):
    """A rank's report of `steps` steps of `compute` then `all_reduce`,
    both off the CPU, with its spans: step k starts at k * period_ms +
    late_ms on the ranks' one clock (a host's CLOCK_MONOTONIC); no host
    named where host is None, the whole meta["host"] where a dict."""
    names = ("step", "compute", "all_reduce")
    lengths = (compute_ms + reduce_ms, compute_ms, reduce_ms)
    stages = [stage(name, parent=-1 if i == 0 else 0, depth=min(i, 1),
                    count=steps, ns=round(ms * MS))
              for i, (name, ms) in enumerate(zip(names, lengths))]
    stages[0]["self_ns"] = 0
    for s in stages:
        s["cpu_ns"] = 0
    spans = np.zeros(3 * steps, _core.SPAN_DTYPE)
    spans["stage"] = np.tile([0, 1, 2], steps)
    spans["parent"] = np.repeat(np.arange(steps) * 3, 3)
    spans["parent"][::3] = -1
    first = START + np.round((np.arange(steps) * period_ms + late_ms) * MS
                             ).astype(np.int64)
    starts = np.stack([first, first, first + round(compute_ms * MS)], 1)
    spans["start_ns"] = starts.ravel()
    spans["end_ns"] = (starts + np.round(np.array(
        [compute_ms + reduce_ms, compute_ms, reduce_ms]) * MS
    ).astype(np.int64)).ravel()
    return Report.from_dict(crafted_report(
        stages, spans, pid=pid, host=host if isinstance(host, dict) else
        {"hostname": host} if host else {}))


def timed_ranks(late_ms=(0, 0), hosts=("vm", "vm"), steps=(10, 10)):
    """Rank 0 computes 2 ms a step and waits 30.1 ms in all_reduce;
    rank 1 the other way round (32 ms and 0.1 ms): the same totals,
    whichever stage is where they meet."""
    return ap.merge([timed_rank(100, late_ms[0], 2, 30.1, hosts[0],
                                steps[0]),
                     timed_rank(101, late_ms[1], 32, 0.1, hosts[1],
                                steps[1])], ["rank 0", "rank 1"])


@pytest.mark.parametrize("late_ms, wait, cause, slow", [
    # the ranks start their steps together: the all-reduce's calls end
    # together, compute's apart: rank 0 waits in all_reduce for rank 1
    ((0, 0), "step/all_reduce", "step/compute", "rank 1"),
    # rank 0 starts 30 ms late, slow in all_reduce: compute's calls end
    # together, all_reduce's apart: rank 1 waits in compute for rank 0
    ((30, 0), "step/compute", "step/all_reduce", "rank 0"),
])
def test_two_ranks_off_the_cpu_wait_where_their_calls_end_together(
        late_ms, wait, cause, slow):
    merged = timed_ranks(late_ms)
    waits = rank_waits(merged)
    assert sorted(waits) == [wait]
    assert (waits[wait].cause.path, waits[wait].cause.slowest.label) == \
        (cause, slow)
    found = {f.path: f for f in merged.diagnose(top=3)}
    assert found[wait].kind == "straggler-bound", found[wait].evidence
    assert found[wait].evidence.startswith(
        f"the other process waits here for {slow}: it is slowest in "
        f"{cause} by 300.0 ms"), found[wait].evidence
    assert found[cause].kind == "waiting"


def test_ranks_in_two_containers_of_one_machine_share_its_clock():
    """Containers are named apart, but one kernel keeps one monotonic
    clock for both: the ranks' calls' times still tell."""
    merged = timed_ranks(hosts=({"hostname": "pod-0", "boot_id": "a"},
                                {"hostname": "pod-1", "boot_id": "a"}))
    assert sorted(rank_waits(merged)) == ["step/all_reduce"]


def test_a_merged_files_malformed_process_host_names_no_clock():
    """A merged report's processes' hosts are not checked on load: a
    boot or hostname that is not a string names no clock, and never
    makes diagnose raise."""
    data = timed_ranks().to_dict()
    data["processes"][0]["host"] = {"hostname": ["vm"], "boot_id": ["a"]}
    merged = Report.from_dict(data)
    assert rank_waits(merged) == {}
    kinds = {f.path: f.kind for f in merged.diagnose(top=3)}
    assert "straggler-bound" not in kinds.values(), kinds


@pytest.mark.parametrize("case", [
    # other hosts: their clocks are NTP's, not close enough to read
    {"hosts": ("vm", "other")},
    # a host not named: no shared clock known
    {"hosts": (None, None)},
    # two machines of one name: their kernels' boots tell them apart
    {"hosts": ({"hostname": "localhost", "boot_id": "a"},
               {"hostname": "localhost", "boot_id": "b"})},
    # the ranks ran the stages a different number of times: not in step
    {"steps": (10, 11)},
    # too few calls to pair
    {"steps": (2, 2)},
    # rank 0 15 ms late: neither stage's calls end (or start) together
    {"late_ms": (15, 0)},
])
def test_two_ranks_off_the_cpu_are_left_unsaid_where_times_do_not_tell(
        case):
    merged = timed_ranks(**case)
    assert rank_waits(merged) == {}
    kinds = {f.path: f.kind for f in merged.diagnose(top=3)}
    assert "straggler-bound" not in kinds.values(), kinds
