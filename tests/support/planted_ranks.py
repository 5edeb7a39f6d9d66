"""Two gloo ranks on this host, each profiling STEPS steps of `compute`
then `all_reduce`; rank 1's compute takes SLOW seconds longer, asleep or
computing (argv[1]: "sleep" or "spin"), the run sampled every argv[2]
seconds or not ("none"). The reports are gathered on rank 0; the main
process prints, as JSON, what the merged report's diagnosis says of both
stages and which stages rank_waits names.

    python planted_ranks.py sleep|spin none|SECONDS

Run in fresh processes, so that each rank imports only what a user's
script would and no profiler of the test's is about."""
import json
import os
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing

import aquaprof as ap
from aquaprof.analysis.stragglers import rank_waits

STEPS = 20
SLOW = 0.03
TIMEOUT = timedelta(seconds=60)   # a hang fails the test, never stalls it


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def rank_main(rank, port, slow, sample, out):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, None, False, TIMEOUT)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2,
                            timeout=TIMEOUT)
    grad = torch.ones(1 << 16)
    with ap.Profiler(sample=sample) as prof:
        dist.barrier()
        for _ in range(STEPS):
            with ap.stage("step"):
                with ap.stage("compute"):
                    sum(range(20000))
                    if rank == 1:
                        slow(SLOW)
                with ap.stage("all_reduce"):
                    dist.all_reduce(grad)
    merged = ap.distributed.gather(prof.report())
    if merged is not None:
        merged.save(os.path.join(out, "merged.json"))
    dist.destroy_process_group()


def main(how, sample):
    slow = {"sleep": time.sleep, "spin": spin}[how]
    sample = None if sample == "none" else float(sample)
    out = tempfile.mkdtemp()
    # the store listens here on a port the kernel picks, held all through
    store = dist.TCPStore("127.0.0.1", 0, None, True, TIMEOUT,
                          wait_for_workers=False)
    torch.multiprocessing.spawn(rank_main,
                                args=(store.port, slow, sample, out),
                                nprocs=2, join=True)
    merged = ap.Report.load(os.path.join(out, "merged.json"))
    found = {f.path: {"kind": f.kind, "evidence": f.evidence, "fix": f.fix}
             for f in merged.diagnose(top=3)}
    print(json.dumps({"findings": found,
                      "waits": sorted(rank_waits(merged)),
                      "labels": [p["label"] for p in merged.processes]}))


if __name__ == "__main__":
    main(*sys.argv[1:3])
