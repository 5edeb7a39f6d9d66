"""The note beside a bottleneck whose time on the run's clock is less
than its calls' self time summed says why, and says spans were dropped
only where they were."""
import asyncio

import aquaprof as ap
from aquaprof.views.text import overlap_note


async def request():
    with ap.stage("request"):
        await asyncio.sleep(0.02)


async def serve():
    await asyncio.gather(*(request() for _ in range(20)))


def test_a_stage_around_an_event_loop_is_not_said_to_have_dropped_spans():
    """A stage around asyncio.run (as `aquaprof run` opens one around a
    server script) whose sub-stages ran in 20 tasks at once: its own
    time on the clock is the time no request was open, all its spans
    were kept, and the note says that the requests ran meanwhile."""
    with ap.Profiler(compensate=False) as prof:
        with ap.stage("run server.py"):
            asyncio.run(serve())
    rep = prof.report()
    outer = rep["run server.py"]
    assert rep.spans_dropped == 0 and outer.at_once == 1
    assert outer.self_wall < 0.5 * outer.self_time
    note = overlap_note(outer)
    assert "dropped" not in note
    assert "its sub-stages ran in other tasks on its thread" in note
    assert "spans were dropped" not in str(rep)

