"""Per-stage and per-kernel GPU figures drawn from a report's traced
events (Report.gpu_events()).

Each event carries the stage and the span whose code launched it (CUPTI
external correlation ids, pushed at stage entry), so attribution holds on
any stream and never synchronizes the device.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np

from .._core import COPY_D2H, COPY_H2D
from ..model.schema import ALLOC, COPY_NAMES, KERNEL, MEMCPY, MEMSET, SYNC

if TYPE_CHECKING:
    from ..model.report import Report

_NS = 1e-9
_NONE = np.iinfo(np.int64).min      # no allocation, in an int64 array


@dataclass
class CopyStats:
    """Memory copies of one direction."""
    count: int = 0
    time: float = 0.0          # seconds on the device
    bytes: int = 0
    pageable_bytes: int = 0    # host side pageable: a staged, slower copy

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
    #: the kernels, or a function that lists them when first asked
    _kernels: Any = field(default_factory=list, repr=False, compare=False)

    @property
    def top_kernels(self) -> List[KernelStats]:
        """The stage's three kernel names with the longest total (its
        sub-stages' included), longest first."""
        if callable(self._kernels):
            self._kernels = self._kernels()
        return self._kernels

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
    # each name's longest launch (the first of equals): the last of its
    # group once sorted by name, duration and launch order reversed
    by_length = np.lexsort((-np.arange(len(kernels)), duration, index))
    longest_of = by_length[np.cumsum(counts) - 1]
    order = np.argsort(-totals, kind="stable")[:limit]
    out = []
    for k in order:
        longest = kernels[longest_of[k]]
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


def _tree_order(names: List[str]) -> Tuple[np.ndarray, np.ndarray,
                                             np.ndarray]:
    """Each stage's parent id (-1 at top), its place in a depth-first
    order, and the number of stages in its subtree (itself included): a
    stage's subtree holds the places [place, place + size). Linear in the
    stages: names hold no '/', so a path's parent is what precedes its
    last '/', and parents come before their children."""
    ids = {path: i for i, path in enumerate(names)}
    parent = np.array([ids[p.rsplit("/", 1)[0]] if "/" in p else -1
                       for p in names], np.int64)
    size = np.ones(len(names), np.int64)
    for i in range(len(names) - 1, -1, -1):
        if parent[i] >= 0:
            size[parent[i]] += size[i]
    place = np.zeros(len(names), np.int64)
    # a stage's first child sits right after it; each next child after
    # the subtree of the one before
    following = np.zeros(len(names) + 1, np.int64)   # by parent id + 1
    for i in range(len(names)):
        p = parent[i]
        if p < 0:
            place[i] = following[0]
            following[0] += size[i]
        else:
            place[i] = following[p + 1]
            following[p + 1] += size[i]
        following[i + 1] = place[i] + 1
    return parent, place, size


def _sums(values: np.ndarray, lo: np.ndarray, hi: np.ndarray
          ) -> np.ndarray:
    """values summed over each [lo, hi) range."""
    before = np.concatenate([[0], np.cumsum(values)])
    return before[hi] - before[lo]


def stage_cuda(report: "Report") -> Dict[int, CudaStats]:
    """CudaStats for every stage id that launched GPU work or holds a
    sub-stage that did. Events sorted by their stage's place in the tree
    make each subtree's events one slice, so the figures are prefix sums:
    the cost grows with the events and the stages, not with their
    product or the tree's depth."""
    events = report.gpu_events()
    if events is None:
        return {}
    names = report.stage_names
    parent, place, size = _tree_order(names)
    staged = events[events["stage"] >= 0]
    at = place[staged["stage"]]
    order = np.argsort(at, kind="stable")
    mine, at = staged[order], at[order]
    lo = np.searchsorted(at, place, "left")
    hi = np.searchsorted(at, place + size, "left")
    own_hi = np.searchsorted(at, place, "right")
    duration = (mine["end_ns"] - mine["start_ns"]) * _NS
    kind = mine["kind"]
    kernel = kind == KERNEL

    def total(mask: np.ndarray, values: Any = None) -> np.ndarray:
        chosen = mask if values is None else np.where(mask, values, 0)
        return _sums(chosen, lo, hi)

    kernels, kernel_time = total(kernel), total(kernel, duration)
    self_kernel_time = _sums(np.where(kernel, duration, 0.0), lo, own_hi)
    copies = {}
    for code, label in COPY_NAMES.items():
        copy = (kind == MEMCPY) & (mine["copy"] == code)
        # pageable or pinned is a host buffer's: a copy between devices
        # (D2D, peer ones among "other") has none to stage
        host = code in (COPY_H2D, COPY_D2H)
        copies[label] = (total(copy), total(copy, duration),
                         total(copy, mine["bytes"]),
                         total(copy & host & (mine["pinned"] == 0),
                               mine["bytes"]))
    memset_time = total(kind == MEMSET, duration)
    sync_time = total(kind == SYNC, duration)
    allocs = kind == ALLOC
    allocations, allocated = total(allocs), total(allocs, mine["bytes"])
    peak = _subtree_peaks(report, mine, allocs, parent, lo, own_hi)
    idle = _idle_shares(report, events, np.flatnonzero(hi > lo))

    out: Dict[int, CudaStats] = {}
    for sid in np.flatnonzero(hi > lo).tolist():
        st = CudaStats()
        st.kernels = int(kernels[sid])
        st.kernel_time = float(kernel_time[sid])
        st.self_kernel_time = float(self_kernel_time[sid])
        for label, (count, time, moved, pageable) in copies.items():
            if count[sid]:
                st.memcpy[label] = CopyStats(
                    int(count[sid]), float(time[sid]), int(moved[sid]),
                    int(pageable[sid]))
        st.memset_time = float(memset_time[sid])
        st.sync_time = float(sync_time[sid])
        st.allocations = int(allocations[sid])
        st.mem_allocated = int(allocated[sid])
        if st.allocations:
            st.mem_peak = int(peak[sid])
        st.idle_share = idle.get(sid)
        # in launch order, as kernel_table breaks ties by it
        st._kernels = (lambda a=int(lo[sid]), b=int(hi[sid]):
                       kernel_table(report, staged[np.sort(order[a:b])],
                                    limit=3))
        out[sid] = st
    return out


def _subtree_peaks(report: "Report", mine: np.ndarray, allocs: np.ndarray,
                   parent: np.ndarray, lo: np.ndarray, own_hi: np.ndarray
                   ) -> np.ndarray:
    """Per stage, the most device memory in use right after one of the
    allocations of its subtree (NONE when it has none; frees CUPTI saw
    without their allocation can make it negative): each stage's own,
    then carried up to its parents."""
    memory, in_use = report.gpu_memory()
    peak = np.full(len(parent), _NONE, np.int64)
    if not allocs.any() or not len(memory):
        return peak
    # the highest in-use figure of each correlation id
    ids, where = np.unique(memory["correlation"], return_inverse=True)
    highest = np.full(len(ids), _NONE, np.int64)
    np.maximum.at(highest, where, in_use)
    found = np.searchsorted(ids, mine["correlation"])
    found = np.minimum(found, len(ids) - 1)
    value = np.where(allocs & (ids[found] == mine["correlation"]),
                     highest[found], _NONE)
    for sid in np.flatnonzero(own_hi > lo).tolist():
        peak[sid] = value[lo[sid]:own_hi[sid]].max()
    for sid in range(len(parent) - 1, -1, -1):
        if parent[sid] >= 0 and peak[sid] > peak[parent[sid]]:
            peak[parent[sid]] = peak[sid]
    return peak


def _idle_shares(report: "Report", events: np.ndarray,
                 stages: np.ndarray) -> Dict[int, float]:
    """For each of stages, the share of the time its own spans were open
    with no kernel, copy or memset running on any device."""
    activity = np.isin(events["kind"], (KERNEL, MEMCPY, MEMSET))
    busy = _merged(events["start_ns"][activity], events["end_ns"][activity])
    spans = report.spans()
    order = np.argsort(spans["stage"], kind="stable")
    by_stage = spans[order]
    first = np.searchsorted(by_stage["stage"], stages, "left")
    last = np.searchsorted(by_stage["stage"], stages, "right")
    out = {}
    for sid, a_at, b_at in zip(stages.tolist(), first.tolist(),
                               last.tolist()):
        if a_at == b_at:
            continue
        opened = by_stage[a_at:b_at]
        a, b = _merged(opened["start_ns"], opened["end_ns"])
        length = float((b - a).sum())
        if length > 0:
            out[sid] = 1.0 - float(_covered(busy, a, b).sum()) / length
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


def events_dropped(gpu: Dict[str, Any]) -> Tuple[int, int]:
    """The GPU events a run never recorded: past max_gpu_events, and lost
    by CUPTI (a report's "gpu" section)."""
    return int(gpu.get("over_max", 0)), int(gpu.get("dropped", 0))
