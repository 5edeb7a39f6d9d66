"""Calls parked at an await when the run ends, or when a live or nested
report is taken: their thread ran other tasks meanwhile, so its CPU time
is not theirs. They are flagged suspended with no CPU time, as a call
that awaited and then exited is, and never read as cpu-bound."""
import asyncio
import threading
import time

import aquaprof as ap

PARKED = 20


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def parked():
    with ap.stage("parked"):
        await asyncio.sleep(60)


async def busy():
    with ap.stage("busy"):
        spin(0.15)


def assert_parked(stats, calls=PARKED):
    assert stats.count == calls
    assert stats.unclosed == calls
    assert stats.suspended == calls
    assert stats.cpu == 0


def finding(rep, path):
    return next(f for f in rep.diagnose(top=5).findings if f.path == path)


def test_tasks_parked_in_a_stage_at_stop_are_awaiting_not_cpu_bound():
    async def main():
        prof = ap.Profiler()
        prof.start()
        tasks = [asyncio.create_task(parked()) for _ in range(PARKED)]
        await asyncio.sleep(0.01)
        await busy()
        prof.stop()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return prof.report()

    rep = asyncio.run(main())
    assert_parked(rep["parked"])
    # the thread's CPU time is the busy stage's, not theirs
    assert rep["busy"].cpu > 0
    assert finding(rep, "parked").host == "awaiting"
    text = str(rep)
    assert f"up to {PARKED} at once" in text
    assert "dropped (max_spans)" not in text
    spans = rep.spans()
    mine = spans[spans["stage"] == rep["parked"].id]
    assert (mine["flags"] & 4).all() and (mine["cpu_ns"] == 0).all()


def test_the_callers_own_stage_keeps_its_cpu_time_unless_it_awaited():
    """stop() inside a task: its stage open since before an await was
    left there; one entered since was not."""
    async def main():
        prof = ap.Profiler()
        prof.start()
        with ap.stage("across an await"):
            await asyncio.sleep(0.01)
            with ap.stage("since the await"):
                spin(0.1)
                prof.stop()
        return prof.report()

    rep = asyncio.run(main())
    assert rep["across an await"].suspended == 1
    assert rep["across an await"].cpu == 0
    inner = rep["across an await/since the await"]
    assert inner.suspended == 0 and inner.unclosed == 1
    assert inner.cpu > 0


def test_a_thread_whose_loop_ends_with_tasks_parked_in_stages():
    """The tasks' stages close when their thread ends: each had been
    left at an await."""
    async def leave_open():
        ap.stage("left open").__enter__()   # never exited
        await asyncio.sleep(60)

    async def main():
        tasks = [asyncio.create_task(leave_open()) for _ in range(PARKED)]
        await asyncio.sleep(0.01)
        spin(0.1)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    with ap.Profiler() as prof:
        thread = threading.Thread(target=asyncio.run, args=(main(),))
        thread.start()
        thread.join()
    rep = prof.report()
    assert_parked(rep["left open"])
    assert finding(rep, "left open").host == "awaiting"


def test_a_snapshot_and_a_nested_profiler_flag_parked_calls_alike():
    async def main():
        outer = ap.Profiler(window=8)
        outer.start()
        tasks = [asyncio.create_task(parked()) for _ in range(PARKED)]
        await asyncio.sleep(0.01)
        inner = ap.Profiler()
        inner.start()
        tasks += [asyncio.create_task(parked()) for _ in range(PARKED)]
        await asyncio.sleep(0.01)
        await busy()
        live = outer.snapshot()
        inner.stop()
        outer.stop()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return live, inner.report(), outer.report()

    live, inner, outer = asyncio.run(main())
    for rep, calls in ((inner, PARKED), (outer, 2 * PARKED)):
        assert_parked(rep["parked"], calls)
    spans = live.spans()
    mine = spans[spans["stage"] == list(live.stages).index("parked")]
    assert len(mine) == 2 * PARKED
    assert (mine["flags"] & 4).all() and (mine["cpu_ns"] == 0).all()
