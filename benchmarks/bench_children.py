"""What capturing child processes costs: a child's start-to-join with
the parent unprofiled, profiled with children=False, and profiled with
children=True (the child starts its own session, and at exit writes its
report), for each start method; the same for a child that records
`calls` stage calls (its report grows with them); and the parent's
stop() and report() gathering N children's reports, of children that
exited and of children still running (a pool's or persistent DataLoader
workers, asked for their reports at the stop); what a child's thread
looking for that request every REQUEST_CHECK_S costs the child's own
Python work, against one look a second, interleaved; and the parent's
own stage pair with capture on and off, interleaved (nothing on the
stage path changes; bench_overhead.py has the finer measure).

    python benchmarks/bench_children.py [--repeats 7] [--looks 25]
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402

_STEP = ap.stage("step")


def record(calls: int) -> None:
    for _ in range(calls):
        with _STEP:
            pass


def child_round_trip(method: str, calls: int, mode: str) -> float:
    """Seconds from Process.start() to join() of one child."""
    ctx = multiprocessing.get_context(method)
    prof = None if mode == "off" else ap.Profiler(
        memory=False, children=mode == "children")
    if prof is not None:
        prof.start()
    try:
        p = ctx.Process(target=record, args=(calls,))
        t0 = time.perf_counter()
        p.start()
        p.join()
        took = time.perf_counter() - t0
    finally:
        if prof is not None:
            prof.stop()
    if mode == "children":
        assert prof is not None
        assert prof.report().meta["children"]["reported"] == 1
    return took


def gathering(children: int, calls: int) -> tuple:
    """Seconds of the parent's stop() and report() with `children`
    reports of `calls` spans each to read and merge."""
    ctx = multiprocessing.get_context("fork")
    prof = ap.Profiler(memory=False).start()
    procs = [ctx.Process(target=record, args=(calls,))
             for _ in range(children)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    t0 = time.perf_counter()
    prof.stop()
    t1 = time.perf_counter()
    rep = prof.report()
    t2 = time.perf_counter()
    assert rep["step"].count == children * calls
    return t1 - t0, t2 - t1


def record_then_wait(calls: int, ready, go) -> None:
    record(calls)
    ready.set()
    go.wait(60)


def asking(children: int, calls: int) -> tuple:
    """Seconds of the parent's stop() and report() with `children` still
    running, each with `calls` spans to deliver when asked."""
    ctx = multiprocessing.get_context("fork")
    prof = ap.Profiler(memory=False).start()
    go = ctx.Event()
    readies = [ctx.Event() for _ in range(children)]
    procs = [ctx.Process(target=record_then_wait, args=(calls, r, go))
             for r in readies]
    for p in procs:
        p.start()
    for r in readies:
        assert r.wait(60)
    t0 = time.perf_counter()
    prof.stop()
    t1 = time.perf_counter()
    rep = prof.report()
    t2 = time.perf_counter()
    go.set()
    for p in procs:
        p.join()
    assert rep["step"].count == children * calls, rep.meta["children"]
    return t1 - t0, t2 - t1


def python_work(answer) -> None:
    """A child's pure-Python loop, timed in the child."""
    t0 = time.perf_counter()
    total = 0
    for i in range(20_000_000):
        total += i & 7
    answer.put(time.perf_counter() - t0)


def child_work_seconds(check_s: float) -> float:
    """python_work's seconds in a captured forked child whose thread
    looks for its parent's request every check_s."""
    from aquaprof.record.processes import child
    ctx = multiprocessing.get_context("fork")
    answer = ctx.Queue()
    saved, child.REQUEST_CHECK_S = child.REQUEST_CHECK_S, check_s
    try:
        with ap.Profiler(memory=False):
            p = ctx.Process(target=python_work, args=(answer,))
            p.start()
            took = answer.get(timeout=120)
            p.join()
    finally:
        child.REQUEST_CHECK_S = saved
    return took


def look_us(repeats: int = 20_000) -> float:
    """Microseconds of one look of a child's thread for its parent's
    request (a stat, the GIL released), as the thread makes it."""
    import tempfile
    from aquaprof import _core
    from aquaprof.record.processes import folder as files
    with tempfile.TemporaryDirectory() as folder:
        missing = [files.request(folder)]
        t0 = time.perf_counter()
        for _ in range(repeats):
            _core._wait_for_file(missing, 1.0, 0.0)
        return (time.perf_counter() - t0) / repeats * 1e6


def stage_pair_ns(children: bool, pairs: int = 200_000) -> float:
    with ap.Profiler(memory=False, compensate=False, children=children,
                     max_spans=0):
        t0 = time.perf_counter_ns()
        record(pairs)
        took = time.perf_counter_ns() - t0
    return took / pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--looks", type=int, default=25,
                        help="interleaved runs of the child's Python loop "
                             "(its noise is several %% run to run)")
    args = parser.parse_args()
    med = statistics.median
    print(f"child start to join, median of {args.repeats}, ms")
    print(f"{'method':>10} {'calls':>7} {'unprofiled':>11} "
          f"{'children=False':>15} {'children=True':>14} {'added':>8}")
    for method in ("fork", "spawn", "forkserver"):
        for calls in (0, 10_000):
            row = {}
            for mode in ("off", "parent only", "children"):
                row[mode] = med(child_round_trip(method, calls, mode)
                                for _ in range(args.repeats)) * 1e3
            print(f"{method:>10} {calls:>7} {row['off']:>11.1f} "
                  f"{row['parent only']:>15.1f} {row['children']:>14.1f} "
                  f"{row['children'] - row['parent only']:>+8.1f}")
    pairs: dict = {False: [], True: []}
    for _ in range(args.repeats):
        for flag in (False, True):
            pairs[flag].append(stage_pair_ns(flag))
    print(f"\nthe parent's stage pair (loop included), median of "
          f"{args.repeats}: children=False {med(pairs[False]):.1f} ns, "
          f"children=True {med(pairs[True]):.1f} ns")
    for title, gather, sizes in (
            ("", gathering, ((4, 1000), (16, 1000), (4, 100_000))),
            (", the children still running, asked at stop()", asking,
             ((2, 1000), (8, 1000), (2, 100_000)))):
        print(f"\nparent stop() and report() with N children's reports"
              f"{title}, median of {args.repeats}, ms")
        print(f"{'children':>9} {'calls each':>11} {'stop':>8} "
              f"{'report':>8}")
        for children, calls in sizes:
            runs = [gather(children, calls) for _ in range(args.repeats)]
            print(f"{children:>9} {calls:>11} "
                  f"{med(r[0] for r in runs) * 1e3:>8.1f} "
                  f"{med(r[1] for r in runs) * 1e3:>8.1f}")
    from aquaprof.record.processes import child
    print()
    looks: dict = {child.REQUEST_CHECK_S: [], 1.0: []}
    for _ in range(args.looks):
        for check_s in looks:
            looks[check_s].append(child_work_seconds(check_s))
    for name, fn in (("median", med), ("fastest", min)):
        now, once = (fn(looks[c]) * 1e3 for c in looks)
        print(f"a child's Python loop, {name} of {args.looks}: {now:.1f} ms "
              f"with a look every {child.REQUEST_CHECK_S:g} s, {once:.1f} ms "
              f"with one a second ({(now / once - 1) * 100:+.2f} %)")
    look = look_us()
    print(f"one look: {look:.2f} us, {look / child.REQUEST_CHECK_S / 1e4:.4f} "
          f"% of a second's CPU at one look every "
          f"{child.REQUEST_CHECK_S:g} s")


if __name__ == "__main__":
    main()
