"""Cost of the views that draw an asyncio server's tasks on lanes (the
Chrome trace, the HTML page) against how many tasks are open at once:
N tasks gathered, each in two nested stages twice, every stage held
across an await, so that all N overlap on the event loop's thread.

    python benchmarks/bench_task_lanes.py [--tasks 1000 8000]

Prints, for each N, the spans, the seconds to write the trace and the
page, and the trace's microseconds a span; the last line is the largest
N's time a span over the smallest's (1 for a cost linear in the spans,
N_large / N_small for one that scans every lane for every span).
"""
from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aquaprof as ap  # noqa: E402


async def task() -> None:
    for _ in range(2):
        with ap.stage("outer"):
            await asyncio.sleep(0)
            with ap.stage("inner"):
                await asyncio.sleep(0)


async def server(n: int) -> None:
    await asyncio.gather(*(task() for _ in range(n)))


def measure(n: int, folder: Path):
    with ap.Profiler(memory=False) as prof:
        asyncio.run(server(n))
    rep = prof.report()
    start = time.perf_counter()
    rep.to_chrome_trace(folder / f"trace{n}.json")
    trace_s = time.perf_counter() - start
    start = time.perf_counter()
    rep.to_html(folder / f"page{n}.html")
    page_s = time.perf_counter() - start
    return len(rep.spans()), trace_s, page_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[1000, 8000])
    args = parser.parse_args()
    per_span = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.tasks:
            spans, trace_s, page_s = measure(n, Path(tmp))
            per_span.append(trace_s / spans)
            print(f"{n:6d} tasks at once, {spans:7d} spans: trace "
                  f"{trace_s:7.2f} s ({trace_s / spans * 1e6:6.1f} us a "
                  f"span), page {page_s:7.2f} s")
    print(f"trace's time a span, {args.tasks[-1]} tasks against "
          f"{args.tasks[0]}: {per_span[-1] / per_span[0]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
