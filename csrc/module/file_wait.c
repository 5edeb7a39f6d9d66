/* _core._wait_for_file: a captured child's thread waiting for its
 * parent's request (aquaprof/record/processes/child.py).
 *
 * The child looks often, so that the parent's stop() waits little and the
 * child records little past it; from Python each look would take the GIL
 * from the child's own work. Here the looks run with the GIL released: a
 * stat a look, on no thread the program uses. */
#include "file_wait.h"

#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

/* The index of the first of n paths that exists, or -1. */
static Py_ssize_t
first_existing(char *const *paths, Py_ssize_t n)
{
    struct stat st;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (stat(paths[i], &st) == 0) {
            return i;
        }
    }
    return -1;
}

static void
sleep_ns(int64_t ns)
{
    struct timespec t = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static int64_t
now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

PyObject *
ap_wait_for_file(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *seq;
    double interval_s, timeout_s;
    if (!PyArg_ParseTuple(args, "Odd:_wait_for_file", &seq, &interval_s,
                          &timeout_s)) {
        return NULL;
    }
    /* a microsecond at least: a shorter look would spin */
    if (!(interval_s >= 1e-6 && interval_s <= 3600) ||
        !(timeout_s >= 0 && timeout_s <= 86400)) {
        PyErr_SetString(PyExc_ValueError,
                        "_wait_for_file needs 1e-6 <= interval_s <= 3600 and "
                        "0 <= timeout_s <= 86400");
        return NULL;
    }
    PyObject *items = PySequence_Tuple(seq);
    if (items == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(items);
    PyObject **bytes = PyMem_Calloc(n ? (size_t)n : 1, sizeof(*bytes));
    char **paths = PyMem_Calloc(n ? (size_t)n : 1, sizeof(*paths));
    PyObject *result = NULL;
    Py_ssize_t found = -1;
    if (bytes == NULL || paths == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_FSConverter(PyTuple_GET_ITEM(items, i), &bytes[i])) {
            goto done;
        }
        paths[i] = PyBytes_AS_STRING(bytes[i]);
    }
    Py_BEGIN_ALLOW_THREADS
    int64_t interval = (int64_t)(interval_s * 1e9);
    int64_t end = now_ns() + (int64_t)(timeout_s * 1e9);
    while (n > 0 && (found = first_existing(paths, n)) < 0) {
        int64_t left = end - now_ns();
        if (left <= 0) {
            break;
        }
        sleep_ns(left < interval ? left : interval);
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(found);
done:
    if (bytes != NULL) {
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_XDECREF(bytes[i]);
        }
    }
    PyMem_Free(bytes);
    PyMem_Free(paths);
    Py_DECREF(items);
    return result;
}
