"""Per-stage and per-kernel GPU figures drawn from a report's traced
events (Report.gpu_events()).

Each event carries the stage and the span whose code launched it (CUPTI
external correlation ids, pushed at stage entry), so attribution holds on
any stream and never synchronizes the device.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import numpy as np

from ..schema import ALLOC, COPY_NAMES, KERNEL, MEMCPY, MEMSET, SYNC

if TYPE_CHECKING:
    from ..report import Report

_NS = 1e-9


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


def _dim3(v: np.ndarray) -> Tuple[int, int, int]:
    """A launch's grid or block (3 x u4 in GPU_DTYPE) as ints."""
    return int(v[0]), int(v[1]), int(v[2])


def kernel_table(report: "Report", events: np.ndarray,
                 limit: Optional[int] = None) -> List[KernelStats]:
    """Kernels among events grouped by name, longest total first."""
    gpu = report.gpu
    kernels = events[events["kind"] == KERNEL]
    if gpu is None or not len(kernels):     # no GPU section: no kernels
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
        block = _dim3(longest["block"])
        device = gpu["devices"][int(longest["device"])] \
            if int(longest["device"]) < len(gpu["devices"]) else {}
        out.append(KernelStats(
            gpu["kernel_names"][int(names[k])], int(counts[k]),
            float(totals[k]) * _NS, _dim3(longest["grid"]),
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
    memory, in_use = report.gpu_memory()
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
