/* _core.merge_stage: the core's merge of one stage's aggregates
 * (ap_stats_merge: Chan's parallel mean and variance, sums, extremes,
 * histogram) over stage dicts as report_data() gives them, so that the
 * reports of several processes merge with the arithmetic that merges a
 * session's threads, and Python keeps no second copy of it. */
#include "module.h"

#include "../core/stats.h"

/* d[key], borrowed; NULL with ValueError naming the key when absent. */
static PyObject *
item(PyObject *d, const char *which, const char *key)
{
    PyObject *k = PyUnicode_FromString(key);
    if (k == NULL) {
        return NULL;
    }
    PyObject *v = PyDict_GetItemWithError(d, k);
    Py_DECREF(k);
    if (v == NULL && !PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "merge_stage: %s has no '%s': not "
                     "a stage dict", which, key);
    }
    return v;
}

/* 0 with *out from an int, or -1 with TypeError or ValueError naming it. */
static int
int64_of(PyObject *v, const char *which, const char *key, int64_t *out)
{
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "merge_stage: %s['%s'] must be int, "
                     "not %.100s", which, key, Py_TYPE(v)->tp_name);
        return -1;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (overflow) {
        PyErr_Format(PyExc_ValueError, "merge_stage: %s['%s'] does not "
                     "fit in 64 bits", which, key);
        return -1;
    }
    *out = x;
    return 0;
}

static int
double_of(PyObject *v, const char *which, const char *key, double *out)
{
    if (!PyFloat_Check(v) && !PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "merge_stage: %s['%s'] must be "
                     "float, not %.100s", which, key, Py_TYPE(v)->tp_name);
        return -1;
    }
    double x = PyFloat_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "merge_stage: %s['%s'] does not "
                     "fit in a float", which, key);
        return -1;
    }
    *out = x;
    return 0;
}

/* One (bucket, count) pair into s's histogram; duplicates refused, since
 * a report's histogram names each bucket once. */
static int
hist_pair(PyObject *pair, const char *which, ap_stats *s)
{
    if ((!PyTuple_Check(pair) && !PyList_Check(pair)) ||
        PySequence_Fast_GET_SIZE(pair) != 2) {
        PyErr_Format(PyExc_TypeError, "merge_stage: %s['hist'] must hold "
                     "(bucket, count) pairs, not %.100s", which,
                     Py_TYPE(pair)->tp_name);
        return -1;
    }
    int64_t bucket, count;
    if (int64_of(PySequence_Fast_GET_ITEM(pair, 0), which, "hist",
                 &bucket) < 0 ||
        int64_of(PySequence_Fast_GET_ITEM(pair, 1), which, "hist",
                 &count) < 0) {
        return -1;
    }
    if (bucket < 0 || bucket >= AP_HIST_BUCKETS || count < 0) {
        PyErr_Format(PyExc_ValueError, "merge_stage: %s['hist'] holds "
                     "(%lld, %lld): buckets run 0 to %d, counts from 0",
                     which, (long long)bucket, (long long)count,
                     AP_HIST_BUCKETS - 1);
        return -1;
    }
    if (ap_stats_hist_at(s, (uint32_t)bucket) != 0) {
        PyErr_Format(PyExc_ValueError, "merge_stage: %s['hist'] names "
                     "bucket %lld twice", which, (long long)bucket);
        return -1;
    }
    if (count && ap_stats_hist_add(s, (uint32_t)bucket, (uint64_t)count) !=
                     AP_OK) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int
hist_of(PyObject *v, const char *which, ap_stats *s)
{
    if (!PyList_Check(v) && !PyTuple_Check(v)) {
        PyErr_Format(PyExc_TypeError, "merge_stage: %s['hist'] must be a "
                     "list of (bucket, count) pairs, not %.100s", which,
                     Py_TYPE(v)->tp_name);
        return -1;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); i++) {
        if (hist_pair(PySequence_Fast_GET_ITEM(v, i), which, s) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Checks every key of a stage dict and reads its aggregates into s, an
 * empty ap_stats (the caller frees it, whatever the outcome). 0, or -1
 * with TypeError or ValueError naming the key, or MemoryError. */
static int
stats_of(PyObject *d, const char *which, ap_stats *s)
{
    if (!PyDict_Check(d)) {
        PyErr_Format(PyExc_TypeError, "merge_stage: %s must be a stage "
                     "dict, not %.100s", which, Py_TYPE(d)->tp_name);
        return -1;
    }
    PyObject *v = item(d, which, "name");
    if (v == NULL) {
        return -1;
    }
    if (!PyUnicode_Check(v)) {
        PyErr_Format(PyExc_TypeError, "merge_stage: %s['name'] must be "
                     "str, not %.100s", which, Py_TYPE(v)->tp_name);
        return -1;
    }
    int64_t unused;
    if (!(v = item(d, which, "parent")) ||
        int64_of(v, which, "parent", &unused) < 0 ||
        !(v = item(d, which, "depth")) ||
        int64_of(v, which, "depth", &unused) < 0) {
        return -1;
    }
    for (size_t i = 0; i < ap_stage_nfields; i++) {
        const ap_stage_field *f = &ap_stage_fields[i];
        char *at = (char *)s + f->offset;
        if (f->absent != AP_ALWAYS &&
            PyDict_GetItemString(d, f->key) == NULL) {
            continue;   /* ap_stats_init made it 0 */
        }
        if (!(v = item(d, which, f->key)) ||
            (f->kind == AP_FIELD_DOUBLE
                 ? double_of(v, which, f->key, (double *)at)
                 : int64_of(v, which, f->key, (int64_t *)at)) < 0) {
            return -1;
        }
    }
    if (s->count < 0) {
        PyErr_Format(PyExc_ValueError, "merge_stage: %s['count'] must be "
                     ">= 0, got %lld", which, (long long)s->count);
        return -1;
    }
    if (!(v = item(d, which, "hist")) || hist_of(v, which, s) < 0) {
        return -1;
    }
    return 0;
}

/* 0 when every sum of the merge fits in 64 bits; -1 with OverflowError
 * naming the first that does not (the core's sums would wrap). Histogram
 * counts, read as int64 and summed as uint64, always fit; the process's
 * CPU time is held at the bound. */
static int
check_sums(const ap_stats *a, const ap_stats *b)
{
    int64_t sum;
    for (size_t i = 0; i < ap_stage_nfields; i++) {
        const ap_stage_field *f = &ap_stage_fields[i];
        if (f->kind == AP_FIELD_SUM && f->absent != AP_WHOLE &&
            __builtin_add_overflow(
                *(const int64_t *)((const char *)a + f->offset),
                *(const int64_t *)((const char *)b + f->offset), &sum)) {
            PyErr_Format(PyExc_OverflowError, "merge_stage: the merged "
                         "'%s' exceeds 64 bits", f->key);
            return -1;
        }
    }
    return 0;
}

/* Whether stage dict d, with `calls` calls, holds what field f needs
 * of it for a merge to know f: a stage without calls adds nothing. */
static int
holds(PyObject *d, int64_t calls, const ap_stage_field *f)
{
    return PyDict_GetItemString(d, f->key) != NULL ||
           (f->absent == AP_WHOLE && calls == 0);
}

/* into's dict with the aggregates replaced by s's: into's keys, in into's
 * order, as merging in place would leave them. An optional figure that
 * neither into nor other held stays out: unknown, not 0; so does one
 * whose sum needs every call's (AP_WHOLE) where either side's calls
 * lack it. into_calls, other_calls: their counts. */
static PyObject *
merged_dict(PyObject *into, int64_t into_calls, PyObject *other,
            int64_t other_calls, const ap_stats *s)
{
    PyObject *d = PyDict_Copy(into);
    if (d == NULL || ap_stats_set_items(d, s) < 0) {
        Py_XDECREF(d);
        return NULL;
    }
    for (size_t i = 0; i < ap_stage_nfields; i++) {
        const ap_stage_field *f = &ap_stage_fields[i];
        if (f->absent == AP_ALWAYS) {
            continue;
        }
        int in_into = holds(into, into_calls, f);
        int in_other = holds(other, other_calls, f);
        int known = f->absent == AP_WHOLE ? in_into && in_other
                                          : in_into || in_other;
        if (!known && PyDict_DelItemString(d, f->key) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

PyObject *
ap_merge_stage(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "merge_stage() takes 2 arguments "
                     "(into, other), %zd given", nargs);
        return NULL;
    }
    ap_stats a, b;
    ap_stats_init(&a);
    ap_stats_init(&b);
    PyObject *result = NULL;
    int64_t into_calls, other_calls;
    if (stats_of(args[0], "into", &a) < 0 ||
        stats_of(args[1], "other", &b) < 0) {
        goto done;
    }
    if (b.count == 0) {
        result = PyDict_Copy(args[0]);   /* it contributes nothing */
        goto done;
    }
    into_calls = a.count;
    other_calls = b.count;
    if (a.count == 0) {
        /* nothing to weigh against: other's figures as they are, which
         * a merge into zeros would round (mean * n / n) */
        ap_stats_free(&a);
        a = b;
        ap_stats_init(&b);
    } else {
        if (check_sums(&a, &b) < 0) {
            goto done;
        }
        if (ap_stats_merge(&a, &b) != AP_OK) {
            PyErr_NoMemory();
            goto done;
        }
    }
    result = merged_dict(args[0], into_calls, args[1], other_calls, &a);
done:
    ap_stats_free(&a);
    ap_stats_free(&b);
    return result;
}
