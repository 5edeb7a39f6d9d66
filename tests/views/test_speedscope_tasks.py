"""speedscope files of asyncio programs and of long runs, read back with
json as speedscope reads them: overlapping tasks each keep their own
open and close (a profile per concurrent task, as the trace's lanes),
and past max_events the shortest spans are left out and the file says
how many."""
import asyncio
import inspect
import json
from collections import Counter

import numpy as np
import pytest

import aquaprof as ap
from aquaprof.views import trace
from aquaprof.views.speedscope import write_speedscope
from cli_runs import cli, one_line_error
from profiled import busy

TASKS = 30


async def task(i):
    with ap.stage("task"):
        # different lengths: the tasks end in another order than they began
        await asyncio.sleep(0.002 * (TASKS - i) % 0.017 + 0.001)
        with ap.stage("work"):
            busy(0.0003)


async def serve():
    with ap.stage("gather"):
        await asyncio.gather(*(task(i) for i in range(TASKS)))


@pytest.fixture(scope="module")
def tasks():
    with ap.Profiler() as prof:
        asyncio.run(serve())
    return prof.report()


def read(path):
    return json.loads(path.read_text(encoding="utf-8"))


def opened(doc):
    """Every frame opened, per profile, as (frame name, open at, close
    at), checking that each profile's events nest and go forward."""
    names = [f["name"] for f in doc["shared"]["frames"]]
    out = {}
    for profile in doc["profiles"]:
        stack, last, mine = [], 0, []
        for e in profile["events"]:
            assert e["at"] >= last
            last = e["at"]
            if e["type"] == "O":
                stack.append((e["frame"], e["at"]))
            else:
                frame, at = stack.pop()
                assert frame == e["frame"], profile["name"]
                mine.append((names[frame], at, e["at"]))
        assert stack == []
        out[profile["name"]] = mine
    return out


def recorded(report, path):
    """(open, close) of every span of a stage, from the run's start."""
    spans = report.spans()
    origin = report.meta["start_ns"]
    mine = spans[spans["stage"] == report.stage_names.index(path)]
    return Counter(zip((mine["start_ns"] - origin).tolist(),
                       (mine["end_ns"] - origin).tolist()))


def test_every_task_opens_and_closes_when_its_span_did(tasks, tmp_path):
    doc = read(write_speedscope(tasks, tmp_path / "s.json"))
    frames = opened(doc)
    for path in ("gather", "gather/task", "gather/task/work"):
        written = Counter((at, to) for profile in frames.values()
                          for name, at, to in profile if name == path)
        assert written == recorded(tasks, path), path
    task_ns = sum(to - at for profile in frames.values()
                  for name, at, to in profile if name == "gather/task")
    # the aggregates count clock ticks, spans() nanoseconds: a few ns a
    # span apart
    assert task_ns == pytest.approx(tasks["gather/task"].wall.total * 1e9,
                                    rel=1e-5)


def test_overlapping_tasks_get_a_profile_per_lane(tasks, tmp_path):
    doc = read(write_speedscope(tasks, tmp_path / "s.json"))
    names = [p["name"] for p in doc["profiles"]]
    main = names[0]
    assert main.startswith("MainThread (tid ")
    lanes = names[1:]
    assert lanes == [f"{main}, task lane {n}"
                     for n in range(1, len(lanes) + 1)]
    # the tasks all slept at once: each but the first needs a lane
    assert len(lanes) >= TASKS - 1
    # a task's work stays under it, in its lane
    for profile in opened(doc).values():
        works = [(at, to) for name, at, to in profile
                 if name == "gather/task/work"]
        holders = [(at, to) for name, at, to in profile
                   if name == "gather/task"]
        assert all(any(a <= w and z <= y for a, y in holders)
                   for w, z in works)


def test_a_file_under_its_cap_leaves_nothing_out(tasks, tmp_path):
    doc = read(write_speedscope(tasks, tmp_path / "s.json", name="run"))
    assert doc["name"] == "run"
    assert doc["aquaprof"]["spans_left_out"] == 0
    assert doc["aquaprof"]["spans_in_report"] == tasks.spans_recorded


def test_past_its_cap_the_file_keeps_the_longest_and_says_so(tasks,
                                                              tmp_path):
    cap = 10
    doc = read(write_speedscope(tasks, tmp_path / "s.json", name="run",
                                max_events=cap))
    left = tasks.spans_recorded - cap
    assert doc["name"].startswith(f"run (aquaprof: {left} shortest spans "
                                  f"left out of this file (max_events={cap})")
    assert doc["aquaprof"] == {
        "spans_in_report": tasks.spans_recorded, "spans_left_out": left,
        "spans_never_recorded": 0, "max_events": cap}
    stages = set(tasks.stage_names)
    kept = sorted(to - at for profile in opened(doc).values()
                  for name, at, to in profile if name in stages)
    spans = tasks.spans()
    longest = np.sort(spans["end_ns"] - spans["start_ns"])[-cap:]
    assert kept == sorted(longest.tolist())
    with pytest.raises(ValueError, match="max_events"):
        write_speedscope(tasks, tmp_path / "x.json", max_events=-1)


def test_the_cap_is_the_traces(tmp_path):
    cap = inspect.signature(write_speedscope).parameters["max_events"]
    assert cap.default == trace.MAX_EVENTS


def test_the_command_takes_the_cap(tasks, tmp_path):
    saved = tasks.save(tmp_path / "run.json")
    out = cli("speedscope", saved, "-o", tmp_path / "s.json",
              "--max-events", 5)
    assert out.returncode == 0, out.stderr
    doc = read(tmp_path / "s.json")
    assert doc["aquaprof"]["spans_left_out"] == tasks.spans_recorded - 5
    assert "shortest spans left out" in doc["name"]
    one_line_error(cli("speedscope", saved, "-o", tmp_path / "t.json",
                       "--max-events", -1), "max_events must be an int")


async def outlives():
    with ap.stage("late"):
        await asyncio.sleep(0.01)


async def spawn_and_leave():
    with ap.stage("spawn"):
        started = asyncio.create_task(outlives())
        await asyncio.sleep(0)
    await started


def test_a_task_outliving_the_stage_that_started_it_keeps_its_length(
        tmp_path):
    with ap.Profiler() as prof:
        asyncio.run(spawn_and_leave())
    report = prof.report()
    doc = read(write_speedscope(report, tmp_path / "s.json"))
    frames = opened(doc)
    for path in ("spawn", "spawn/late"):
        written = Counter((at, to) for profile in frames.values()
                          for name, at, to in profile if name == path)
        assert written == recorded(report, path), path
    # and the trace, which lays its tracks out the same way, nests
    events = json.loads(trace.chrome_trace(report))["traceEvents"]
    spans = sorted((e for e in events if e["ph"] == "X"),
                   key=lambda e: e["ts"])
    assert len(spans) == 2 and spans[0]["tid"] != spans[1]["tid"]


def own_work(k):
    busy(0.003)


def work_0():
    own_work(0)


def work_1():
    own_work(1)


def work_2():
    own_work(2)


async def computes(work):
    with ap.stage("task"):
        for _ in range(40):
            work()
            await asyncio.sleep(0)


def test_sampled_code_of_tasks_open_at_once_goes_to_no_other_tasks_lane(
        tmp_path):
    """Three tasks of one stage open at once, each computing in its own
    function: a sample says its stage, not its task, so where several of
    the stage's calls were open it is drawn in none of their lanes, never
    all in the lane of the one that began last (which showed every
    task's work and the others idle)."""
    async def three():
        await asyncio.gather(computes(work_0), computes(work_1),
                             computes(work_2))
    with ap.Profiler(sample=0.001) as prof:
        asyncio.run(three())
    rep = prof.report()
    doc = read(write_speedscope(rep, tmp_path / "s.json"))
    for lane, frames in opened(doc).items():
        works = {name.split(" ")[0] for name, _at, _to in frames
                 if name.startswith("work_")}
        assert len(works) <= 1, (lane, works)
    events = json.loads(trace.chrome_trace(rep))
    by_lane = {}
    for e in events["traceEvents"] if isinstance(events, dict) else events:
        if e.get("ph") == "X" and e.get("name", "").startswith("work_"):
            by_lane.setdefault(e["tid"], set()).add(e["name"].split(" ")[0])
    assert all(len(works) <= 1 for works in by_lane.values()), by_lane
    # the stage still has every task's code, where it is not per call
    hot = {h.function for h in rep["task"].hot(100)}
    assert {"work_0", "work_1", "work_2"} <= hot, hot
