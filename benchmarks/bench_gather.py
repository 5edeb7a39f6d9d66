"""Cost of aquaprof.distributed.gather: W ranks of a gloo job on this host,
each with a report of S raw spans, gather them on rank 0.

    python benchmarks/bench_gather.py [--ranks W] [--spans S ...]
                                      [--repeats R]

For each S: the bytes of one rank's report as it travels (its JSON, spans
compressed), and the median over R rounds of gather's wall time on rank 0
(the collective plus decoding and merging) and on the others (serialising
and sending), each round started together after a barrier.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def rank_main(rank, world, port, spans, repeats, out):
    import torch.distributed as dist

    import aquaprof as ap

    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    store = dist.TCPStore("127.0.0.1", port, None, False,
                          timedelta(seconds=300))
    dist.init_process_group("gloo", store=store, rank=rank,
                            world_size=world)
    figures = {}
    for n in spans:
        with ap.Profiler(max_spans=n, memory=False) as prof:
            for _ in range(n // 2):
                with ap.stage("step"):
                    with ap.stage("compute"):
                        pass
        rep = prof.report()
        size = len(json.dumps(rep.to_dict(), separators=(",", ":")))
        times = []
        for _ in range(repeats):
            dist.barrier()
            start = time.perf_counter()
            ap.distributed.gather(rep)
            times.append(time.perf_counter() - start)
        figures[n] = (size, statistics.median(times))
    Path(out, f"{rank}.json").write_text(json.dumps(figures))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--spans", type=int, nargs="+",
                        default=[1_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import torch.distributed as dist
    import torch.multiprocessing as mp

    store = dist.TCPStore("127.0.0.1", 0, None, True,
                          timedelta(seconds=300), wait_for_workers=False)
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(rank_main, args=(args.ranks, store.port, args.spans,
                                  args.repeats, out),
                 nprocs=args.ranks, join=True)
        figures = [json.loads(Path(out, f"{r}.json").read_text())
                   for r in range(args.ranks)]
    print(f"gather of {args.ranks} gloo ranks on one host, median of "
          f"{args.repeats}")
    print(f"{'spans a rank':>12}  {'bytes a rank':>12}  {'rank 0 (s)':>10}  "
          f"{'others (s)':>10}")
    for n in args.spans:
        size, on_dst = figures[0][str(n)]
        others = max(f[str(n)][1] for f in figures[1:]) \
            if args.ranks > 1 else 0.0
        print(f"{n:>12,}  {size:>12,}  {on_dst:>10.4f}  {others:>10.4f}")


if __name__ == "__main__":
    main()
