"""Type stubs of the C extension aquaprof._core."""
from typing import (Any, Callable, Dict, Optional, Sequence, TypeVar,
                    overload)

import numpy as np

_F = TypeVar("_F", bound=Callable[..., Any])

SPAN_DTYPE: np.dtype
HIST_LOWER_NS: np.ndarray
SPAN_RAISED: int
SPAN_UNCLOSED: int
SPAN_SUSPENDED: int

# GPU events (Profiler(cuda=...)): their record, their kinds, and the
# direction of a copy
GPU_DTYPE: np.dtype
GPU_KERNEL: int
GPU_MEMCPY: int
GPU_MEMSET: int
GPU_ALLOC: int
GPU_FREE: int
GPU_SYNC: int
COPY_OTHER: int
COPY_H2D: int
COPY_D2H: int
COPY_D2D: int
# 1 where the extension was built with CUPTI tracing, else 0
HAVE_CUPTI: int

class Stage:
    @property
    def name(self) -> Optional[str]: ...
    @property
    def items(self) -> int: ...
    def __enter__(self) -> "Stage": ...
    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool: ...
    def __call__(self, func: _F) -> _F: ...

class StagedFunction:
    @property
    def stage_name(self) -> str: ...
    __wrapped__: Callable[..., Any]
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    # A method when looked up on an instance, as a plain function is
    def __get__(self, obj: Any, objtype: Any = ...) -> Any: ...

@overload
def stage(name: _F, *, items: Optional[int] = ...) -> _F: ...
@overload
def stage(name: Optional[str] = ..., *, items: Optional[int] = ...) -> Stage: ...
def active() -> bool: ...
def _restage(func: _F, name: str, items: int) -> _F: ...
def merge_stage(into: Dict[str, Any],
                other: Dict[str, Any]) -> Dict[str, Any]:
    """A new stage dict: into's aggregates merged with other's by the
    core's merge (Chan's parallel mean and m2, sums, extremes, histogram);
    into's keys and order kept, a stage of count 0 contributes nothing."""
    ...
def _fail_allocations(skip: int, count: int) -> int:
    """For tests: after `skip` more allocations of the C core succeed,
    the next `count` fail (-1: all until the next call; (0, 0): none).
    Returns how many were made to fail so far."""
    ...

class Sampler:
    """Samples every thread's Python call stack by stage (internal)."""
    def __init__(self, interval_ns: int, max_samples: int) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def data(self) -> Dict[str, Any]: ...

class Profiler:
    def __init__(self, *, max_spans: int = ..., memory: bool = ...,
                 memory_interval: float = ...,
                 cpu_resolution: float = ..., cuda: int = ...,
                 cuda_sync: bool = ..., libcuda: str = ...,
                 cupti_paths: Sequence[str] = ...,
                 window: int = ..., max_stages: int = ...,
                 max_gpu_events: int = ...) -> None: ...
    @property
    def running(self) -> bool: ...
    @property
    def nested(self) -> bool: ...
    @property
    def nest_base(self) -> Optional[Dict[str, Any]]: ...
    def start(self, *, nest: bool = ...,
              neighbor: Optional[str] = ...) -> None: ...
    def stop(self, *, neighbor: Optional[str] = ...) -> None: ...
    def report_data(self) -> Dict[str, Any]: ...
    def snapshot_data(self) -> Dict[str, Any]: ...
    def _footprint(self) -> int: ...
