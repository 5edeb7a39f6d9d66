"""The real programs benchmarks/bench_view_sizes.py --programs profiles,
each run as a user runs it: `aquaprof run [--no-sample] view_programs.py
NAME`.

- server: an asyncio streams server and its client in one process, 200
  requests (20 at a time), each a stage `request` that computes 0.6 ms
  in `compute` and awaits 5 ms;
- idle: a ThreadPoolExecutor of 64 workers blocked on a queue, and one
  thread computing 50 stages `crunch` of 40 ms;
- long: 2,000,000 stage calls of under a microsecond (500,000 of `step`
  holding `decode` and `transform`, and `write`), the size of a long
  run's views past max_spans.

The fourth, a torch training loop with a DataLoader of two workers, is
tests/support/training_script.py --no-profiler --seconds S.
"""
from __future__ import annotations

import asyncio
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402

REQUESTS = 200
IDLE_WORKERS = 64
LONG_CALLS = 2_000_000


async def handle(reader, writer) -> None:
    with ap.stage("request"):
        await reader.readline()
        with ap.stage("compute"):
            total = sum(i * i for i in range(20000))
        await asyncio.sleep(0.005)
        writer.write(b"%d\n" % total)
        await writer.drain()
    writer.close()


async def client(port: int, i: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET %d\n" % i)
    await writer.drain()
    await reader.readline()
    writer.close()


async def serve() -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    for first in range(0, REQUESTS, 20):
        await asyncio.gather(*(client(port, i)
                               for i in range(first, first + 20)))
    server.close()
    await server.wait_closed()


def crunch(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def idle() -> None:
    jobs: "queue.Queue[None]" = queue.Queue()
    pool = ThreadPoolExecutor(IDLE_WORKERS)
    for _ in range(IDLE_WORKERS):
        pool.submit(jobs.get)

    def busy() -> None:
        for _ in range(50):
            with ap.stage("crunch"):
                crunch(0.04)
    worker = threading.Thread(target=busy, name="busy")
    worker.start()
    worker.join()
    for _ in range(IDLE_WORKERS):
        jobs.put(None)
    pool.shutdown()


@ap.stage("decode")
def decode(i: int) -> int:
    return i + 1


def long() -> None:
    for i in range(LONG_CALLS // 4):
        with ap.stage("step"):
            decode(i)
            with ap.stage("transform"):
                pass
        with ap.stage("write"):
            pass


if __name__ == "__main__":
    {"server": lambda: asyncio.run(serve()), "idle": idle,
     "long": long}[sys.argv[1]]()
