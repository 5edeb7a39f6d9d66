/* Turns a core ap_report into Python data: a dict of plain objects and a
 * NumPy structured array of spans that takes over the C buffer. */
#include "module.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL aquaprof_ARRAY_API
#define NO_IMPORT_ARRAY
#include <numpy/arrayobject.h>

#include <stddef.h>

#include "../core/intern.h"

const ap_stage_field ap_stage_fields[] = {
    {"count", offsetof(ap_stats, count), AP_FIELD_SUM, 0},
    {"raised", offsetof(ap_stats, raised), AP_FIELD_SUM, 0},
    {"unclosed", offsetof(ap_stats, unclosed), AP_FIELD_SUM, 0},
    {"suspended", offsetof(ap_stats, suspended), AP_FIELD_SUM, 1},
    {"total_ns", offsetof(ap_stats, total_ns), AP_FIELD_SUM, 0},
    {"self_ns", offsetof(ap_stats, self_ns), AP_FIELD_SUM, 0},
    {"min_ns", offsetof(ap_stats, min_ns), AP_FIELD_EXTREME, 0},
    {"max_ns", offsetof(ap_stats, max_ns), AP_FIELD_EXTREME, 0},
    {"mean_ns", offsetof(ap_stats, mean_ns), AP_FIELD_DOUBLE, 0},
    {"m2", offsetof(ap_stats, m2), AP_FIELD_DOUBLE, 0},
    {"cpu_ns", offsetof(ap_stats, cpu_ns), AP_FIELD_SUM, 0},
    {"items", offsetof(ap_stats, items), AP_FIELD_SUM, 0},
    {"mem_peak", offsetof(ap_stats, mem_peak), AP_FIELD_EXTREME, 0},
    {"mem_delta", offsetof(ap_stats, mem_delta), AP_FIELD_SUM, 0},
};
const size_t ap_stage_nfields =
    sizeof(ap_stage_fields) / sizeof(ap_stage_fields[0]);

static PyObject *
hist_pairs(const ap_stats *s)
{
    PyObject *pairs = PyList_New(0);
    if (pairs == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < AP_HIST_BUCKETS; i++) {
        if (s->hist[i] == 0) {
            continue;
        }
        PyObject *pair = Py_BuildValue("(IK)", i,
                                       (unsigned long long)s->hist[i]);
        if (pair == NULL || PyList_Append(pairs, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(pairs);
            return NULL;
        }
        Py_DECREF(pair);
    }
    return pairs;
}

/* Steals value; -1 where it is NULL (its error already set). */
static int
set_item(PyObject *d, const char *key, PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc;
}

int
ap_stats_set_items(PyObject *d, const ap_stats *s)
{
    for (size_t i = 0; i < ap_stage_nfields; i++) {
        const ap_stage_field *f = &ap_stage_fields[i];
        const char *at = (const char *)s + f->offset;
        PyObject *value;
        if (f->kind == AP_FIELD_DOUBLE) {
            value = PyFloat_FromDouble(*(const double *)at);
        } else {
            int64_t x = *(const int64_t *)at;
            if (f->offset == offsetof(ap_stats, min_ns) && s->count == 0) {
                x = 0;     /* the running minimum starts at INT64_MAX */
            }
            value = PyLong_FromLongLong(x);
        }
        if (set_item(d, f->key, value) < 0) {
            return -1;
        }
    }
    return set_item(d, "hist", hist_pairs(s));
}

static PyObject *
stage_dict(const ap_report_stage *stage)
{
    size_t len = 0;
    const char *name = ap_intern_name(stage->name, &len);
    PyObject *d = Py_BuildValue("{s:s#,s:i,s:I}", "name", name,
                                (Py_ssize_t)len, "parent",
                                (int)stage->parent, "depth",
                                (unsigned)stage->depth);
    if (d == NULL || ap_stats_set_items(d, &stage->stats) < 0) {
        Py_XDECREF(d);
        return NULL;
    }
    return d;
}

static void
free_spans(PyObject *capsule)
{
    free(PyCapsule_GetPointer(capsule, "aquaprof.spans"));
}

/* Steals r->spans. */
static PyObject *
span_array(ap_module_state *st, ap_report *r)
{
    PyObject *capsule = PyCapsule_New(r->spans, "aquaprof.spans", free_spans);
    if (capsule == NULL) {
        return NULL;
    }
    r->spans = NULL;
    npy_intp dims[1] = {(npy_intp)r->nspans};
    PyArray_Descr *descr = (PyArray_Descr *)st->span_dtype;
    Py_INCREF(descr);   /* NewFromDescr steals it */
    PyObject *array = PyArray_NewFromDescr(
        &PyArray_Type, descr, 1, dims, NULL,
        PyCapsule_GetPointer(capsule, "aquaprof.spans"), NPY_ARRAY_CARRAY,
        NULL);
    if (array == NULL) {
        Py_DECREF(capsule);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)array, capsule) < 0) {
        Py_DECREF(array);
        return NULL;
    }
    /* the report is a record of what happened: keep it read-only */
    PyArray_CLEARFLAGS((PyArrayObject *)array, NPY_ARRAY_WRITEABLE);
    return array;
}

static PyObject *
threads_list(const ap_report *r)
{
    PyObject *list = PyList_New(r->nthreads);
    if (list == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < r->nthreads; i++) {
        const ap_report_thread *t = &r->threads[i];
        PyObject *d = Py_BuildValue("{s:I,s:L,s:L,s:L,s:L}", "index",
                                    t->index,
                                    "native_id", (long long)t->native_id,
                                    "spans", (long long)t->spans,
                                    "dropped", (long long)t->dropped,
                                    "cpu_reads", (long long)t->cpu_reads);
        if (d == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, d);
    }
    return list;
}

/* [[t_ns, rss], ...]: lists, as JSON gives them back */
static PyObject *
memory_list(const ap_report *r)
{
    PyObject *list = PyList_New(r->nmemory);
    if (list == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < r->nmemory; i++) {
        PyObject *pair = Py_BuildValue("[LL]", (long long)r->memory[i].t_ns,
                                       (long long)r->memory[i].rss);
        if (pair == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, pair);
    }
    return list;
}

PyObject *
ap_report_to_python(ap_module_state *st, ap_report *r, ap_gpu_trace *gpu)
{
    PyObject *stages = NULL, *threads = NULL, *spans = NULL, *memory = NULL;
    PyObject *result = NULL, *gpu_data = NULL;
    if (gpu) {
        /* before span_array takes the spans the events are resolved to */
        gpu_data = ap_gpu_trace_to_python(st, gpu, r);
        if (gpu_data == NULL) {
            goto error;
        }
    }
    stages = PyList_New(r->nstages);
    if (stages == NULL) {
        goto error;
    }
    for (uint32_t i = 0; i < r->nstages; i++) {
        PyObject *d = stage_dict(&r->stages[i]);
        if (d == NULL) {
            goto error;
        }
        PyList_SET_ITEM(stages, i, d);
    }
    threads = threads_list(r);
    if (threads == NULL) {
        goto error;
    }
    spans = span_array(st, r);
    if (spans == NULL) {
        goto error;
    }
    memory = memory_list(r);
    if (memory == NULL) {
        goto error;
    }
    result = Py_BuildValue(
        "{s:L,s:L,s:s,s:L,s:L,s:O,s:L,s:L,s:L,s:L,s:L,s:N,s:N,s:N,s:N}",
        "start_ns", (long long)r->start_ns,
        "stop_ns", (long long)r->stop_ns,
        "clock", r->clock,
        "pid", (long long)r->pid,
        "max_spans", (long long)r->config.max_spans,
        "memory", r->config.memory ? Py_True : Py_False,
        "memory_interval_ns", (long long)r->config.memory_interval_ns,
        "cpu_resolution_ns", (long long)r->config.cpu_resolution_ns,
        "spans_dropped", (long long)r->dropped,
        "unclosed", (long long)r->unclosed,
        "lost", (long long)r->lost,
        "stages", stages,
        "threads", threads,
        "spans", spans,
        "memory_samples", memory);
    /* stolen by N, even on failure */
    stages = threads = spans = memory = NULL;
    if (result && gpu_data && PyDict_SetItemString(result, "gpu",
                                                   gpu_data) < 0) {
        Py_CLEAR(result);
    }
error:
    Py_XDECREF(stages);
    Py_XDECREF(threads);
    Py_XDECREF(spans);
    Py_XDECREF(memory);
    Py_XDECREF(gpu_data);
    ap_report_free(r);
    return result;
}

static PyObject *
hist_lower_bounds(void)
{
    npy_intp dims[1] = {AP_HIST_BUCKETS + 1};
    PyObject *array = PyArray_SimpleNew(1, dims, NPY_INT64);
    if (array == NULL) {
        return NULL;
    }
    int64_t *data = PyArray_DATA((PyArrayObject *)array);
    for (uint32_t i = 0; i < AP_HIST_BUCKETS; i++) {
        data[i] = ap_hist_lower(i);
    }
    /* one past the last bucket: its upper bound for interpolation */
    data[AP_HIST_BUCKETS] = ap_hist_lower(AP_HIST_BUCKETS - 1) * 2;
    PyArray_CLEARFLAGS((PyArrayObject *)array, NPY_ARRAY_WRITEABLE);
    return array;
}

int
ap_add_dtype(PyObject *module, const char *name, PyObject *spec,
             size_t size, PyObject **out)
{
    if (spec == NULL) {
        return -1;
    }
    PyArray_Descr *descr = NULL;
    int ok = PyArray_DescrConverter(spec, &descr);
    Py_DECREF(spec);
    if (!ok) {
        return -1;
    }
    *out = (PyObject *)descr;
    if (PyDataType_ELSIZE(descr) != (npy_intp)size) {
        PyErr_Format(PyExc_SystemError, "%s does not match its C struct",
                     name);
        return -1;
    }
    return PyModule_AddObjectRef(module, name, *out);
}

int
ap_report_init(PyObject *module, ap_module_state *st)
{
    PyObject *spec = Py_BuildValue(
        "[(ss)(ss)(ss)(ss)(ss)(ss)(ss)(ss)]", "stage", "<u4", "thread", "<u4",
        "parent", "<i4", "flags", "<u4", "start_ns", "<i8", "end_ns", "<i8",
        "cpu_ns", "<i8", "items", "<i8");
    if (ap_add_dtype(module, "SPAN_DTYPE", spec, sizeof(ap_span),
                     &st->span_dtype) < 0) {
        return -1;
    }
    PyObject *bounds = hist_lower_bounds();
    if (bounds == NULL) {
        return -1;
    }
    if (PyModule_AddObject(module, "HIST_LOWER_NS", bounds) < 0) {
        Py_DECREF(bounds);
        return -1;
    }
    if (PyModule_AddIntConstant(module, "SPAN_RAISED", AP_SPAN_RAISED) < 0) {
        return -1;
    }
    if (PyModule_AddIntConstant(module, "SPAN_UNCLOSED",
                                AP_SPAN_UNCLOSED) < 0) {
        return -1;
    }
    return PyModule_AddIntConstant(module, "SPAN_SUSPENDED",
                                   AP_SPAN_SUSPENDED);
}
