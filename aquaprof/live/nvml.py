"""Device memory in use, read live through NVML (libnvidia-ml, opened at
run time with ctypes), for the monitor's GPU memory alerts and gauges.
NVML needs no CUDA context and sees every process's memory on a device:
the figures are what nvidia-smi shows. $AQUAPROF_LIBNVML names another
library (tests use a fake).

NVML numbers every device of the machine; CUDA (torch's cuda:0) numbers
only those CUDA_VISIBLE_DEVICES lets through, in its order. The figures
come in CUDA's numbering, so that device 0 is the program's cuda:0. Its
entries are indices or UUIDs (GPU-..., MIG-...; a unique prefix of a GPU
UUID is enough, as for CUDA); as for CUDA, the list ends at the first
entry that names no device. Integer entries are taken as NVML's (PCI
bus) order, which is CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID and on
machines of one GPU model."""
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


def _handle(lib: ctypes.CDLL, index: int) -> ctypes.c_void_p:
    handle = ctypes.c_void_p()
    code = lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle))
    if code != 0:
        raise RuntimeError(f"NVML: cannot open device {index} (code "
                           f"{code})")
    return handle


def _uuid(lib: ctypes.CDLL, handle: ctypes.c_void_p) -> str:
    text = ctypes.create_string_buffer(96)
    code = lib.nvmlDeviceGetUUID(handle, text, len(text))
    if code != 0:
        raise RuntimeError(f"NVML: nvmlDeviceGetUUID failed with code "
                           f"{code}")
    return text.value.decode("ascii", "replace")


def _by_uuid(lib: ctypes.CDLL, entry: str,
             handles: List[ctypes.c_void_p]) -> Optional[ctypes.c_void_p]:
    """The device a CUDA_VISIBLE_DEVICES UUID entry names, None for none."""
    if entry.startswith("MIG-"):
        # a MIG instance is no index of NVML's: only its full UUID opens it
        handle = ctypes.c_void_p()
        code = lib.nvmlDeviceGetHandleByUUID(entry.encode(),
                                             ctypes.byref(handle))
        return handle if code == 0 else None
    prefix = entry if entry.startswith("GPU-") else "GPU-" + entry
    found = [h for h in handles if _uuid(lib, h).startswith(prefix)]
    return found[0] if len(found) == 1 else None


def _visible(lib: ctypes.CDLL, count: int) -> List[ctypes.c_void_p]:
    """NVML's handles of the devices CUDA sees, in CUDA's order."""
    handles = [_handle(lib, i) for i in range(count)]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return handles
    chosen: List[ctypes.c_void_p] = []
    for entry in (e.strip() for e in visible.split(",")):
        handle: Optional[ctypes.c_void_p] = None
        if entry.isdigit():
            handle = handles[int(entry)] if int(entry) < count else None
        elif entry:
            handle = _by_uuid(lib, entry, handles)
        if handle is None or any(h.value == handle.value for h in chosen):
            break
        chosen.append(handle)
    return chosen


def memory_used() -> List[int]:
    """Bytes in use on each device CUDA sees (CUDA_VISIBLE_DEVICES), in
    CUDA's numbering. RuntimeError when NVML cannot be opened or read,
    with the reason."""
    lib = _open()
    count = ctypes.c_uint()
    code = lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
    if code != 0:
        raise RuntimeError(f"NVML: nvmlDeviceGetCount_v2 failed with code "
                           f"{code}")
    used = []
    for i, handle in enumerate(_visible(lib, count.value)):
        memory = _Memory()
        code = lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory))
        if code != 0:
            raise RuntimeError(f"NVML: cannot read device {i}'s memory "
                               f"(code {code})")
        used.append(int(memory.used))
    return used
