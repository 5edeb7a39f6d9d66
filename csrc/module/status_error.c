/* The one place where a core status becomes a Python exception. */
#include "module.h"

PyObject *
ap_status_error(ap_status st, const char *doing)
{
    switch (st) {
    case AP_ERR_NOMEM:
        return PyErr_NoMemory();
    case AP_ERR_ACTIVE:
        /* one session per process: only a Profiler's start meets another */
        PyErr_SetString(PyExc_RuntimeError,
                        "another aquaprof.Profiler is running in this process "
                        "and this one was started with nest=False");
        return NULL;
    case AP_ERR_SYSTEM:
        PyErr_Format(PyExc_OSError, "cannot %s", doing);
        return NULL;
    default:
        PyErr_Format(PyExc_RuntimeError, "cannot %s (status %d)", doing,
                     (int)st);
        return NULL;
    }
}
