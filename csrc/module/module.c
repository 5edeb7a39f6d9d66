/* aquaprof._core: multi-phase init, per-module state, module functions. */
#include "module.h"

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL aquaprof_ARRAY_API
#include <numpy/arrayobject.h>

#include "../core/alloc.h"
#include "../core/intern.h"
#include "../core/session.h"
#include "../gpu/gpu_trace.h"
#include "term_deadline.h"
#include "file_wait.h"

static PyObject *
active(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyBool_FromLong(ap_active());
}

PyDoc_STRVAR(stage_doc,
"stage(name=None, *, items=None)\n--\n\n"
"A stage of the pipeline: 'with aquaprof.stage(\"load\", items=16):' or\n"
"'@aquaprof.stage(\"load\")'; a bare '@aquaprof.stage' names the stage\n"
"after the function's __qualname__. items (int >= 0) counts what one\n"
"pass processes, for throughput. Costs one flag test when no profiler\n"
"is running.");

PyDoc_STRVAR(merge_stage_doc,
"merge_stage(into, other)\n--\n\n"
"A new stage dict: into's aggregates merged with other's by the core's\n"
"merge (count, Chan's parallel mean and m2, sums, min, max, mem_peak,\n"
"mem_rise, histogram), as report_data() merges a session's threads.\n"
"Both are stage dicts as report_data() gives them; the result keeps\n"
"into's keys (name, parent, depth and any other) and order. A stage of\n"
"count 0 contributes nothing; into of count 0 takes other's figures as\n"
"they are. TypeError or ValueError names a missing or ill-typed key;\n"
"OverflowError, a sum past 64 bits.");

PyDoc_STRVAR(fail_allocations_doc,
"_fail_allocations(skip, count)\n--\n\n"
"For tests of running out of memory: after `skip` more allocations of\n"
"the C core succeed (on any thread), the next `count` fail; count -1\n"
"fails all of them until the next call, and (0, 0) turns failures off.\n"
"Returns how many allocations were made to fail so far.");

static PyObject *
fail_allocations(PyObject *module, PyObject *args)
{
    (void)module;
    long long skip, count;
    if (!PyArg_ParseTuple(args, "LL:_fail_allocations", &skip, &count)) {
        return NULL;
    }
    if (skip < 0 || count < -1) {
        PyErr_SetString(PyExc_ValueError, "_fail_allocations: skip must be "
                        ">= 0 and count >= -1");
        return NULL;
    }
    ap_alloc_fail(skip, count);
    return PyLong_FromLongLong(ap_alloc_failed());
}

PyDoc_STRVAR(gpu_flush_doc,
"_gpu_flush(): hands the CUPTI activity buffers filled so far to the\n"
"running trace (nothing when none runs): called before torch.profiler\n"
"registers its own CUPTI callbacks.");

static PyObject *
gpu_flush(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    ap_gpu_flush();
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *
interned_names(PyObject *module, PyObject *unused)
{
    (void)module;
    (void)unused;
    return PyLong_FromUnsignedLong(ap_intern_count());
}

static PyMethodDef module_methods[] = {
    {"stage", (PyCFunction)(void (*)(void))ap_stage_function,
     METH_FASTCALL | METH_KEYWORDS, stage_doc},
    {"active", active, METH_NOARGS, "True while a Profiler is running."},
    {"_restage", ap_restage, METH_VARARGS,
     "_restage(func, name, items): rebuilds an unpickled staged function."},
    {"merge_stage", (PyCFunction)(void (*)(void))ap_merge_stage,
     METH_FASTCALL, merge_stage_doc},
    {"_fail_allocations", fail_allocations, METH_VARARGS,
     fail_allocations_doc},
    {"_gpu_flush", gpu_flush, METH_NOARGS, gpu_flush_doc},
    {"_interned_names", interned_names, METH_NOARGS,
     "_interned_names(): how many stage names the process holds for its\n"
     "life (csrc/core/intern.h), for tests of their bound."},
    {"_sigterm_deadline", ap_sigterm_deadline, METH_VARARGS,
     "_sigterm_deadline(seconds, marks): wraps SIGTERM's Python handler\n"
     "in this process; a SIGTERM whose Python handler has not started\n"
     "within `seconds` (the main thread busy in C) creates the files\n"
     "`marks` and ends the process by SIGTERM's default action. False\n"
     "where the handler is not Python's; OSError when no watch starts."},
    {"_sigterm_hold", ap_sigterm_hold, METH_O,
     "_sigterm_hold(on): Python at work on a SIGTERM's behalf (its\n"
     "handler, or the report's delivery): the deadline waits while held."},
    {"_sigterm_release", ap_sigterm_release, METH_NOARGS,
     "_sigterm_release(): SIGTERM's default action back where the handler\n"
     "is still _sigterm_deadline()'s, and its watch ended; a SIGTERM that\n"
     "came and Python never held is sent again."},
    {"_sigterm_watch", ap_sigterm_watch, METH_NOARGS,
     "_sigterm_watch(): the id of this process's SIGTERM watch, 0 where\n"
     "none runs."},
    {"_sigterm_rescue", ap_sigterm_rescue, METH_O,
     "_sigterm_rescue(watch): waits, the GIL let go, until a SIGTERM's\n"
     "Python handler has not started by the deadline (True: save in its\n"
     "place, holding the signal, then end the process by it) or the watch\n"
     "ends (False, at once where it already did or has a rescuer)."},
    {"_wait_for_file", ap_wait_for_file, METH_VARARGS,
     "_wait_for_file(paths, interval_s, timeout_s): looks every\n"
     "interval_s, the GIL released, until one of the files exists (its\n"
     "index) or timeout_s passed (-1)."},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *module)
{
    ap_module_state *st = ap_state(module);
    if (PyArray_ImportNumPyAPI() < 0) {
        return -1;
    }
    PyObject *functools = PyImport_ImportModule("functools");
    if (functools == NULL) {
        return -1;
    }
    st->update_wrapper = PyObject_GetAttrString(functools, "update_wrapper");
    Py_DECREF(functools);
    if (st->update_wrapper == NULL) {
        return -1;
    }
    if (ap_stage_types_init(module, st) < 0 ||
        ap_staged_function_type_init(module, st) < 0 ||
        ap_profiler_type_init(module, st) < 0 ||
        ap_report_init(module, st) < 0 ||
        ap_gpu_dtype_init(module, st) < 0 ||
        ap_contexts_init(module, st) < 0 ||
        ap_sampler_type_init(module) < 0) {
        return -1;
    }
    /* the reader's default limit is the writer's (aquaprof.limits) */
    return PyModule_AddIntConstant(module, "MAX_DEPTH", AP_MAX_DEPTH);
}

static int
module_traverse(PyObject *module, visitproc visit, void *arg)
{
    ap_module_state *st = ap_state(module);
    Py_VISIT(st->stage_type);
    Py_VISIT(st->staged_function_type);
    Py_VISIT(st->profiler_type);
    Py_VISIT(st->protocol_type);
    Py_VISIT(st->context_stack_type);
    Py_VISIT(st->stack_var);
    Py_VISIT(st->wrap_suspendable);
    Py_VISIT(st->update_wrapper);
    Py_VISIT(st->span_dtype);
    Py_VISIT(st->gpu_dtype);
    Py_VISIT(st->seen_threads);
    for (int i = 0; i < AP_NAME_CACHE; i++) {
        Py_VISIT(st->names[i].name);
        Py_VISIT(st->names[i].stage);
    }
    return 0;
}

static int
module_clear(PyObject *module)
{
    ap_module_state *st = ap_state(module);
    Py_CLEAR(st->stage_type);
    Py_CLEAR(st->staged_function_type);
    Py_CLEAR(st->profiler_type);
    Py_CLEAR(st->protocol_type);
    Py_CLEAR(st->context_stack_type);
    Py_CLEAR(st->stack_var);
    Py_CLEAR(st->wrap_suspendable);
    Py_CLEAR(st->update_wrapper);
    Py_CLEAR(st->span_dtype);
    Py_CLEAR(st->gpu_dtype);
    Py_CLEAR(st->seen_threads);
    for (int i = 0; i < AP_NAME_CACHE; i++) {
        Py_CLEAR(st->names[i].name);
        Py_CLEAR(st->names[i].stage);
    }
    return 0;
}

static void
module_free(void *module)
{
    module_clear((PyObject *)module);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, module_exec},
#ifdef Py_mod_multiple_interpreters
    /* the core's session is process-wide */
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_NOT_SUPPORTED},
#endif
#ifdef Py_mod_gil
    /* per-thread buffers need no GIL, but stop() closing other threads'
     * stages does (csrc/core/session.h) */
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

PyModuleDef ap_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aquaprof._core",
    .m_doc = "C core of aquaprof: stages, sessions and raw reports.",
    .m_size = sizeof(ap_module_state),
    .m_methods = module_methods,
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC
PyInit__core(void)
{
    return PyModuleDef_Init(&ap_module_def);
}
