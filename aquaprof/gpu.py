"""GPU activity in reports: what Profiler(cuda=...) asks of the C layer,
where CUPTI is looked for, and the per-stage and per-kernel figures drawn
from the traced events (Report.gpu_events()).

Each event carries the stage and the span whose code launched it (CUPTI
external correlation ids, pushed at stage entry), so attribution holds on
any stream and never synchronizes the device.
"""
from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np

from . import _core

if TYPE_CHECKING:
    from .report import Report

KERNEL, MEMCPY, MEMSET = _core.GPU_KERNEL, _core.GPU_MEMCPY, _core.GPU_MEMSET
ALLOC, FREE, SYNC = _core.GPU_ALLOC, _core.GPU_FREE, _core.GPU_SYNC
COPY_NAMES = {_core.COPY_H2D: "H2D", _core.COPY_D2H: "D2H",
              _core.COPY_D2D: "D2D", _core.COPY_OTHER: "other"}
_MODES = {False: 0, "auto": 1, True: 2}
_NS = 1e-9


def cupti_candidates() -> List[str]:
    """Where CUPTI is looked for, in order: $AQUAPROF_CUPTI (the library or
    its folder), $CUDA_HOME and $CUDA_PATH, /usr/local/cuda, the nvidia-*
    Python wheels' lib folders, then the loader's own search path. (A
    CUPTI already loaded in the process, torch's, is used before any.)"""
    out: List[str] = []

    def folder(path: str) -> None:
        out.extend(sorted(glob.glob(os.path.join(path, "libcupti.so*")),
                          key=len))

    given = os.environ.get("AQUAPROF_CUPTI")
    if given:
        if os.path.isdir(given):
            folder(given)
        else:
            out.append(given)
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
             "/usr/local/cuda"]
    for root in filter(None, roots):
        for sub in ("extras/CUPTI/lib64", "lib64", "lib"):
            folder(os.path.join(root, sub))
    for site in sys.path:
        for lib in sorted(glob.glob(os.path.join(site, "nvidia", "*",
                                                 "lib"))):
            folder(lib)
    out += ["libcupti.so.13", "libcupti.so"]
    return list(dict.fromkeys(out))


def profiler_args(cuda: Any, cuda_sync: Any) -> Dict[str, Any]:
    """The _core.Profiler keywords for cuda= and cuda_sync=."""
    if not any(cuda is mode for mode in (True, False)) and cuda != "auto":
        raise ValueError(f"cuda must be 'auto', True or False, got {cuda!r}")
    if not isinstance(cuda_sync, bool):
        raise ValueError(f"cuda_sync must be True or False, got "
                         f"{cuda_sync!r}")
    args: Dict[str, Any] = {"cuda": _MODES[cuda], "cuda_sync": cuda_sync}
    if cuda is not False:
        args["cupti_paths"] = cupti_candidates()
        # the driver to open: a test or an unusual install may name it
        args["libcuda"] = os.environ.get("AQUAPROF_LIBCUDA", "libcuda.so.1")
    elif cuda_sync:
        args["libcuda"] = os.environ.get("AQUAPROF_LIBCUDA", "libcuda.so.1")
    return args


@dataclass
class CopyStats:
    """Memory copies of one direction."""
    count: int = 0
    time: float = 0.0          # seconds on the device
    bytes: int = 0
    pageable_bytes: int = 0    # host side not pinned: a staged, slower copy

    @property
    def bandwidth(self) -> Optional[float]:
        """Achieved bytes per second, None without copies."""
        return self.bytes / self.time if self.time > 0 else None


@dataclass
class KernelStats:
    """One kernel name's launches."""
    name: str
    count: int
    total: float               # seconds
    grid: Tuple[int, int, int]     # of the launch that took longest
    block: Tuple[int, int, int]
    registers: int             # per thread
    shared: int                # bytes per block
    occupancy: Optional[float]  # theoretical, 0..1, None without device data

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0


@dataclass
class CudaStats:
    """A stage's GPU work, its sub-stages' included (self_kernel_time
    leaves them out). Times are seconds on the device."""
    kernels: int = 0
    kernel_time: float = 0.0
    self_kernel_time: float = 0.0
    memcpy: Dict[str, CopyStats] = field(default_factory=dict)
    memset_time: float = 0.0
    sync_time: float = 0.0     # host blocked in device synchronizations
    #: share of the time the stage was open with no kernel, copy or
    #: memset running on any device; None when no spans were kept
    idle_share: Optional[float] = None
    allocations: int = 0       # device allocations (cudaMalloc) made
    mem_allocated: int = 0     # device bytes the stage cudaMalloc'ed
    #: highest device memory (of allocations CUPTI saw) right after one of
    #: the stage's allocations; None when it made none
    mem_peak: Optional[int] = None
    top_kernels: List[KernelStats] = field(default_factory=list)

    @property
    def memcpy_time(self) -> float:
        return sum(c.time for c in self.memcpy.values())

    @property
    def busy_time(self) -> float:
        return self.kernel_time + self.memcpy_time + self.memset_time


def occupancy(device: Dict[str, int], block: int, registers: int,
              shared: int) -> Optional[float]:
    """Theoretical occupancy (resident warps over the SM's maximum) from
    the limits of threads, blocks, registers and shared memory per SM;
    allocation granularities are left out, so it can read a little high."""
    warp = device.get("warp_size") or 32
    max_threads = device.get("threads_per_sm") or 0
    if block <= 0 or max_threads <= 0:
        return None
    warps = -(-block // warp)
    limits = [max_threads // (warps * warp),
              device.get("blocks_per_sm") or 1 << 30]
    if registers:
        limits.append(device.get("registers_per_sm", 0) //
                      (registers * warps * warp))
    if shared:
        limits.append(device.get("shared_per_sm", 0) // shared)
    blocks = max(min(limits), 0)
    return min(blocks * warps * warp / max_threads, 1.0)


def kernel_table(report: "Report", events: np.ndarray,
                 limit: Optional[int] = None) -> List[KernelStats]:
    """Kernels among events grouped by name, longest total first."""
    gpu = report.gpu
    kernels = events[events["kind"] == KERNEL]
    if not len(kernels):
        return []
    duration = (kernels["end_ns"] - kernels["start_ns"]).astype(np.int64)
    names, index = np.unique(kernels["name"], return_inverse=True)
    totals = np.bincount(index, weights=duration)
    counts = np.bincount(index)
    order = np.argsort(-totals, kind="stable")[:limit]
    out = []
    for k in order:
        mine = np.flatnonzero(index == k)
        longest = kernels[mine[np.argmax(duration[mine])]]
        block = tuple(int(x) for x in longest["block"])
        device = gpu["devices"][int(longest["device"])] \
            if int(longest["device"]) < len(gpu["devices"]) else {}
        out.append(KernelStats(
            gpu["kernel_names"][int(names[k])], int(counts[k]),
            float(totals[k]) * _NS, tuple(int(x) for x in longest["grid"]),
            block, int(longest["registers"]), int(longest["shared"]),
            occupancy(device, block[0] * block[1] * block[2],
                      int(longest["registers"]), int(longest["shared"]))))
    return out


def _merged(starts: np.ndarray, ends: np.ndarray
            ) -> Tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint [start, end) pairs."""
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    first = np.ones(len(s), bool)
    first[1:] = s[1:] > np.maximum.accumulate(e)[:-1]
    at = np.flatnonzero(first)
    return s[at], np.maximum.reduceat(e, at)


def _covered(busy: Tuple[np.ndarray, np.ndarray], a: np.ndarray,
             b: np.ndarray) -> np.ndarray:
    """How much of each [a, b) the disjoint sorted busy intervals cover."""
    s, e = busy
    if not len(s):
        return np.zeros(len(a))
    before = np.concatenate([[0], np.cumsum(e - s)])   # length before each

    def upto(x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(s, x, side="right") - 1     # last one begun
        j = np.maximum(i, 0)
        return np.where(i >= 0, before[j] + np.clip(x - s[j], 0,
                                                    e[j] - s[j]), 0)

    return upto(b) - upto(a)


def stage_cuda(report: "Report") -> Dict[int, CudaStats]:
    """CudaStats for every stage id that launched GPU work or holds a
    sub-stage that did."""
    events = report.gpu_events()
    if events is None:
        return {}
    names = report.stage_names
    # each stage with its sub-stages: ids whose path extends it
    within: Dict[int, List[int]] = {i: [i] for i in range(len(names))}
    for i, path in enumerate(names):
        for j in range(len(names)):
            if j != i and path.startswith(names[j] + "/"):
                within[j].append(i)
    activity = np.isin(events["kind"], (KERNEL, MEMCPY, MEMSET))
    busy = _merged(events["start_ns"][activity], events["end_ns"][activity])
    memory = events[np.isin(events["kind"], (ALLOC, FREE))]
    memory = memory[np.argsort(memory["start_ns"], kind="stable")]
    in_use = np.cumsum(np.where(memory["kind"] == ALLOC, memory["bytes"],
                                -memory["bytes"]))
    spans = report.spans()
    out: Dict[int, CudaStats] = {}
    for sid, ids in within.items():
        mine = events[np.isin(events["stage"], ids)]
        if not len(mine):
            continue
        st = CudaStats()
        duration = (mine["end_ns"] - mine["start_ns"]) * _NS
        kernel = mine["kind"] == KERNEL
        st.kernels = int(kernel.sum())
        st.kernel_time = float(duration[kernel].sum())
        st.self_kernel_time = float(duration[kernel & (mine["stage"] == sid)]
                                    .sum())
        for code, label in COPY_NAMES.items():
            copies = (mine["kind"] == MEMCPY) & (mine["copy"] == code)
            if copies.any():
                st.memcpy[label] = CopyStats(
                    int(copies.sum()), float(duration[copies].sum()),
                    int(mine["bytes"][copies].sum()),
                    int(mine["bytes"][copies & (mine["pinned"] == 0)].sum()))
        st.memset_time = float(duration[mine["kind"] == MEMSET].sum())
        st.sync_time = float(duration[mine["kind"] == SYNC].sum())
        allocs = (mine["kind"] == ALLOC)
        st.allocations = int(allocs.sum())
        st.mem_allocated = int(mine["bytes"][allocs].sum())
        if allocs.any():
            at = np.isin(memory["correlation"], mine["correlation"][allocs])
            st.mem_peak = int(in_use[at].max())
        opened = spans[np.isin(spans["stage"], [sid])]
        if len(opened):
            a, b = _merged(opened["start_ns"], opened["end_ns"])
            total = float((b - a).sum())
            if total > 0:
                st.idle_share = 1.0 - float(_covered(busy, a, b).sum()) / total
        st.top_kernels = kernel_table(report, mine, limit=3)
        out[sid] = st
    return out


def span_gpu_time(report: "Report") -> np.ndarray:
    """Kernel seconds launched by each span (aligned with spans())."""
    spans = report.spans()
    events = report.gpu_events()
    out = np.zeros(len(spans))
    if events is None:
        return out
    kernels = events[(events["kind"] == KERNEL) & (events["span"] >= 0)]
    np.add.at(out, kernels["span"], (kernels["end_ns"] - kernels["start_ns"])
              * _NS)
    return out


def validate(gpu: Any, nstages: int, nspans: int) -> None:
    """Raises ReportError unless gpu is a report's decoded GPU section."""
    from .report import ReportError
    if not isinstance(gpu, dict):
        raise ReportError("report['gpu'] must be an object")
    names, devices = gpu.get("kernel_names"), gpu.get("devices")
    if not isinstance(names, list) or not all(isinstance(n, str)
                                              for n in names):
        raise ReportError("report['gpu']['kernel_names'] must be a list of "
                          "str")
    if not isinstance(devices, list) or not all(
            isinstance(d, dict) and isinstance(d.get("name"), str) and all(
                isinstance(v, int) and not isinstance(v, bool)
                for k, v in d.items() if k != "name") for d in devices):
        raise ReportError("report['gpu']['devices'] must be a list of "
                          "objects with a str 'name' and int limits")
    for key in ("dropped", "unattributed"):
        value = gpu.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or \
                value < 0:
            raise ReportError(f"report['gpu'][{key!r}] must be an int >= 0")
    ev = gpu.get("events")
    if not isinstance(ev, np.ndarray) or ev.dtype != _core.GPU_DTYPE:
        raise ReportError("report['gpu']['events'] must be a GPU event "
                          "array")
    if not len(ev):
        return
    problems = [
        (~np.isin(ev["kind"], (KERNEL, MEMCPY, MEMSET, ALLOC, FREE, SYNC)),
         "an unknown kind"),
        ((ev["stage"] < -1) | (ev["stage"] >= nstages), "a stage id the "
         "report lacks"),
        ((ev["span"] < -1) | (ev["span"] >= nspans), "a span the report "
         "lacks"),
        ((ev["kind"] == KERNEL) & (ev["name"] >= len(names)),
         "a kernel name the report lacks"),
        (ev["end_ns"] < ev["start_ns"], "an end before its start"),
        (ev["bytes"] < 0, "negative bytes"),
        (ev["copy"] > 3, "an unknown copy direction"),
    ]
    for bad, what in problems:
        if bad.any():
            raise ReportError(f"a GPU event has {what}")
