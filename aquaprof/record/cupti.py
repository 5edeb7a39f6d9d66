"""Where CUPTI and the CUDA driver are looked for, and what
Profiler(cuda=..., cuda_sync=...) asks of the C layer."""
from __future__ import annotations

import functools
import glob
import os
import sys
from typing import Any, Callable, Dict, List, Optional

_MODES = {False: 0, "auto": 1, True: 2}


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


def cupti_neighbor() -> Optional[str]:
    """The other CUPTI client tracing this process now, or None: CUPTI
    serves one client at a time, and aquaprof never takes it from one.
    torch.profiler (Kineto) is asked through torch, when torch is already
    imported; Nsight tools and other injected CUDA tools show in
    CUDA_INJECTION64_PATH."""
    torch = sys.modules.get("torch")
    try:
        enabled = torch._C._autograd._profiler_enabled  # type: ignore
    except AttributeError:  # no torch, another torch, one half imported
        enabled = None
    # called outside the try: what a program's signal handler raises
    # meanwhile is the program's
    if enabled is not None and enabled():
        return "torch.profiler"
    injected = os.environ.get("CUDA_INJECTION64_PATH")
    if injected:
        return f"a CUDA tool injected through CUDA_INJECTION64_PATH " \
               f"({os.path.basename(injected)}, Nsight's as a rule)"
    return None


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
    from .. import _core

    @functools.wraps(original)
    def flushing_first(*args: Any, **kwargs: Any) -> Any:
        _core._gpu_flush()
        return original(*args, **kwargs)

    setattr(flushing_first, _FLUSHES_FIRST, True)
    return flushing_first


def profiler_args(cuda: Any, cuda_sync: Any) -> Dict[str, Any]:
    """The _core.Profiler keywords for cuda= and cuda_sync=."""
    if cuda is not True and cuda is not False and cuda != "auto":
        raise ValueError(f"cuda must be 'auto', True or False, got {cuda!r}")
    if not isinstance(cuda_sync, bool):
        raise ValueError(f"cuda_sync must be True or False, got "
                         f"{cuda_sync!r}")
    args: Dict[str, Any] = {"cuda": _MODES[cuda], "cuda_sync": cuda_sync}
    if cuda is not False:
        args["cupti_paths"] = cupti_candidates()
    # the driver ($AQUAPROF_LIBCUDA, else libcuda.so.1) is the C loader's
    # to name, for the profiler and the plane-sweep kit alike
    return args
