/* Functions decorated with aquaprof.stage: each call is a stage. With no
 * profiler running a call costs one flag test over calling func. */
#include "module.h"

#include <structmember.h>

#include "../core/session.h"

/* Flags of code objects that must not be wrapped (CPython's values). */
#define AP_CO_GENERATOR 0x0020
#define AP_CO_COROUTINE 0x0080
#define AP_CO_ITERABLE_COROUTINE 0x0100
#define AP_CO_ASYNC_GENERATOR 0x0200

typedef struct {
    PyObject_HEAD
    PyObject *func;
    vectorcallfunc func_call;  /* func's own vectorcall, or the generic */
    PyObject *name;
    uint32_t name_id;
    int64_t items;
    vectorcallfunc vectorcall;
    PyObject *dict;
} StagedFunctionObject;

static PyObject *
staged_call(PyObject *self, PyObject *const *args, size_t nargsf,
            PyObject *kwnames)
{
    StagedFunctionObject *sf = (StagedFunctionObject *)self;
    if (!ap_active()) {
        return sf->func_call(sf->func, args, nargsf, kwnames);
    }
    int entered = ap_enter(sf->name_id, sf->items, self) == AP_OK;
    PyObject *result = sf->func_call(sf->func, args, nargsf, kwnames);
    if (entered && ap_exit(self, result == NULL) == AP_ERR_NOT_INNERMOST &&
        result != NULL) {
        Py_DECREF(result);
        PyErr_Format(PyExc_RuntimeError,
                     "%R returned while a stage it entered is still open; "
                     "close inner stages first (use 'with')", sf->name);
        return NULL;
    }
    return result;
}

static PyObject *
staged_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static int
staged_traverse(StagedFunctionObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->func);
    Py_VISIT(self->name);
    Py_VISIT(self->dict);
    return 0;
}

static int
staged_clear(StagedFunctionObject *self)
{
    Py_CLEAR(self->func);
    Py_CLEAR(self->name);
    Py_CLEAR(self->dict);
    return 0;
}

static void
staged_dealloc(StagedFunctionObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    staged_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
staged_repr(StagedFunctionObject *self)
{
    return PyUnicode_FromFormat("<aquaprof staged function %R of %R>",
                                self->name, self->func);
}

static PyMemberDef staged_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET,
     offsetof(StagedFunctionObject, vectorcall), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(StagedFunctionObject, dict),
     READONLY, NULL},
    {"stage_name", T_OBJECT, offsetof(StagedFunctionObject, name), READONLY,
     "Name of the stage each call is recorded under."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef staged_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL,
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot staged_slots[] = {
    {Py_tp_getset, staged_getset},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, staged_get},
    {Py_tp_traverse, staged_traverse},
    {Py_tp_clear, staged_clear},
    {Py_tp_dealloc, staged_dealloc},
    {Py_tp_repr, staged_repr},
    {Py_tp_members, staged_members},
    {Py_tp_doc, "A function whose calls are recorded as an aquaprof stage."},
    {0, NULL},
};

static PyType_Spec staged_spec = {
    .name = "aquaprof._core.StagedFunction",
    .basicsize = sizeof(StagedFunctionObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .slots = staged_slots,
};

/* Refuses what a stage cannot time as one call: generators and
 * coroutines return at their first suspension. */
static int
check_wrappable(PyObject *func)
{
    if (!PyCallable_Check(func)) {
        PyErr_Format(PyExc_TypeError,
                     "aquaprof.stage decorates callables, got %.100s",
                     Py_TYPE(func)->tp_name);
        return -1;
    }
    PyObject *code = NULL;
    if (ap_getattr_optional(func, "__code__", &code) < 0) {
        return -1;
    }
    if (code == NULL) {
        return 0;
    }
    long flags = 0;
    PyObject *co_flags = NULL;
    if (ap_getattr_optional(code, "co_flags", &co_flags) < 0) {
        Py_DECREF(code);
        return -1;
    }
    Py_DECREF(code);
    if (co_flags && PyLong_Check(co_flags)) {
        flags = PyLong_AsLong(co_flags);
    }
    Py_XDECREF(co_flags);
    const char *kind = NULL;
    if (flags & (AP_CO_GENERATOR | AP_CO_ITERABLE_COROUTINE)) {
        kind = "a generator function";
    } else if (flags & AP_CO_ASYNC_GENERATOR) {
        kind = "an async generator function";
    } else if (flags & AP_CO_COROUTINE) {
        kind = "a coroutine function";
    }
    if (kind) {
        PyErr_Format(PyExc_TypeError,
                     "aquaprof.stage cannot decorate %R: it is %s, which "
                     "returns at its first suspension, so the stage would "
                     "not cover its work; use 'with aquaprof.stage(...):' "
                     "inside it instead", func, kind);
        return -1;
    }
    return 0;
}

static PyObject *
default_name(PyObject *func)
{
    PyObject *name = NULL;
    if (ap_getattr_optional(func, "__qualname__", &name) < 0) {
        return NULL;
    }
    if (name == NULL &&
        ap_getattr_optional(func, "__name__", &name) < 0) {
        return NULL;
    }
    if (name == NULL || !PyUnicode_Check(name)) {
        Py_XDECREF(name);
        PyErr_Format(PyExc_TypeError,
                     "cannot name a stage after %R (no __qualname__): pass "
                     "a name, aquaprof.stage(\"name\")", func);
        return NULL;
    }
    return name;
}

/* Wraps func; name NULL means func's __qualname__. */
PyObject *
ap_wrap_function(ap_module_state *st, PyObject *func, PyObject *name,
              uint32_t name_id, int64_t items)
{
    if (check_wrappable(func) < 0) {
        return NULL;
    }
    PyObject *owned_name = NULL;
    if (name == NULL) {
        ap_name_slot *slot;
        name = owned_name = default_name(func);
        if (name == NULL || ap_stage_name(st, name, &name_id, &slot) < 0) {
            Py_XDECREF(owned_name);
            return NULL;
        }
    }
    StagedFunctionObject *sf = PyObject_GC_New(StagedFunctionObject,
                                               st->staged_function_type);
    if (sf == NULL) {
        Py_XDECREF(owned_name);
        return NULL;
    }
    sf->func = Py_NewRef(func);
    sf->func_call = PyVectorcall_Function(func);
    if (sf->func_call == NULL) {
        sf->func_call = PyObject_Vectorcall;
    }
    sf->name = owned_name ? owned_name : Py_NewRef(name);
    sf->name_id = name_id;
    sf->items = items;
    sf->vectorcall = staged_call;
    sf->dict = NULL;
    PyObject_GC_Track(sf);
    PyObject *done = PyObject_CallFunctionObjArgs(st->update_wrapper,
                                                  (PyObject *)sf, func, NULL);
    if (done == NULL) {
        Py_DECREF(sf);
        return NULL;
    }
    Py_DECREF(done);
    return (PyObject *)sf;
}

int
ap_staged_function_type_init(PyObject *module, ap_module_state *st)
{
    st->staged_function_type = (PyTypeObject *)PyType_FromModuleAndSpec(
        module, &staged_spec, NULL);
    if (st->staged_function_type == NULL) {
        return -1;
    }
    return PyModule_AddType(module, st->staged_function_type);
}
