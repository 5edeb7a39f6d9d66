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
    {"count", offsetof(ap_stats, count), AP_FIELD_SUM, AP_ALWAYS},
    {"raised", offsetof(ap_stats, raised), AP_FIELD_SUM, AP_ALWAYS},
    {"unclosed", offsetof(ap_stats, unclosed), AP_FIELD_SUM, AP_ALWAYS},
    {"suspended", offsetof(ap_stats, suspended), AP_FIELD_SUM, AP_OR_ZERO},
    {"total_ns", offsetof(ap_stats, total_ns), AP_FIELD_SUM, AP_ALWAYS},
    {"self_ns", offsetof(ap_stats, self_ns), AP_FIELD_SUM, AP_ALWAYS},
    {"min_ns", offsetof(ap_stats, min_ns), AP_FIELD_EXTREME, AP_ALWAYS},
    {"max_ns", offsetof(ap_stats, max_ns), AP_FIELD_EXTREME, AP_ALWAYS},
    {"mean_ns", offsetof(ap_stats, mean_ns), AP_FIELD_DOUBLE, AP_ALWAYS},
    {"m2", offsetof(ap_stats, m2), AP_FIELD_DOUBLE, AP_ALWAYS},
    {"cpu_ns", offsetof(ap_stats, cpu_ns), AP_FIELD_SUM, AP_ALWAYS},
    {"proc_cpu_ns", offsetof(ap_stats, proc_cpu_ns), AP_FIELD_SUM, AP_WHOLE},
    {"items", offsetof(ap_stats, items), AP_FIELD_SUM, AP_ALWAYS},
    {"mem_peak", offsetof(ap_stats, mem_peak), AP_FIELD_EXTREME, AP_ALWAYS},
    {"mem_delta", offsetof(ap_stats, mem_delta), AP_FIELD_SUM, AP_ALWAYS},
    {"mem_rise", offsetof(ap_stats, mem_rise), AP_FIELD_EXTREME, AP_OR_ZERO},
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
    for (uint32_t k = 0; k < s->hist_n; k++) {
        if (s->hist[k] == 0) {
            continue;
        }
        PyObject *pair = Py_BuildValue("(IK)", s->hist_lo + k,
                                       (unsigned long long)s->hist[k]);
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

/* The span array over r->spans, which it takes; on failure r->spans is
 * left to r. A report whose spans were all shed gets an empty array. */
static PyObject *
span_array(ap_module_state *st, ap_report *r)
{
    npy_intp dims[1] = {(npy_intp)r->nspans};
    PyArray_Descr *descr = (PyArray_Descr *)st->span_dtype;
    Py_INCREF(descr);   /* NewFromDescr steals it */
    if (r->spans == NULL) {
        dims[0] = 0;
        return PyArray_NewFromDescr(&PyArray_Type, descr, 1, dims, NULL,
                                    NULL, 0, NULL);
    }
    /* no destructor until the array holds it: a failure leaves r whole */
    PyObject *capsule = PyCapsule_New(r->spans, "aquaprof.spans", NULL);
    if (capsule == NULL) {
        Py_DECREF(descr);
        return NULL;
    }
    PyObject *array = PyArray_NewFromDescr(
        &PyArray_Type, descr, 1, dims, NULL, r->spans, NPY_ARRAY_CARRAY,
        NULL);
    if (array == NULL) {
        Py_DECREF(capsule);
        return NULL;
    }
    /* steals capsule, even on failure */
    if (PyArray_SetBaseObject((PyArrayObject *)array, capsule) < 0) {
        Py_DECREF(array);
        return NULL;
    }
    if (PyCapsule_SetDestructor(capsule, free_spans) < 0) {
        Py_DECREF(array);
        return NULL;
    }
    r->spans = NULL;
    /* the report is a record of what happened: keep it read-only */
    PyArray_CLEARFLAGS((PyArrayObject *)array, NPY_ARRAY_WRITEABLE);
    return array;
}

/* Sets d["name"] to the name of threads[index], where it has one. 0, or
 * -1 with an exception set. */
static int
add_name(PyObject *d, PyObject *threads, uint32_t index)
{
    PyObject *key = PyLong_FromUnsignedLong(index);
    if (key == NULL) {
        return -1;
    }
    PyObject *thread = PyDict_GetItemWithError(threads, key);  /* borrowed */
    Py_DECREF(key);
    if (thread == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *name = ap_thread_name(thread);
    if (name == NULL) {
        return 0;
    }
    int rc = PyDict_SetItemString(d, "name", name);
    Py_DECREF(name);
    return rc;
}

static int
add_count(PyObject *d, const char *key, int64_t n)
{
    PyObject *value = PyLong_FromLongLong(n);
    if (value == NULL) {
        return -1;
    }
    int rc = PyDict_SetItemString(d, key, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *
threads_list(const ap_report *r, PyObject *threads)
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
        if (t->folded && add_count(d, "folded", t->folded) < 0) {
            Py_DECREF(list);
            return NULL;
        }
        if (threads && add_name(d, threads, t->index) < 0) {
            Py_DECREF(list);
            return NULL;
        }
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

/* Forgets r's spans after the array that took them went away: a report
 * built from r again says they were shed. */
static void
shed_all_spans(ap_report *r)
{
    r->shed += r->nspans;
    r->nspans = 0;
    for (uint32_t i = 0; i < r->nthreads; i++) {
        r->threads[i].spans = 0;
    }
}

PyObject *
ap_report_to_python(ap_module_state *st, ap_report *r, ap_gpu_trace *gpu,
                    PyObject *seen)
{
    PyObject *stages = NULL, *threads = NULL, *spans = NULL, *memory = NULL;
    PyObject *result = NULL, *gpu_data = NULL, *spans_key = NULL;
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
    threads = threads_list(r, seen);
    if (threads == NULL) {
        goto error;
    }
    memory = memory_list(r);
    if (memory == NULL) {
        goto error;
    }
    uint32_t max_stages = r->config.max_stages ? r->config.max_stages
                                               : AP_MAX_STAGES;
    result = Py_BuildValue(
        "{s:L,s:L,s:s,s:L,s:L,s:I,s:O,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:N,"
        "s:N,s:O,s:N}",
        "start_ns", (long long)r->start_ns,
        "stop_ns", (long long)r->stop_ns,
        "clock", r->clock,
        "pid", (long long)r->pid,
        "max_spans", (long long)r->config.max_spans,
        "max_stages", (unsigned)max_stages,
        "memory", r->config.memory ? Py_True : Py_False,
        "memory_interval_ns", (long long)r->config.memory_interval_ns,
        "cpu_resolution_ns", (long long)r->config.cpu_resolution_ns,
        "spans_dropped", (long long)r->dropped,
        "unclosed", (long long)r->unclosed,
        "lost", (long long)r->lost,
        "stages_overflowed", (long long)r->overflowed,
        "stages_too_deep", (long long)r->too_deep,
        "spans_shed", (long long)r->shed,
        "stages", stages,
        "threads", threads,
        "spans", Py_None,   /* its place, for the array made last */
        "memory_samples", memory);
    /* stolen by N, even on failure */
    stages = threads = memory = NULL;
    if (result == NULL ||
        (gpu_data && PyDict_SetItemString(result, "gpu", gpu_data) < 0)) {
        goto error;
    }
    /* last, as it takes r's spans: any failure before leaves r whole; the
     * key is made first, so that replacing the placeholder allocates
     * nothing */
    spans_key = PyUnicode_InternFromString("spans");
    if (spans_key == NULL) {
        goto error;
    }
    spans = span_array(st, r);
    if (spans == NULL) {
        goto error;
    }
    if (PyDict_SetItem(result, spans_key, spans) < 0) {
        Py_CLEAR(spans);
        shed_all_spans(r);
        goto error;
    }
    Py_DECREF(spans);
    Py_DECREF(spans_key);
    Py_XDECREF(gpu_data);
    ap_report_free(r);
    return result;
error:
    Py_XDECREF(spans_key);
    Py_XDECREF(result);
    Py_XDECREF(stages);
    Py_XDECREF(threads);
    Py_XDECREF(memory);
    Py_XDECREF(gpu_data);
    return NULL;
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
