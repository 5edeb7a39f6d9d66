"""Stages on the run's clock: calls that overlap (threads, asyncio tasks,
processes) count their common time once, so that the bottlenecks are
where the run's time went, not where most calls were open at once."""
import asyncio
import random
import threading
import time

import numpy as np
import pytest

import aquaprof as ap
from aquaprof.views.text import overlap_note
from aquaprof import _core
from aquaprof.analysis.concurrency import apart, on_clock, \
    self_open_by_thread


def spans(rows):
    out = np.zeros(len(rows), _core.SPAN_DTYPE)
    for i, (stage, start, end) in enumerate(rows):
        out[i]["stage"], out[i]["start_ns"], out[i]["end_ns"] = \
            stage, start, end
    return out


def test_cover_and_most_at_once_equal_a_count_tick_by_tick():
    rng = random.Random(7)
    for _ in range(300):
        stages = rng.randrange(1, 4)
        rows = []
        for _ in range(rng.randrange(1, 25)):
            start = rng.randrange(0, 100)
            rows.append((rng.randrange(stages), start,
                         start + rng.randrange(0, 30)))
        got = on_clock(spans(rows), stages)
        for stage in range(stages):
            open_at = [sum(1 for s, a, b in rows if s == stage and a <= t < b)
                       for t in range(140)]
            assert got.covered_ns[stage] == sum(1 for k in open_at if k)
            assert got.at_once[stage] == max(open_at)
            assert got.summed_ns[stage] == sum(b - a for s, a, b in rows
                                               if s == stage)


def test_a_clock_range_past_64_bits_of_lift_is_still_exact():
    # start times far apart across many stages: the ranks path
    rows = [(s, s * 2 ** 54, s * 2 ** 54 + 10) for s in range(200)]
    rows += [(s, s * 2 ** 54 + 5, s * 2 ** 54 + 20) for s in range(200)]
    got = on_clock(spans(rows), 200)
    assert list(got.covered_ns) == [20] * 200
    assert list(got.at_once) == [2] * 200


def test_threads_at_once_rank_below_longer_serial_work():
    def nap():
        with ap.stage("fanout"):
            time.sleep(0.1)
    with ap.Profiler(compensate=False) as prof:
        threads = [threading.Thread(target=nap) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with ap.stage("serial"):
            time.sleep(0.3)
    rep = prof.report()
    fanout = rep["fanout"]
    assert fanout.self_time > 0.75 and fanout.at_once == 8
    assert 0.09 < fanout.self_wall < 0.2
    assert [s.path for s in rep.top(2)] == ["serial", "fanout"]
    line = next(x for x in str(rep).splitlines() if "2. fanout" in x)
    assert "summed over its calls, up to 8 at once" in line


def test_items_a_second_of_threads_at_once_is_what_they_made_together():
    # 4 workers each load 10 items every 5 ms: together 8,000 items a
    # second, which is what a user sizing the pool needs; the calls'
    # summed wall time gives a quarter of it
    def worker():
        for _ in range(20):
            with ap.stage("load", items=10):
                time.sleep(0.005)
    with ap.Profiler(compensate=False) as prof:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        began = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.perf_counter() - began
        with ap.stage("alone", items=3):
            time.sleep(0.01)
    rep = prof.report()
    assert rep["load"].throughput == pytest.approx(800 / took, rel=0.2)
    alone = rep["alone"]
    assert alone.throughput == pytest.approx(3 / alone.wall.total)


def test_with_spans_dropped_the_report_says_overlap_is_judged_on_the_rest():
    # the first thread to record takes the whole max_spans: the kept
    # spans then show no overlap, and the clock's figures cannot be exact
    def worker():
        for _ in range(20):
            with ap.stage("load", items=10):
                time.sleep(0.001)
    with ap.Profiler(compensate=False, max_spans=10) as prof:
        threads = [threading.Thread(target=worker) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    text = str(prof.report())
    assert "judged from the kept spans alone" in text


def test_asyncio_tasks_asleep_at_once_rank_below_the_one_that_computes():
    async def sleeper():
        with ap.stage("task"):
            await asyncio.sleep(0.1)

    async def main():
        await asyncio.gather(*(sleeper() for _ in range(100)))
        with ap.stage("compute"):
            end = time.perf_counter() + 0.2
            while time.perf_counter() < end:
                pass
    with ap.Profiler(compensate=False) as prof:
        asyncio.run(main())
    rep = prof.report()
    assert rep["task"].self_time > 5 and rep["task"].at_once == 100
    assert rep["task"].self_wall < 0.3
    assert rep.top(1)[0].path == "compute"
    assert rep.diagnose(top=1).findings[0].path == "compute"


def test_calls_that_never_overlap_keep_their_self_time():
    with ap.Profiler(compensate=False) as prof:
        for _ in range(3):
            with ap.stage("outer"):
                with ap.stage("inner"):
                    time.sleep(0.005)
    rep = prof.report()
    for s in rep.stages:
        assert s.at_once == 1 and s.self_wall == s.self_time
        assert "summed over its calls" not in str(rep)


def test_one_threads_calls_without_awaits_are_measured_apart_the_same():
    # recursion makes paths of their own: no stage overlaps itself there
    def recurse(n):
        with ap.stage("rec"):
            if n:
                recurse(n - 1)
    with ap.Profiler(compensate=False) as prof:
        for _ in range(3):
            recurse(4)
    rep = prof.report()
    spans, n = rep.spans(), len(rep.stages)
    for measured, known in zip(on_clock(spans, n), apart(spans, n)):
        assert measured.tolist() == known.tolist()
    assert all(s.at_once == 1 for s in rep.stages)


def test_calls_whose_spans_were_dropped_count_no_more_than_the_run():
    def work():
        with ap.stage("work"):
            time.sleep(0.1)
    with ap.Profiler(compensate=False, max_spans=4) as prof:
        for _ in range(4):
            with ap.stage("fill"):
                pass
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rep = prof.report()
    work = rep["work"]
    assert work.self_time > 0.75 and work.at_once == 0
    assert work.self_wall <= rep.wall
    line = next(x for x in str(rep).splitlines() if ". work" in x)
    assert "spans were dropped" in line


def test_self_time_on_the_clock_equals_a_count_tick_by_tick():
    # calls of stage 0 on several threads at once, each with sequential
    # calls of stage 1 inside: self-open where a call is open and in none
    # of its own sub-stage calls; on each thread, over its calls alone
    rng = random.Random(11)
    for _ in range(200):
        rows, parents, threads = [], [], []
        nthreads = rng.randrange(1, 4)
        for thread in range(nthreads):
            t = rng.randrange(0, 20)
            for _call in range(rng.randrange(1, 3)):
                start = t
                at = start
                kids = []
                for _kid in range(rng.randrange(0, 3)):
                    a = at + rng.randrange(0, 5)
                    b = a + rng.randrange(0, 6)
                    kids.append((a, b))
                    at = b
                end = at + rng.randrange(0, 5)
                me = len(rows)
                rows.append((0, start, end))
                parents.append(-1)
                for a, b in kids:
                    rows.append((1, a, b))
                    parents.append(me)
                threads += [thread] * (1 + len(kids))
                t = end + rng.randrange(0, 4)
        array = spans(rows)
        array["parent"], array["thread"] = parents, threads
        got = on_clock(array, 2)
        by_thread = self_open_by_thread(array, 0, nthreads)

        def self_open(on=range(nthreads)):
            calls = [(i, a, b) for i, (s, a, b) in enumerate(rows)
                     if s == 0 and threads[i] in on]
            return sum(
                1 for t in range(120)
                if any(a <= t < b and not any(
                    p == i and x <= t < y
                    for (s, x, y), p in zip(rows, parents))
                    for i, a, b in calls))
        if got.at_once[0] > 1:
            assert got.self_ns[0] == self_open(), (rows, parents)
        assert [int(n) for n in by_thread] == \
            [self_open([k]) for k in range(nthreads)], (rows, parents)


def test_a_stage_overlapping_itself_counts_the_self_time_its_threads_had():
    # one thread's call is all its own; three others wait in `db` inside
    # theirs: 0.2 s of the run was `handle`'s own, not a quarter of it
    def handle(inner):
        with ap.stage("handle"):
            if inner:
                with ap.stage("db"):
                    time.sleep(0.2)
            else:
                time.sleep(0.2)
    with ap.Profiler(compensate=False) as prof:
        threads = [threading.Thread(target=handle, args=(i > 0,))
                   for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rep = prof.report()
    assert rep["handle"].at_once == 4
    assert 0.18 < rep["handle"].self_wall < 0.25
    assert 0.18 < rep["handle/db"].self_wall < 0.25


def test_a_span_naming_a_parent_the_array_lacks_is_taken_as_parentless():
    rows = [(0, 0, 10), (0, 5, 15), (1, 6, 8)]
    array = spans(rows)
    array["parent"] = [-1, -1, 7]
    got = on_clock(array, 2)
    assert got.at_once[0] == 2 and got.self_ns[0] == 15


def test_a_call_whose_gathered_tasks_overlap_has_no_time_of_its_own_then():
    # the tasks' suspended time is not taken from the gathering call's
    # self time; on the clock, while any task of it is open, it is theirs
    async def task():
        with ap.stage("task"):
            await asyncio.sleep(0.05)

    async def main():
        with ap.stage("gather"):
            await asyncio.gather(*(task() for _ in range(20)))
    with ap.Profiler(compensate=False) as prof:
        asyncio.run(main())
    rep = prof.report()
    gather = rep["gather"]
    assert gather.at_once == 1 and gather.self_time > 0.04
    assert gather.self_wall < 0.01
    assert [s.path for s in rep.top(1)] == ["gather/task"]


def test_a_call_awaiting_one_task_has_no_time_of_its_own_while_it_runs():
    # create_task (and wait_for before Python 3.12) runs the awaited
    # coroutine in a task of its own: the core's self time, kept a task at
    # a time, does not take its sub-stage from the awaiting call; on the
    # clock it has none of it, whichever task ran the sub-stage
    async def child():
        with ap.stage("inner"):
            await asyncio.sleep(0.1)

    async def main():
        with ap.stage("created"):
            await asyncio.create_task(child())
        with ap.stage("waited"):
            await asyncio.wait_for(child(), 5)
    with ap.Profiler(compensate=False) as prof:
        asyncio.run(main())
    rep = prof.report()
    assert rep["created"].self_time > 0.09
    for path in ("created", "waited"):
        outer, inner = rep[path], rep[f"{path}/inner"]
        assert outer.at_once == 1 and outer.self_wall < 0.01
        assert inner.self_wall > 0.09
    assert sorted(s.path for s in rep.top(2)) == ["created/inner",
                                                  "waited/inner"]
    assert sum(s.self_wall for s in rep.stages) <= rep.wall
    assert "its sub-stages ran in tasks it awaited" in \
        overlap_note(rep["created"])
    assert "spans were dropped" not in str(rep)
    found = {f.path: f for f in rep.diagnose(top=4).findings}
    assert "outside its sub-stages, which ran in tasks it awaited" in \
        found["created"].evidence
    assert "outside its sub-stages" not in found["created/inner"].evidence


def test_counts_of_thousands_keep_their_digits_in_the_printed_lines():
    # "1,000 calls": the printed diagnosis keeps a finding's first clause,
    # which must not end at the thousands' comma
    async def task():
        with ap.stage("req"):
            await asyncio.sleep(0)

    async def main():
        await asyncio.gather(*(task() for _ in range(1000)))
    with ap.Profiler(compensate=False) as prof:
        asyncio.run(main())
    text = str(prof.report())
    assert "req: awaiting; 1,000 of 1,000 calls suspended at an await" in \
        text
    assert "req (1,000 of 1,000)" in text


def test_a_suspended_stage_whose_spans_were_dropped_keeps_its_self_time():
    # the kept calls cannot stand for the dropped ones on the clock: an
    # awaiting stage past max_spans keeps the core's self time, and the
    # note says spans were dropped, not that sub-stages ran elsewhere
    async def main():
        for _ in range(40):
            with ap.stage("fetch"):
                await asyncio.sleep(0.002)
    with ap.Profiler(compensate=False, max_spans=10) as prof:
        asyncio.run(main())
    rep = prof.report()
    fetch = rep["fetch"]
    assert rep.spans_dropped > 0 and fetch.suspended == 40
    assert fetch.self_wall == pytest.approx(fetch.self_time)
    assert not fetch.awaited_sub_stages
    assert "tasks it awaited" not in str(rep)
