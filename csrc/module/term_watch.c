/* A SIGTERM noted at the C level, for a captured child's watcher thread.
 * CPython runs a signal's Python handler on the main thread, and a main
 * thread waiting on a lock (a pool worker waiting for work) wakes for it
 * only when the signal interrupts that wait: one that lands as the wait
 * begins is taken by Python's C handler first and then waits with it,
 * and Pool.terminate() waits for that worker for ever. Python's handler
 * is wrapped so that the watcher can see the signal came and send it
 * again to the main thread. */
#include "module.h"

#include <signal.h>

static struct sigaction python_action;   /* Python's, which ours calls */
static volatile sig_atomic_t noted;

static void
noting_handler(int signum)
{
    noted = 1;
    python_action.sa_handler(signum);
}

PyObject *
ap_note_sigterm(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    struct sigaction now;
    if (sigaction(SIGTERM, NULL, &now) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    noted = 0;      /* a forked child starts afresh */
    if (now.sa_handler == noting_handler) {
        Py_RETURN_TRUE;
    }
    if ((now.sa_flags & SA_SIGINFO) || now.sa_handler == SIG_DFL ||
        now.sa_handler == SIG_IGN) {
        Py_RETURN_FALSE;    /* not Python's: nothing to wrap */
    }
    python_action = now;
    struct sigaction ours = now;
    ours.sa_handler = noting_handler;
    if (sigaction(SIGTERM, &ours, NULL) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_TRUE;
}

PyObject *
ap_sigterm_noted(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(noted);
}

PyObject *
ap_sigterm_default(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    struct sigaction now;
    if (sigaction(SIGTERM, NULL, &now) == 0 &&
        now.sa_handler == noting_handler) {
        struct sigaction dfl = now;
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGTERM, &dfl, NULL);
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}
