/* What the sampler needs of CPython's internals, in one place: the lock
 * of the interpreter's thread list, and a way to have the main thread
 * run a call soon. The layout is the one of the Python this is built for:
 * its internal headers ship with it.
 *
 * Py_AddPendingCall queues a call that only the main thread runs, when it
 * next polls its eval breaker; before 3.13 it sets that flag only when the
 * caller is the main thread itself, so from the sampler's thread the call
 * would wait for the main thread's next GIL switch, milliseconds later.
 * The flag is set here as CPython sets it for a signal on Windows, the
 * same situation; the main thread then finds the call within
 * microseconds. The main thread recomputes the flag now and then from
 * what it has to do, and may store what it computed just before the
 * call was queued over it: the flag is then set again (a lost wake-up
 * would cost a wait for the GIL). */
#include <patchlevel.h>

#define Py_BUILD_CORE 1
#include <Python.h>

#if PY_VERSION_HEX >= 0x030C0000
#include "internal/pycore_pystate.h"
#else
#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#endif

#include "sampler.h"

int
ap_ask_main_thread(int (*func)(void *), void *arg)
{
    if (Py_AddPendingCall(func, arg) != 0) {
        return -1;
    }
    ap_wake_main_thread();
    return 0;
}

void
ap_wake_main_thread(void)
{
#if PY_VERSION_HEX < 0x030D0000
    _Py_atomic_store_relaxed(&PyInterpreterState_Main()->ceval.eval_breaker,
                             1);
#endif
}

/* 3.13's HEAD_LOCK inlines a call to _PyMutex_LockTimed, which that
 * CPython does not export; PyMutex_Lock is its exported form. */
void
ap_threads_lock(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyMutex_Lock(&_PyRuntime.interpreters.mutex);
#elif PY_VERSION_HEX >= 0x030C0000
    HEAD_LOCK(&_PyRuntime);
#else
    PyThread_acquire_lock(_PyRuntime.interpreters.mutex, WAIT_LOCK);
#endif
}

void
ap_threads_unlock(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    PyMutex_Unlock(&_PyRuntime.interpreters.mutex);
#elif PY_VERSION_HEX >= 0x030C0000
    HEAD_UNLOCK(&_PyRuntime);
#else
    PyThread_release_lock(_PyRuntime.interpreters.mutex);
#endif
}
