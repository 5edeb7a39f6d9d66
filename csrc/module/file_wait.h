/* A captured child's wait for its parent's request (file_wait.c). */
#ifndef AP_FILE_WAIT_H
#define AP_FILE_WAIT_H

#include "module.h"

/* _core._wait_for_file(paths, interval_s, timeout_s): looks every
 * interval_s, with the GIL released, until one of the files `paths`
 * exists (its index) or timeout_s passed (-1; at once for no paths); NULL
 * with an exception set for bad arguments or no memory. For a thread that
 * takes no signals: they are not looked at until it returns. */
PyObject *ap_wait_for_file(PyObject *module, PyObject *args);

#endif
