/* aquaprof._core.Sampler, the Python object over the call-stack sampler
 * (csrc/sampler): its arguments, its start and stop, its data. */
#include "module.h"
#include "../sampler/sampler.h"

#include <errno.h>
#include <stdlib.h>

static int
sampler_init(ap_sampler *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"interval_ns", "max_samples", NULL};
    long long interval, max_samples;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "LL:Sampler", keywords,
                                     &interval, &max_samples)) {
        return -1;
    }
    if (self->module != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Sampler is made once");
        return -1;
    }
    if (interval < 100000 || interval > 60LL * 1000000000) {
        PyErr_Format(PyExc_ValueError, "interval_ns must be between 100 us "
                     "and 60 s, got %lld", interval);
        return -1;
    }
    if (max_samples < 0 || max_samples > UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "max_samples must be between 0 and "
                     "%u, got %lld", UINT32_MAX, max_samples);
        return -1;
    }
#if PY_VERSION_HEX < 0x030A0000
    PyObject *gc = PyImport_ImportModule("gc");
    self->gc_switches = gc ? Py_BuildValue(
        "(NNN)", PyObject_GetAttrString(gc, "isenabled"),
        PyObject_GetAttrString(gc, "disable"),
        PyObject_GetAttrString(gc, "enable")) : NULL;
    Py_XDECREF(gc);
    if (self->gc_switches == NULL) {
        return -1;
    }
#endif
    self->box = calloc(1, sizeof(*self->box));
    if (self->box == NULL ||
        ap_sample_store_init(&self->store, max_samples) != AP_OK) {
        free(self->box);
        self->box = NULL;
        PyErr_NoMemory();
        return -1;
    }
    self->seen_index_ok = ap_path_map_init(&self->seen_index, 0) == AP_OK;
    self->box->refs = 1;
    self->interval_ns = interval;
    self->module = Py_NewRef(PyType_GetModule(Py_TYPE(self)));
    self->context_stack = ap_context_stack_in;
    self->thread_note = ap_thread_note_by_ident;
    return 0;
}

static PyObject *
sampler_start(ap_sampler *self, PyObject *unused)
{
    (void)unused;
#ifdef Py_GIL_DISABLED
    PyErr_SetString(PyExc_RuntimeError, "sampling call stacks needs the "
                    "GIL: this free-threaded Python has none");
    return NULL;
#endif
    if (self->module == NULL || self->state != 0) {
        PyErr_SetString(PyExc_RuntimeError, "a Sampler starts once");
        return NULL;
    }
    int err = ap_sampler_start_threads(self);
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *
sampler_stop(ap_sampler *self, PyObject *unused)
{
    (void)unused;
    ap_sampler_end_threads(self);
    if (self->state == 2) {
        ap_sampler_close_files(self);
    }
    Py_RETURN_NONE;
}

static PyObject *
sampler_data(ap_sampler *self, PyObject *unused)
{
    (void)unused;
    if (self->state != 2) {
        PyErr_SetString(PyExc_RuntimeError, "Sampler.data() needs a "
                        "stopped sampler");
        return NULL;
    }
    return ap_sample_data(self);
}

static void
sampler_dealloc(ap_sampler *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    /* a running thread holds a reference: state is never 1 here */
    for (uint32_t i = 0; i < self->store.nentries; i++) {
        Py_DECREF((PyObject *)self->store.entries[i]);
    }
    ap_sample_store_free(&self->store);
    ap_sampler_close_files(self);
    PyMem_RawFree(self->seen);
    ap_path_map_free(&self->seen_index);
    PyMem_RawFree(self->threads);
    if (self->box) {
        ap_mailbox_release(self->box);
    }
    Py_XDECREF(self->gc_switches);
    Py_XDECREF(self->names);
    Py_XDECREF(self->module);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMethodDef sampler_methods[] = {
    {"start", (PyCFunction)sampler_start, METH_NOARGS,
     "Starts the sampling thread (once)."},
    {"stop", (PyCFunction)sampler_stop, METH_NOARGS,
     "Ends the sampling thread and waits for it; idempotent."},
    {"data", (PyCFunction)sampler_data, METH_NOARGS,
     "What was sampled, as a dict (docs/report-format.md), once stopped."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot sampler_slots[] = {
    {Py_tp_init, sampler_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, sampler_dealloc},
    {Py_tp_methods, sampler_methods},
    {Py_tp_doc, "Sampler(interval_ns, max_samples): samples every "
                "thread's Python call stack by stage (internal)."},
    {0, NULL},
};

static PyType_Spec sampler_spec = {
    .name = "aquaprof._core.Sampler",
    .basicsize = sizeof(ap_sampler),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = sampler_slots,
};

int
ap_sampler_type_init(PyObject *module)
{
    PyObject *type = PyType_FromModuleAndSpec(module, &sampler_spec, NULL);
    if (type == NULL) {
        return -1;
    }
    int r = PyModule_AddType(module, (PyTypeObject *)type);
    Py_DECREF(type);
    return r;
}
