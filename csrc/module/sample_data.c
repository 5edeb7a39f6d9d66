/* What a stopped sampler recorded, as the report's samples section
 * (docs/report-format.md): code frames, aggregate stacks, the timeline
 * as bytes that the Python layer views as an array. */
#include "module.h"
#include "../sampler/sampler.h"

/* [function, file, line] of each frame (the store's entries are
 * (function, file, line) tuples). */
static PyObject *
frames_list(const ap_sample_store *s)
{
    PyObject *frames = PyList_New(s->nentries);
    for (uint32_t i = 0; frames && i < s->nentries; i++) {
        PyObject *entry = PySequence_List((PyObject *)s->entries[i]);
        if (entry == NULL) {
            Py_CLEAR(frames);
            break;
        }
        PyList_SET_ITEM(frames, i, entry);
    }
    return frames;
}

/* [process, tid, stage, frames, count, wall_ns, cpu_ns, delay_ns,
 * gil_ns, lock_ns] */
static PyObject *
stack_entry(const ap_sample_store *s, const ap_sample_stack *k)
{
    uint32_t ids[AP_SAMPLE_DEPTH];
    uint32_t n = ap_sample_frames_of(s, k->leaf, ids, AP_SAMPLE_DEPTH);
    PyObject *frames = PyList_New(n);
    for (uint32_t i = 0; frames && i < n; i++) {
        PyObject *id = PyLong_FromUnsignedLong(ids[i]);
        if (id == NULL) {
            Py_CLEAR(frames);
            break;
        }
        PyList_SET_ITEM(frames, i, id);
    }
    if (frames == NULL) {
        return NULL;
    }
    return Py_BuildValue("[iLLNLLLLLL]", 0, (long long)k->tid,
                         (long long)k->stage, frames, (long long)k->count,
                         (long long)k->wall_ns, (long long)k->cpu_ns,
                         (long long)k->delay_ns, (long long)k->gil_ns,
                         (long long)k->lock_ns);
}

static int
add_count(PyObject *dict, const char *key, int64_t value)
{
    PyObject *v = PyLong_FromLongLong(value);
    int r = v ? PyDict_SetItemString(dict, key, v) : -1;
    Py_XDECREF(v);
    return r;
}

static PyObject *
stacks_list(const ap_sample_store *s)
{
    PyObject *stacks = PyList_New(s->nstacks);
    for (uint32_t i = 0; stacks && i < s->nstacks; i++) {
        PyObject *entry = stack_entry(s, &s->stacks[i]);
        if (entry == NULL) {
            Py_CLEAR(stacks);
            break;
        }
        PyList_SET_ITEM(stacks, i, entry);
    }
    return stacks;
}

/* [[process, tid, name], ...] of the threads noted when first sampled
 * that have a name (as they are now, or as they were then where the
 * thread is gone), in the order of their tids */
static PyObject *
threads_list(ap_sampler *self)
{
    PyObject *notes = self->names ? PyDict_Items(self->names)
                                  : PyList_New(0);
    PyObject *out = PyList_New(0);
    if (notes == NULL || out == NULL || PyList_Sort(notes) < 0) {
        Py_XDECREF(notes);
        Py_XDECREF(out);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(notes); i++) {
        PyObject *pair = PyList_GET_ITEM(notes, i);
        PyObject *name = ap_thread_name(PyTuple_GET_ITEM(pair, 1));
        if (name == NULL) {
            continue;       /* noted without a name */
        }
        PyObject *entry = Py_BuildValue("[iON]", 0, PyTuple_GET_ITEM(pair, 0),
                                        name);
        if (entry == NULL || PyList_Append(out, entry) < 0) {
            Py_XDECREF(entry);
            Py_DECREF(notes);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(entry);
    }
    Py_DECREF(notes);
    return out;
}

PyObject *
ap_sample_data(ap_sampler *self)
{
    const ap_sample_store *s = &self->store;
    PyObject *frames = frames_list(s);
    PyObject *stacks = frames ? stacks_list(s) : NULL;
    if (stacks == NULL) {
        Py_XDECREF(frames);
        return NULL;
    }
    PyObject *data = Py_BuildValue(
        "{sLsLsLsLsLsLsNsNsy#sy#sy#sL}", "interval_ns",
        (long long)self->interval_ns, "rounds", (long long)self->rounds,
        "late", (long long)self->late, "unseen_ns",
        (long long)self->unseen_total, "held_ns", (long long)self->held_ns,
        "lost", (long long)s->lost, "frames", frames, "stacks", stacks,
        /* y# gives None for NULL: an empty timeline is b"" */
        "timeline_t", s->tick_t ? (const char *)s->tick_t : "",
        (Py_ssize_t)(s->nticks * (int64_t)sizeof(int64_t)),
        "timeline_stack", s->tick_stack ? (const char *)s->tick_stack : "",
        (Py_ssize_t)(s->nticks * (int64_t)sizeof(uint32_t)),
        "timeline_cpu", s->tick_cpu ? (const char *)s->tick_cpu : "",
        (Py_ssize_t)(s->nticks * (int64_t)sizeof(uint32_t)),
        "timeline_dropped", (long long)s->timeline_dropped);
    PyObject *threads = data ? threads_list(self) : NULL;
    if (threads == NULL ||
        (PyList_GET_SIZE(threads) &&
         PyDict_SetItemString(data, "threads", threads) < 0)) {
        Py_CLEAR(data);
    }
    Py_XDECREF(threads);
    /* the waits' totals only where they were measured */
    if (data && (add_count(data, "unanswered",
                           atomic_load(&self->unanswered)) < 0 ||
                 (self->delay_known &&
                  add_count(data, "delay_ns", self->delay_total) < 0) ||
                 (self->gil_known &&
                  (add_count(data, "gil_ns", self->gil_total) < 0 ||
                   add_count(data, "lock_ns", self->lock_total) < 0)))) {
        Py_CLEAR(data);
    }
    return data;
}
