"""A small torch.distributed job that tests/integrations/test_distributed.py starts with
torch.multiprocessing.spawn: each rank profiles a staged loop (rank SLOW
computes longer, the others wait for it at a barrier), then gathers its
report three ways and writes what it got under the output folder.

Run in fresh processes, so it imports only what a user's script would."""
import os
import time
import traceback
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

import aquaprof as ap

STEPS = 4
SLOW = 2
FAST_COMPUTE = 0.002    # seconds a step computes on every rank but SLOW
SLOW_COMPUTE = 0.025    # and on SLOW
TIMEOUT = timedelta(seconds=60)   # a hang fails the test, never stalls it


def profile_steps(rank):
    """The rank's report: STEPS steps of compute then a barrier, rank + 1
    calls of `load`, and a `log` that only rank 0 runs. The ranks start
    together: init_process_group and the profiler's start return to each
    at its own time."""
    with ap.Profiler() as prof:
        dist.barrier()
        for _ in range(rank + 1):
            with ap.stage("load"):
                time.sleep(0.001)
        for _ in range(STEPS):
            with ap.stage("step"):
                with ap.stage("compute"):
                    time.sleep(SLOW_COMPUTE if rank == SLOW
                               else FAST_COMPUTE)
                with ap.stage("sync"):
                    dist.barrier()
        if rank == 0:
            with ap.stage("log"):
                pass
    return prof.report()


def outcome(call):
    """What a call returned or raised, as one line of text."""
    try:
        got = call()
    except Exception as e:      # the test reads which, and why
        return f"{type(e).__name__}: {e}"
    return "None" if got is None else "Report"


def run_rank(rank, world, port, out):
    out = Path(out)
    # gloo's own connections on the loopback, like its store
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    try:
        store = dist.TCPStore("127.0.0.1", port, None, False, TIMEOUT)
        dist.init_process_group("gloo", store=store, rank=rank,
                                world_size=world, timeout=TIMEOUT)
        rep = profile_steps(rank)
        rep.save(out / f"rank{rank}.json")

        merged = ap.distributed.gather(rep)
        if merged is not None:
            merged.save(out / "merged.json")
        (out / f"all-{rank}.txt").write_text(
            "None" if merged is None else "Report")

        # a group of ranks 0 and 2, gathered on rank 2; rank 1 is outside
        pair = dist.new_group([0, 2])
        sub = ap.distributed.gather(rep, dst=2, group=pair)
        if sub is not None:
            sub.save(out / "pair.json")
        (out / f"pair-{rank}.txt").write_text(
            "None" if sub is None else "Report")

        # rank 1 passes no report: it raises, rank 0 says so, none waits
        sent = {"not": "a report"} if rank == 1 else rep
        (out / f"bad-{rank}.txt").write_text(
            outcome(lambda: ap.distributed.gather(sent)))
        dist.destroy_process_group()
    except BaseException:
        (out / f"failed-{rank}.txt").write_text(traceback.format_exc())
        raise
