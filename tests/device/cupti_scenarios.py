"""CUPTI tracing on a real GPU, one scenario per process: the driver and
CUPTI stay loaded for a process's life, so a scenario that spoils them
must not hide the next one's result.

    python3 tests/device/cupti_scenarios.py NAME

Each prints one line, 'RESULT {json}', holding what it EXPECTs, what it
got and ok; it exits 0 when the expectation holds and 1 when it does not
(or when the scenario could not run), so that gpu-check's summary says
FAILED for a real fault."""
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import aquaprof as ap  # noqa: E402
from aquaprof import _core
from aquaprof.model import schema

# a kernel's timestamps and a span's come from one clock, but CUPTI
# converts the device's: a few microseconds of skew are its own
SKEW_NS = 50_000
MATRICES = 1024
GOT = {}        # what a scenario found so far, reported even if it raises


def result(expect, ok):
    name = sys.argv[1]
    print("RESULT " + json.dumps({"scenario": name, "ok": bool(ok),
                                  "EXPECT": expect, **GOT}, default=str),
          flush=True)
    sys.exit(0 if ok else 1)


def cuda_torch():
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    return torch


def matrices(torch):
    x = torch.randn(MATRICES, MATRICES, device="cuda")
    w = torch.randn(MATRICES, MATRICES, device="cuda") / MATRICES ** 0.5
    torch.mm(x, w)      # cuBLAS sets itself up outside what is measured
    torch.cuda.synchronize()
    return x, w


def kernels(rep):
    """The report's kernel events, each with its stage's path."""
    ev = rep.gpu_events()
    if ev is None:
        return np.zeros(0, dtype=_core.GPU_DTYPE), []
    ev = ev[ev["kind"] == schema.KERNEL]
    names = rep.stage_names
    return ev, [names[s] if s >= 0 else None for s in ev["stage"]]


def kernels_in(rep, path):
    _, paths = kernels(rep)
    return sum(p == path for p in paths)


def kernel_names(rep, ev):
    return {rep.gpu["kernel_names"][i] for i in ev["name"]}


# ----------------------------------------------------------- scenarios
def pipeline():
    """A torch pipeline and the plane sweep, each stage waiting for its
    own work: every kernel must lie inside the span that launched it."""
    torch = cuda_torch()
    from aquaprof import mvs
    from aquaprof.mvs import scenes
    x, w = matrices(torch)
    host = torch.randn(1 << 20).pin_memory()
    sc = scenes.make_scene("flat", views=3, height=96, width=128)
    depths = np.linspace(*sc.depth_range(0.03), 16)
    ref = torch.as_tensor(sc.ref, device="cuda")
    srcs = torch.as_tensor(np.stack(sc.images[1:]), device="cuda")
    steps = 5
    with ap.Profiler(cuda=True) as prof:
        for _ in range(steps):
            with ap.stage("h2d"):
                host.to("cuda", non_blocking=True)
                torch.cuda.synchronize()
            with ap.stage("compute"):
                y = x
                for _ in range(4):
                    y = torch.mm(y, w)
                with ap.stage("norm"):
                    torch.nn.functional.layer_norm(y, y.shape[-1:])
                    torch.cuda.synchronize()
        with ap.stage("cost volume"):
            volume = mvs.build_cost_volume(ref, srcs, sc.ref_cam,
                                           sc.cameras[1:], depths)
            torch.cuda.synchronize()
        with ap.stage("depth"):
            mvs.extract_depth(volume, depths)
            torch.cuda.synchronize()
    rep = prof.report()
    ev, paths = kernels(rep)
    spans = rep.spans()
    linked = ev[ev["span"] >= 0]
    lead = linked["start_ns"] - spans["start_ns"][linked["span"]]
    lag = linked["end_ns"] - spans["end_ns"][linked["span"]]
    per_stage = {p: paths.count(p) for p in sorted(set(paths), key=str)}
    sweep = {p: sorted(kernel_names(rep, ev[[q == p for q in paths]]))
             for p in ("cost volume", "depth")}
    GOT.update(status=rep.gpu_status, kernels=per_stage, sweep=sweep,
               not_linked=int((ev["span"] < 0).sum()),
               zero_timestamps=int(((ev["start_ns"] == 0)
                                    | (ev["end_ns"] == 0)).sum()),
               start_before_span_ns=int(-lead.min()) if len(lead) else None,
               end_after_span_ns=int(lag.max()) if len(lag) else None)
    ok = (len(ev) > 0 and GOT["not_linked"] == 0
          and GOT["zero_timestamps"] == 0
          and (lead >= -SKEW_NS).all() and (lag <= SKEW_NS).all()
          and per_stage.get("compute", 0) >= 4 * steps
          and per_stage.get("compute/norm", 0) >= steps
          and "ap_strip_ncc_r5_kernel" in sweep["cost volume"]
          and "ap_extract_kernel" in sweep["depth"])
    result("every kernel linked to its span and inside it (within "
           f"{SKEW_NS // 1000} us: each stage waits for its work), no zero "
           f"timestamp; compute >= {4 * steps} kernels, compute/norm >= "
           f"{steps}, ap_strip_ncc_r5_kernel in 'cost volume', "
           "ap_extract_kernel in 'depth'", ok)


def torch_profiler():
    """torch.profiler before, during and after an aquaprof run."""
    torch = cuda_torch()
    from torch.profiler import ProfilerActivity, profile
    x, w = matrices(torch)
    n = 10

    def launch():
        for _ in range(n):
            torch.mm(x, w)
        torch.cuda.synchronize()

    def theirs(when):
        with profile(activities=[ProfilerActivity.CUDA]) as kp:
            launch()
        GOT[f"torch.profiler {when}: its kernels"] = sum(
            e.device_type == torch.autograd.DeviceType.CUDA
            for e in kp.events())

    theirs("before")
    with ap.Profiler(cuda=True) as prof:
        with ap.stage("before"):
            launch()
        with ap.stage("during"):
            theirs("during")
        with ap.stage("after"):
            launch()
    rep = prof.report()
    GOT["status"] = rep.gpu_status
    for stage in ("before", "during", "after"):
        GOT[f"aquaprof: kernels in '{stage}'"] = kernels_in(rep, stage)
    theirs("after")
    with ap.Profiler(cuda=True) as again:
        with ap.stage("again"):
            launch()
    GOT["aquaprof run after torch.profiler: kernels"] = kernels_in(
        again.report(), "again")
    # CUPTI serves one client: torch.profiler started inside a run takes it
    # over for the rest of that run, which must then say so; runs before
    # and after it trace in full, and its own trace is whole each time
    took_over = "took CUPTI over" in GOT["status"]
    whole = all(GOT[f"aquaprof: kernels in '{s}'"] >= n
                for s in ("before", "during", "after"))
    result(f"torch.profiler's trace holds >= {n} kernels each time; the "
           f"aquaprof run after it records >= {n}; the run around it "
           f"records every stage or says CUPTI was taken over",
           all(GOT[f"torch.profiler {w}: its kernels"] >= n
               for w in ("before", "during", "after"))
           and GOT["aquaprof run after torch.profiler: kernels"] >= n
           and (whole or took_over))


def open_stage():
    """A stage still open at stop(): the next run must not give its work
    to that stage."""
    torch = cuda_torch()
    x, w = matrices(torch)
    first = ap.Profiler(cuda=True)
    first.start()
    with ap.stage("left open"):
        torch.mm(x, w)
        first.stop()
    GOT["first run: stages flagged unclosed"] = first.report().unclosed
    with ap.Profiler(cuda=True) as prof:
        with ap.stage("x"):
            torch.mm(x, w)
            torch.cuda.synchronize()
        torch.mm(x, w)          # the same work, outside any stage
        torch.cuda.synchronize()
    rep = prof.report()
    _, paths = kernels(rep)
    GOT.update(kernels_in_x=paths.count("x"),
               kernels_outside_any_stage=paths.count(None),
               kernels_in_left_open=sum(p is not None and "left open" in p
                                        for p in paths),
               unattributed=rep.gpu["unattributed"] if rep.gpu else None)
    result("the second run gives 'left open' no kernel, and 'x' as many "
           "kernels (>= 1) as the same work outside any stage",
           GOT["kernels_in_left_open"] == 0 and GOT["kernels_in_x"] >= 1
           and GOT["kernels_in_x"] == GOT["kernels_outside_any_stage"])


def stop_thread():
    """Work on a worker thread and its own stream, still running when a
    third thread, which never used CUDA, calls stop()."""
    torch = cuda_torch()
    x, w = matrices(torch)
    mm = 5
    launched = threading.Event()
    prof = ap.Profiler(cuda=True)
    prof.start()

    def worker():
        try:
            side = torch.cuda.Stream()
            with torch.cuda.stream(side), ap.stage("worker"):
                torch.cuda._sleep(500_000_000)      # about 0.3 s on the GPU
                for _ in range(mm):
                    torch.mm(x, w)
        except Exception as e:
            GOT["worker_raised"] = repr(e)[:200]
        finally:
            launched.set()

    def stopper():
        launched.wait()
        start = time.perf_counter()
        try:
            prof.stop()
        except Exception as e:   # the report below says what it lost
            GOT["stop_raised"] = repr(e)[:200]
        GOT["stop_waited_s"] = round(time.perf_counter() - start, 3)

    threads = [threading.Thread(target=worker),
               threading.Thread(target=stopper)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.cuda.synchronize()
    rep = prof.report()
    ev, paths = kernels(rep)
    mine = ev[[p == "worker" for p in paths]]
    GOT.update(status=rep.gpu_status, kernels=len(ev),
               kernels_in_worker=len(mine),
               zero_timestamps=int(((ev["start_ns"] == 0)
                                    | (ev["end_ns"] == 0)).sum()),
               end_before_start=int((ev["end_ns"] < ev["start_ns"]).sum()),
               streams=sorted({int(s) for s in mine["stream"]}))
    result(f"the worker's {mm + 1} kernels (a sleep and {mm} matrix "
           "products on its stream) are in stage 'worker', none has a zero "
           "timestamp or ends before it starts",
           GOT["kernels_in_worker"] >= mm + 1 and GOT["zero_timestamps"] == 0
           and GOT["end_before_start"] == 0 and "stop_raised" not in GOT
           and "worker_raised" not in GOT)


FORK_CHILD_TIMEOUT_S = 60


def fork_once():
    """In its own process: a profiling parent that never uses CUDA
    itself forks; the child starts a Profiler of its own, then CUDA."""
    mode = sys.argv[2]
    import torch
    prof = ap.Profiler(cuda="auto" if mode == "auto" else False)
    prof.start()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        child = {}
        try:
            with ap.Profiler(cuda=False):
                with ap.stage("child"):
                    pass
            child["new_profiler_in_child"] = "works"
        except Exception as e:
            child["new_profiler_in_child"] = repr(e)[:200]
        try:
            torch.ones(4, device="cuda").sum().item()
            child["cuda_in_child"] = "works"
        except Exception as e:
            child["cuda_in_child"] = repr(e)[:200]
        os.write(write, json.dumps(child).encode())
        os._exit(0)
    os.close(write)
    deadline = time.monotonic() + FORK_CHILD_TIMEOUT_S
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            break
        time.sleep(0.05)
    answer = os.read(read, 4096)
    prof.stop()
    print(json.dumps({"parent": prof.report().gpu_status,
                      **(json.loads(answer) if answer else
                         {"child": f"no answer in {FORK_CHILD_TIMEOUT_S} s"})
                      }))


def fork():
    for mode in ("auto", "off"):
        run = subprocess.run([sys.executable, __file__, "_fork", mode],
                             capture_output=True, text=True,
                             timeout=FORK_CHILD_TIMEOUT_S + 60)
        lines = run.stdout.strip().splitlines()
        try:
            GOT[f"cuda={mode} in the parent"] = json.loads(lines[-1])
        except (IndexError, ValueError):
            GOT[f"cuda={mode} in the parent"] = {
                "rc": run.returncode, "stderr": run.stderr[-400:]}
    result("with cuda='auto' and with cuda=False in the parent, a new "
           "Profiler works in the child (docs/profiler.md) and so does "
           "CUDA, which the parent never used itself",
           all(v.get("new_profiler_in_child") == "works"
               and v.get("cuda_in_child") == "works" for v in GOT.values()))


def overhead():
    """The stage pair with CUPTI on and off, as the benchmark measures it,
    and what the first start() costs (cuInit and CUPTI's setup)."""
    cuda_torch()
    from bench_gpu_overhead import pair_cost
    start = time.perf_counter()
    with ap.Profiler(cuda=True):
        GOT["first_start_s"] = round(time.perf_counter() - start, 3)
    off, on = pair_cost(False), pair_cost(True)
    GOT.update(stage_pair_ns_cuda_off=round(off), stage_pair_ns_cupti=round(
        on), added_ns=round(on - off))
    result("CUPTI tracing adds under 1000 ns to a stage pair",
           on - off < 1000)


def blocks():
    """Python blocks a traced run leaves behind: tests/package/test_refcounts.py
    saw about one a run on a GPU machine and none through the fakes; the
    largest growths by traceback say where."""
    import gc
    import tracemalloc

    def cycle():
        with ap.Profiler() as prof:
            with ap.stage("cycle", items=1):
                pass
        prof.report()

    cuda_torch()
    for _ in range(150):      # free lists and caches settle first
        cycle()
    gc.collect()
    tracemalloc.start(12)
    before, snapshot = sys.getallocatedblocks(), tracemalloc.take_snapshot()
    for _ in range(300):
        cycle()
    gc.collect()
    grown = sys.getallocatedblocks() - before
    top = tracemalloc.take_snapshot().compare_to(snapshot, "traceback")[:4]
    GOT["blocks_after_300_runs"] = grown
    GOT["largest_growths"] = [
        [str(stat).split(":")[-1].strip()] + stat.traceback.format()[-6:]
        for stat in top]
    result("300 traced runs leave fewer than 20 Python blocks", grown < 20)


SCENARIOS = {"pipeline": pipeline, "torch_profiler": torch_profiler,
             "open_stage": open_stage, "stop_thread": stop_thread,
             "fork": fork, "overhead": overhead, "blocks": blocks}

if __name__ == "__main__":
    if sys.argv[1:2] == ["_fork"]:
        fork_once()
        sys.exit(0)
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(SCENARIOS)}")
    try:
        SCENARIOS[sys.argv[1]]()
    except Exception as e:
        traceback.print_exc()
        GOT["error"] = repr(e)[:400]
        result("the scenario runs to its end", False)
