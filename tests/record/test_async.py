"""Stages in asyncio programs: each task keeps its own stage stack, so
tasks interleaved at their awaits never nest into one another, and
@aquaprof.stage times coroutines, async generators and generators."""
import asyncio
import functools
import inspect
import json
import multiprocessing
import re
import threading
import time

import pytest

import aquaprof as ap
from aquaprof import _core
from aquaprof.views.trace import chrome_trace


def spin(seconds):
    loop_until = asyncio.get_event_loop().time() + seconds
    while asyncio.get_event_loop().time() < loop_until:
        pass


async def task_holding_a_stage_across_awaits(i):
    with ap.stage("task"):
        await asyncio.sleep(0.01)
        with ap.stage("work"):
            sum(range(2000))
        await asyncio.sleep(0)


def test_a_hundred_gathered_tasks_each_get_their_own_stack():
    async def main():
        await asyncio.gather(*(task_holding_a_stage_across_awaits(i)
                               for i in range(100)))

    with ap.Profiler() as prof:
        with ap.stage("serve"):
            asyncio.run(main())
    rep = prof.report()
    assert [s.path for s in rep.stages] == [
        "serve", "serve/task", "serve/task/work"]
    task, work = rep["serve/task"], rep["serve/task/work"]
    assert task.count == 100 and work.count == 100
    assert rep.unclosed == 0
    # each task's own figures: at least its own sleep, and self time is
    # its wall less its own work only, not the other tasks'
    assert task.wall.min >= 0.01
    assert task.self_time == pytest.approx(task.wall.total - work.wall.total,
                                           abs=1e-6)
    # suspended at an await: no CPU time of their own; the work is not
    assert task.suspended == 100 and task.cpu == 0
    assert work.suspended == 0 and work.cpu > 0
    assert rep["serve"].suspended == 0 and rep["serve"].cpu > 0
    assert "suspended at an await" in str(rep)
    assert rep.diagnose().findings  # never fails on such a report
    kinds = {f.path: f.kind for f in rep.diagnose(top=3).findings}
    assert kinds["serve/task"] == "awaiting"


def test_tasks_computing_between_short_awaits_hold_the_loop_not_await():
    # sampled: the loop ran each stage's tasks, computing, or ran others
    @ap.stage("compute")
    async def compute():
        for _ in range(3):
            spin(0.005)
            with ap.stage("log"):    # a sub-stage takes none of its time
                pass
            await asyncio.sleep(0)

    @ap.stage("block")
    async def block():
        for _ in range(3):
            time.sleep(0.005)        # a blocking call on the loop
            await asyncio.sleep(0)

    async def nap():
        with ap.stage("nap"):
            await asyncio.sleep(0.1)

    async def main():
        await asyncio.gather(*(nap() for _ in range(50)))
        await asyncio.gather(*(compute() for _ in range(10)))
        await asyncio.gather(*(block() for _ in range(10)))
    with ap.Profiler(sample=0.001) as prof:
        asyncio.run(main())
    rep = prof.report()
    found = {f.path: f for f in rep.diagnose(top=3).findings}
    assert found["compute"].kind == "cpu-bound", found["compute"].evidence
    assert "it holds the loop" in found["compute"].evidence
    assert "asyncio.to_thread" in found["compute"].fix
    assert found["block"].kind == "waiting", found["block"].evidence
    assert "a call that blocks holds the loop" in found["block"].evidence
    assert "asyncio form" in found["block"].fix
    assert found["nap"].kind == "awaiting", found["nap"].evidence
    # unsampled, the loop's CPU cannot be told apart: the finding says so
    with ap.Profiler() as prof:
        asyncio.run(main())
    found = {f.path: f for f in prof.report().diagnose(top=3).findings}
    assert found["compute"].kind == "awaiting"
    assert "sample the run" in found["compute"].evidence


def requests_beside_a_render():
    """20 requests await 1 ms of I/O while one computes 50 ms on the
    event loop, three times; then 20 naps of 50 ms."""
    async def handle(i):
        with ap.stage("request"):
            await asyncio.sleep(0.001)
            if i == 0:
                with ap.stage("render"):
                    spin(0.05)

    async def nap():
        with ap.stage("nap"):
            await asyncio.sleep(0.05)

    async def main():
        for _ in range(3):
            await asyncio.gather(*(handle(i) for i in range(21)))
        await asyncio.gather(*(nap() for _ in range(20)))
    with ap.Profiler(sample=0.001) as prof:
        asyncio.run(main())
    return prof.report()


def test_requests_waiting_while_one_renders_on_the_loop_name_the_render():
    """The requests wait for the loop, not for I/O, and their finding
    says what held it. Requests that only sleep name nothing."""
    found = {f.path: f for f in
             requests_beside_a_render().diagnose(top=3).findings}
    request = found["request"]
    assert request.kind == "awaiting", request.evidence
    assert "the event loop computed in request/render" in request.evidence
    assert request.fix.startswith("its tasks waited for the event loop, "
                                  "busy in request/render"), request.fix
    assert found["request/render"].kind == "cpu-bound"
    nap = found["nap"]
    assert nap.kind == "awaiting" and "event loop computed" not in \
        nap.evidence, nap.evidence


def test_a_gpu_class_keeps_its_fix_where_the_loop_was_held(monkeypatch):
    """An awaiting stage that a GPU class took over (its calls block on
    the device) keeps that class's fix; what held the loop stays in its
    evidence."""
    from aquaprof.analysis import diagnose
    real = diagnose._gpu_class
    monkeypatch.setattr(diagnose, "_gpu_class", lambda stage: (
        ("sync-bound", "host blocked on the device 40.0 ms of 50.0 ms "
                       "wall (80 %)") if stage.path == "request"
        else real(stage)))
    found = {f.path: f for f in
             requests_beside_a_render().diagnose(top=3).findings}
    request = found["request"]
    assert request.kind == "sync-bound", request.evidence
    assert "the event loop computed in request/render" in request.evidence
    assert request.fix == diagnose._FIXES["sync-bound"][0], request.fix


async def holds_its_loop_three_eighths():
    # each call blocks its loop 3 ms of every 8: 37 % of its time
    with ap.stage("serve"):
        for _ in range(12):
            time.sleep(0.003)
            await asyncio.sleep(0.005)


def serve_on_its_own_loop(path=None):
    """One process's run of holds_its_loop_three_eighths, saved to
    `path` when given."""
    with ap.Profiler(sample=0.001) as prof:
        asyncio.run(holds_its_loop_three_eighths())
    if path:
        prof.report().save(path)
    return prof


def test_loops_running_a_stage_at_once_are_each_judged_on_their_own_clock():
    # two loops each held 37 % of the time, at the same time: summed on
    # the run's clock they would read 75 % and be said to hold the loop
    with ap.Profiler(sample=0.001) as prof:
        threads = [threading.Thread(target=asyncio.run,
                                    args=(holds_its_loop_three_eighths(),))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rep = prof.report()
    assert rep["serve"].at_once == 2
    found = {f.path: f for f in rep.diagnose(top=3).findings}
    assert found["serve"].kind == "awaiting", found["serve"].evidence
    assert "on its 2 threads' clocks" in found["serve"].evidence


def test_processes_running_a_stage_at_once_are_judged_on_their_own_clocks(
        tmp_path):
    paths = [tmp_path / f"{i}.aqp" for i in range(2)]
    forked = multiprocessing.get_context("fork")
    children = [forked.Process(target=serve_on_its_own_loop, args=(p,))
                for p in paths]
    for child in children:
        child.start()
    for child in children:
        child.join()
        assert child.exitcode == 0
    merged = ap.merge([ap.Report.load(p) for p in paths])
    found = {f.path: f for f in merged.diagnose(top=3).findings}
    assert found["serve"].kind == "awaiting", found["serve"].evidence
    ran = re.search(r"threads' clocks \((\d+) %\)", found["serve"].evidence)
    assert ran and 20 <= int(ran[1]) <= 50, found["serve"].evidence


def test_a_stage_held_across_an_await_does_not_collect_other_tasks():
    order = []

    async def holder():
        with ap.stage("hold"):
            order.append("hold in")
            await asyncio.sleep(0.02)
            order.append("hold out")

    async def other():
        await asyncio.sleep(0.005)
        for _ in range(3):
            with ap.stage("other"):
                spin(0.001)
        order.append("other done")

    async def main():
        await asyncio.gather(holder(), other())

    with ap.Profiler() as prof:
        asyncio.run(main())
    rep = prof.report()
    assert order == ["hold in", "other done", "hold out"]  # interleaved
    assert {s.path for s in rep.stages} == {"hold", "other"}
    assert rep["hold"].self_time == pytest.approx(rep["hold"].wall.total)
    assert rep["other"].count == 3 and rep["other"].cpu > 0.002


def test_tasks_created_inside_a_stage_nest_under_it():
    async def child():
        with ap.stage("child"):
            await asyncio.sleep(0.001)

    async def request():
        with ap.stage("request"):
            await asyncio.gather(asyncio.create_task(child()),
                                 asyncio.create_task(child()))
        await asyncio.create_task(child())   # created outside the stage

    with ap.Profiler() as prof:
        asyncio.run(request())
    rep = prof.report()
    assert rep["request/child"].count == 2
    assert rep["child"].count == 1


def test_without_a_profiler_asyncio_programs_are_untouched():
    async def main():
        await asyncio.gather(*(task_holding_a_stage_across_awaits(i)
                               for i in range(20)))
        return "done"

    assert asyncio.run(main()) == "done"


@ap.stage
async def fetch(delay, value):
    await asyncio.sleep(delay)
    return value


@ap.stage("failing fetch")
async def failing_fetch():
    await asyncio.sleep(0)
    raise KeyError("missing")


class Client:
    @ap.stage
    async def get(self, x):
        await asyncio.sleep(0)
        return x * 2


async def _numbers(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


numbers = ap.stage("numbers")(_numbers)


def test_staged_coroutine_functions_time_the_awaited_run():
    assert inspect.iscoroutinefunction(fetch)
    assert fetch.__name__ == "fetch" and fetch.stage_name == "fetch"

    async def main():
        results = await asyncio.gather(fetch(0.02, 1), fetch(0.02, 2))
        with pytest.raises(KeyError):
            await failing_fetch()
        return results, await Client().get(4)

    with ap.Profiler() as prof:
        assert asyncio.run(main()) == ([1, 2], 8)
    rep = prof.report()
    assert rep["fetch"].count == 2 and rep["fetch"].wall.min >= 0.02
    assert rep["failing fetch"].raised == 1
    assert rep["Client.get"].count == 1


def test_staged_partial_of_a_coroutine_function():
    quick = ap.stage("quick")(functools.partial(fetch.__wrapped__, 0))

    with ap.Profiler() as prof:
        assert asyncio.run(quick("v")) == "v"
    assert prof.report()["quick"].count == 1
    with pytest.raises(TypeError, match="pass a name"):
        ap.stage(functools.partial(fetch.__wrapped__, 0))


def test_staged_async_generators_count_each_step():
    assert inspect.isasyncgenfunction(numbers)

    async def consume():
        got = []
        async for x in numbers(3):
            with ap.stage("consume"):
                got.append(x)
        return got

    with ap.Profiler() as prof:
        assert asyncio.run(consume()) == [0, 1, 2]
    rep = prof.report()
    assert rep["numbers"].count == 4          # three values and the end
    assert rep["consume"].count == 3          # the consumer's own stage
    assert "numbers/consume" not in rep


def test_staged_async_generators_pass_asend_athrow_and_aclose_on():
    log = []

    @ap.stage("echo")
    async def echo():
        try:
            received = None
            while True:
                try:
                    received = yield received
                except ValueError as exc:
                    received = f"caught {exc}"
        finally:
            log.append("closed")

    async def main():
        gen = echo()
        await gen.asend(None)
        a = await gen.asend("x")
        b = await gen.athrow(ValueError("bad"))
        await gen.aclose()
        return a, b

    with ap.Profiler() as prof:
        assert asyncio.run(main()) == ("x", "caught bad")
    assert log == ["closed"]
    assert prof.report()["echo"].count == 3


def test_staged_generators_time_their_own_steps():
    @ap.stage("produce")
    def produce(n):
        for i in range(n):
            yield i
        return "end"

    def consume():
        gen = produce(2)
        out = []
        while True:
            try:
                out.append(next(gen))
            except StopIteration as stop:
                out.append(stop.value)
                return out

    assert inspect.isgeneratorfunction(produce)
    with ap.Profiler() as prof:
        assert consume() == [0, 1, "end"]
        assert list(produce(3)) == [0, 1, 2]
    assert prof.report()["produce"].count == 3 + 4


def test_event_loops_on_two_threads_keep_their_own_stacks():
    import threading

    def run_loop():
        async def main():
            await asyncio.gather(*(task_holding_a_stage_across_awaits(i)
                                   for i in range(10)))
        asyncio.run(main())

    with ap.Profiler() as prof:
        threads = [threading.Thread(target=run_loop) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rep = prof.report()
    assert rep["task"].count == 20 and rep["task/work"].count == 20
    assert rep.unclosed == 0


def _nests(events):
    """Whether the complete events of one track nest properly."""
    open_ends = []
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        end = e["ts"] + e["dur"]
        while open_ends and open_ends[-1] <= e["ts"] + 1e-3:
            open_ends.pop()
        if open_ends and end > open_ends[-1] + 1e-3:
            return False
        open_ends.append(end)
    return True


def test_trace_puts_interleaved_tasks_on_their_own_lanes():
    async def main():
        await asyncio.gather(*(task_holding_a_stage_across_awaits(i)
                               for i in range(5)))

    with ap.Profiler() as prof:
        with ap.stage("serve"):
            asyncio.run(main())
    events = json.loads(chrome_trace(prof.report()))["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    tracks = {}
    for e in spans:
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    assert len(tracks) >= 5       # the thread's own track and task lanes
    assert all(_nests(t) for t in tracks.values())
    lanes = [e for e in events if e["ph"] == "M" and "task lane" in
             str(e.get("args", {}).get("name", ""))]
    assert len(lanes) == len(tracks) - 1
    assert sum(1 for e in spans if e["args"].get("suspended")) == 5


def test_a_synchronous_run_keeps_one_track_per_thread():
    with ap.Profiler() as prof:
        for _ in range(3):
            with ap.stage("a"):
                with ap.stage("b"):
                    pass
    events = json.loads(chrome_trace(prof.report()))["traceEvents"]
    assert len({e["tid"] for e in events if e["ph"] == "X"}) == 1
    assert _core.SPAN_SUSPENDED not in set(prof.report().spans()["flags"])


def test_a_profiler_nested_inside_a_task_reports_that_tasks_work():
    async def main():
        with ap.Profiler() as inner:
            await asyncio.gather(*(task_holding_a_stage_across_awaits(i)
                                   for i in range(10)))
        return inner.report()

    with ap.Profiler() as outer:
        with ap.stage("serve"):
            inner = asyncio.run(main())
    assert inner["task"].count == 10 and inner["task/work"].count == 10
    assert inner.unclosed == 0
    assert outer.report()["serve/task"].count == 10


def test_a_coroutine_computing_beside_a_python_thread_is_not_called_blocked():
    # the hog never blocks: what it does not compute of the loop's time
    # it waits for the GIL (a thread spins Python meanwhile) or a CPU;
    # however the shares fall, it holds the loop, and no blocking call
    @ap.stage("hog")
    async def hog():
        for _ in range(30):
            spin(0.01)
            await asyncio.sleep(0)

    def python_thread():
        end = time.perf_counter() + 0.4
        while time.perf_counter() < end:
            pass

    async def main():
        beside = asyncio.create_task(asyncio.to_thread(python_thread))
        await hog()
        await beside
    with ap.Profiler(sample=0.001) as prof:
        asyncio.run(main())
    found = {f.path: f for f in prof.report().diagnose(top=3).findings}
    hog_found = found["hog"]
    assert hog_found.kind in ("cpu-bound", "gil-bound", "cpu-starved",
                              "mixed"), hog_found.evidence
    assert "it holds the loop" in hog_found.evidence
    assert "a call that blocks" not in hog_found.evidence
