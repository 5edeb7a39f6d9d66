"""The flamegraph of a real asyncio program whose tasks overlap: a stage
whose calls were open at once on one event loop is as wide as its time
on the loop's clock, never wider than the stage it runs under; its
time suspended at awaits is its own "(awaiting)" frame, not charged to
the code it ran; and the SVG and folded stacks agree."""
import asyncio
import html
import re
import time

import numpy as np
import pytest

import aquaprof as ap
from aquaprof.analysis.sampled_code import AWAITING, stage_clock
from aquaprof.views.flamegraph import flamegraph_svg

TASKS = 20
SLEEP = 0.05
BUSY = 0.002


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def one_task():
    with ap.stage("task"):
        await asyncio.sleep(SLEEP)
        spin(BUSY)


async def gathered():
    with ap.stage("gather"):
        await asyncio.gather(*(one_task() for _ in range(TASKS)))


@pytest.fixture(scope="module")
def rep():
    with ap.Profiler(sample=0.001) as prof:
        asyncio.run(gathered())
    return prof.report()


def frames(svg):
    """[(path, parent index or None, width as first drawn, hover text)],
    in the order drawn; a code frame's path made from its parents'; the
    idle threads' frame as wide as its CPU time, as the root counts it."""
    out = []
    for kind, attrs, title in re.findall(r'<g class="(f[^"]*)"([^>]*)>'
                                         r'<title>([^<]*)</title>', svg):
        a = {k: html.unescape(v) for k, v in
             re.findall(r'([\w-]+)="([^"]*)"', attrs)}
        parent = int(a["data-p"]) if "data-p" in a else None
        under = out[parent][0] if parent is not None else None
        path = "" if under is None else \
            f"{under}/{a['data-n']}" if under else a["data-n"]
        width = a["data-c" if "idle" in kind.split() else "data-w"]
        out.append((path, parent, float(width), html.unescape(title)))
    return out


def by_path(svg):
    return {path: (w, text) for path, _, w, text in frames(svg)}


def code_path(shown, stage, name):
    """The path of the code frame named `name` (its label's start) above
    stage."""
    found = [p for p in shown if p.startswith(stage + "/")
             and p.rsplit("/", 1)[-1].startswith(name)]
    assert found, f"no {name} above {stage}: {sorted(shown)}"
    return found[0]


def test_a_stage_whose_calls_overlapped_is_as_wide_as_its_time_on_the_clock(
        rep):
    task, gather = rep["gather/task"], rep["gather"]
    assert task.at_once == TASKS
    assert task.wall.total > 0.8 * TASKS * SLEEP     # the sum: ~1 s
    shown = by_path(rep.flamegraph().html())
    task_w, task_text = shown["gather/task"]
    gather_w, _ = shown["gather"]
    assert task_w <= gather_w <= rep.wall
    assert task_w < task.wall.total / 5
    assert f"{TASKS} calls, up to {TASKS} at once" in task_text
    assert "summed" in task_text
    # the gather's own time: only before its tasks start and after they
    # end, not its whole call
    assert gather_w - task_w < 0.25 * gather_w


def test_no_frame_is_wider_than_its_parent_and_children_add_up(rep):
    drawn = frames(flamegraph_svg(rep, min_share=0))
    kids = {}
    for path, parent, w, _ in drawn:
        if parent is not None and not path.startswith("idle threads"):
            assert w <= drawn[parent][2] + 1e-9, path
            kids[parent] = kids.get(parent, 0.0) + w
    for i, total in kids.items():
        if not drawn[i][0].startswith("idle threads"):   # drawn by CPU
            assert total <= drawn[i][2] + 1e-9, drawn[i][0]


def test_awaited_time_is_its_own_frame_not_the_code_that_ran(rep):
    shown = by_path(flamegraph_svg(rep, min_share=0))
    awaiting = shown[f"gather/task/{AWAITING}"][0]
    spun = shown[code_path(shown, "gather/task", "spin")][0]
    # the code ran ~TASKS * BUSY (40 ms); the rest of the 50 ms the tasks
    # spent suspended is the awaiting frame's
    assert spun < 3 * TASKS * BUSY
    assert awaiting > SLEEP / 2
    text = shown[f"gather/task/{AWAITING}"][1]
    assert "suspended at an await" in text


def test_folded_stacks_add_up_to_the_flamegraph_widths(rep, tmp_path):
    lines = rep.to_folded(tmp_path / "f.folded").read_text().splitlines()
    values = [(line.rsplit(" ", 1)[0].split(";"), int(line.rsplit(" ", 1)[1]))
              for line in lines]
    shown = by_path(flamegraph_svg(rep, min_share=0))
    clock = stage_clock(rep)
    for stage in ("gather", "gather/task"):
        parts = stage.split("/")
        under = sum(ns for frames_, ns in values
                    if frames_[:len(parts)] == parts)
        assert under == clock.width[rep[stage].id]
        assert under * 1e-9 == pytest.approx(shown[stage][0], abs=1e-9)
    assert sum(ns for f, ns in values if f[0] == "gather") <= rep.wall * 1e9
    assert any(f[-1] == AWAITING for f, _ in values)


def test_a_program_without_overlap_keeps_its_summed_widths():
    with ap.Profiler(sample=0.001) as prof:
        with ap.stage("outer"):
            for _ in range(3):
                with ap.stage("inner"):
                    spin(0.002)
    rep = prof.report()
    clock = stage_clock(rep)
    assert not clock.overlapped
    for s in rep.stages:
        assert clock.width[s.id] == round(s.wall.total * 1e9)
        assert clock.own[s.id] == round(s.self_time * 1e9)


def test_a_call_of_no_length_takes_no_time_from_the_clock():
    # at one time a call's close sorts before opens: one of no length
    # would stay open for the rest of its thread's time
    from aquaprof import _core
    from aquaprof.analysis.sampled_code import _leaf_shares
    rows = [(0, -1, 0, 100), (1, 0, 10, 90), (1, 0, 20, 80), (2, 1, 30, 30)]
    spans = np.zeros(len(rows), _core.SPAN_DTYPE)
    for i, (stage, parent, start, end) in enumerate(rows):
        spans[i]["stage"], spans[i]["parent"] = stage, parent
        spans[i]["start_ns"], spans[i]["end_ns"] = start, end
    shares = _leaf_shares(spans, np.arange(len(rows)))
    assert list(shares) == [20, 50, 30, 0]


def test_a_call_awaiting_one_task_is_as_wide_as_its_sub_stage(tmp_path):
    # the awaited coroutine runs in a task of its own (create_task): the
    # awaiting call's own time is not its sub-stage's too, so the folded
    # stacks under it add up to its width, and the SVG says the same
    async def child():
        with ap.stage("inner"):
            await asyncio.sleep(0.1)

    async def main():
        with ap.stage("request"):
            await asyncio.create_task(child())
    with ap.Profiler(sample=0.001) as prof:
        asyncio.run(main())
    rep = prof.report()
    clock = stage_clock(rep)
    outer, inner = rep["request"], rep["request/inner"]
    assert clock.own[outer.id] < 0.01e9
    assert clock.width[outer.id] == clock.width[inner.id] + \
        clock.own[outer.id]
    lines = rep.to_folded(tmp_path / "f.folded").read_text().splitlines()
    under = sum(int(line.rsplit(" ", 1)[1]) for line in lines
                if line.split(";")[0].split(" ")[0] == "request")
    assert under == clock.width[outer.id] <= rep.wall * 1e9
    shown = by_path(flamegraph_svg(rep, min_share=0))
    assert shown["request"][0] == pytest.approx(under * 1e-9, abs=1e-9)
    # its self time is its own few microseconds, not its sub-stage's
    # 100 ms (a self time of 100.6 us once read as the latter's 100)
    self_time = re.search(r"self ([\d.]+) (ns|us|ms|s)\b",
                          shown["request"][1])
    assert self_time, shown["request"][1]
    assert float(self_time[1]) * {"ns": 1e-9, "us": 1e-6, "ms": 1e-3,
                                  "s": 1.0}[self_time[2]] < 0.01


def test_a_call_that_never_awaits_holds_its_thread_beside_suspended_ones(
        tmp_path):
    # 20 tasks asleep in a stage while a call that never awaits computes
    # 100 ms: no task ran meanwhile, so the whole 100 ms is its own, not
    # a 21st of it; the sleepers share the rest of the clock
    async def sleeper():
        with ap.stage("sleeper"):
            await asyncio.sleep(0.2)

    async def lone():
        with ap.stage("lone"):
            await asyncio.sleep(0.2)

    async def main():
        tasks = [asyncio.create_task(sleeper()) for _ in range(20)]
        tasks.append(asyncio.create_task(lone()))
        await asyncio.sleep(0.02)
        with ap.stage("hog"):
            spin(0.1)
        await asyncio.gather(*tasks)
    with ap.Profiler(sample=0.001) as prof:
        asyncio.run(main())
    rep = prof.report()
    hog = rep["hog"]
    assert hog.suspended == 0 and hog.at_once == 1
    clock = stage_clock(rep)
    assert clock.own[hog.id] == round(hog.wall.total * 1e9)
    lines = rep.to_folded(tmp_path / "f.folded").read_text().splitlines()
    under = sum(int(line.rsplit(" ", 1)[1]) for line in lines
                if line.split(";")[0].split(" ")[0] == "hog")
    assert under == clock.width[hog.id]
    shown = by_path(flamegraph_svg(rep, min_share=0))
    assert shown["hog"][0] == pytest.approx(hog.wall.total, abs=1e-9)
    sleepers = clock.width[rep["sleeper"].id]
    assert sleepers + clock.width[hog.id] <= rep.wall * 1e9
    # one call, which overlapped no other of its stage, yet shared its
    # thread's clock with the sleepers' while suspended
    assert rep["lone"].at_once == 1
    assert "shared their thread's time" in shown["lone"][1]
    assert "up to 20 at once" in shown["sleeper"][1]


def test_a_suspended_stage_no_sample_caught_running_awaited_its_time(
        tmp_path):
    # sampled twice a second, a 50 ms await is seen by no sample: its own
    # time is the awaiting frame's, as when samples see the loop elsewhere
    async def main():
        with ap.stage("fetch"):
            await asyncio.sleep(0.05)
    with ap.Profiler(sample=0.5) as prof:
        asyncio.run(main())
    rep = prof.report()
    assert rep.samples is not None
    lines = rep.to_folded(tmp_path / "f.folded").read_text().splitlines()
    awaited = [line for line in lines
               if line.startswith(f"fetch;{AWAITING} ")]
    assert len(awaited) == 1
    assert int(awaited[0].rsplit(" ", 1)[1]) == \
        stage_clock(rep).own[rep["fetch"].id]
