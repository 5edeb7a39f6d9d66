"""Greenlets (gevent, eventlet) share a thread and switch at will, as
asyncio tasks do at an await: a stage left open across a switch is a
suspended call, whose CPU time the thread clock cannot tell, never a
call charged the CPU of every greenlet that ran meanwhile."""
import time

import pytest

import aquaprof as ap

# requirements-dev.txt installs both; a machine without them (a GPU
# machine's image) skips this file rather than failing the collection
gevent = pytest.importorskip("gevent")
greenlet = pytest.importorskip("greenlet")


def busy(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def quiet():
    return ap.Profiler(compensate=False, memory=False)


def test_greenlets_switching_inside_stages_are_not_charged_each_other():
    main = greenlet.getcurrent()

    def worker(name, work):
        for _ in range(5):
            with ap.stage(name):
                busy(work)
                main.switch()

    start = time.process_time()
    with quiet() as prof:
        workers = [greenlet.greenlet(worker) for _ in range(2)]
        workers[0].switch("computes", 0.01)
        workers[1].switch("idles", 0.0)
        while not all(w.dead for w in workers):
            for w in workers:
                if not w.dead:
                    w.switch()
    used = time.process_time() - start
    rep = prof.report()
    for name in ("computes", "idles"):
        s = rep[name]
        assert s.count == 5 and s.suspended == 5, name
        # charged every greenlet's CPU before: 65 ms for "idles"
        assert s.cpu < 0.005, (name, s.cpu)
    assert sum(s.cpu for s in rep.stages) <= used
    kinds = {d.path: d.kind for d in rep.diagnose(top=5)}
    assert kinds["idles"] != "cpu-bound"


def test_greenlets_parked_in_a_stage_at_stop_get_no_cpu_time():
    """stop() closes the stages of greenlets parked at a switch: suspended,
    as an exit after the switch would have flagged them."""
    main = greenlet.getcurrent()

    def parked():
        with ap.stage("parked"):
            main.switch()

    prof = quiet()
    prof.start()
    waiting = [greenlet.greenlet(parked) for _ in range(10)]
    for g in waiting:
        g.switch()
    with ap.stage("busy"):
        busy(0.05)
    prof.stop()
    # each let finish: one collected while parked is killed by a C++
    # throw, which a sanitized build cannot take
    for g in waiting:
        g.switch()
    assert all(g.dead for g in waiting)
    rep = prof.report()
    s = rep["parked"]
    assert (s.count, s.unclosed, s.suspended, s.cpu) == (10, 10, 10, 0)
    kinds = {d.path: d.host for d in rep.diagnose(top=5)}
    assert kinds["parked"] == "awaiting"


def test_a_gevent_server_shape():
    def request(i):
        with ap.stage("request"):
            with ap.stage("parse"):
                busy(0.002)
            gevent.sleep(0.005)            # the network, cooperatively
            with ap.stage("respond"):
                busy(0.001)

    start = time.process_time()
    with quiet() as prof:
        gevent.joinall([gevent.spawn(request, i) for i in range(30)])
    used = time.process_time() - start
    rep = prof.report()
    assert rep["request"].count == 30
    # each request waits on the others' turns: suspended, CPU left out
    assert rep["request"].suspended == 30
    # the stages that run through keep their own CPU
    assert rep["request/parse"].suspended == 0
    assert 0.8 * 0.06 < rep["request/parse"].cpu < used
    assert sum(s.cpu for s in rep.stages) <= used
    kinds = {d.path: d.kind for d in rep.diagnose(top=5)}
    assert kinds["request"] == "awaiting"
