"""Where CUPTI is looked for, and who else is tracing with it: CUPTI
serves one client at a time."""
from __future__ import annotations

import glob
import os
import sys
from typing import List, Optional


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
