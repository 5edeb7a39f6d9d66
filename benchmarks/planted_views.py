"""What the views draw of planted runs whose truth is known, and what
large ones cost:

- asyncio: a stage `gather` around 50 tasks, each a stage `task` that
  awaits 100 ms then computes 2 ms (truth: the run about 0.2 s, the
  tasks' code about 0.1 s of it). Printed: each stage's width in the
  flamegraph and its summed wall time, the code `busy` and the stage's
  awaited time, the top bottlenecks, and the tasks' time in speedscope
  against spans();
- a server: --server tasks open at once, each a stage that awaits
  20 ms; the page timeline's height with its lanes capped
  (timeline.MAX_LANES) and with every lane drawn;
- many spans: --spans tiny calls over 600 stage paths, sampled; the
  size and writing time of the HTML page, the Chrome trace and
  speedscope (both capped at 1,000,000 spans by default).

    .venv/bin/python benchmarks/planted_views.py [--spans 1500000]
        [--server 1000]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aquaprof as ap  # noqa: E402

TASKS = 50


def busy(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def task() -> None:
    with ap.stage("task"):
        await asyncio.sleep(0.1)
        busy(0.002)


async def gather() -> None:
    with ap.stage("gather"):
        await asyncio.gather(*(task() for _ in range(TASKS)))


def tasks_run(folder: Path) -> None:
    with ap.Profiler(sample=0.001) as prof:
        asyncio.run(gather())
    rep = prof.report()
    print(f"asyncio, {TASKS} tasks: run {rep.wall * 1e3:.0f} ms")
    task_id = rep["gather/task"].id
    try:
        drawn(rep, task_id)
    except ImportError:     # a version before the flamegraph's clock
        print("  flamegraph: each stage drawn at its calls' summed time")
    spans = rep.spans()
    scope = json.loads(rep.to_speedscope(folder / "tasks.json").read_text())
    frames = [f["name"] for f in scope["shared"]["frames"]]
    summed = 0
    task = frames.index("gather/task")
    for profile in scope["profiles"]:
        opened = []         # speedscope's events nest: a close ends the last
        for event in profile["events"]:
            if event["type"] == "O":
                opened.append(event["at"])
            elif event["frame"] == task:
                summed += event["at"] - opened.pop()
            else:
                opened.pop()
    truth = int((spans["end_ns"] - spans["start_ns"])[
        spans["stage"] == task_id].sum())
    print(f"  speedscope: the tasks' time {summed * 1e-6:.1f} ms, spans() "
          f"{truth * 1e-6:.1f} ms")


def drawn(rep: "ap.Report", task_id: int) -> None:
    """Each stage's width in the flamegraph, and the task's code."""
    from aquaprof.analysis.sampled_code import AWAITING, code_names, \
        stage_clock, weights
    clock = stage_clock(rep)
    for s in rep.stages:
        print(f"  {s.path}: drawn {clock.width[s.id] * 1e-6:.0f} ms wide, "
              f"its calls summed {s.wall.total * 1e3:.0f} ms, at once "
              f"{s.at_once}, on the clock (self) {s.self_wall * 1e3:.0f} ms")
    names = code_names(rep).names
    for chain, ns in weights(rep).get(task_id, {}).items():
        label = names[chain[-1]]
        if label == AWAITING or label.startswith("busy"):
            print(f"  under task, {label}: {ns * 1e-6:.0f} ms")
    print("  top bottlenecks: " + ", ".join(
        f"{s.path} {s.self_wall * 1e3:.0f} ms" for s in rep.top(2)))


async def request() -> None:
    with ap.stage("request"):
        await asyncio.sleep(0.02)


async def serve(count: int) -> None:
    await asyncio.gather(*(request() for _ in range(count)))


def server(count: int) -> None:
    from aquaprof.views import timeline
    with ap.Profiler(sample=None) as prof:
        asyncio.run(serve(count))
    rep = prof.report()

    def height(svg: str) -> int:
        return int(re.search(r'viewBox="0 0 \d+ (\d+)"', svg).group(1))
    svg, note = timeline.spans_svg(rep)
    capped = height(svg)
    lanes = timeline.MAX_LANES
    timeline.MAX_LANES = count + 1
    try:
        whole = height(timeline.spans_svg(rep)[0])
    finally:
        timeline.MAX_LANES = lanes
    print(f"a server, {count} tasks open at once: the page's timeline "
          f"{capped:,} px tall with {lanes} lanes a thread, {whole:,} px "
          f"with every lane; its note: {note}")


def many_spans(folder: Path, count: int) -> None:
    names = [f"stage{i:03d}" for i in range(600)]
    with ap.Profiler(sample=0.001, max_spans=count) as prof:
        for i in range(count):
            with ap.stage(names[i % 600]):
                pass
    rep = prof.report()
    print(f"{rep.spans_recorded} spans over {len(rep)} stage paths")
    for what, write in (
            ("HTML page", lambda p: rep.to_html(p)),
            ("Chrome trace", lambda p: rep.to_chrome_trace(p)),
            ("speedscope", lambda p: rep.to_speedscope(p))):
        path = folder / what.replace(" ", "_")
        t0 = time.perf_counter()
        write(path)
        took = time.perf_counter() - t0
        print(f"  {what}: {path.stat().st_size / (1 << 20):.1f} MB in "
              f"{took:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=1_500_000)
    parser.add_argument("--server", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tasks_run(Path(tmp))
        server(args.server)
        many_spans(Path(tmp), args.spans)


if __name__ == "__main__":
    main()
