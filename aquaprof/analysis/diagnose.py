"""What to do next: each top stage classified from its measured figures,
with the evidence, a fix to try and the command that checks it.

Host-side classes, decided on the stage's own wall and thread CPU time
(its sub-stages' aside, as its self time is) and the host memory it drove
up:
- cpu-bound: the thread computes for most of the stage's wall time;
- waiting: it mostly does not (I/O, sleep, locks, other processes, or the
  GPU when the stage blocks on it); where the samples show it asleep on
  a lock or for other threads (a futex not the GIL's: a pool's result,
  a native library's workers joined) or in the standard library's waits
  for other processes (subprocess, a multiprocessing pool; a wait on
  concurrent.futures in the rounds in which its process ran a process
  pool's manager thread and no thread pool's worker ran a task:
  pool_threads), the fix to try says so rather than send the reader
  after I/O;
- mixed: in between;
- cpu-starved (where the run was sampled, on Linux): its threads were
  runnable but not running, the CPU given to other threads or processes,
  for CPU_STARVED or more of the stage's sampled time (the run delay the
  kernel counts per thread, /proc/.../schedstat), and for longer than they
  slept on the GIL;
- cpu-starved? (unsampled, on a busy machine): on the CPU for
  STARVED_FLOOR to CPU_BOUND of its wall time while the machine's other
  processes left the run less than BUSY_MACHINE_FREE of a CPU, or under
  CPU_BOUND while its thread waited for a CPU (its run delay over the
  run, shared out by CPU time: _run_delay_rate): a wait for a CPU cannot
  be told from a blocking call without samples;
- gil-bound (the same): its threads slept on the GIL for GIL_BOUND or
  more of the stage's sampled time (each sample of a thread asleep in a
  futex on the GIL's condition variable or mutex);
- threads-bound: a waiting stage while whose calls the other threads of
  its process used THREADS_BUSY CPUs or more on average, and at least
  twice what they used outside it where the run had time outside it to
  tell (a pool it handed its work to, a native library's threads). The
  process's CPU time while the stage was open (StageStats.process_cpu,
  every thread's, native ones too) gives the figure, sampled or not;
  the samples add which Python threads and what they ran (aquaprof.
  analysis.other_threads). Where the process kept SATURATED of the CPUs
  it may run on busy meanwhile, its own threads crowded the stage's out,
  and the fix says to run no more compute threads than CPUs; a
  cpu-starved stage's evidence says so too. Where it used about one CPU
  (ONE_CPU_FROM to ONE_AT_A_TIME) with CPUs free instead, its threads ran
  one at a time, and the fix names the GIL, not more threads;
- awaiting: most of its calls were suspended at an await (asyncio), so
  their CPU time is unknown and the wall time is mostly waiting on I/O or
  on other tasks of the event loop;
- allocation-heavy (added to the others): within one call the process's
  RSS rose ALLOC_BYTES or more above what it was as that call began
  (StageStats.mem_rise: memory other code kept between the stage's calls
  is not the stage's; where the sampled timeline shows the process's
  other threads at work during its calls, the evidence says that what
  they allocated counts too), or the stage called cudaMalloc about once
  a call or more.
GPU classes, for stages that launched traced GPU work (StageStats.cuda);
the first that holds wins, and the host class stays in Finding.host:
- transfer-bound: copies take most of the stage's GPU time and a fair
  share of its wall time;
- gpu-bound: some device was busy for nearly all the stage's time;
- sync-bound: the host sat blocked on the device for a good part of the
  stage while the device still idled (serialising syncs);
- launch-bound: many tiny kernels a call, with the device mostly idle;
- gpu-starved: the device idled most of the stage's time while the host
  did something else.
Where the run was sampled, the evidence names the stage's hottest code:
the function most often innermost in the samples taken at the stage
itself (its sub-stages have their own rows), with its share of them.
The loop's wait for its data, which wins over every class above for that
stage (the host class stays in Finding.host); given for each
next(DataLoader) stage that holds, among the top stages or not:
- data-loading-bound: the stage next(DataLoader) (integrations/
  dataloader.py) took DATA_BOUND or more of its parent stage's wall time
  (the step), or, under a stage entered once (train, the script that
  aquaprof run wraps) or at the root, of the loop's time from its first
  batch to its last. The evidence names where the
  batches were made: the worker processes' hottest stage by self time, as
  a share of their time in stages (the processes captured as DataLoader
  workers, or in reports merged by hand, those that recorded no
  next(DataLoader)), or, with no workers (num_workers=0), the
  hottest stage nested in next(DataLoader) itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, \
    Tuple

import numpy as np

from ..common.checks import whole
from ..common.words import first_clause, plural, shorten_path
from ..common.units import fmt_bytes, fmt_time, printable, text_html
from ..model.report import subtree
from .concurrency import self_open_by_thread
from .gpu_stats import events_dropped
from .other_threads import OUTSIDE_SHARE, loop_holder, other_threads
from .pool_threads import MP_POOL, frames_of, innermost_wait, \
    process_pool_shares, thread_pool_processes, waits_on_futures
from .stragglers import rank_waits
from .run_cost import torch_kinds
from .samples import Waits, sampled, stage_hot, stage_waits, \
    stage_wall_by_thread

if TYPE_CHECKING:
    from ..model.report import Report, StageStats

CPU_BOUND = 0.8          # CPU time / wall time above this: computing
WAITING = 0.5            # below this: mostly not running
#: an awaiting stage whose event loops computed in other tasks' stages
#: for this share of its calls' time or more waited for the loop
LOOP_HELD = 0.25
#: a waiting stage asleep on a lock or other threads for this share of
#: its sampled time or more (and more than blocked otherwise) is told to
#: look at those threads, not at I/O
LOCK_WAITS = 0.25
ALLOC_BYTES = 256 << 20  # RSS raised this far above the stage's entry
DEVICE_ALLOCS = 10       # cudaMalloc calls (and ~one a call) to count
TRANSFER = 0.5           # copies' share of the stage's GPU time above this
TRANSFER_WALL = 0.2      # ... and of its wall time
GPU_BUSY = 0.2           # GPU idle share at or below this: gpu-bound
OWN_GPU = 0.5            # ... with its own GPU work this share of the busy
SYNC = 0.3               # host blocked on the device for this share
LAUNCH_KERNEL = 10e-6    # mean kernel shorter than this (seconds)
LAUNCH_PER_CALL = 10     # ... with this many kernels a call or more
LAUNCH_IDLE = 0.4        # ... and the GPU idle this share or more
STARVED = 0.5            # GPU idle this share or more
CPU_STARVED = 0.25       # run delay share of the sampled time from this
# Unsampled, on a machine whose other processes kept all but this many
# CPUs busy on average, a stage neither computing nor idle may have
# waited for a CPU as well as blocked: its thread CPU time cannot tell.
# It is called cpu-starved? (hedged) from STARVED_FLOOR of its wall time
# on the CPU; under it, a thread computing all along would have had a
# larger share even beside four busy threads a CPU, so it waited.
BUSY_MACHINE_FREE = 0.5
STARVED_FLOOR = 0.2
# Or, at any share under CPU_BOUND, where the thread that ran it waited
# for a CPU (its run delay) for this share of the run or more, and at
# that rate about CPU_STARVED of the stage's time: well past the wake-up
# latencies of a quiet machine
CONTENDED = 0.05
GIL_BOUND = 0.25         # GIL sleep share of the sampled time from this
# CPUs the process's other threads used on average while a waiting stage
# was open, from which it waits for them (a pool it handed its work to),
# where they used under half as much outside it
THREADS_BUSY = 0.5
# the process using this share of the CPUs it may run on, or more, while
# a stage that mostly waited was open: its own threads took them (on 2
# CPUs, a process with 8 torch threads used 1.58 to 1.88 beside the
# machine's own chores, sampled or not)
SATURATED = 0.75
# the process using ONE_CPU_FROM to ONE_AT_A_TIME CPUs while a
# threads-bound stage was open, with ROOM_LEFT CPUs or more free beside
# it (of those it may use, less the machine's other processes'): its
# threads ran about one at a time, and more threads would not help
# (Python threads on one GIL: a pool of 4 computing Python on 2 free CPUs
# used 1.0). Well under one CPU, they waited too (I/O, a lock), which
# more threads may overlap
ONE_CPU_FROM = 0.75
ONE_AT_A_TIME = 1.25
ROOM_LEFT = 0.5
# next(DataLoader)'s share of its parent's wall time from which the loop
# is data-loading-bound. Hiding the loading entirely speeds the loop up
# by at most 1 / (1 - share): 1.4x at 30 %, only 1.1x at 10 %, where the
# step's own stages are the larger target. A loop its workers keep fed
# waits only for a queue get and a batch's unpickling, a few % of a step.
DATA_BOUND = 0.3
# A stage entered once a batch that holds the wait is the step, whose
# time is the loop's, where it covers this much of the loop's time from
# its first batch to its last; one that covers less (a stage around
# next() alone) holds part of each step, and the wait is judged against
# the loop's time instead.
STEP_COVERS = 0.9
#: the stage every next() on a torch DataLoader iterator is recorded as
LOADER_STAGE = "next(DataLoader)"

_FIXES = {
    "cpu-bound": (
        "the stage's own Python or C code: vectorise it (NumPy, torch), "
        "move it to the GPU, or spread it over processes",
        "python -m aquaprof run SCRIPT, then aquaprof compare BEFORE.json "
        "AFTER.json; py-spy top --pid PID shows the hot functions"),
    "waiting": (
        "overlap the wait: prefetch and read ahead (DataLoader "
        "num_workers, pin_memory), batch small I/O, and look for locks or "
        "a device synchronisation inside the stage",
        "compare the stage's CPU and wall time again after the change "
        "(aquaprof compare); strace -c -p PID shows which system calls "
        "wait"),
    # waiting, its time off the CPU mostly asleep on a lock or for other
    # threads: no I/O to overlap
    "waiting on threads": (
        "it waits on a lock or for other threads, not on I/O: where it "
        "hands its work to threads (a pool, a native library's workers), "
        "they set its pace: give them CPUs of their own (no more busy "
        "threads and processes than CPUs), more threads or less work "
        "each; where threads share a lock, hold it for less time",
        "compare the stage's wall time again after the change (aquaprof "
        "compare); py-spy dump --native --pid PID shows where each thread "
        "waits"),
    # waiting, its sampled time off the CPU mostly in the standard
    # library's waits for other processes: their CPU work sets its pace
    "waiting on processes": (
        "it waits for other processes (a child it runs, a process pool's "
        "workers), not on I/O: make their work cheaper, split it over "
        "more processes where CPUs are free, or overlap it with the "
        "stage's own work (start the child earlier, imap or apply_async "
        "instead of map); profile the child itself (python -m aquaprof "
        "run)",
        "compare the stage's wall time again after the change (aquaprof "
        "compare); top or pidstat shows the child processes' CPU"),
    # waiting, unsampled, in a run whose child processes computed: it may
    # wait for them or on I/O, which only the samples tell apart
    "waiting, children busy": (
        "it may wait for its child processes rather than on I/O (they "
        "computed in the run: see the evidence): where it waits for them (a "
        "subprocess it runs, a process pool's results), make their work "
        "cheaper, split it over more processes where CPUs are free, or "
        "overlap it with the stage's own work; where it waits on I/O, "
        "prefetch and read ahead, batch small I/O; sample the run "
        "(Profiler(sample=0.001)) to tell which",
        "compare the stage's wall time again after the change (aquaprof "
        "compare); top or pidstat shows the child processes' CPU"),
    "cpu-starved": (
        "give the stage a CPU: no more busy threads and processes than "
        "CPUs (DataLoader num_workers, torch.set_num_threads, "
        "OMP_NUM_THREADS for NumPy's BLAS), pin busy processes to cores "
        "of their own (os.sched_setaffinity, taskset), or move the "
        "competing work elsewhere",
        "the stage's run delay share before and after, in its own time: "
        "aquaprof.analysis.samples.stage_waits(rep, STAGE, "
        "sub_stages=False); top or uptime show the machine's load"),
    "gil-bound": (
        "take Python work off the GIL: processes instead of threads "
        "(DataLoader workers, multiprocessing, concurrent.futures."
        "ProcessPoolExecutor), fewer threads running Python at once, or "
        "the work in NumPy or torch calls long enough to release the GIL",
        "the stage's GIL share before and after, in its own time: "
        "aquaprof.analysis.samples.stage_waits(rep, STAGE, "
        "sub_stages=False).gil_s; its wall time with aquaprof compare"),
    "threads-bound": (
        "the work is in the threads the stage waits for (a pool it handed "
        "its work to, a native library's threads): speed that work up, or "
        "give it more threads where CPUs are free; Python threads' work "
        "can be marked with stages (inside the task the pool runs) to see "
        "where it goes",
        "the other threads' CPU while STAGE runs: aquaprof.analysis."
        "other_threads.other_threads(rep, rep[STAGE]); its wall time with "
        "aquaprof compare"),
    # threads-bound, the process held to about one CPU with CPUs free
    "threads-bound, one at a time": (
        "the work is in the threads the stage waits for, and they ran "
        "about one at a time with CPUs free: where they run Python they "
        "share one GIL, and adding threads will not help: move the work "
        "to "
        "processes (concurrent.futures.ProcessPoolExecutor, "
        "multiprocessing) or into calls that release the GIL (NumPy, "
        "torch); a native library held to one thread: raise its thread "
        "count; sample the run (Profiler(sample=0.001)) to tell which",
        "the other threads' CPU while STAGE runs: aquaprof.analysis."
        "other_threads.other_threads(rep, rep[STAGE]); its wall time with "
        "aquaprof compare"),
    "straggler-bound": (
        "the time is other processes waiting here for a slower one (a "
        "collective: DDP's gradient all-reduce, a barrier): speed up that "
        "process where it is slowest (named in the evidence): even out its "
        "data (batch sizes, sequence lengths), its device or host, or "
        "work only it does",
        "the stragglers list (rep.stragglers()) before and after: the "
        "slow process's stage near 1.0x, and STAGE's time on the others "
        "with it"),
    "awaiting": (
        "find what the task awaits: slow I/O, a semaphore or pool limit, "
        "or CPU-heavy tasks on the same event loop holding it (their "
        "stages' CPU time)",
        "PYTHONASYNCIODEBUG=1 logs callbacks slower than 100 ms; compare "
        "the stage's wall time again after the change (aquaprof compare)"),
    "cpu-starved?": (
        "sample the run (Profiler(sample=0.001)) to tell a wait for a CPU "
        "from a blocking call: unsampled, both read as time off the CPU; "
        "if starved, give the stage a CPU: no more busy threads and "
        "processes than CPUs (DataLoader num_workers, "
        "torch.set_num_threads, OMP_NUM_THREADS), or move the competing "
        "work elsewhere",
        "profile again sampled and read the stage's run delay share in its "
        "own time: aquaprof.analysis.samples.stage_waits(rep, STAGE, "
        "sub_stages=False); top or uptime show the machine's load"),
    "mixed": (
        "split the stage into finer stages to separate computing from "
        "waiting, then treat each part",
        "profile again with the finer stages and read diagnose() for "
        "each"),
    "allocation-heavy": (
        "reuse buffers instead of allocating per call (preallocate, "
        "out= arguments, torch.empty once), or process in smaller batches",
        "watch mem peak and the trace's host memory counter "
        "(aquaprof trace run.json -o trace.json)"),
    "transfer-bound": (
        "keep tensors on the device between stages, pin host buffers "
        "(DataLoader pin_memory=True, tensor.pin_memory()) and copy with "
        "non_blocking=True, and batch many small copies into few",
        "the stage's copy time, bandwidth and pageable bytes "
        "(rep[STAGE].cuda.memcpy) before and after: aquaprof compare"),
    "gpu-bound": (
        "the device is the limit: make the kernels cheaper (mixed "
        "precision with torch.autocast, fused or compiled kernels with "
        "torch.compile, better occupancy for the top kernel), or spread "
        "the work over more devices",
        "rep.kernels() before and after; nsys profile and ncu on the top "
        "kernel for its own limits"),
    "sync-bound": (
        "take the hidden synchronisations out of the loop: .item(), "
        ".cpu(), .numpy(), printing a CUDA tensor, torch.cuda.synchronize"
        "(); keep results on the device and read them once every N steps "
        "(torch.cuda.set_sync_debug_mode('warn') points at them)",
        "the stage's cuda.sync_time and GPU idle share before and after "
        "(aquaprof compare)"),
    "launch-bound": (
        "launch fewer, larger kernels: vectorise the Python loop, batch "
        "the small operations, torch.compile or CUDA graphs "
        "(torch.cuda.CUDAGraph)",
        "kernels a call and the GPU idle share in rep[STAGE].cuda before "
        "and after"),
    "gpu-starved": (
        "feed the device: take host work off its path (DataLoader "
        "workers, prefetch to the device on a side stream), or move the "
        "host computation onto the device",
        "the stage's GPU idle share (rep[STAGE].cuda.idle_share) before "
        "and after"),
    "device-allocation": (
        "let allocations be reused: keep buffers across calls, use the "
        "framework's caching allocator (CuPy's memory pool, torch's "
        "default) instead of raw cudaMalloc/cudaFree a call",
        "the stage's cuda.allocations a call before and after"),
}


@dataclass
class Finding:
    """One stage's diagnosis."""
    path: str
    kind: str                          # the host class or a GPU class
    evidence: str
    fix: str
    verify: str
    also: List[str] = field(default_factory=list)   # allocation-heavy
    #: cpu-bound, waiting, mixed, cpu-starved, cpu-starved? (unsampled, on
    #: a busy machine), gil-bound, threads-bound or awaiting
    host: str = ""
    #: the stage's hottest sampled code and its share, "" unsampled
    code: str = ""

    def __str__(self) -> str:
        extra = f" (also {', '.join(self.also)})" if self.also else ""
        return (f"{printable(self.path)}: {self.kind}{extra}\n"
                f"    evidence: {self.evidence}\n"
                f"    try:      {self.fix}\n"
                f"    verify:   {self.verify}")


def _gpu_class(stage: "StageStats") -> Optional[Tuple[str, str]]:
    """The GPU class of a stage that launched GPU work, with its
    evidence; None when no GPU class holds."""
    cuda = stage.cuda
    wall = stage.wall.total
    if cuda is None or wall <= 0 or not (cuda.busy_time or cuda.sync_time):
        return None
    idle = cuda.idle_share
    idle_text = (f"GPU idle {idle * 100:.0f} % of the stage's time"
                 if idle is not None else "GPU idle share unknown (no spans)")
    copies = cuda.memcpy_time
    if cuda.busy_time > 0 and copies >= TRANSFER * cuda.busy_time and \
            copies >= TRANSFER_WALL * wall:
        moved = sum(c.bytes for c in cuda.memcpy.values())
        pageable = sum(c.pageable_bytes for c in cuda.memcpy.values())
        return "transfer-bound", (
            f"copies took {fmt_time(copies)} of {fmt_time(cuda.busy_time)} "
            f"GPU time ({copies / cuda.busy_time * 100:.0f} %) in "
            f"{fmt_time(wall)} wall; {fmt_bytes(moved)} moved at "
            f"{fmt_bytes(int(moved / copies))}/s, {fmt_bytes(pageable)} of "
            f"it from pageable host memory")
    # the GPU busy with other stages' work (kernels queued before, still
    # running) does not bind this one: its own must be most of it
    if idle is not None and idle <= GPU_BUSY and \
            cuda.busy_time >= OWN_GPU * (1 - idle) * wall and \
            cuda.kernel_time > copies:
        top = cuda.top_kernels[0] if cuda.top_kernels else None
        longest = (f"; top kernel {printable(top.name)}: "
                   f"{fmt_time(top.total)} in "
                   f"{plural(top.count, 'launch', 'launches')}" if top else "")
        return "gpu-bound", (
            f"GPU busy {(1 - idle) * 100:.0f} % of the stage's time; "
            f"{plural(cuda.kernels, 'kernel')} took "
            f"{fmt_time(cuda.kernel_time)} of "
            f"{fmt_time(wall)} wall{longest}")
    if cuda.sync_time >= SYNC * wall and (idle is None or idle > GPU_BUSY):
        return "sync-bound", (
            f"host blocked on the device {fmt_time(cuda.sync_time)} of "
            f"{fmt_time(wall)} wall ({cuda.sync_time / wall * 100:.0f} %); "
            f"{idle_text}")
    if idle is None:
        return None
    per_call = cuda.kernels / stage.count if stage.count else 0.0
    mean = cuda.kernel_time / cuda.kernels if cuda.kernels else 0.0
    if cuda.kernels and mean < LAUNCH_KERNEL and \
            per_call >= LAUNCH_PER_CALL and idle >= LAUNCH_IDLE:
        return "launch-bound", (
            f"{cuda.kernels} kernels ({per_call:.0f} a call) of "
            f"{fmt_time(mean)} on average; {idle_text}")
    if idle >= STARVED:
        return "gpu-starved", (
            f"{idle_text} while the host ran: thread CPU time "
            f"{fmt_time(stage.cpu)} of {fmt_time(wall)} wall")
    return None


def _also(finding: Finding, what: str, evidence: str) -> None:
    finding.also.append(what)
    fix, verify = _FIXES[what]
    finding.evidence += f"; {evidence}"
    finding.fix += f"; and {fix}"
    finding.verify += f"; {verify}"


def _others_allocate(report: "Report", stage: "StageStats") -> str:
    """Where the stage's process had other threads at work during its
    calls, the words that say its RSS rise may be theirs: RSS is the
    process's."""
    others = other_threads(report, stage)
    if others is None:
        return ""
    # allocating takes CPU (300 MiB, about 0.1 s of page faults): others
    # that used more of it during the calls than the stage's own thread
    # may have done it, however little of a CPU that was on average
    theirs = others.inside_s
    if others.inside < THREADS_BUSY and theirs <= stage.cpu:
        return ""
    hottest = f", hottest there: {others.hottest}" if others.hottest else ""
    return (f"; RSS is the process's, and its other threads used "
            f"{fmt_time(theirs)} of CPU during the calls "
            f"({others.inside:.2f} CPUs on average{hottest}) against the "
            f"stage's own {fmt_time(stage.cpu)}: what they allocated counts "
            f"here too")


def _share(part: float, whole: float) -> str:
    return f"{part / whole * 100:.0f} %"


def _loader_class(stage: "StageStats",
                  report: "Report") -> Optional[Tuple[str, str, str]]:
    """Evidence, fix and check when stage is a next(DataLoader) that took
    DATA_BOUND or more of its parent's wall time, or of the loop's time
    under a parent entered once, at the root, or under a parent entered
    each batch that covers less than STEP_COVERS of the loop; None
    otherwise."""
    if stage.name != LOADER_STAGE:
        return None
    parent = report[stage.parent] if stage.parent else None
    whole = parent.wall.total if parent else report.wall
    ratio = (f"rep[{stage.path!r}].wall.total / "
             + (f"rep[{parent.path!r}].wall.total" if parent else "rep.wall"))
    of = f"{printable(parent.path)}'s wall time" if parent else \
        "the run's wall time"
    once = parent is None or parent.count == 1
    each_batch = parent is not None and parent.count >= stage.count
    loop = _loop_time(stage, report) if once or each_batch else None
    # a stage entered once around the loop (the run itself, the script
    # aquaprof run wraps, a train stage) holds the imports and the setup
    # before it too; one entered each batch that covers less than the
    # loop (with ap.stage("load"): next(it)) holds part of a step only
    if loop is not None and (loop < whole if once else
                             whole < STEP_COVERS * loop):
        whole, ratio = loop, (f"rep[{stage.path!r}].wall.total over the "
                              f"loop's time from its first batch to its "
                              f"last")
        of = f"its time from its first batch to its last ({fmt_time(loop)})"
    wait = stage.wall.total
    if whole <= 0 or wait < DATA_BOUND * whole:
        return None
    waited = (f"{fmt_time(wait)} of {fmt_time(whole)} wall in "
              f"{plural(stage.count, 'call')} "
              f"({fmt_time(stage.wall.mean)} a call)")
    verify = (f"profile again and aquaprof compare BEFORE.json AFTER.json: "
              f"{ratio} (now {_share(wait, whole)}) should fall under "
              f"{DATA_BOUND * 100:.0f} %")
    workers = _workers_hottest(report)
    # workers, counted by their ids: non-persistent ones start again
    # each epoch
    tagged = len({p["worker"] for p in report.processes if "worker" in p})
    # DataLoader workers known as such decide: a sampler staged inside
    # next(DataLoader) does not mean the loading ran in the loop
    inline = None if tagged and workers else _inline_hottest(stage, report)
    if inline:
        name, took = inline
        return (f"the loop spent {_share(wait, whole)} of {of} loading its "
                f"batches itself in next(DataLoader), where {name} took "
                f"{_share(took, wait)} of it; {waited}; no worker "
                f"processes (num_workers=0): the dataset's stages are "
                f"nested in next(DataLoader)",
                f"load in worker processes so that loading overlaps the "
                f"step: DataLoader(num_workers=N) with prefetch_factor, "
                f"pin_memory=True when batches go to the GPU and "
                f"persistent_workers=True; or make {name} cheaper",
                verify)
    if workers:
        name, took, staged, processes = workers
        return (f"the loop waited {_share(wait, whole)} of {of} in "
                f"next(DataLoader) on its workers, whose {name} took "
                f"{_share(took, staged)} of their time in stages; {waited}; "
                f"{plural(processes, 'worker process', 'worker processes')} spent "
                f"{fmt_time(staged)} in stages, {fmt_time(took)} of it as "
                f"self time of {name}",
                f"feed the loop faster: more workers (DataLoader "
                f"num_workers, {tagged or processes} in this report), a "
                f"deeper queue (prefetch_factor), pin_memory=True when "
                f"batches go to the GPU, persistent_workers=True so that "
                f"each epoch does not start its workers again; or make "
                f"{name} cheaper",
                verify)
    where = (f"its {plural(tagged, 'worker process', 'worker processes')} "
             f"recorded none" if tagged else
             "neither nested in next(DataLoader) nor in worker processes "
             "of this report")
    return (f"the loop waited {_share(wait, whole)} of {of} in "
            f"next(DataLoader); {waited}; no stage recorded where the "
            f"batches are made ({where})",
            f"more workers (DataLoader num_workers"
            f"{f', {tagged} in this report' if tagged else ''}), "
            f"prefetch_factor, pin_memory=True when batches go to the GPU, "
            f"persistent_workers=True; stage the dataset's __getitem__ "
            f"(ap.stage) to find what to make cheaper",
            verify)


def _loop_time(stage: "StageStats", report: "Report") -> Optional[float]:
    """Seconds from the first call of next(DataLoader) `stage` to the end
    of its last, on each thread that called it (ranks merged, several
    loops), added up; None where some of its spans were dropped
    (max_spans), or where a thread called it fewer than three times (two
    batches and the end): one batch taken before a loop is no loop."""
    spans = report.spans()
    spans = spans[spans["stage"] == stage.id]
    if not len(spans) or len(spans) != stage.count:
        return None
    total = 0
    for thread in np.unique(spans["thread"]).tolist():
        mine = spans[spans["thread"] == thread]
        if len(mine) < 3:
            return None
        total += int(mine["end_ns"].max() - mine["start_ns"].min())
    return total * 1e-9


def _inline_hottest(stage: "StageStats",
                    report: "Report") -> Optional[Tuple[str, float]]:
    """The stage nested in next(DataLoader) with the most self time (its
    path below it) and that time; None when nothing is nested. The
    DataLoader's own code outside any stage competes as such, and so do
    the torch hooks' stages nested in it."""
    below = stage.path + "/"
    # the torch hooks' stages (torch_ops: the collate's ops, or what the
    # main process runs while its workers load) are not the dataset's
    hooks = torch_kinds(report)
    nested = [s for s in report.stages
              if s.path.startswith(below) and s.self_time > 0
              and s.path not in hooks]
    if not nested:
        return None
    top = max(nested, key=lambda s: (s.self_time, s.path))
    if stage.self_time > top.self_time:
        return ("the DataLoader's own code outside any stage (sampler, "
                "collate_fn)", stage.self_time)
    return printable(top.path[len(below):]), top.self_time


def _workers_hottest(report: "Report") -> Optional[
        Tuple[str, float, float, int]]:
    """Over the workers of a merged report: the stage with the most self
    time, that time, their time in stages (their own outermost stages'
    totals) and how many they are; None when no worker recorded a stage.
    The workers are the processes captured as DataLoader workers, or in
    reports that do not say (merged by hand), the processes that recorded
    no next(DataLoader)."""
    stats = report.stages
    parent = {s.id: report[s.parent].id if s.parent else -1 for s in stats}
    loaders = {s.id for s in stats if s.name == LOADER_STAGE}
    own: Dict[int, float] = {}
    staged = 0.0
    processes = 0
    tagged = any("worker" in p for p in report.processes)
    for process in report.processes:
        entries = process.get("stages", [])
        ids = {e[0] for e in entries}
        if not entries or ids & loaders or (tagged and
                                            "worker" not in process):
            continue
        processes += 1
        for sid, _count, total_ns, self_ns, _cpu in entries:
            own[sid] = own.get(sid, 0.0) + self_ns * 1e-9
            if parent[sid] not in ids:
                staged += total_ns * 1e-9
    if not own or staged <= 0:
        return None
    names = report.stage_names
    top = max(own, key=lambda sid: (own[sid], names[sid]))
    return printable(names[top]), own[top], staged, processes


def _hottest_code(report: "Report", stage: "StageStats") -> str:
    """'f (file.py:40), 71 % of its sampled self time', from the samples
    taken at the stage itself; '' without any."""
    hot = stage_hot(sampled(report), stage.id, 1, sub_stages=False)
    if not hot:
        return ""
    return (f"{printable(hot[0].label)}, {hot[0].own * 100:.0f} % of its "
            f"sampled self time")


def _starved_or_gil(stage: "StageStats", report: "Report",
                    waits: "Waits") -> Optional[Tuple[str, str]]:
    """cpu-starved or gil-bound with its evidence, where the sampled
    waits show it; None otherwise."""
    delay = waits.delay_s / waits.wall_s
    gil = waits.gil_s / waits.wall_s
    if waits.delay_known and delay >= CPU_STARVED and delay >= gil:
        return "cpu-starved", (
            f"; runnable but not running {fmt_time(waits.delay_s)} of "
            f"{fmt_time(waits.wall_s)} sampled ({delay * 100:.0f} %): the "
            f"CPU went to others; {_competition(report)}")
    if waits.gil_known and gil >= GIL_BOUND:
        return "gil-bound", (
            f"; asleep on the GIL {fmt_time(waits.gil_s)} of "
            f"{fmt_time(waits.wall_s)} sampled ({gil * 100:.0f} %); "
            f"{_python_elsewhere(report, stage)}")
    return None


def _shares(waits: "Waits") -> str:
    """Where its sampled time went off the CPU, in shares of it."""
    lock = (f"on a lock or another thread "
            f"{waits.lock_s / waits.wall_s * 100:.0f} %, "
            if waits.lock_known else "")
    return (f"blocked {waits.blocked_s / waits.wall_s * 100:.0f} %, {lock}"
            f"runnable {waits.delay_s / waits.wall_s * 100:.0f} %, on the "
            f"GIL {waits.gil_s / waits.wall_s * 100:.0f} %")


#: where the standard library waits for other processes: a sampled
#: stack waits for one where past the innermost frame of one of these
#: files (path ends) it runs the standard library alone; a process
#: pool's or a forked child's own stacks begin in them too, and run the
#: program's code past them
_PROCESS_WAITS = ("/subprocess.py", "/multiprocessing/pool.py",
                  "/multiprocessing/popen_fork.py",
                  "/concurrent/futures/process.py")


def _waits_on_processes(report: "Report", stage: "StageStats") -> bool:
    """Whether most of the stage's sampled time off the CPU was spent in
    stacks waiting for other processes (_PROCESS_WAITS): subprocess's
    wait for its child, a multiprocessing pool's results (but in a
    process that ran a ThreadPool, whose waits are the same); or waiting
    on futures in rounds when a process pool's threads, and no thread
    pool's, were at work beside it (pool_threads)."""
    samples = report.samples
    if samples is None:
        return False
    frames = frames_of(samples)
    files = frames.files
    waiting = [f.endswith(_PROCESS_WAITS) for f in files]
    wanted = subtree(report.stage_parents, stage.id)
    threaded = thread_pool_processes(report, frames)
    off = on_processes = 0.0
    on_futures: Dict[int, float] = {}     # stack: its time off the CPU
    for k, (p, _tid, sid, chain, _count, wall, cpu, *_w) in enumerate(
            samples["stacks"]):
        if sid not in wanted:
            continue
        off += wall - cpu
        last = innermost_wait(chain, waiting.__getitem__, frames.stdlib)
        if last is not None:
            if p not in threaded or \
                    not files[chain[last]].endswith(MP_POOL):
                on_processes += wall - cpu
        elif waits_on_futures(chain, frames):
            on_futures[k] = wall - cpu
    pooled = process_pool_shares(report, frames) if on_futures else None
    if pooled is not None:
        on_processes += sum(t * pooled[k] for k, t in on_futures.items())
    return off > 0 and 2 * on_processes > off


def _waits_on_threads(report: "Report", stage: "StageStats") -> bool:
    """Whether the stage's sampled time off the CPU went mostly to a lock
    or other threads (a futex not the GIL's) rather than to I/O or
    sleep: a stage that hands its work to threads, native ones too
    (which are not sampled), and joins them."""
    waits = stage_waits(report, stage.path)
    return (waits is not None and waits.lock_known and
            waits.lock_s > waits.blocked_s and
            waits.lock_s >= LOCK_WAITS * waits.wall_s)


def _waiting_fix(report: "Report", stage: "StageStats") -> str:
    """Which fix a waiting stage gets: for other processes, for threads
    or a lock, or the I/O one."""
    if _waits_on_processes(report, stage):
        return "waiting on processes"
    if _waits_on_threads(report, stage):
        return "waiting on threads"
    if _children_busy(stage, report) is not None:
        return "waiting, children busy"
    return "waiting"


def _children_busy(stage: "StageStats", report: "Report"
                   ) -> Optional[float]:
    """In an unsampled run (the samples tell a wait for a child apart),
    the CPUs the run's child processes that exited and were waited for
    used on average over it (meta["host"]["children_cpus"]), where
    THREADS_BUSY or more and the run's figures are the stage's process's
    (_run_is_its_process); None otherwise."""
    host = report.meta.get("host", {})
    used = host.get("children_cpus")
    if report.samples is not None or not isinstance(used, (int, float)) or \
            used < THREADS_BUSY or "merged" in host or \
            not _run_is_its_process(stage, report):
        return None
    return float(used)


class _Others(NamedTuple):
    """What the other threads of a stage's process did while it ran
    itself: CPUs on average inside its calls and outside them (None where
    unknown), the process's own CPUs inside (None where not recorded),
    and the words that say so."""

    inside: float
    outside: Optional[float]
    process: Optional[float]
    said: str


def _process_own(stage: "StageStats", report: "Report") -> Optional[float]:
    """The process's CPU seconds while the stage ran itself, its
    sub-stages' aside as _own_time takes them; None where a figure was
    not recorded (memory=False, files from before it), where calls were
    suspended (at an await, a greenlet's switch: their own thread CPU is
    unknown, and the process's while they were open is the other tasks'
    on their thread as much as other threads'), or where calls were open
    at once (a pool's threads each in the stage: each call counted the
    others' CPU, which is the stage's own work)."""
    levels, sub = _levels(stage, report)
    if any(s.process_cpu is None or s.suspended or not _one_at_a_time(
            s, report) for s in levels) or \
            any(s.process_cpu is None for s in sub):
        return None
    return max(sum(s.process_cpu for s in levels) -  # type: ignore[misc]
               sum(s.process_cpu for s in sub), 0.0)  # type: ignore[misc]


def _one_at_a_time(stage: "StageStats", report: "Report") -> bool:
    """Whether the stage's calls never overlapped: the run's clock says
    so, or where it did not measure them, they all ran on one thread."""
    if stage.at_once:
        return stage.at_once <= 1
    return len(_threads_of(stage, report)) <= 1


def _threads_of(stage: "StageStats", report: "Report") -> List[int]:
    """The thread indices the stage's recorded calls ran on."""
    spans = report.spans()
    return np.unique(spans["thread"][spans["stage"] == stage.id]).tolist()


def _others_outside(stage: "StageStats", report: "Report"
                    ) -> Optional[float]:
    """CPUs the process's threads but the stage's used on average while
    the stage was not open, from the process's CPU time over the run;
    where the stage's calls ran on another thread than the one that
    started and stopped the run, or that thread's CPU time is unknown,
    the stage's own thread's time outside them counts too (more than the
    others used). None where the run's figures are not those of the one
    process that ran the stage (_run_is_its_process), for a stage open
    for nearly all the run, or where the figures were not recorded."""
    host = report.meta.get("host", {})
    run = host.get("process_cpus")
    if stage.process_cpu is None or not isinstance(run, (int, float)) or \
            not _run_is_its_process(stage, report) or stage.wall.total <= 0:
        return None
    covered = (stage.wall.total if stage.clock is None else
               float(stage.clock.wall(stage.id, stage.wall.total)))
    rest = report.wall - covered
    if rest < OUTSIDE_SHARE * report.wall:
        return None
    # calls open at once in several threads each counted the process's
    # CPU: their share of it on the run's clock
    outside = run * report.wall - stage.process_cpu * covered / \
        stage.wall.total
    threads = {t["index"]: t["native_id"] for t in report.threads}
    ran_on = {threads.get(i) for i in _threads_of(stage, report)}
    mine = host.get("thread_cpu")
    if ran_on == {host.get("thread_id")} and isinstance(mine, float):
        outside -= max(mine - stage.cpu, 0.0)
    return max(outside, 0.0) / rest


def _run_is_its_process(stage: "StageStats", report: "Report") -> bool:
    """Whether the run's wall time and process figures (meta["host"]) are
    those of the one process that ran all the stage's calls: a report of
    one process, or a run's own with the child processes it captured (a
    DataLoader's workers) where none of them ran the stage. Reports of
    several runs merged keep the first run's figures over all their
    time."""
    if len(report.processes) <= 1:
        return True
    if "merged" in report.meta.get("host", {}):
        return False
    return [p.process for p in report.by_process(stage.path)] == [0]


def _others(stage: "StageStats", report: "Report", cpu: float,
            wall: float) -> Optional[_Others]:
    """The other threads' CPUs while the stage (its own time: cpu of
    wall seconds) was open: from the process's CPU time where recorded,
    which counts native threads the sampler never sees, else from the
    samples; None where neither tells."""
    sampled = other_threads(report, stage)
    process = _process_own(stage, report)
    if process is None or wall <= 0:
        if sampled is None:
            return None
        inside, outside, used = sampled.inside, sampled.outside, None
    else:
        used = process / wall
        inside = max(process - cpu, 0.0) / wall
        # outside as inside: the process's figures, all its threads;
        # the samples' rate sees only Python threads
        outside = _others_outside(stage, report)
        if outside is None and sampled is not None:
            outside = sampled.outside
    when = (f", {outside:.1f} while it was not" if outside is not None
            else "")
    native = ""
    unseen = inside - sampled.inside if sampled is not None else 0.0
    if used is not None and sampled is None:
        native = (" (all its threads, native ones too: a library's pool, "
                  "torch's, OpenMP's or BLAS's)")
    elif used is not None and unseen >= 0.05:
        native = (f", {unseen:.1f} of them in threads not sampled (native "
                  f"ones: a library's pool, torch's, OpenMP's or BLAS's)")
    hottest = (f"; hottest there: {sampled.hottest}"
               if sampled is not None and sampled.hottest else "")
    return _Others(inside, outside, used, (
        f"; while it was open, the other threads of its process used "
        f"{inside:.1f} CPUs on average{native}{when}{hottest}"))


def _cpu_room(report: "Report") -> Optional[Tuple[float, str, bool]]:
    """The CPUs the process may use, how the evidence names them, and
    whether its cgroup's quota sets them (tighter than its affinity);
    None where unknown."""
    host = report.meta.get("host", {})
    cpus, quota = host.get("cpus"), host.get("cpu_quota")
    if "merged" in host:
        quota = None        # the first run's
    if isinstance(quota, (int, float)) and quota > 0 and \
            (not isinstance(cpus, int) or quota < cpus):
        return (float(quota), f"the {quota:g} CPU{'' if quota == 1 else 's'} "
                f"its cgroup's quota (a container's CPU limit) lets it use",
                True)
    if isinstance(cpus, int) and cpus >= 1:
        return float(cpus), f"the {plural(cpus, 'CPU')} it may run on", False
    return None


def _throttled(report: "Report") -> str:
    """'; its cgroup's CPU quota throttled it in 37 of 40 quota periods
    of the run' where the kernel throttled the cgroup in any (the run's
    and the cgroup's figure, not the stage's, said beside CPUs taken);
    "" otherwise."""
    host = report.meta.get("host", {})
    held, periods = host.get("throttled_periods"), host.get("quota_periods")
    if not isinstance(held, int) or not isinstance(periods, int) or \
            held <= 0 or "merged" in host:
        return ""
    return (f"; its cgroup's CPU quota throttled it in {held:,} of "
            f"{plural(periods, 'quota period')} of the run")


def _crowded(stage: "StageStats", others: Optional[_Others],
             report: "Report") -> Tuple[str, str]:
    """Where the stage's process (the run's own, _run_is_its_process),
    its other threads THREADS_BUSY CPUs or more of it, kept SATURATED or
    more of the CPUs it may use busy while the stage was open (its
    affinity's, or its cgroup quota's where tighter), alone or with the
    machine's other processes (their average over the run, where no
    quota binds): the words that say who took them, and the fix's first
    words; ("", "") otherwise."""
    room = _cpu_room(report)
    if others is None or others.process is None or \
            others.inside < THREADS_BUSY or room is None or \
            not _run_is_its_process(stage, report):
        return "", ""
    cpus, named, quota = room
    kept = f"; its process kept {others.process:.1f} of {named} busy " \
           f"meanwhile"
    machine = report.meta.get("host", {}).get("other_cpus")
    if others.process >= SATURATED * cpus:
        said = f"{kept}: its own threads took them"
    elif not quota and isinstance(machine, (int, float)) and \
            others.process + machine >= SATURATED * cpus:
        said = (f"{kept}, and the machine's other processes {machine:.1f} "
                f"on average over the run: they took them together")
    else:
        return "", ""
    most = max(1, int(cpus))
    return said + _throttled(report), (
        f"its process keeps the CPUs it may use busy: where it runs more "
        f"compute threads than {named} (torch.set_num_threads, "
        f"OMP_NUM_THREADS for NumPy's BLAS, a pool's max_workers; torch "
        f"and OpenMP count the machine's cores, not a container's share), "
        f"run {most} at most, or they wait for each other; ")


def _one_cpu(stage: "StageStats", others: Optional[_Others],
             report: "Report") -> str:
    """Where the stage's process (the run's own) used ONE_CPU_FROM to
    ONE_AT_A_TIME CPUs while it was open, with ROOM_LEFT or more of those
    it may use free beside it and the machine's other processes: the
    words that say its threads ran about one at a time; "" otherwise."""
    room = _cpu_room(report)
    if others is None or others.process is None or room is None or \
            not ONE_CPU_FROM <= others.process <= ONE_AT_A_TIME or \
            not _run_is_its_process(stage, report):
        return ""
    cpus, named, quota = room
    machine = report.meta.get("host", {}).get("other_cpus")
    if not quota:
        if not isinstance(machine, (int, float)):
            return ""
        free = cpus - others.process - machine
    else:
        free = cpus - others.process
    if free < ROOM_LEFT:
        return ""
    return (f"; its process used {others.process:.1f} of {named} "
            f"meanwhile, {free:.1f} free: its threads ran about one at a "
            f"time")


class _Waits(NamedTuple):
    """A stage's class from its waits, the evidence to add, the words to
    put before its fix and the fix's key in _FIXES."""

    kind: str
    said: str
    first: str = ""
    fix: Optional[str] = None


def _waits_class(stage: "StageStats", report: "Report", host: str,
                 cpu: float, wall: float) -> _Waits:
    """cpu-starved, gil-bound or threads-bound with its evidence, where
    the figures show it; otherwise `host` with what the samples and the
    process's CPU time say of its off-CPU time ("" for a cpu-bound stage
    or one whose waits were not measured); the words to put before its
    fix ("" mostly), and the fix where it is not the class's own. cpu,
    wall: its own thread CPU and wall time."""
    if host == "cpu-bound":
        return _Waits(host, "")
    on_cpu = cpu / wall if wall > 0 else 0.0
    others = _others(stage, report, cpu, wall)
    crowded, first = _crowded(stage, others, report)
    said, handed = "", False
    if others is not None and others.inside >= THREADS_BUSY:
        said = others.said
        handed = host == "waiting" and others.outside is not None and \
            others.inside >= 2 * others.outside
    waits = _own_waits(stage, report)
    if waits is None:
        if handed:
            return _threads_bound(stage, others, report, said + crowded,
                                  first)
        unsampled = report.samples is None
        computes = unsampled and on_cpu >= STARVED_FLOOR
        busy = _busy_machine(report) if computes else None
        # its thread's own delay needs no floor: shared out by CPU time,
        # a stage that barely ran gets as little of it
        delayed = _run_delay_rate(stage, report, cpu, wall) \
            if unsampled else None
        if (computes and (crowded or busy)) or delayed:
            # a thread that computes at all, off the CPU while others
            # took the CPUs (its process's own threads among them), or
            # whose thread waited for one over the run, may have waited
            kind = "cpu-starved?"
            said = (delayed or "") + (f"; {busy}" if busy else "") + said
        else:
            kind = host
        # who took the CPUs is said with its fix, to the classes it binds
        if kind != host:
            said += crowded
        children = _children_busy(stage, report) \
            if kind == "waiting" else None
        if children is not None:
            said += (f"; its child processes (those it ran and waited for: "
                     f"a subprocess, a pool it closed) used {children:.1f} "
                     f"CPUs on average over the run")
        if report.samples is None:
            said += _SAMPLE_TO_TELL
        return _Waits(kind, said, first if kind != host else "")
    held = _starved_or_gil(stage, report, waits)
    if held is not None:
        return _Waits(held[0], held[1] + crowded, first) \
            if held[0] == "cpu-starved" else _Waits(held[0], held[1])
    shares = (f"; of its sampled time: {_shares(waits)}"
              if waits.delay_known or waits.gil_known else "")
    # the samples saw it blocked (I/O, a sleep), not waiting on a lock or
    # another thread: the other threads' work was beside it, not for it
    if handed and waits.lock_known and \
            2 * waits.blocked_s > waits.wall_s - waits.cpu_s:
        handed = False
    if handed:
        return _threads_bound(stage, others, report, shares + said + crowded,
                              first)
    return _Waits(host, shares + said)


def _run_delay_rate(stage: "StageStats", report: "Report", cpu: float,
                    wall: float) -> Optional[str]:
    """Unsampled, for a stage whose calls all ran on the thread that
    started and stopped the run: where that thread was runnable but not
    running for CONTENDED of the run or more (meta["host"]["thread_delay"],
    Linux's run delay), the words that give the stage's share of it at
    the run's rate: a thread held off the CPU waits for it about in
    proportion to the time it gets (cpu, the stage's own thread CPU), so
    its run delay is shared out by CPU time, up to the stage's time off
    the CPU; where that share comes to CPU_STARVED of the stage's own
    wall time or more. None otherwise."""
    host = report.meta.get("host", {})
    delay, mine = host.get("thread_delay"), host.get("thread_cpu")
    if not isinstance(delay, (int, float)) or \
            not isinstance(mine, (int, float)) or mine <= 0 or wall <= 0:
        return None
    # nor more than its time off the CPU: the run's rate may come from
    # another stretch of the run
    share = min(delay * cpu / mine, delay, wall - cpu)
    # the figures first, the spans only where they would hedge
    if delay < CONTENDED * report.wall or share < CPU_STARVED * wall or \
            "merged" in host or not _run_is_its_process(stage, report):
        return None
    threads = {t["index"]: t["native_id"] for t in report.threads}
    if {threads.get(i) for i in _threads_of(stage, report)} != \
            {host.get("thread_id")}:
        return None
    return (f"; over the run its thread waited for a CPU {fmt_time(delay)} "
            f"beside {fmt_time(mine)} on one (Linux's run delay): at that "
            f"rate about {fmt_time(share)} of this stage's "
            f"{fmt_time(wall)} ({share / wall * 100:.0f} %)")


_SAMPLE_TO_TELL = ("; sample the run (Profiler(sample=0.001)) to tell CPU "
                   "starvation and the GIL from blocking")


def _threads_bound(stage: "StageStats", others: Optional[_Others],
                   report: "Report", said: str, first: str) -> _Waits:
    """threads-bound, with the fix for threads held to one CPU where
    they were (_one_cpu) and the CPUs were not taken (`first`, _crowded's
    fix, is "")."""
    one = "" if first else _one_cpu(stage, others, report)
    said += one + (_SAMPLE_TO_TELL if report.samples is None else "")
    if not one:
        return _Waits("threads-bound", said, first)
    return _Waits("threads-bound", said, "", "threads-bound, one at a time")


def _awaiting_class(stage: "StageStats", report: "Report"
                    ) -> Tuple[str, str, bool]:
    """A stage whose calls were mostly suspended at an await: awaiting;
    or, where the samples show that the event loops ran the stage itself
    (not its sub-stages) for most of its own time on their threads'
    clocks, it holds the loop: cpu-bound where it computed then, waiting
    on a call that blocks the loop where it did not. Its thread CPU,
    shared with the other tasks, tells neither. The third value: it
    holds the loop."""
    outside = (f" ({fmt_time(stage.self_wall)} on the run's clock "
               f"outside its sub-stages, which ran in tasks it awaited)"
               if stage.awaited_sub_stages else "")
    said = (f"{stage.suspended:,} of {plural(stage.count, 'call')} "
            f"suspended at an await, {fmt_time(stage.wall.total)} wall, "
            f"self time {fmt_time(stage.self_time)}{outside}")
    waits = stage_waits(report, stage.path, sub_stages=False)
    if waits is None or stage.self_wall <= 0:
        hint = ("; sample the run (Profiler(sample=0.001)) to tell a task "
                "computing on the event loop from one awaiting"
                if report.samples is None else "")
        return "awaiting", (f"{said}; their CPU time is unknown (the event "
                            f"loop ran other tasks meanwhile){hint}"), False
    ran, own, where = _on_loops(stage, report, waits)
    running = ran / own if own > 0 else 0.0
    loops = "loop" if where == "the run's clock" else "loops"
    ran_said = (f"; the event {loops} ran it {fmt_time(ran)} of the "
                f"{fmt_time(own)} of its own time on {where} "
                f"({running * 100:.0f} %)")
    if running < WAITING:
        return "awaiting", f"{said}{ran_said}", False
    busy = waits.cpu_s / waits.wall_s
    if busy >= CPU_BOUND:
        return "cpu-bound", (f"{said}{ran_said}, computing "
                             f"{busy * 100:.0f} % of that: it holds the "
                             f"loop"), True
    # not blocked, where the loop's thread waited for a CPU or the GIL
    held = _starved_or_gil(stage, report, waits)
    if held is not None:
        return held[0], (f"{said}{ran_said}, computing {busy * 100:.0f} % "
                         f"of that: it holds the loop{held[1]}"), True
    shares = (f" ({_shares(waits)})"
              if waits.delay_known or waits.gil_known else "")
    if busy >= WAITING:
        return "mixed", (f"{said}{ran_said}, computing {busy * 100:.0f} % "
                         f"of that{shares}: it holds the loop"), True
    return "waiting", (f"{said}{ran_said}, computing only "
                       f"{busy * 100:.0f} % of that{shares}: a call that "
                       f"blocks holds the loop"), True


def _loop_held(stage: "StageStats", report: "Report") -> Tuple[str, str]:
    """(evidence, the holder's name) where an awaiting stage's event loops
    computed elsewhere for LOOP_HELD or more of the time its calls were
    open (other tasks' stages, or code in none): its tasks waited for the
    loop, not for I/O; ("", "") otherwise."""
    holder = loop_holder(report, stage)
    if holder is None or holder.cpu_s < LOOP_HELD * holder.covered_s:
        return "", ""
    name = printable(holder.path) if holder.path else "code in no stage"
    return (f"; while its calls were open the event loop computed in "
            f"{name} {fmt_time(holder.cpu_s)} of {fmt_time(holder.covered_s)}"
            f" ({holder.cpu_s / holder.covered_s * 100:.0f} %)"), name


def _on_loops(stage: "StageStats", report: "Report", waits: "Waits"
              ) -> Tuple[float, float, str]:
    """Seconds the event loops were sampled running the stage itself, of
    its own time on the clocks of the threads that ran it (each thread's
    loop, in each process, runs only its own calls), and whose clocks
    those are. Where some of its spans were dropped (max_spans), the
    run's clock and all its samples stand for them."""
    spans = report.spans()
    if np.count_nonzero(spans["stage"] == stage.id) != stage.count:
        return (min(waits.wall_s, stage.self_wall), stage.self_wall,
                "the run's clock")
    threads = report.threads
    own = self_open_by_thread(spans, stage.id, len(threads))
    sampled_ns = stage_wall_by_thread(report, stage.id)
    ran = sum(min(sampled_ns.get((t.get("process", 0), t["native_id"]), 0),
                  int(own[t["index"]])) for t in threads)
    used = int(np.count_nonzero(own))
    where = "the run's clock" if used <= 1 else f"its {used} threads' clocks"
    return ran * 1e-9, float(own.sum()) * 1e-9, where


def _busy_machine(report: "Report") -> Optional[str]:
    """'the machine's other processes kept 1.8 of the 2 CPUs this process
    may run on busy ...' where they left this run less than
    BUSY_MACHINE_FREE of a CPU on average; None otherwise or where
    unknown."""
    host = report.meta.get("host")
    if not isinstance(host, dict):
        return None
    others, cpus = host.get("other_cpus"), host.get("cpus")
    if not isinstance(others, (int, float)) or not isinstance(cpus, int) \
            or cpus - others >= BUSY_MACHINE_FREE:
        return None
    # cpus: those of the process's affinity, which other_cpus counts
    return (f"the machine's other processes kept {others:.1f} of the "
            f"{plural(cpus, 'CPU')} this process may run on busy on average "
            f"during the run, so its time off the CPU may be a wait for one")


def _competition(report: "Report") -> str:
    """What competed for the CPUs: the machine's, this report's busy
    threads and processes, the load average."""
    host = report.meta.get("host", {})
    cpus, load = host.get("cpus"), host.get("load")
    samples = report.samples or {"stacks": []}
    busy: Dict[Tuple[int, int], int] = {}
    for p, tid, _stage, _frames, _count, _wall, cpu, *_w in \
            samples["stacks"]:
        busy[p, tid] = busy.get((p, tid), 0) + cpu
    used = sum(busy.values()) * 1e-9 / report.wall if report.wall else 0.0
    processes = len({p for p, _tid in busy})
    parts = [f"this run's {plural(len(busy), 'sampled thread')} in "
             f"{plural(processes, 'process', 'processes')} used "
             f"{used:.1f} CPUs on average"]
    process = host.get("process_cpus")
    if isinstance(process, (int, float)) and len(report.processes) <= 1:
        parts[0] += (f", the process {process:.1f} with all its threads "
                     f"(native ones are not sampled)")
    if cpus:
        parts.append(f"{plural(cpus, 'CPU')} to run on")
    if load is not None:
        parts.append(f"load average {load:.1f} (every process of the "
                     f"machine)")
    return ", ".join(parts)


def _python_elsewhere(report: "Report", stage: "StageStats") -> str:
    """The stages whose threads used the most CPU meanwhile in the
    processes that ran this one: who kept the GIL, or ran C beside it."""
    samples = report.samples or {"stacks": []}
    mine = {s[0] for s in samples["stacks"] if s[2] == stage.id}
    names = report.stage_names
    cpu: Dict[str, int] = {}
    for p, _tid, sid, _frames, _count, _wall, used, *_w in \
            samples["stacks"]:
        if p in mine:
            name = names[sid] if sid >= 0 else "(no stage)"
            cpu[name] = cpu.get(name, 0) + used
    top = sorted(cpu.items(), key=lambda kv: -kv[1])[:3]
    listed = ", ".join(f"{printable(n)} {fmt_time(ns * 1e-9)}"
                       for n, ns in top if ns > 0)
    where = "its processes" if len(mine) > 1 else "its process"
    return (f"sampled CPU time by stage in {where} (threads running "
            f"Python hold the GIL): {listed}" if listed else
            f"no thread of {where} used CPU meanwhile")


def _levels(stage: "StageStats", report: "Report"
            ) -> Tuple[List["StageStats"], List["StageStats"]]:
    """The stage's recursion levels (Report.recursion) and the stages
    nested directly in any of them: what its own time leaves out."""
    levels = report.recursion(stage)
    paths = {s.path for s in levels}
    return levels, [s for s in report.stages if s.parent in paths]


def _own_waits(stage: "StageStats", report: "Report") -> Optional[Waits]:
    """The sampled Waits of the stage's own time, what it is classified
    by (_own_time): its levels' samples, its sub-stages' aside (a parent
    starved while it computed, beside a sleeping child, is not waiting);
    None where none of them was sampled."""
    levels, _sub = _levels(stage, report)
    found = [w for w in (stage_waits(report, s.path, sub_stages=False)
                         for s in levels) if w is not None]
    if not found:
        return None
    return Waits(sum(w.wall_s for w in found), sum(w.cpu_s for w in found),
                 sum(w.delay_s for w in found), sum(w.gil_s for w in found),
                 found[0].delay_known, found[0].gil_known,
                 sum(w.lock_s for w in found), found[0].lock_known)


def _own_time(stage: "StageStats", report: "Report") -> Tuple[float, float,
                                                               str]:
    """The stage's own thread CPU and wall time, seconds, its sub-stages'
    aside (what it was picked by, its self time, is that too: a parent
    that only waits for a computing child is not cpu-bound, nor is one
    that computes between waiting children waiting), and how the evidence
    names them. A recursive stage's are those of all its levels, as its
    rank is (Report.recursion): its outermost level may hold only the
    calls down to where its work is done."""
    levels, sub = _levels(stage, report)
    below = sum(s.cpu for s in sub)
    if len(levels) > 1:
        return (max(sum(s.cpu for s in levels) - below, 0.0),
                sum(s.self_time for s in levels),
                f"self time of its {len(levels):,} levels")
    if not below and stage.self_time >= stage.wall.total:
        return stage.cpu, stage.wall.total, "wall"
    return max(stage.cpu - below, 0.0), stage.self_time, "self time"


def _rank_wait(stage: "StageStats", report: "Report") -> Optional[str]:
    """'the other 2 processes wait here for rank 1 (vm): it is slowest
    in step/forward by 306.1 ms (16.3x its fastest); ...' where the
    stage's time on the other processes is a wait for one slow elsewhere
    (stragglers.rank_waits); None otherwise. Its first clause has no
    comma: the summary line keeps it alone."""
    if len(report.processes) < 2:
        return None
    wait = rank_waits(report).get(stage.path)
    if wait is None:
        return None
    cause = wait.cause
    rank = printable(cause.slowest.label)
    others = len(report.by_process(stage.path)) - 1
    who = ("the other process waits" if others == 1 else
           f"the other {plural(others, 'process', 'processes')} wait")
    # a fastest process that spent no time there: no ratio to give
    ratio = (f"{cause.ratio:.1f}x its fastest" if np.isfinite(cause.ratio)
             else "its fastest spent no time there")
    return (f"{who} here for {rank}: it is slowest in "
            f"{printable(cause.path)} by {fmt_time(cause.lost)} ({ratio}); it "
            f"spent {fmt_time(wait.stage.fastest.total)} here against "
            f"{fmt_time(wait.stage.slowest.total)} on "
            f"{printable(wait.stage.slowest.label)}")


def diagnose_stage(stage: "StageStats", report: "Report") -> Finding:
    cpu, wall, named = _own_time(stage, report)
    busy = cpu / wall if wall > 0 else 0.0
    host = ("cpu-bound" if busy >= CPU_BOUND else
            "waiting" if busy < WAITING else "mixed")
    host, waits, first, fix_key = _waits_class(stage, report, host, cpu,
                                               wall)
    evidence = (f"thread CPU time {fmt_time(cpu)} of {fmt_time(wall)} "
                f"{named} ({busy * 100:.0f} %), "
                f"{plural(stage.count, 'call')}, "
                + (f"self time {fmt_time(stage.self_time)}"
                   if named == "wall" else
                   f"{fmt_time(stage.cpu)} of {fmt_time(stage.wall.total)} "
                   f"with its sub-stages") + waits)
    holds_loop = False
    held_by = ""
    if stage.suspended * 2 >= stage.count > 0:
        host, evidence, holds_loop = _awaiting_class(stage, report)
        if host == "awaiting":
            held, held_by = _loop_held(stage, report)
            evidence += held
    kind = host
    waited = _rank_wait(stage, report)
    if waited is not None and host in ("waiting", "mixed"):
        kind = "straggler-bound"
        evidence = f"{waited}; host {host}: {evidence}"
    # the wait for another process is the cause, whatever the stage's
    # own data or device did meanwhile (an all-reduce blocks on the
    # device: sync-bound would send the reader after .item() calls)
    straggling = kind == "straggler-bound"
    loader = None if straggling else _loader_class(stage, report)
    gpu = None if loader or straggling else _gpu_class(stage)
    if loader:
        kind = "data-loading-bound"
        loader_evidence, fix, verify = loader
        evidence = f"{loader_evidence}; host {host}: {evidence}"
    else:
        if gpu:
            kind, gpu_evidence = gpu
            evidence = f"{gpu_evidence}; host {host}: {evidence}"
        fix, verify = _FIXES[_waiting_fix(report, stage) if
                             kind == "waiting" else
                             fix_key if kind == host and fix_key else kind]
        if kind == host:
            fix = first + fix
        verify = verify.replace("STAGE", repr(stage.path))
        if holds_loop:
            fix += ("; the event loop runs one task at a time: await the "
                    "call's asyncio form, or move the work off the loop "
                    "(asyncio.to_thread, loop.run_in_executor with a "
                    "process pool)")
        elif held_by and kind == "awaiting":
            fix = (f"its tasks waited for the event loop, busy in "
                   f"{held_by}, more than for I/O: move that work off the "
                   f"loop (asyncio.to_thread, loop.run_in_executor with a "
                   f"process pool), or await in it so other tasks run")
    code = _hottest_code(report, stage)
    if code:
        evidence += f"; hottest code: {code}"
    finding = Finding(stage.path, kind, evidence, fix, verify, host=host,
                      code=code)
    if stage.mem_rise and stage.mem_rise >= ALLOC_BYTES:
        _also(finding, "allocation-heavy",
              f"RSS rose up to {fmt_bytes(stage.mem_rise)} above its value "
              f"at entry within a call ({fmt_bytes(stage.mem_delta, True)} "
              f"kept over all calls){_others_allocate(report, stage)}")
    cuda = stage.cuda
    if cuda and cuda.allocations >= max(DEVICE_ALLOCS, stage.count * 0.9):
        _also(finding, "device-allocation",
              f"{cuda.allocations} device allocations in {stage.count} "
              f"calls ({fmt_bytes(cuda.mem_allocated)})")
    return finding


class Diagnosis:
    """Findings for the top stages by their ranked time: those the
    report names as its bottlenecks (Report.bottlenecks)."""

    def __init__(self, report: "Report", top: int = 3):
        if not whole(top, 1):
            raise ValueError(f"top must be an int >= 1, got {top!r}")
        tops = [s for s, _ranked in report.bottlenecks(top)]
        # a loop bound by its data loading is given whether or not its
        # wait ranks among the top: with num_workers=0 the self time is in
        # the dataset's stages nested in it
        paths = {s.path for s in tops}
        loaders = [s for s in report.stages if s.path not in paths and
                   _loader_class(s, report) is not None]
        self.findings = [diagnose_stage(s, report) for s in tops + loaders]
        self._loaders = len(loaders)
        #: why no GPU class could be given, or what GPU events dropped do
        #: to the classes given; None when GPU work was traced whole
        self.gpu: Optional[str] = None
        if report.gpu is None:
            self.gpu = (f"GPU classes (gpu-bound, gpu-starved, sync-, "
                        f"transfer-, launch-bound) need traced GPU "
                        f"activity; GPU: {report.gpu_status}")
        else:
            self.gpu = _gpu_lost(report.gpu)

    def __iter__(self):
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    def __repr__(self) -> str:
        return str(self)       # what a REPL should show: the findings

    def _repr_html_(self) -> str:
        return text_html(str(self))

    def __str__(self) -> str:
        if not self.findings:
            return "Diagnosis: no stage with self time to diagnose"
        also = (", and the loops bound by their data loading"
                if self._loaders else "")
        lines = [f"Diagnosis of the top stages by self time{also}:"]
        for i, f in enumerate(self.findings, 1):
            lines.append(f"  {i}. " + str(f).replace("\n", "\n   "))
        if self.gpu:
            lines.append(f"  ({self.gpu})")
        return "\n".join(lines)

    def summary(self, width: Optional[int] = None) -> str:
        """One line a stage, for the printed report; width: the terminal
        columns a stage's path may take at most, beside its number."""
        if not self.findings:
            return "Diagnosis: no stage with self time to diagnose"
        lines = ["Diagnosis (details: report.diagnose()):"]
        for i, f in enumerate(self.findings, 1):
            extra = f" + {', '.join(f.also)}" if f.also else ""
            code = f"; hottest code: {first_clause(f.code)}" \
                if f.code else ""
            most = 120 if width is None else max(width - 8, 12)
            lines.append(f"  {i}. {shorten_path(printable(f.path), most)}: "
                         f"{f.kind}{extra}; {first_clause(f.evidence)}"
                         f"{code}")
        if self.gpu and not self.gpu.startswith("GPU classes"):
            lines.append(f"  ({self.gpu})")
        return "\n".join(lines)


def _gpu_lost(gpu: Dict[str, Any]) -> Optional[str]:
    """What the GPU events dropped do to the findings, None where none
    were: the stages that launched them have no GPU figures, and a host
    class where a GPU one might hold."""
    over, lost = events_dropped(gpu)
    if not over and not lost:
        return None
    why = "; ".join(
        ([f"{over:,} past max_gpu_events={gpu.get('max_events', 0):,}"]
         if over else []) +
        ([f"{lost:,} lost by CUPTI"] if lost else []))
    return (f"{plural(over + lost, 'GPU event')} dropped ({why}): the "
            f"stages that launched them lack those GPU figures, and their "
            f"classes may be the host's where a GPU class holds; raise "
            f"max_gpu_events to keep them")
