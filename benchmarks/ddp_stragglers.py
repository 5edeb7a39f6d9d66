"""Planted stragglers in a real DDP job: is the wait at the all-reduce told
from its cause?

Three gloo ranks train a small MLP with DistributedDataParallel for 10
steps of forward, backward (whose gradient all-reduce meets the ranks)
and opt. Rank 1 is planted 30 ms a step slower in its forward: asleep
("sleep") or computing ("compute"); "none" plants nothing. The merged
report (aquaprof.distributed.gather) is then read as a user would: the
diagnosis of step/backward must be straggler-bound naming rank 1 and
step/forward where a rank was planted, and no stage straggler-bound
where none was.

    .venv/bin/python benchmarks/ddp_stragglers.py --runs 3

Each run is a fresh set of processes; a line a run, then the tally.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

# the repository's aquaprof (the ranks, spawned, take this path too)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

STEPS = 10
SLOW = 1
PLANT = 0.03


def rank_main(rank: int, world: int, port: int, mode: str,
              out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import aquaprof as ap
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    with ap.Profiler() as prof:
        dist.barrier()
        for _ in range(STEPS):
            with ap.stage("step"):
                with ap.stage("forward"):
                    loss = nn.functional.cross_entropy(ddp(x), y)
                    if rank == SLOW and mode == "sleep":
                        time.sleep(PLANT)
                    elif rank == SLOW and mode == "compute":
                        end = time.perf_counter() + PLANT
                        a = torch.randn(128, 128)
                        while time.perf_counter() < end:
                            a = (a @ a).tanh()
                with ap.stage("backward"):
                    loss.backward()
                with ap.stage("opt"):
                    opt.step()
                    opt.zero_grad()
    merged = ap.distributed.gather(prof.report())
    if merged is not None:
        merged.save(out)
    dist.destroy_process_group()


def one_run(mode: str) -> str:
    import torch.multiprocessing as mp
    import aquaprof as ap
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "merged.json")
        try:
            mp.spawn(rank_main, args=(3, port, mode, out), nprocs=3,
                     join=True)
        except mp.ProcessExitedException as e:
            # a rank aborted at its exit now and then ("terminate called
            # without an active exception"), the profiler on or off:
            # torch's gloo teardown, after the report was gathered
            if not Path(out).exists():
                raise
            print(f"(after the gather: {e})", flush=True)
        merged = ap.Report.load(out)
    found = {f.path: f for f in merged.diagnose(top=3)}
    backward = found.get("step/backward")
    named = [f"{p}: {f.kind}" for p, f in found.items()]
    print(f"{mode:8s} " + "; ".join(named), flush=True)
    waits = [f for f in found.values() if f.kind == "straggler-bound"]
    if mode == "none":
        return "right" if not waits else "wrong"
    return "right" if (
        backward is not None and backward.kind == "straggler-bound"
        and f"rank {SLOW}" in backward.evidence.split(":")[0]
        and "slowest in step/forward" in backward.evidence
        and waits == [backward]) else "wrong"


def main(argv: list) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--modes", nargs="*", default=["sleep", "compute", "none"],
                   choices=["sleep", "compute", "none"])
    a = p.parse_args(argv)
    tally = {}
    for mode in a.modes:
        for _ in range(a.runs):
            tally.setdefault(mode, []).append(one_run(mode))
    for mode, got in tally.items():
        print(f"{mode}: {got.count('right')} of {len(got)} right")
    return 0 if all(g == "right" for v in tally.values() for g in v) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
