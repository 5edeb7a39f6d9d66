/* Asks the main thread to run its Python signal handlers soon, from
 * another thread and without the GIL: how the sampler gets a round taken
 * on the main thread between two bytecodes (sampler.c says why).
 *
 * PyErr_SetInterruptEx marks the signal tripped. Before 3.13 it only
 * sets the flag the eval loop polls when the calling thread could handle
 * signals itself (the main thread), so the main thread would see it at
 * its next GIL switch, milliseconds later; here the two flags it polls
 * are set as CPython sets them for a signal received on Windows, which
 * is the same situation. The layout is the one of the Python this is
 * built for: its internal headers ship with it. */
#if PY_VERSION_HEX < 0x030D0000 || !defined(PY_VERSION_HEX)
#define Py_BUILD_CORE 1
#endif
#include <Python.h>

#if PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < 0x030D0000
#include "internal/pycore_atomic.h"
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#endif

#include "sampler_wake.h"

int
ap_wake_main_thread(int signum)
{
#if PY_VERSION_HEX >= 0x030A0000
    if (PyErr_SetInterruptEx(signum) != 0) {
        return -1;
    }
#if PY_VERSION_HEX < 0x030D0000
    _Py_atomic_store_relaxed(&_PyRuntime.ceval.signals_pending, 1);
    _Py_atomic_store_relaxed(&PyInterpreterState_Main()->ceval.eval_breaker,
                             1);
#endif
    return 0;
#else
    (void)signum;
    return -1;   /* 3.9: no way to trip a signal but SIGINT */
#endif
}
