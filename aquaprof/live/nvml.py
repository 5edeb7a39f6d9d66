"""Device memory in use, read live through NVML (libnvidia-ml, opened at
run time with ctypes), for the monitor's GPU memory alerts and gauges.
NVML needs no CUDA context and sees every process's memory on a device:
the figures are what nvidia-smi shows. $AQUAPROF_LIBNVML names another
library (tests use a fake)."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import List, Optional

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


def _open() -> ctypes.CDLL:
    global _lib
    with _lock:
        if _lib is None:
            path = os.environ.get("AQUAPROF_LIBNVML", "libnvidia-ml.so.1")
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise RuntimeError(f"no NVML: cannot open {path} ({e})") \
                    from None
            code = lib.nvmlInit_v2()
            if code != 0:
                raise RuntimeError(f"no NVML: nvmlInit_v2 failed with "
                                   f"code {code} ({path})")
            _lib = lib
        return _lib


def memory_used() -> List[int]:
    """Bytes in use on each device NVML sees. RuntimeError when NVML
    cannot be opened or read, with the reason."""
    lib = _open()
    count = ctypes.c_uint()
    code = lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
    if code != 0:
        raise RuntimeError(f"NVML: nvmlDeviceGetCount_v2 failed with code "
                           f"{code}")
    used = []
    for i in range(count.value):
        handle, memory = ctypes.c_void_p(), _Memory()
        code = lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle))
        if code == 0:
            code = lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory))
        if code != 0:
            raise RuntimeError(f"NVML: cannot read device {i}'s memory "
                               f"(code {code})")
        used.append(int(memory.used))
    return used
