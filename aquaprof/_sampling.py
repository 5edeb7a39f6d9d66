"""The signal number through which the sampler asks the main thread for a
round (csrc/module/sampler.c says why): one that nothing handles, so
that taking it changes nothing, and given back at the end.

No real signal is ever sent: the sampler trips it with
PyErr_SetInterruptEx, which makes the main thread run its Python handler
between two bytecodes. A signal's handler can only be set from the main
thread; a Profiler started elsewhere samples without one (each round
then waits for the GIL).
"""
from __future__ import annotations

import signal
import sys
import threading
from typing import Any, Callable, Optional


def free_signal() -> Optional[int]:
    """A real-time signal with no handler (the default one), None when
    there is none or this is not the main thread."""
    if (sys.version_info < (3, 10) or not hasattr(signal, "SIGRTMAX")
            or threading.current_thread() is not threading.main_thread()):
        return None
    for signum in range(signal.SIGRTMAX - 1, signal.SIGRTMIN + 1, -1):
        try:
            if signal.getsignal(signum) is signal.SIG_DFL:
                return signum
        except (OSError, ValueError):   # reserved by the C library
            continue
    return None


def handle(signum: int, take: Callable[[int, Any], None]) -> None:
    signal.signal(signum, take)


def end(sampler: Any, signum: Optional[int]) -> None:
    """Stops sampler, then gives its signal back (main thread only; from
    elsewhere the handler stays, and does nothing once stopped)."""
    sampler.stop()
    if (signum and threading.current_thread() is threading.main_thread()
            and signal.getsignal(signum) == sampler.take):
        signal.signal(signum, signal.SIG_DFL)
