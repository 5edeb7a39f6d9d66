"""torch.profiler in the same process: it must be handed aquaprof's
CUPTI records before it takes CUPTI's callbacks."""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from ... import _core

_FLUSHES_FIRST = "_aquaprof_flushes_first"


def flush_before_torch_profiler() -> None:
    """Has torch.profiler hand aquaprof the CUPTI records of the run so far
    before it registers its own CUPTI callbacks: CUPTI delivers a buffer
    to whoever's callback is registered when it fills, so the buffer
    aquaprof was filling would otherwise go to torch.profiler, which
    drops a buffer it did not allocate, with aquaprof's records and its
    own first ones. Wraps torch's two profiler entry points once per
    process (a flush when no trace runs does nothing); torch not yet
    imported, or another torch, is left alone."""
    module = sys.modules.get("torch.autograd.profiler")
    if module is None:
        return
    for name in ("_prepare_profiler", "_enable_profiler"):
        original = getattr(module, name, None)
        if callable(original) and not getattr(original, _FLUSHES_FIRST,
                                              False):
            wrapped = _flushing_first(original)
            try:
                setattr(module, name, wrapped)
            except (AttributeError, TypeError):  # a module refusing it
                pass


def _flushing_first(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def flushing_first(*args: Any, **kwargs: Any) -> Any:
        _core._gpu_flush()
        return original(*args, **kwargs)

    setattr(flushing_first, _FLUSHES_FIRST, True)
    return flushing_first
