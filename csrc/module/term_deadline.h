/* A captured child's SIGTERM, with a deadline (term_deadline.c). */
#ifndef AP_TERM_DEADLINE_H
#define AP_TERM_DEADLINE_H

#include "module.h"

/* _core._sigterm_deadline(seconds, marks): wraps SIGTERM's Python handler
 * in this process; a SIGTERM whose Python handler has not started within
 * `seconds` creates the files `marks` and ends the process by SIGTERM's
 * default action. True when watching, False where the C handler is not
 * one to wrap; NULL with an exception set (the handler left as it was,
 * nothing held). */
PyObject *ap_sigterm_deadline(PyObject *module, PyObject *args);

/* _core._sigterm_hold(on): while held (on, counted), Python is at work on
 * the signal's behalf and the deadline waits. */
PyObject *ap_sigterm_hold(PyObject *module, PyObject *on);

/* _core._sigterm_release(): SIGTERM's default action back where the
 * handler is still ours, the watch ended; a SIGTERM that came and that
 * Python never took is then sent again, to end the process by it. */
PyObject *ap_sigterm_release(PyObject *module, PyObject *unused);

/* _core._sigterm_watch(): the id of this process's watch, 0 where none
 * runs. */
PyObject *ap_sigterm_watch(PyObject *module, PyObject *unused);

/* _core._sigterm_rescue(watch): waits, the GIL let go, until a
 * SIGTERM's Python handler has not started by the deadline (True: save
 * in its place, holding the signal, then end the process by it) or the
 * watch ends (False; at once where it already ended or has a rescuer). */
PyObject *ap_sigterm_rescue(PyObject *module, PyObject *watch);

#endif
