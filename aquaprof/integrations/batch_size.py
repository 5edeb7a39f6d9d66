"""``aquaprof.sweep``: a function run at several batch sizes, with the
throughput, latency and memory of each, the best batch size and where
memory gives out.

    result = ap.sweep(lambda b: model(batch(b)), [1, 8, 16, 32])
    result = ap.sweep(lambda b: mvs.build_cost_volume(..., depth_batch=b),
                      [1, 8, 16, 32], items=lambda b: n_depths)
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

from ..common.checks import whole
from .._core import active, stage
from ..common.units import fmt_bytes, fmt_rate, fmt_time, text_html


@dataclass
class BatchResult:
    batch: int
    status: str                    # "ok", "over memory", or the error
    latency: Optional[float]       # median seconds a call
    throughput: Optional[float]    # items a second
    host_peak: Optional[int]       # RSS peak above the start, bytes
    gpu_peak: Optional[int]        # torch's peak allocation, bytes


def _rss_peak_reset() -> bool:
    """Resets the kernel's RSS high-water mark (VmHWM); False where it
    cannot be."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _status_value(key: str) -> Optional[int]:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _torch_cuda() -> Any:
    """torch's CUDA module if the process already uses CUDA, else None:
    a sweep never starts CUDA by itself."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return torch.cuda
    return None


class SweepResult:
    def __init__(self, rows: List[BatchResult], report: Any):
        self.rows = rows
        #: the Profiler's report of the sweep (None inside a caller's own
        #: profiler, whose report then holds the stages)
        self.report = report

    @property
    def best(self) -> Optional[int]:
        """The batch size with the highest throughput among those that ran
        within memory."""
        ok = [r for r in self.rows if r.status == "ok" and r.throughput]
        # (`or 0.0` for the type checker: ok holds no None throughput)
        return max(ok, key=lambda r: r.throughput or 0.0).batch if ok \
            else None

    @property
    def pressure_point(self) -> Optional[int]:
        """The first batch size that failed or went over the memory
        limit."""
        bad = [r for r in self.rows if r.status != "ok"]
        return bad[0].batch if bad else None

    def __repr__(self) -> str:
        return str(self)       # what a REPL should show: the table

    def _repr_html_(self) -> str:
        return text_html(str(self))

    def __str__(self) -> str:
        lines = [f"{'batch':>6} {'latency':>10} {'items/s':>10} "
                 f"{'host peak':>10} {'GPU peak':>10}  status"]
        for r in self.rows:
            lines.append(
                f"{r.batch:6d} "
                f"{fmt_time(r.latency) if r.latency else '-':>10} "
                f"{fmt_rate(r.throughput):>10} {fmt_bytes(r.host_peak):>10} "
                f"{fmt_bytes(r.gpu_peak):>10}  {r.status}")
        best = "none ran within memory" if self.best is None \
            else self.best
        pressure = (f"memory pressure from batch {self.pressure_point}"
                    if self.pressure_point is not None else
                    f"no memory pressure up to batch {self.rows[-1].batch}")
        lines.append(f"best batch size: {best}; {pressure}")
        return "\n".join(lines)


def sweep(fn: Callable[[int], Any], batch_sizes: Sequence[int], *,
          items: Optional[Callable[[int], int]] = None, repeats: int = 3,
          warmup: int = 1, memory_limit: Optional[int] = None
          ) -> SweepResult:
    """Runs fn(batch) `warmup` times, then `repeats` times under a stage
    ``sweep batch=N``, for each batch size in order.

    items(batch): items one call processes (default: batch). A batch
    size whose call raises MemoryError or torch's out-of-memory error, or
    whose host (RSS) or GPU memory peak goes over memory_limit bytes, is
    marked and the larger ones are not tried."""
    from ..record.profiler import Profiler
    sizes = list(batch_sizes)
    if not sizes or not all(whole(b, 1) for b in sizes):
        raise ValueError(f"batch_sizes must be ints >= 1, got {sizes!r}")
    if not callable(fn):
        raise TypeError("fn must be callable with a batch size")
    if repeats < 1 or warmup < 0:
        raise ValueError("repeats must be >= 1 and warmup >= 0")
    count = items or (lambda b: b)
    own = None if active() else Profiler()
    if own:
        own.start()
    rows: List[BatchResult] = []
    try:
        for b in sizes:
            rows.append(_one_size(fn, b, count(b), repeats, warmup,
                                  memory_limit))
            if rows[-1].status != "ok":
                break
    finally:
        if own:
            own.stop()
    return SweepResult(rows, own.report() if own else None)


def _one_size(fn: Callable[[int], Any], b: int, n_items: int, repeats: int,
              warmup: int, memory_limit: Optional[int]) -> BatchResult:
    cuda = _torch_cuda()
    base = _status_value("VmRSS:")
    tracked = _rss_peak_reset()
    if cuda:
        cuda.reset_peak_memory_stats()
        gpu_base = cuda.memory_allocated()
    times = []
    try:
        for _ in range(warmup):
            fn(b)
        for _ in range(repeats):
            with stage(f"sweep batch={b}", items=n_items):
                t = time.perf_counter()
                fn(b)
                if cuda:
                    cuda.synchronize()
                times.append(time.perf_counter() - t)
    except Exception as e:
        oom = isinstance(e, MemoryError) or "out of memory" in str(e).lower()
        if not oom:
            raise
        return BatchResult(b, f"out of memory ({type(e).__name__})", None,
                           None, None, None)
    peak = _status_value("VmHWM:") if tracked else None
    host = peak - base if peak is not None and base is not None else None
    gpu = cuda.max_memory_allocated() - gpu_base if cuda else None
    latency = statistics.median(times)
    over = memory_limit is not None and (
        (host or 0) > memory_limit or (gpu or 0) > memory_limit)
    return BatchResult(b, "over memory" if over else "ok", latency,
                       n_items / latency if latency > 0 else None, host, gpu)
