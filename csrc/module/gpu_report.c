/* The GPU part of a report: events tied to stages and spans, kernel
 * names and devices, as Python data. */
#include "module.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL aquaprof_ARRAY_API
#define NO_IMPORT_ARRAY
#include <numpy/arrayobject.h>

#include <string.h>

static PyObject *
event_array(ap_module_state *st, const ap_gpu_trace *t)
{
    npy_intp dims[1] = {(npy_intp)t->nevents};
    PyArray_Descr *descr = (PyArray_Descr *)st->gpu_dtype;
    Py_INCREF(descr);   /* NewFromDescr steals it */
    PyObject *array = PyArray_NewFromDescr(&PyArray_Type, descr, 1, dims,
                                           NULL, NULL, 0, NULL);
    if (array && t->nevents) {
        memcpy(PyArray_DATA((PyArrayObject *)array), t->events,
               t->nevents * sizeof(ap_gpu_event));
    }
    return array;
}

static PyObject *
names_list(const ap_gpu_trace *t)
{
    PyObject *list = PyList_New(t->names.count);
    for (uint32_t i = 0; list && i < t->names.count; i++) {
        size_t len;
        const char *text = ap_intern_table_text(&t->names, i, &len);
        /* mangled names are ASCII; anything else is kept, escaped */
        PyObject *name = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len,
                                              "backslashreplace");
        if (!name) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, name);
    }
    return list;
}

static PyObject *
devices_list(const ap_gpu_trace *t)
{
    PyObject *list = PyList_New(t->ndevices);
    for (uint32_t i = 0; list && i < t->ndevices; i++) {
        const ap_gpu_device *d = &t->devices[i];
        PyObject *item = Py_BuildValue(
            "{s:s,s:i,s:i,s:i,s:i,s:i,s:i}", "name", d->name, "sms", d->sms,
            "threads_per_sm", d->threads_per_sm, "blocks_per_sm",
            d->blocks_per_sm, "registers_per_sm", d->registers_per_sm,
            "shared_per_sm", d->shared_per_sm, "warp_size", d->warp_size);
        if (!item) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

PyObject *
ap_gpu_trace_to_python(ap_module_state *st, ap_gpu_trace *t,
                       const ap_report *r)
{
    ap_gpu_trace_resolve(t, r);
    PyObject *events = event_array(st, t);
    PyObject *names = events ? names_list(t) : NULL;
    PyObject *devices = names ? devices_list(t) : NULL;
    if (!devices) {
        Py_XDECREF(events);
        Py_XDECREF(names);
        return NULL;
    }
    return Py_BuildValue("{s:N,s:N,s:N,s:L,s:L,s:L,s:L,s:L,s:L}", "events",
                         events, "kernel_names", names, "devices", devices,
                         "dropped", (long long)t->dropped,
                         "unattributed", (long long)t->unattributed,
                         "incomplete", (long long)t->incomplete,
                         "over_max", (long long)t->over_max,
                         "max_events", (long long)t->max_events,
                         "late", (long long)t->late);
}

int
ap_gpu_dtype_init(PyObject *module, ap_module_state *st)
{
    PyObject *spec = Py_BuildValue(
        "[(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ssi)(ssi)(ss)(ss)(ss)(ss)(ss)"
        "(ss)]",
        "start_ns", "<i8", "end_ns", "<i8", "bytes", "<i8", "span", "<i8",
        "correlation", "<u8", "stage", "<i4", "name", "<u4", "device", "<u4",
        "stream", "<u4", "grid", "<u4", 3, "block", "<u4", 3, "shared", "<u4",
        "registers", "<u2", "kind", "u1", "copy", "u1", "pinned", "u1",
        "pad", "V7");
    if (ap_add_dtype(module, "GPU_DTYPE", spec, sizeof(ap_gpu_event),
                     &st->gpu_dtype) < 0) {
        return -1;
    }
    static const struct {
        const char *name;
        int value;
    } constants[] = {
        {"GPU_KERNEL", AP_GPU_KERNEL}, {"GPU_MEMCPY", AP_GPU_MEMCPY},
        {"GPU_MEMSET", AP_GPU_MEMSET}, {"GPU_ALLOC", AP_GPU_ALLOC},
        {"GPU_FREE", AP_GPU_FREE},     {"GPU_SYNC", AP_GPU_SYNC},
        {"COPY_OTHER", AP_COPY_OTHER}, {"COPY_H2D", AP_COPY_H2D},
        {"COPY_D2H", AP_COPY_D2H},     {"COPY_D2D", AP_COPY_D2D},
    };
    for (size_t i = 0; i < sizeof(constants) / sizeof(constants[0]); i++) {
        if (PyModule_AddIntConstant(module, constants[i].name,
                                    constants[i].value) < 0) {
            return -1;
        }
    }
    return PyModule_AddIntConstant(module, "HAVE_CUPTI",
                                   ap_gpu_can_trace());
}
